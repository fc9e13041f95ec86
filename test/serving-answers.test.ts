// The serving index answers what LanceDB answers for the same request (issue 51's answer rows):
// filter bitmaps invalidated by every column they read, non-deterministic filters never cached,
// list and struct columns, empty strings, fixed-size lists with nulls inside, the default metric of
// an exact search, multi_vector of one vector, out-of-range literals and query values. Each answer
// is compared with LanceDB's own on the same files (or with the engine path of the same server).
import * as lancedb from "@lancedb/lancedb";
import type { Table as EsmTable } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { fromIPC } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const DIM = 8;
const ROWS = 400;
const PATH = "x-quiver-search-path";
let root = "";

/** A seeded generator (mulberry32): the same rows every run. */
function seeded(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const next = seeded(7);
const vectors = Array.from({ length: ROWS }, () => Array.from({ length: DIM }, () => next() * 2 - 1));
const query = Array.from({ length: DIM }, () => next() * 2 - 1);
const vecType = new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true));
const ids = () => arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => i), new arrow.Int32());
const vecs = () => arrow.vectorFromArray(vectors, vecType);
const listOf = (t: arrow.DataType) => new arrow.List(new arrow.Field("item", t, true));
const STRUCT = new arrow.Struct([new arrow.Field("l", listOf(new arrow.Float64()), true), new arrow.Field("n", new arrow.Utf8(), true)]);

/** Rows of every shape the serving path must answer as LanceDB does. */
const mixed = () =>
  new arrow.Table({
    id: ids(),
    vector: vecs(),
    s: arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 7 === 0 ? null : i % 3 === 0 ? "" : `v${i % 5}`)), new arrow.Utf8()),
    big: arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => BigInt(i) - 200n), new arrow.Int64()),
    tags: arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 4 === 0 ? ["", ""] : i % 4 === 1 ? [] : [`t${i % 3}`, "red"])), listOf(new arrow.Utf8())),
    nums: arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 3 === 0 ? [i, null, i + 1] : [i])), listOf(new arrow.Int32())),
    st: arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => ({ l: i % 2 === 0 ? [null, null] : [i / 2, 1.5], n: i % 5 === 0 ? "" : `n${i}` })), STRUCT),
    fsl: arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 2 === 0 ? [i, null, i + 2] : [i, i + 1, i + 2])), new arrow.FixedSizeList(3, new arrow.Field("item", new arrow.Int32(), true))),
  });

/** Rows whose tags an update changes (a column the index does not cache). */
const tagged = () => new arrow.Table({ id: ids(), vector: vecs(), tags: arrow.vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 2 === 0 ? ["red"] : ["blue"])), listOf(new arrow.Utf8())) });

/** Rows with a time (`t`, Unix seconds) that the test sets ahead of now: `t < to_unixtime(now())` passes them once it comes. */
const clock = () => new arrow.Table({ id: ids(), vector: vecs(), t: arrow.vectorFromArray(Array.from({ length: ROWS }, () => 0n), new arrow.Int64()) });

const ivf = (distanceType: "l2" | "cosine") => ({ config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2, distanceType }) });

const q = inProcessForFile(
  {
    seed: async (dataDir) => {
      root = dataDir;
      const db = await lancedb.connectNamespace("dir", { root: dataDir });
      await (await db.createTable("mixed", mixed(), [])).createIndex("vector", ivf("l2"));
      await (await db.createTable("tagged", tagged(), [])).createIndex("vector", ivf("l2"));
      await (await db.createTable("clock", clock(), [])).createIndex("vector", ivf("l2"));
      await (await db.createTable("cos", tagged(), [])).createIndex("vector", ivf("cosine"));
      await (await db.createTable("cos_gone", tagged(), [])).createIndex("vector", ivf("cosine"));
    },
  },
  180_000,
);

const ipc = (t: EsmTable) => arrow.tableToIPC(t as never, "stream");

async function call(table: string, body: object, headers?: Record<string, string>) {
  const r = await q.call("POST", `/v1/table/${table}/query`, { k: 10, vector: { single_vector: query }, vector_column: "vector", ...body }, headers);
  return { status: r.status, text: r.text, bytes: r.bytes, path: r.headers.get(PATH) ?? "" };
}

/** The answer once the serving index answers it (it is built on a table's first search). */
async function served(table: string, body: object, headers?: Record<string, string>) {
  let last = "";
  for (let i = 0; i < 600; i++) {
    const r = await call(table, body, headers);
    if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
    if (r.path === "serving") return r;
    last = r.path;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`the serving index never answered (${last})`);
}

/** LanceDB's exact answer (every row measured) at the table's latest version. */
async function exact(table: string, f: (x: lancedb.VectorQuery) => lancedb.VectorQuery = (x) => x, v: number[] = query): Promise<EsmTable> {
  const t = await (await lancedb.connectNamespace("dir", { root })).openTable(table, []);
  return (await f(t.vectorSearch(v).bypassVectorIndex().limit(10)).toArrow()) as unknown as EsmTable;
}

const col = (t: EsmTable, n: string) => Array.from(t.getChild(n)!.toArray() as ArrayLike<unknown>);
/** Every row's values as JSON (lists and structs as arrays and objects, 64-bit integers as strings). */
const rowsOf = (t: EsmTable) => JSON.stringify(t.toArray().map((r) => r.toJSON()), (_k, v) => (typeof v === "bigint" ? String(v) : v));
const fields = (t: EsmTable) => t.schema.fields.map((f) => `${f.name}:${f.type}`);

describe("filter bitmaps", () => {
  it("are evaluated again after a write changes a column they read that the index does not cache", async () => {
    await q.call("POST", "/v1/table/tagged_q/create", ipc(tagged()));
    await (await (await lancedb.connectNamespace("dir", { root })).openTable("tagged_q", [])).createIndex("vector", ivf("l2"));
    // Row addresses (LanceDB's table) and stable row ids (created through Quiver).
    for (const table of ["tagged", "tagged_q"]) {
      const filter = "array_has(tags, 'red')";
      const before = fromIPC((await served(table, { filter, bypass_vector_index: true })).bytes);
      expect(col(before, "id")).toEqual(col(await exact(table, (x) => x.where(filter)), "id"));
      // The rows just answered lose their red tag: neither their vectors nor any cached column change.
      const hit = col(before, "id").join(",");
      const r = await q.call("POST", `/v1/table/${table}/update`, { predicate: `id IN (${hit})`, updates: [["tags", "make_array('blue')"]] });
      expect(r.status, r.text).toBe(200);
      const after = fromIPC((await served(table, { filter, bypass_vector_index: true })).bytes);
      const want = col(await exact(table, (x) => x.where(filter)), "id");
      expect(want.some((id) => col(before, "id").includes(id))).toBe(false);
      expect(col(after, "id")).toEqual(want);
    }
  });

  it("of non-deterministic functions are never cached", async () => {
    const filter = "t < to_unixtime(now())";
    // The rows' time is set a few seconds ahead; on a machine too slow to answer the first search
    // before then, again further ahead, so the first evaluation always comes before the time.
    let ahead = 0;
    for (let margin = 4; ; margin *= 2) {
      expect(margin, "the first search never came before the rows' time").toBeLessThan(256);
      ahead = Math.floor(Date.now() / 1000) + margin;
      const set = await q.call("POST", "/v1/table/clock/update", { updates: [["t", String(ahead)]] });
      expect(set.status, set.text).toBe(200);
      const first = fromIPC((await served("clock", { filter, bypass_vector_index: true })).bytes);
      if (Date.now() < ahead * 1000) {
        expect(first.numRows).toBe(0);
        break;
      }
    }
    // The rows' time comes; no write in between.
    await new Promise((res) => setTimeout(res, Math.max(0, (ahead + 1) * 1000 - Date.now())));
    const later = await call("clock", { filter, bypass_vector_index: true });
    expect(later.status, later.text).toBe(200);
    expect(col(fromIPC(later.bytes), "id")).toEqual(col(await exact("clock", (x) => x.where(filter)), "id"));
    expect(fromIPC(later.bytes).numRows).toBe(10);
  }, 600_000);
});

describe("values", () => {
  it("lists, structs of lists and fixed-size lists with nulls inside equal LanceDB's, in Arrow and JSON", async () => {
    const got = fromIPC((await served("mixed", { bypass_vector_index: true })).bytes);
    const want = await exact("mixed");
    expect(fields(got)).toEqual(fields(want));
    // Column by column: lists of strings, of numbers with nulls, a struct of lists, a fixed-size list with nulls inside.
    const differ = ["id", "s", "big", "tags", "nums", "st", "fsl"].filter((name) => rowsOf(got.select([name]) as never) !== rowsOf(want.select([name]) as never));
    expect(differ).toEqual([]);
    // JSON rows: the serving path's against the engine's (version 1 is before the index: LanceDB answers it).
    const json = { accept: "application/json" };
    const serving = await served("mixed", { bypass_vector_index: true }, json);
    const engine = await call("mixed", { bypass_vector_index: true, version: 1 }, json);
    expect(engine.path).toMatch(/^engine/);
    const parsed = (text: string) => (JSON.parse(text) as Record<string, unknown>[]).map(({ _distance, ...row }) => ({ row, d: _distance as number }));
    const [a, b] = [parsed(serving.text), parsed(engine.text)];
    expect(a.map((x) => x.row)).toEqual(b.map((x) => x.row));
    a.forEach((x, i) => expect(x.d).toBeCloseTo(b[i].d, 4));
  });

  it("empty strings are found by = and IN", async () => {
    for (const filter of ["s = ''", "s IN ('v1', '')", "s != '' AND id < 100", "s = '' OR s = 'v2'"]) {
      const got = fromIPC((await served("mixed", { filter, bypass_vector_index: true })).bytes);
      expect(col(got, "id"), filter).toEqual(col(await exact("mixed", (x) => x.where(filter)), "id"));
    }
  });
});

describe("options and literals", () => {
  it("bypass_vector_index without distance_type ranks by L2 on a cosine index, as LanceDB does", async () => {
    await served("cos", {});
    const r = await call("cos", { bypass_vector_index: true });
    expect(r.status, r.text).toBe(200);
    const got = fromIPC(r.bytes);
    const want = await exact("cos");
    expect(col(got, "id")).toEqual(col(want, "id"));
    (col(got, "_distance") as number[]).forEach((d, i) => expect(d).toBeCloseTo(col(want, "_distance")[i] as number, 3));
  });

  it("without distance_type, rows inserted after a cosine index rank by cosine; once the index covers none of the rows, by L2, as LanceDB does", async () => {
    // LanceDB ranks indexed rows by their PQ codes (trained afresh each run); refining every row
    // makes its answer exact in the index's metric, which is what the serving index measures.
    const lance = async () => (await (await lancedb.connectNamespace("dir", { root })).openTable("cos_gone", [])).vectorSearch(query).nprobes(2).refineFactor(ROWS).limit(10).toArrow() as unknown as Promise<EsmTable>;
    const same = async (what: string) => {
      const r = await call("cos_gone", {});
      expect(r.status, r.text).toBe(200);
      const got = fromIPC(r.bytes);
      const want = await lance();
      expect(col(got, "id"), `${what} (${r.path})`).toEqual(col(want, "id"));
      (col(got, "_distance") as number[]).forEach((d, i) => expect(d, what).toBeCloseTo(col(want, "_distance")[i] as number, 3));
    };
    await served("cos_gone", {});
    const more = () => new arrow.Table({ id: arrow.vectorFromArray(Array.from({ length: 50 }, (_, i) => ROWS + i), new arrow.Int32()), vector: arrow.vectorFromArray(vectors.slice(0, 50).map((v) => v.map((x) => x * 3 + 0.5)), vecType), tags: arrow.vectorFromArray(Array.from({ length: 50 }, () => ["red"]), listOf(new arrow.Utf8())) });
    expect((await q.call("POST", "/v1/table/cos_gone/insert", ipc(more()))).status).toBe(200);
    await same("rows inserted after the index");
    expect((await q.call("POST", "/v1/table/cos_gone/delete", { predicate: `id < ${ROWS}` })).status).toBe(200);
    await same("every indexed row deleted");
  });

  it("multi_vector of one vector answers LanceDB's columns (no query_index)", async () => {
    // After a search of several vectors (whose answer has query_index) with the same projection.
    const several = fromIPC((await served("mixed", { vector: { multi_vector: [query, query.map((x) => -x)] }, bypass_vector_index: true })).bytes);
    expect(several.schema.fields.map((f) => f.name)).toContain("query_index");
    const got = fromIPC((await served("mixed", { vector: { multi_vector: [query] }, bypass_vector_index: true })).bytes);
    expect(fields(got)).toEqual(fields(await exact("mixed")));
  });

  it("an integer literal past a signed 64-bit one is LanceDB's 400, cached column or not", async () => {
    await served("mixed", {});
    const r = await call("mixed", { filter: "big = -9223372036854775808" });
    expect(r.status, r.text).toBe(400);
  });

  it("a query value past float32's range answers k rows, as LanceDB does", async () => {
    await served("mixed", {});
    const v = query.map((x, i) => (i === 0 ? 1e39 : x));
    const r = await call("mixed", { vector: { single_vector: v }, bypass_vector_index: true });
    expect(r.status, r.text).toBe(200);
    expect(r.path).toBe("engine; reason=option:vector");
    const want = await exact("mixed", (x) => x, v);
    expect(want.numRows).toBe(10);
    expect(col(fromIPC(r.bytes), "id")).toEqual(col(want, "id"));
  });
});
