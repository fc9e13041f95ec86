// Another process overwrites a table Quiver has searched (warm handle, schema and serving index)
// with a schema that lacks one of its columns; a query naming that column then gets the error a
// query naming any unknown column gets (404 TableColumnNotFound naming it), never a 500, and one
// without it answers LanceDB's rows of the new version. Found by the serving fuzz (seed 3, step
// 465: a search of a renamed table another process's overwrite had left without x53 answered 500
// "No field named x53"). A filter naming it is 404 too where DataFusion words its error "Did you
// mean 'x3'?" rather than "Valid fields are …" (a name close to it exists): it was a 400.
import * as lancedb from "@lancedb/lancedb";
import type { Table, Vector } from "apache-arrow";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { fromIPC } from "./helpers/arrow.js";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const q = serverForFile({}, 120_000);
const DIM = 4;
const COLS = 60;
const GONE = "x53";

/** `count` rows with ids from `first`, columns x1..x`cols` except those in `without`, and a vector. */
function rows(first: number, count: number, without: string[] = []) {
  const ids = Array.from({ length: count }, (_, i) => first + i);
  const cols: Record<string, Vector> = { id: arrow.vectorFromArray(ids, new arrow.Int32()) };
  // The gone column holds strings: the serving index does not cache them, so its answers take their
  // columns from LanceDB by row id (as the fuzz's tables, of strings and lists, always do).
  for (let c = 1; c <= COLS; c++) {
    const name = `x${c}`;
    if (without.includes(name)) continue;
    cols[name] = name === GONE ? arrow.vectorFromArray(ids.map((i) => `row ${i}`), new arrow.Utf8()) : arrow.vectorFromArray(ids.map((i) => i * c), new arrow.Int32());
  }
  const vecs = ids.map((i) => Array.from({ length: DIM }, (_, d) => Math.sin(i * 7 + d)));
  cols.vector = arrow.vectorFromArray(vecs, new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true)));
  return new arrow.Table(cols);
}
const ipc = (t: Table) => arrow.tableToIPC(t, "stream");

const post = (table: string, op: string, body: unknown, headers?: Record<string, string>) => q.call("POST", `/v1/table/${table}/${op}`, body, headers);

/** The table's directory opened by LanceDB in this process (another writer), where Quiver says it lies. */
async function where(table: string): Promise<{ db: lancedb.Connection; name: string }> {
  const location = (await post(table, "describe", {})).json.location as string;
  return { db: await lancedb.connect(path.dirname(location)), name: path.basename(location, ".lance") };
}

const V = [0.1, 0.2, 0.3, 0.4];
const search = (extra: object) => ({ vector: { single_vector: V }, vector_column: "vector", k: 10, bypass_vector_index: true, ...extra });
const PATH = "x-quiver-search-path";

/** Sends `body` until the path that answers it is `want` (a build or sync may be under way); its last answer. */
async function until(table: string, body: object, headers: Record<string, string>, want: string) {
  let r = await post(table, "query", body, headers);
  for (let i = 0; i < 400 && r.status === 200 && r.headers.get(PATH) !== want; i++) {
    await new Promise((res) => setTimeout(res, 50));
    r = await post(table, "query", body, headers);
  }
  expect(r.status, r.text).toBe(200);
  expect(r.headers.get(PATH)).toBe(want);
  return r;
}

async function create(table: string, indexed: boolean): Promise<void> {
  expect((await post(table, "create", ipc(rows(0, 300)))).status).toBe(200);
  if (!indexed) return;
  const ix = await post(table, "create_index", { column: "vector", index_type: "IVF_FLAT", num_partitions: 2 });
  expect((await settle(q, ix.json.transaction_id)).status).toBe("Succeeded");
}

/** Searches naming the column (warming the handle, its schema and the serving index where built). */
async function warm(table: string, served: boolean): Promise<void> {
  let searchPath = "";
  for (let i = 0; i < (served ? 400 : 1); i++) {
    const r = await post(table, "query", search({ columns: ["id", GONE], filter: `${GONE} IS NOT NULL` }));
    expect(r.status, r.text).toBe(200);
    searchPath = r.headers.get("x-quiver-search-path") ?? "";
    if (searchPath === "serving") break;
    await new Promise((res) => setTimeout(res, 50));
  }
  if (served) expect(searchPath).toBe("serving");
}

/** After the overwrite: the gone column named in columns or filter is 404 naming it; a search without it answers LanceDB's rows. */
async function expectNewSchema(table: string, db: lancedb.Connection, dir: string, version: number): Promise<void> {
  // The overwrite is another process's commit: the searches name its version.
  const h = { "x-quiver-min-version": String(version) };
  for (const body of [search({ columns: ["id", GONE] }), search({ filter: `${GONE} = 'row 5'` }), { k: 10, columns: ["id", GONE] }, { k: 10, filter: `${GONE} IS NULL` }]) {
    const r = await post(table, "query", body, h);
    expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(404);
    expect(r.json.code).toBe(12);
    expect(r.json.detail).toContain(`"${GONE}" not found`);
  }
  const r = await post(table, "query", search({}), h);
  expect(r.status, r.text).toBe(200);
  const got = fromIPC(r.bytes);
  const want = (await (await db.openTable(dir)).vectorSearch(V).bypassVectorIndex().limit(10).toArrow()) as unknown as ReturnType<typeof fromIPC>;
  expect(got.schema.fields.map((f) => f.name)).toEqual(want.schema.fields.map((f) => f.name));
  expect(got.schema.fields.map((f) => f.name)).not.toContain(GONE);
  expect(Array.from(got.getChild("id")!.toArray() as Int32Array)).toEqual(Array.from(want.getChild("id")!.toArray() as Int32Array));
}

async function overwritten(table: string, first: number): Promise<{ db: lancedb.Connection; dir: string; version: number }> {
  const { db, name } = await where(table);
  const t = await db.createTable(name, rows(first, 200, [GONE]), { mode: "overwrite" });
  return { db, dir: name, version: await t.version() };
}

describe("another process overwrites a searched table without one of its columns", () => {
  for (const indexed of [false, true]) {
    const kind = indexed ? "with a vector index and the serving index built" : "without a vector index";
    it(`${kind}: the gone column is 404 naming it, a search without it LanceDB's rows`, async () => {
      const table = `plain_${indexed}`;
      await create(table, indexed);
      await warm(table, indexed);
      const { db, dir, version } = await overwritten(table, 1000);
      await expectNewSchema(table, db, dir, version);
    });

    it(`${kind}, renamed through Quiver before the overwrite`, async () => {
      const table = `before_${indexed}`;
      await create(table, indexed);
      await warm(table, indexed);
      expect((await post(table, "rename", { new_table_name: `${table}_r` })).status).toBe(200);
      await warm(`${table}_r`, indexed);
      const { db, dir, version } = await overwritten(`${table}_r`, 2000);
      await expectNewSchema(`${table}_r`, db, dir, version);
    });

    it(`${kind}, renamed through Quiver after the overwrite`, async () => {
      const table = `after_${indexed}`;
      await create(table, indexed);
      await warm(table, indexed);
      const { db, dir, version } = await overwritten(table, 3000);
      expect((await post(table, "rename", { new_table_name: `${table}_r` })).status).toBe(200);
      await expectNewSchema(`${table}_r`, db, dir, version);
    });
  }

  it("overwritten without its vector index, then indexed again by the other process: the serving index answers the new columns", async () => {
    const table = "reindexed";
    await create(table, true);
    // The plan of a plain search (its columns, taken from LanceDB by row id) is made while x53 is there.
    await until(table, search({}), {}, "serving");
    const { db, dir, version } = await overwritten(table, 4000);
    // The overwrite dropped the vector index: LanceDB answers once the serving index sees it.
    await until(table, search({}), { "x-quiver-min-version": String(version) }, "engine; reason=not_indexed");
    const t = await db.openTable(dir);
    await t.createIndex("vector", { config: lancedb.Index.ivfFlat({ numPartitions: 2 }) });
    // The versions before are cleaned up: the index saved at one of them cannot be brought forward, and is built afresh.
    await t.optimize({ cleanupOlderThan: new Date(Date.now() + 1000), deleteUnverified: true });
    const h = { "x-quiver-min-version": String(await t.version()) };
    // Built again for the new version: its answers have the new columns (before, the table's state
    // kept its answer plan of the old ones: the search failed in its thread, `reason=error`).
    const r = await until(table, search({}), h, "serving");
    const got = fromIPC(r.bytes);
    const want = (await t.vectorSearch(V).bypassVectorIndex().limit(10).toArrow()) as unknown as ReturnType<typeof fromIPC>;
    expect(got.schema.fields.map((f) => f.name)).toEqual(want.schema.fields.map((f) => f.name));
    expect(Array.from(got.getChild("id")!.toArray() as Int32Array)).toEqual(Array.from(want.getChild("id")!.toArray() as Int32Array));
    await expectNewSchema(table, db, dir, await t.version());
  });
});
