// The serving index after every kind of write that is not a plain append, update or delete: a
// rename and a new table under the old name, a restore, an overwrite with the same row count, and
// another process's column changes, index replacement and first index. After each, searches (with
// and without a filter) answer the rows and values of LanceDB's exact search on the same data directory.
import * as lancedb from "@lancedb/lancedb";
import type { Table as EsmTable } from "apache-arrow";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { batch, batches, queryVectors, rng, vectorSource } from "../bench/dataset.js";
import { fromIPC } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { settle } from "./helpers/transactions.js";

const SMALL = { rows: 1200, dim: 8, rank: 3, seed: 5 };
const qs = queryVectors(SMALL, 4).map((v) => Array.from(v));
const TABLES = ["ren", "over", "cols", "metric"];
let root = "";

const q = inProcessForFile(
  {
    seed: async (dataDir) => {
      root = dataDir;
      const db = await lancedb.connect(dataDir);
      const small = [...batches(SMALL, SMALL.rows)][0];
      for (const name of TABLES) await (await db.createTable(name, small)).createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }) });
      await db.createTable("late", small);
    },
  },
  180_000,
);

const PATH = "x-quiver-search-path";
const post = (table: string, op: string, body: unknown) => q.call("POST", `/v1/table/${table}/${op}`, body);
/** The table's data opened by LanceDB itself, where Quiver says it lies. */
async function open(table: string): Promise<lancedb.Table> {
  const location = (await post(table, "describe", {})).json.location as string;
  return (await lancedb.connect(path.dirname(location))).openTable(path.basename(location, ".lance"));
}

/** Rows of the dataset's shape with ids from `first`, vectors from a source of their own. */
const rows = (first: number, count: number) => batch({ ...SMALL, rows: count }, first, count, vectorSource({ ...SMALL, seed: SMALL.seed + first }), rng(first));
const ipc = (t: ReturnType<typeof rows>) => arrow.tableToIPC(t, "stream");

async function answer(table: string, body: object): Promise<{ t: EsmTable; path: string }> {
  const r = await post(table, "query", { k: 10, ...body });
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  return { t: fromIPC(r.bytes), path: r.headers.get(PATH) ?? "" };
}

/** Search until the serving index answers at the table's latest version (a rebuild may be under way). */
async function served(table: string, body: object): Promise<EsmTable> {
  const version = await (await open(table)).version();
  let last = "";
  for (let i = 0; i < 600; i++) {
    const r = await q.call("POST", `/v1/table/${table}/query`, { k: 10, ...body }, { "x-quiver-min-version": String(version) });
    if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
    last = r.headers.get(PATH) ?? "";
    if (last === "serving") return fromIPC(r.bytes);
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`the serving index never answered (${last})`);
}

/** A vector index made through Quiver. */
async function indexed(table: string): Promise<void> {
  const ix = await post(table, "create_index", { column: "vector", index_type: "IVF_PQ", num_partitions: 2, num_sub_vectors: 2 });
  expect((await settle(q, ix.json.transaction_id)).status).toBe("Succeeded");
}

/** LanceDB's exact answer (every row measured) at the table's latest version. */
async function exact(table: string, v: number[], f: (x: lancedb.VectorQuery) => lancedb.VectorQuery = (x) => x): Promise<EsmTable> {
  return (await f((await open(table)).vectorSearch(v).bypassVectorIndex().limit(10)).toArrow()) as unknown as EsmTable;
}

const col = (t: EsmTable, n: string) => Array.from(t.getChild(n)!.toArray() as ArrayLike<unknown>, (x) => (x && typeof x === "object" && "toArray" in x ? Array.from((x as { toArray(): ArrayLike<number> }).toArray()) : x));
const values = (t: EsmTable) => t.schema.fields.filter((f) => f.name !== "_distance").map((f) => [f.name, String(f.type), JSON.stringify(col(t, f.name))]);

/** Same schema, rows, values and order as LanceDB's exact answer; distances within float tolerance. */
function expectSame(got: EsmTable, want: EsmTable): void {
  expect(values(got)).toEqual(values(want));
  const d = col(want, "_distance") as number[];
  (col(got, "_distance") as number[]).forEach((x, i) => expect(x).toBeCloseTo(d[i], 3));
}

/** A plain vector search and a filtered one, served, against LanceDB's exact answers. */
async function expectExact(table: string, metric: "l2" | "cosine" = "l2"): Promise<void> {
  for (const v of qs) {
    expectSame(await served(table, { vector: { single_vector: v } }), await exact(table, v, (x) => x.distanceType(metric)));
    expectSame(await served(table, { vector: { single_vector: v }, filter: "category = 'alpha'" }), await exact(table, v, (x) => x.distanceType(metric).where("category = 'alpha'")));
  }
}

describe("the serving index after writes that are not appends, updates or deletes", () => {
  it("a rename, then a new table under the old name: each name answers its own rows", async () => {
    await expectExact("ren");
    expect((await post("ren", "rename", { new_table_name: "ren2" })).status).toBe(200);
    expect((await post("ren", "create", ipc(rows(50_000, 300)))).status).toBe(200);
    // Its commits are announced under the old name, whose index is the renamed table's.
    expect((await post("ren", "add_columns", { new_columns: [{ name: "twice", expression: "id * 2" }] })).status).toBe(200);
    expect((await post("ren", "count_rows", {})).json).toBe(300);
    const scan = await post("ren", "query", { k: 1000, columns: ["id"] });
    expect(scan.status).toBe(200);
    expect((col(fromIPC(scan.bytes), "id") as number[]).sort((a, b) => a - b)).toEqual(Array.from({ length: 300 }, (_, i) => 50_000 + i));
    // The new table has no vector index: LanceDB answers it, with its own rows.
    expectSame((await answer("ren", { vector: { single_vector: qs[0] } })).t, await exact("ren", qs[0]));
    await indexed("ren");
    await expectExact("ren");
    await expectExact("ren2");
    expect((await post("ren2", "count_rows", {})).json).toBe(SMALL.rows);
  });

  it("a restore to an older version: changed rows answer their restored vectors and values, after an insert and a restart", async () => {
    // Made by Quiver: stable row ids, which record the version each row was last updated at.
    expect((await post("rest", "create", ipc(rows(0, SMALL.rows)))).status).toBe(200);
    await indexed("rest");
    await expectExact("rest");
    const before = await (await open("rest")).version();
    const v = qs[0];
    // The rows nearest the query move far away and get new values (keeping their row ids); others are deleted.
    expect((await post("rest", "update", { predicate: "id < 300", updates: [["vector", `[${v.map((x) => x + 40).join(",")}]`], ["id", "id + 100000"]] })).status).toBe(200);
    expect((await post("rest", "delete", { predicate: "id >= 1000 AND id < 100000" })).status).toBe(200);
    await expectExact("rest");
    expect((await post("rest", "restore", { version: before })).status).toBe(200);
    await expectExact("rest");
    expect((await post("rest", "insert", ipc(rows(60_000, 5)))).status).toBe(200);
    await expectExact("rest");
    await q.restart();
    await expectExact("rest");
  });

  it("an overwrite with the same row count answers the new rows", async () => {
    await expectExact("over");
    const r = await q.call("POST", "/v1/table/over/insert?mode=overwrite", ipc(rows(70_000, SMALL.rows)));
    expect(r.status).toBe(200);
    // The overwrite dropped the vector index: LanceDB answers, with the new rows.
    for (const v of qs) {
      expectSame((await answer("over", { vector: { single_vector: v } })).t, await exact("over", v));
      expectSame((await answer("over", { vector: { single_vector: v }, filter: "id < 70600" })).t, await exact("over", v, (x) => x.where("id < 70600")));
    }
  });

  it("another process adds and drops columns: the answers' columns follow", async () => {
    await expectExact("cols");
    const t = await open("cols");
    await t.addColumns([{ name: "twice", valueSql: "id * 2" }]);
    // The column the index does not cache is taken from LanceDB by row id, with the rest of the row.
    await expectExact("cols");
    expect(values(await served("cols", { vector: { single_vector: qs[0] } })).map(([n]) => n)).toContain("twice");
    await t.dropColumns(["text"]);
    await expectExact("cols");
    expect(values(await served("cols", { vector: { single_vector: qs[0] } })).map(([n]) => n)).not.toContain("text");
  });

  it("another process replaces the vector index with a cosine one: searches rank by cosine", async () => {
    await expectExact("metric");
    await (await open("metric")).createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2, distanceType: "cosine" }), replace: true });
    await expectExact("metric", "cosine");
  });

  it("another process indexes a table searched without a vector index: the serving index answers it", async () => {
    let path = "";
    // Its first search looks for a vector index (not_built meanwhile).
    for (let i = 0; i < 100 && path !== "engine; reason=not_indexed"; i++) path = (await answer("late", { vector: { single_vector: qs[0] } })).path;
    expect(path).toBe("engine; reason=not_indexed");
    await (await open("late")).createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }) });
    // Looked for again at the next version: before, it stayed LanceDB's for good.
    await expectExact("late");
  });
});
