// POST /v1/table/{id}/query (+ explain_plan, analyze_plan) against tables made by LanceDB itself;
// every result is compared with LanceDB's own answer to the same query in this process.
import * as lancedb from "@lancedb/lancedb";
import type { Table as EsmTable } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { batches, queryVectors } from "../bench/dataset.js";
import { fromIPC } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const SPEC = { rows: 2000, dim: 16, rank: 4, seed: 7 };
const BIG = 100_000;
let db: lancedb.Connection;
let items: lancedb.Table; // IVF_PQ + FTS (with positions) + bitmap
let flat: lancedb.Table; // same rows, no indexes
let ver: lancedb.Table;
const qv = queryVectors(SPEC, 20).map((v) => Array.from(v));

const q = inProcessForFile(
  {
    // Every answer is compared with LanceDB's own: the engine's path (test/serving.test.ts covers the serving index's).
    args: ["--serving", "off"],
    seed: async (dataDir) => {
      db = await lancedb.connectNamespace("dir", { root: dataDir });
      await db.createNamespace(["ns1"]);
      const data = [...batches(SPEC, SPEC.rows)][0];
      items = await db.createTable("items", data, ["ns1"]);
      flat = await db.createTable("flat", data, ["ns1"]);
      await items.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 8, numSubVectors: 8 }) });
      await items.createIndex("text", { config: lancedb.Index.fts({ withPosition: true }) });
      await items.createIndex("category", { config: lancedb.Index.bitmap() });
      const fsl = (xs: number[][]) =>
        arrow.makeVector(arrow.makeData({
          type: new arrow.FixedSizeList(4, new arrow.Field("item", new arrow.Float32(), true)),
          length: xs.length,
          nullCount: 0,
          child: arrow.makeData({ type: new arrow.Float32(), length: xs.length * 4, data: Float32Array.from(xs.flat()) }),
        }));
      const n = Array.from({ length: 50 }, (_, i) => i);
      await db.createTable("two", new arrow.Table({
        id: arrow.makeVector(Int32Array.from(n)),
        a: fsl(n.map((i) => [i, 1, 0, 0])),
        b: fsl(n.map((i) => [0, i, 1, 0])),
        name: arrow.vectorFromArray(n.map((i) => `n${i}`), new arrow.Utf8()),
      }), ["ns1"]);
      ver = await db.createTable("ver", Array.from({ length: 100 }, (_, i) => ({ id: i, v: [i, 0] })), ["ns1"]);
      await ver.add(Array.from({ length: 50 }, (_, i) => ({ id: 100 + i, v: [i, 1] })));
      const dev = await (await ver.branches()).create("dev");
      await dev.add([{ id: 999, v: [9, 9] }]);
      await db.createTable("sorted", Array.from({ length: 12 }, (_, i) => ({ id: i, g: i % 3, name: i % 4 === 0 ? null : `n${(i * 7) % 12}`, s: { rank: 12 - i } })), ["ns1"]);
      const ids = new Int32Array(BIG).map((_, i) => i);
      await db.createTable("big", new arrow.Table({ id: arrow.makeVector(ids), x: arrow.makeVector(new Float32Array(BIG).map((_, i) => i / 2)) }), ["ns1"]);
    },
  },
  120_000,
);

const run = (table: string, body: unknown) => q.call("POST", `/v1/table/ns1$${table}/query`, body);
async function rows(table: string, body: unknown): Promise<EsmTable> {
  const r = await run(table, body);
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  expect(r.headers.get("content-type")).toBe("application/vnd.apache.arrow.file");
  return fromIPC(r.bytes);
}
const col = (t: { getChild(n: string): { toArray(): ArrayLike<unknown> } | null }, n: string) => Array.from(t.getChild(n)!.toArray());
const names = (t: { schema: { fields: { name: string }[] } }) => t.schema.fields.map((f) => f.name);

async function expectError(table: string, body: unknown, status: number, detail: RegExp, code?: number) {
  const r = await run(table, body);
  expect(r.status, r.text).toBe(status);
  expect(r.json.detail).toMatch(detail);
  if (code !== undefined) expect(r.json.code).toBe(code);
}

describe("vector search", () => {
  it("flat search equals LanceDB's exactly, as one Arrow IPC file", async () => {
    const r = await run("flat", { vector: { single_vector: qv[0] }, k: 10 });
    expect(Buffer.from(r.bytes.subarray(0, 6)).toString()).toBe("ARROW1");
    expect(Buffer.from(r.bytes.subarray(r.bytes.length - 6)).toString()).toBe("ARROW1");
    const got = fromIPC(r.bytes);
    const want = await flat.vectorSearch(qv[0]).limit(10).toArrow();
    expect(names(got)).toEqual(["id", "text", "category", "vector", "_distance"]);
    expect(col(got, "id")).toEqual(col(want, "id"));
    expect(col(got, "_distance")).toEqual(col(want, "_distance"));
    expect(col(got, "text")).toEqual(col(want, "text"));
  });

  it("indexed search equals LanceDB's and has recall@10 >= 0.9 against exact search", async () => {
    let hits = 0;
    for (const v of qv) {
      const got = col(await rows("items", { vector: { single_vector: v }, k: 10, columns: { column_names: ["id"] } }), "id");
      const own = col(await items.vectorSearch(v).select(["id", "_distance"]).limit(10).toArrow(), "id");
      expect(got).toEqual(own);
      const exact = col(await rows("items", { vector: { single_vector: v }, k: 10, bypass_vector_index: true, columns: { column_names: ["id"] } }), "id");
      hits += got.filter((id) => exact.includes(id)).length;
    }
    expect(hits / (10 * qv.length)).toBeGreaterThanOrEqual(0.9);
  });

  it("k and offset select ranks offset+1 .. offset+k", async () => {
    const all = col(await rows("flat", { vector: { single_vector: qv[1] }, k: 10 }), "id");
    expect(col(await rows("flat", { vector: { single_vector: qv[1] }, k: 3, offset: 2 }), "id")).toEqual(all.slice(2, 5));
  });

  it("k = 0 returns an empty result with the schema", async () => {
    const t = await rows("flat", { vector: { single_vector: qv[1] }, k: 0 });
    expect(t.numRows).toBe(0);
    expect(names(t)).toContain("_distance");
  });

  it("filter with prefilter (default) and with postfilter", async () => {
    const pre = await rows("flat", { vector: { single_vector: qv[2] }, k: 10, filter: "category = 'beta'" });
    expect(pre.numRows).toBe(10);
    expect(new Set(col(pre, "category"))).toEqual(new Set(["beta"]));
    const own = await flat.vectorSearch(qv[2]).where("category = 'beta'").limit(10).toArrow();
    expect(col(pre, "id")).toEqual(col(own, "id"));
    // Post-filtering keeps only the matching rows among the top k.
    const post = await rows("flat", { vector: { single_vector: qv[2] }, k: 30, filter: "category = 'beta'", prefilter: false });
    const ownPost = await flat.vectorSearch(qv[2]).where("category = 'beta'").postfilter().limit(30).toArrow();
    expect(post.numRows).toBeGreaterThan(0);
    expect(post.numRows).toBeLessThan(30);
    expect(col(post, "id")).toEqual(col(ownPost, "id"));
  });

  it("columns.column_names, column_aliases and the client's list", async () => {
    const body = { vector: { single_vector: qv[0] }, k: 5 };
    expect(names(await rows("flat", { ...body, columns: { column_names: ["id", "category"] } }))).toEqual(["id", "category", "_distance"]);
    const aliased = await rows("flat", { ...body, columns: { column_aliases: { ident: "id", cat: "category" } } });
    expect(names(aliased)).toEqual(["ident", "cat", "_distance"]);
    expect(col(aliased, "ident")).toEqual(col(await flat.vectorSearch(qv[0]).limit(5).toArrow(), "id"));
    expect(names(await rows("flat", { vector: qv[0], k: 5, columns: ["text"] }))).toEqual(["text", "_distance"]);
    // LanceDB's client may send `{output name: SQL expression}`.
    const exprs = await rows("flat", { vector: qv[0], k: 5, columns: { twice: "id * 2" } });
    expect(names(exprs)).toEqual(["twice", "_distance"]);
    expect(col(exprs, "twice")).toEqual(col(aliased, "ident").map((x) => (x as number) * 2));
    await expectError("flat", { vector: qv[0], columns: { bad: "id +" } }, 400, /^columns: /, 13);
  });

  it("distance_type changes the metric (cosine equals LanceDB's cosine)", async () => {
    const got = await rows("flat", { vector: { single_vector: qv[3] }, k: 10, distance_type: "cosine" });
    const own = await flat.vectorSearch(qv[3]).distanceType("cosine").limit(10).toArrow();
    expect(col(got, "id")).toEqual(col(own, "id"));
    expect(col(got, "_distance")).toEqual(col(own, "_distance"));
    const dot = await rows("flat", { vector: { single_vector: qv[3] }, k: 3, distance_type: "Dot" });
    expect((col(dot, "_distance") as number[])[0]).toBeLessThan(0);
  });

  it("lower_bound and upper_bound keep lower <= distance < upper", async () => {
    const all = col(await rows("flat", { vector: { single_vector: qv[4] }, k: 50 }), "_distance") as number[];
    const lo = all[5];
    const hi = all[20];
    const t = await rows("flat", { vector: { single_vector: qv[4] }, k: 50, lower_bound: lo, upper_bound: hi });
    const d = col(t, "_distance") as number[];
    expect(d.length).toBe(all.filter((x) => x >= lo && x < hi).length);
    expect(d.every((x) => x >= lo && x < hi)).toBe(true);
  });

  it("nprobes, refine_factor and bypass_vector_index reach the plan; ef is accepted", async () => {
    const plan = async (extra: object) =>
      (await q.call("POST", "/v1/table/ns1$items/explain_plan", { query: { vector: { single_vector: qv[0] }, k: 5, ...extra } })).json as string;
    expect(await plan({})).toMatch(/minimum_nprobes=20/);
    expect(await plan({ nprobes: 3 })).toMatch(/minimum_nprobes=3, maximum_nprobes=Some\(3\)/);
    expect(await plan({ refine_factor: 4 })).toMatch(/KNNVectorDistance/);
    expect(await plan({ bypass_vector_index: true })).not.toMatch(/ANNSubIndex/);
    expect(await plan({})).toMatch(/ANNSubIndex/);
    expect((await rows("items", { vector: { single_vector: qv[0] }, k: 5, ef: 64, nprobes: 2 })).numRows).toBe(5);
  });

  it("nprobes above the engine's default maximum (21, 50) are searched, not refused", async () => {
    for (const nprobes of [21, 50]) {
      const plan = (await q.call("POST", "/v1/table/ns1$items/explain_plan", { query: { vector: { single_vector: qv[0] }, k: 5, nprobes } })).json as string;
      expect(plan).toMatch(new RegExp(`minimum_nprobes=${nprobes}, maximum_nprobes=Some\\(${nprobes}\\)`));
      const want = await items.vectorSearch(qv[0]).limit(5).nprobes(nprobes).toArrow();
      expect(col(await rows("items", { vector: { single_vector: qv[0] }, k: 5, nprobes }), "id")).toEqual(col(want, "id"));
    }
  });

  it("fast_search skips unindexed data (no vector index: no rows)", async () => {
    expect((await rows("flat", { vector: { single_vector: qv[0] }, k: 5, fast_search: true })).numRows).toBe(0);
    expect((await rows("items", { vector: { single_vector: qv[0] }, k: 5, fast_search: true })).numRows).toBe(5);
  });

  it("with_row_id adds a _rowid column", async () => {
    const t = await rows("flat", { vector: { single_vector: qv[0] }, k: 3, with_row_id: true });
    expect(names(t)).toContain("_rowid");
    expect(typeof col(t, "_rowid")[0]).toBe("bigint");
  });

  it("multi_vector runs one search per vector, with query_index", async () => {
    const t = await rows("flat", { vector: { multi_vector: [qv[0], qv[1]] }, k: 2 });
    expect(t.numRows).toBe(4);
    expect(names(t)[0]).toBe("query_index");
  });

  it("vector_column is inferred, chosen, and ambiguous without it", async () => {
    await expectError("two", { vector: { single_vector: [1, 1, 0, 0] }, k: 3 }, 400, /vector_column: .*"a".*"b"/);
    const t = await rows("two", { vector: { single_vector: [3, 1, 0, 0] }, k: 1, vector_column: "a" });
    expect(col(t, "id")).toEqual([3]);
    const tb = await rows("two", { vector: { single_vector: [0, 7, 1, 0] }, k: 1, vector_column: "b" });
    expect(col(tb, "id")).toEqual([7]);
    await expectError("two", { vector: { single_vector: [1, 1, 0, 0] }, vector_column: "nope" }, 404, /vector_column "nope" not found in table "ns1\$two"/, 12);
    await expectError("two", { vector: { single_vector: [1, 1, 0, 0] }, vector_column: "name" }, 400, /vector_column: "name" is not a vector column/);
  });
});

describe("versions, branches and visibility", () => {
  it("version reads an older version; an unknown one is 404", async () => {
    expect((await rows("ver", { k: 1000 })).numRows).toBe(150);
    expect((await rows("ver", { version: 1 })).numRows).toBe(100);
    await expectError("ver", { version: 99 }, 404, /version 99/, 11);
  });

  it("branch reads the branch; an unknown one is 404", async () => {
    expect(col(await rows("ver", { branch: "dev", filter: "id = 999" }), "id")).toEqual([999]);
    expect((await rows("ver", { filter: "id = 999" })).numRows).toBe(0);
    await expectError("ver", { branch: "nope" }, 404, /branch "nope"/, 22);
  });

  it("writes by another process become visible within the consistency interval", async () => {
    const before = (await rows("ver", {})).numRows;
    await ver.add([{ id: 5000, v: [1, 1] }]);
    await new Promise((r) => setTimeout(r, 1200));
    expect((await rows("ver", {})).numRows).toBe(before + 1);
  });
});

describe("full-text search", () => {
  it("string_query equals LanceDB's", async () => {
    const got = await rows("items", { full_text_query: { string_query: { query: "apple" } }, k: 10 });
    const own = await items.search("apple", "fts").limit(10).toArrow();
    expect(col(got, "id")).toEqual(col(own, "id"));
    expect(names(got)).toContain("_score");
  });

  it("string_query with columns, filter and the client's {query, columns} shape", async () => {
    const body = { full_text_query: { string_query: { query: "river", columns: ["text"] } }, filter: "category = 'gamma'", k: 20 };
    const got = await rows("items", body);
    const own = await items.query().fullTextSearch("river", { columns: ["text"] }).where("category = 'gamma'").limit(20).toArrow();
    expect(col(got, "id")).toEqual(col(own, "id"));
    const legacy = await rows("items", { vector: [], full_text_query: { query: "river", columns: ["text"] }, filter: "category = 'gamma'", k: 20 });
    expect(col(legacy, "id")).toEqual(col(own, "id"));
    const legacyTree = await rows("items", { vector: [], full_text_query: { query: { match: { terms: "river", column: "text" } } }, filter: "category = 'gamma'", k: 20 });
    expect(col(legacyTree, "id")).toEqual(col(own, "id"));
  });

  const structured = (query: object) => ({ full_text_query: { structured_query: { query } }, k: 10, columns: { column_names: ["id", "text"] } });

  it("structured match (with and without column), phrase, boost, multi_match, boolean", async () => {
    const ids = async (body: object) => col(await rows("items", body), "id");
    const own = async (fq: lancedb.FullTextQuery) => col(await items.query().fullTextSearch(fq).select(["id", "text"]).limit(10).toArrow(), "id");
    const m = new lancedb.MatchQuery("apple banana", "text", { operator: lancedb.Operator.And });
    expect(await ids(structured({ match: { terms: "apple banana", column: "text", operator: "And" } }))).toEqual(await own(m));
    expect(await ids(structured({ match: { terms: "apple banana", operator: "and" } }))).toEqual(await own(m));
    const phrase = await rows("items", structured({ phrase: { terms: "quick brown", column: "text" } }));
    expect(phrase.numRows).toBeGreaterThan(0);
    expect((col(phrase, "text") as string[]).every((t) => t.includes("quick brown"))).toBe(true);
    const boost = new lancedb.BoostQuery(new lancedb.MatchQuery("apple", "text"), new lancedb.MatchQuery("banana", "text"), { negativeBoost: 0.2 });
    expect(await ids(structured({ boost: { positive: { match: { terms: "apple" } }, negative: { match: { terms: "banana" } }, negative_boost: 0.2 } }))).toEqual(await own(boost));
    const multi = new lancedb.MultiMatchQuery("fox", ["text", "category"]);
    expect(await ids(structured({ multi_match: { match_queries: [{ terms: "fox", column: "text" }, { terms: "fox", column: "category" }] } }))).toEqual(await own(multi));
    const bool = await rows("items", {
      ...structured({ boolean: { must: [{ match: { terms: "apple", column: "text" } }], should: [], must_not: [{ match: { terms: "banana", column: "text" } }] } }),
      k: 500,
    });
    const texts = col(bool, "text") as string[];
    expect(texts.length).toBeGreaterThan(0);
    expect(texts.every((t) => t.includes("apple") && !t.includes("banana"))).toBe(true);
  });
});

describe("hybrid search and scans", () => {
  it("vector plus text is fused with reciprocal rank fusion, like LanceDB's default", async () => {
    const got = await rows("items", { vector: { single_vector: qv[5] }, full_text_query: { string_query: { query: "apple" } }, k: 10 });
    const own = await items.vectorSearch(qv[5]).fullTextSearch("apple").limit(10).toArrow();
    expect(names(got)).toContain("_relevance_score");
    expect(col(got, "id")).toEqual(col(own, "id"));
    const scores = col(got, "_relevance_score") as number[];
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    // Each list contributes 1/(60 + rank): the best row scores between 1/60 and 2/60.
    expect(scores[0]).toBeGreaterThanOrEqual(1 / 60 - 1e-6);
    expect(scores[0]).toBeLessThanOrEqual(2 / 60 + 1e-6);
  });

  it("neither vector nor text is a filtered scan (no implicit limit)", async () => {
    const t = await rows("items", { filter: "category = 'alpha'" });
    expect(t.numRows).toBe(await items.countRows("category = 'alpha'"));
    expect((await rows("items", { filter: "category = 'alpha'", k: 3, offset: 2 })).numRows).toBe(3);
  });

  it("an empty result is a valid file with the schema", async () => {
    const t = await rows("items", { filter: "id < 0", columns: { column_names: ["id", "text"] } });
    expect(t.numRows).toBe(0);
    expect(names(t)).toEqual(["id", "text"]);
  });

  it("a 100,000-row result streams intact", async () => {
    const r = await run("big", {});
    expect(r.status).toBe(200);
    const t = fromIPC(r.bytes);
    expect(t.numRows).toBe(BIG);
    expect(t.batches.length).toBeGreaterThan(1);
    const ids = t.getChild("id")!.toArray() as Int32Array;
    const seen = new Uint8Array(BIG);
    for (const id of ids) seen[id] = 1;
    expect(seen.every((s) => s === 1)).toBe(true);
    expect(t.getChild("x")!.get(ids.indexOf(4242))).toBe(2121);
  });
});

describe("order_by", () => {
  const sorted = async (table: string, body: unknown) => col(await rows(table, body), "id");

  it("sorts a scan before offset and k, by several keys, ascending unless told", async () => {
    const order_by = [{ column_name: "category", ascending: false }, { column_name: "id" }];
    const got = await sorted("items", { filter: "id < 200", order_by, offset: 3, k: 5 });
    const own = await items.query().where("id < 200").orderBy([{ columnName: "category", ascending: false }, { columnName: "id" }]).offset(3).limit(5).toArrow();
    expect(got).toEqual(col(own, "id"));
    const all = await sorted("items", { filter: "id < 200", order_by });
    expect(got).toEqual(all.slice(3, 8));
  });

  it("nulls sort last by default and first with nulls_first; nested field paths sort too", async () => {
    const last = await rows("sorted", { order_by: [{ column_name: "name" }] });
    expect(col(last, "name").slice(-3)).toEqual([null, null, null]);
    const first = await rows("sorted", { order_by: [{ column_name: "name", ascending: false, nulls_first: true }], k: 4 });
    expect(col(first, "name")).toEqual([null, null, null, "n9"]);
    expect(await sorted("sorted", { order_by: [{ column_name: "s.rank" }], k: 3 })).toEqual([11, 10, 9]);
  });

  it("an unknown column is 404 TableColumnNotFound; with a vector or text search it is 400", async () => {
    await expectError("sorted", { order_by: [{ column_name: "nope" }] }, 404, /order_by column "nope" not found/, 12);
    await expectError("items", { vector: { single_vector: qv[0] }, k: 5, order_by: [{ column_name: "id" }] }, 400, /^order_by: cannot be combined with a vector search/, 13);
    await expectError("items", { full_text_query: { string_query: { query: "apple" } }, order_by: [{ column_name: "id" }] }, 400, /^order_by: cannot be combined with a full-text search/, 13);
    await expectError("sorted", { order_by: [{ ascending: true }] }, 400, /order_by/);
  });

  it("explain_plan takes it through its nested query, analyze_plan at the top level", async () => {
    const e = await q.call("POST", "/v1/table/ns1$sorted/explain_plan", { query: { order_by: [{ column_name: "g", ascending: false }], k: 2 } });
    expect(e.status).toBe(200);
    expect(e.json).toMatch(/SortExec: TopK\(fetch=2\), expr=\[g@\d+ DESC/);
    const a = await q.call("POST", "/v1/table/ns1$sorted/analyze_plan", { order_by: [{ column_name: "id", ascending: false }], k: 1 });
    expect(a.status).toBe(200);
    expect(a.json).toMatch(/SortExec/);
  });
});

describe("plans", () => {
  it("explain_plan and analyze_plan return the engine's plan as a JSON string", async () => {
    const e = await q.call("POST", "/v1/table/ns1$items/explain_plan", { query: { vector: { single_vector: qv[0] }, k: 5, filter: "category = 'beta'" } });
    expect(e.status).toBe(200);
    expect(e.json).toMatch(/ANNSubIndex/);
    const a = await q.call("POST", "/v1/table/ns1$items/analyze_plan", { vector: { single_vector: qv[0] }, k: 5 });
    expect(a.status).toBe(200);
    expect(a.json).toMatch(/metrics=/);
    const bad = await q.call("POST", "/v1/table/ns1$items/explain_plan", { query: { filter: "nope = 1" } });
    expect(bad.status).toBe(404);
    expect(bad.json.code).toBe(12);
  });
});

describe("errors", () => {
  const v = { single_vector: qv[0] };
  it.each([
    [{ k: -1 }, /^k: /],
    [{ offset: -1 }, /^offset: /],
    [{ nprobes: -1, vector: v }, /^nprobes: /],
    [{ ef: -2, vector: v }, /^ef: /],
    [{ refine_factor: -1, vector: v }, /^refine_factor: /],
    [{ version: -1 }, /^version: /],
    [{ vector_column: "", vector: v }, /^vector_column: /],
    [{ vector: { single_vector: qv[0], multi_vector: [qv[0]] } }, /^vector: provide single_vector or multi_vector, not both/],
    [{ vector: { single_vector: [] } }, /^vector.single_vector: /],
    [{ vector: { multi_vector: [[1, 2], [1]] } }, /^vector.multi_vector\[1\]: /],
    [{ vector: ["x"] }, /^vector/],
    [{ columns: { column_names: ["id"], column_aliases: { a: "id" } } }, /^columns: provide column_names or column_aliases, not both/],
    [{ full_text_query: { string_query: { query: "a" }, structured_query: { query: { match: { terms: "a" } } } } }, /^full_text_query: provide string_query or structured_query, not both/],
    [{ full_text_query: { structured_query: { query: { match: { terms: "a" }, phrase: { terms: "b" } } } } }, /^full_text_query.structured_query.query: provide exactly one of/],
    [{ full_text_query: { structured_query: { query: { match: { terms: "a", fuzziness: -1 } } } } }, /^full_text_query.structured_query.query.match.fuzziness: /],
    [{ distance_type: "manhattan", vector: v }, /^distance_type: /],
    [{ lower_bound: 2, upper_bound: 1, vector: v }, /^lower_bound: /],
    [{ vector: { single_vector: [1, 2, 3] } }, /^vector: /],
    [{ filter: "category = = 1" }, /^filter: .*sql parser error/],
  ])("400 for %j", async (body, detail) => {
    await expectError("items", body, 400, detail, 13);
  });

  it.each([
    [{ filter: "nope = 1" }, /column "nope" not found in table "ns1\$items"/],
    [{ columns: { column_names: ["id", "nope"] } }, /column "nope" not found in table "ns1\$items"/],
    [{ columns: { column_aliases: { x: "nope" } } }, /column "nope" not found/],
    [{ vector: { single_vector: qv[0] }, vector_column: "nope" }, /vector_column "nope" not found/],
    [{ full_text_query: { string_query: { query: "a", columns: ["nope"] } } }, /full-text column "nope" not found/],
  ])("404 TableColumnNotFound for %j", async (body, detail) => {
    await expectError("items", body, 404, detail, 12);
  });

  it("unknown table and namespace are 404 with codes 4 and 1", async () => {
    const t = await q.call("POST", "/v1/table/ns1$nope/query", {});
    expect([t.status, t.json.code]).toEqual([404, 4]);
    const n = await q.call("POST", "/v1/table/nons$nope/query", {});
    expect([n.status, n.json.code]).toEqual([404, 1]);
  });

  it("a read credential may query; nothing changes after errors", async () => {
    const before = await items.countRows();
    const r = await q.call("POST", "/v1/table/ns1$items/query", { k: 1 }, { "x-api-key": "test-read-key" });
    expect(r.status).toBe(200);
    expect(await items.countRows()).toBe(before);
  });
});
