// LanceDB's own REMOTE (Cloud) client, `connect("db://…", { hostOverride })`, pointed at Quiver:
// the wire shape it really sends to /v1/table/{name}/query/ (and describe/, count_rows/,
// explain_plan/, analyze_plan/), checked end to end. Every answer is compared with LanceDB's
// in-process answer to the same query on the same files.
import * as lancedb from "@lancedb/lancedb";
import { beforeAll, describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { batches, queryVectors } from "../bench/dataset.js";
import { READ_KEY, serverForFile } from "./helpers/quiver.js";

const SPEC = { rows: 2000, dim: 16, rank: 4, seed: 11 };
let local: lancedb.Connection; // in-process, on Quiver's data directory
let remote: lancedb.Connection; // LanceDB's remote client, talking HTTP to Quiver
let mine: lancedb.Table; // local handle of "items"
let theirs: lancedb.Table; // remote handle of "items"
const qv = queryVectors(SPEC, 5).map((v) => Array.from(v));

const q = serverForFile(
  {
    // Answers are compared with LanceDB's own (its probes' recall included): the engine's path.
    args: ["--serving", "off"],
    seed: async (dataDir) => {
      const ns = await lancedb.connectNamespace("dir", { root: dataDir });
      const items = await ns.createTable("items", [...batches(SPEC, SPEC.rows)][0], []);
      await items.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 8, numSubVectors: 4 }) });
      await items.createIndex("text", { config: lancedb.Index.fts() });
      await ns.createTable("types", typesTable(), []);
      await ns.createNamespace(["ns1"]);
      const inner = new arrow.Table({
        id: arrow.vectorFromArray([1, 2], new arrow.Int32()),
        v: arrow.vectorFromArray([[1, 0], [0, 1]], new arrow.FixedSizeList(2, new arrow.Field("item", new arrow.Float32(), true))),
      });
      await ns.createTable("inner", inner, ["ns1"]);
    },
  },
  120_000,
);
beforeAll(async () => {
  local = await lancedb.connect(q.dataDir);
  mine = await local.openTable("items");
  remote = await lancedb.connect("db://quiver", {
    apiKey: READ_KEY,
    hostOverride: q.url,
    clientConfig: { retryConfig: { retries: 0 } },
  });
  theirs = await remote.openTable("items");
});

/** One column of each common type, to check the schema the remote client reads from describe/. */
function typesTable() {
  const n = 3;
  const A = arrow;
  const col = (t: any, values: unknown[]) => A.vectorFromArray(values, t);
  return new A.Table({
    b: col(new A.Bool(), [true, false, true]),
    i8: col(new A.Int8(), [1, 2, 3]),
    u32: col(new A.Uint32(), [1, 2, 3]),
    i64: col(new A.Int64(), [1n, 2n, 3n]),
    f32: col(new A.Float32(), [1, 2, 3]),
    f64: col(new A.Float64(), [1, 2, 3]),
    s: col(new A.Utf8(), ["a", "b", "c"]),
    ls: col(new A.LargeUtf8(), ["a", "b", "c"]),
    bin: col(new A.Binary(), [1, 2, 3].map((i) => Uint8Array.of(i))),
    d: col(new A.DateDay(), [0, 1, 2].map((i) => new Date(i * 86_400_000))),
    ts: col(new A.TimestampMicrosecond(), [1, 2, 3]),
    tsz: col(new A.TimestampMillisecond("UTC"), [1, 2, 3]),
    tags: col(new A.List(new A.Field("item", new A.Utf8(), true)), Array.from({ length: n }, () => ["x", "y"])),
    st: col(new A.Struct([new A.Field("x", new A.Int32(), true)]), [{ x: 1 }, { x: 2 }, { x: 3 }]),
    v: col(new A.FixedSizeList(2, new A.Field("item", new A.Float32(), true)), [[1, 2], [3, 4], [5, 6]]),
  });
}

/** Rows as plain JSON values (BigInt → number, typed arrays → arrays) for exact comparison. */
function rows(t: { toArray(): any[] }): unknown[] {
  return JSON.parse(
    JSON.stringify(t.toArray().map((r) => r.toJSON()), (_k, v) =>
      typeof v === "bigint" ? Number(v) : ArrayBuffer.isView(v) ? Array.from(v as Float32Array) : v?.toJSON ? v.toJSON() : v,
    ),
  );
}
const names = (t: { schema: { fields: { name: string }[] } }) => t.schema.fields.map((f) => f.name);

describe("LanceDB remote client against Quiver", () => {
  it("lists, opens and counts root tables (GET /v1/table/, count_rows/ with a predicate)", async () => {
    // GET /v1/table/ is Quiver's ListAllTables: namespaced tables appear as `ns1$inner`.
    expect(await remote.tableNames()).toEqual(["items", "ns1$inner", "types"]);
    expect(await theirs.countRows()).toBe(SPEC.rows);
    expect(await theirs.countRows("id < 100")).toBe(await mine.countRows("id < 100"));
  });

  it("reaches a table inside a namespace (the id joined with `$`)", async () => {
    const t = await remote.openTable("inner", ["ns1"]);
    expect(await t.countRows()).toBe(2);
    const got = await t.vectorSearch([0, 1]).limit(1).toArray();
    expect(got.map((r) => Number(r.id))).toEqual([2]);
  });

  it("reads the schema from describe/ in LanceDB's own type vocabulary", async () => {
    expect((await theirs.schema()).toString()).toBe((await mine.schema()).toString());
    const t = await local.openTable("types");
    const r = await remote.openTable("types");
    expect((await r.schema()).fields.map((f) => `${f.name}: ${f.type}`)).toEqual(
      (await t.schema()).fields.map((f) => `${f.name}: ${f.type}`),
    );
    // The namespace-spec vocabulary is unchanged for everyone else.
    const d = await q.call("POST", "/v1/table/types/describe", {});
    expect(d.json.schema.fields.find((f: { name: string }) => f.name === "f64").type).toEqual({ type: "float64" });
  });

  it("vectorSearch().limit().nprobes() gives LanceDB's own rows and distances", async () => {
    for (const v of qv.slice(0, 3)) {
      const got = await theirs.vectorSearch(v).limit(7).nprobes(2).toArrow();
      const want = await mine.vectorSearch(v).limit(7).nprobes(2).toArrow();
      expect(names(got)).toEqual(names(want));
      expect(names(got)).toContain("_distance");
      expect(rows(got)).toEqual(rows(want));
    }
  });

  it("honours minimum_nprobes / maximum_nprobes: in the plan and in the results", async () => {
    const v = qv[0];
    const plan = await theirs.vectorSearch(v).minimumNprobes(2).maximumNprobes(5).limit(5).explainPlan(true);
    expect(plan).toMatch(/minimum_nprobes=2, maximum_nprobes=Some\(5\)/);
    expect(plan).toBe(await mine.vectorSearch(v).minimumNprobes(2).maximumNprobes(5).limit(5).explainPlan(true));
    // By effect, each answer equal to LanceDB's own: the prefilter keeps 10 rows of 2,000 spread over
    // 8 partitions, so one probe finds only some of them and a maximum of 8 (every partition) finds
    // all 10. (IVF training is not deterministic, so the filter must not depend on the partitions.)
    let seed = 3;
    const away = Array.from({ length: SPEC.dim }, () => ((seed = (seed * 16807) % 2147483647) / 2147483647) - 0.5);
    const run = (t: lancedb.Table, min: number, max: number) =>
      t.vectorSearch(away).minimumNprobes(min).maximumNprobes(max).where("id % 200 = 0").limit(10).toArrow();
    const narrow = rows(await run(theirs, 1, 1));
    const wide = rows(await run(theirs, 1, 8));
    expect(narrow).toEqual(rows(await run(mine, 1, 1)));
    expect(wide).toEqual(rows(await run(mine, 1, 8)));
    expect(wide.length).toBe(10);
    expect(narrow.length).toBeLessThan(10);
  });

  it("a bad nprobes range is a 400 naming maximum_nprobes, from the client's own call", async () => {
    // The client checks min <= max itself, so send the wire shape it would produce directly.
    const r = await q.call("POST", "/v1/table/items/query/", { vector: qv[0], k: 3, minimum_nprobes: 4, maximum_nprobes: 2, version: null });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^maximum_nprobes: /);
  });

  it("distance type, filters, postfilter, offset and bypassing the index match LanceDB", async () => {
    const v = qv[1];
    const cases: [string, (t: lancedb.Table) => lancedb.VectorQuery][] = [
      ["cosine", (t) => t.vectorSearch(v).distanceType("cosine").limit(5)],
      ["prefilter", (t) => t.vectorSearch(v).where("category = 'beta'").limit(5)],
      ["postfilter", (t) => t.vectorSearch(v).where("category = 'beta'").postfilter().limit(5)],
      ["offset", (t) => t.vectorSearch(v).offset(3).limit(4)],
      ["flat", (t) => t.vectorSearch(v).bypassVectorIndex().limit(5)],
      ["refine", (t) => t.vectorSearch(v).refineFactor(2).nprobes(3).limit(5)],
      ["bounds", (t) => t.vectorSearch(v).distanceRange(0, 1e9).bypassVectorIndex().limit(5)],
    ];
    for (const [name, build] of cases) {
      const got = rows(await build(theirs).toArrow());
      expect(got.length, name).toBeGreaterThan(0);
      expect(got, name).toEqual(rows(await build(mine).toArrow()));
    }
  });

  it("full-text search(text, 'fts') matches LanceDB's rows and scores", async () => {
    const got = await theirs.search("fox", "fts").limit(6).toArrow();
    const want = await mine.search("fox", "fts").limit(6).toArrow();
    expect(names(got)).toContain("_score");
    expect(got.numRows).toBeGreaterThan(0);
    expect(rows(got)).toEqual(rows(want));
  });

  it("query().where().limit(), select of columns and of aliased expressions, withRowId", async () => {
    const cases: [string, (t: lancedb.Table) => lancedb.Query][] = [
      ["where", (t) => t.query().where("id >= 10 AND id < 40").limit(5)],
      ["select", (t) => t.query().select(["id", "text"]).limit(3)],
      ["aliases", (t) => t.query().select({ ident: "id", twice: "id * 2", up: "upper(category)" }).limit(3)],
      ["rowid", (t) => t.query().select(["id"]).withRowId().where("id > 1990")],
    ];
    for (const [name, build] of cases) {
      const got = await build(theirs).toArrow();
      const want = await build(mine).toArrow();
      expect(names(got), name).toEqual(names(want));
      expect(rows(got), name).toEqual(rows(want));
    }
    const aliased = await theirs.query().select({ ident: "id", twice: "id * 2" }).limit(2).toArray();
    expect(aliased.map((r) => [Number(r.ident), Number(r.twice)])).toEqual([[0, 0], [1, 2]]);
    expect(names(await theirs.query().withRowId().limit(1).toArrow())).toContain("_rowid");
  });

  it("a hybrid query (vector + full text, fused with reciprocal rank) matches LanceDB", async () => {
    const build = (t: lancedb.Table) => t.query().nearestTo(qv[2]).fullTextSearch("fox").limit(8);
    const got = await build(theirs).toArrow();
    const want = await build(mine).toArrow();
    expect(names(got)).toContain("_relevance_score");
    expect(got.numRows).toBe(8);
    expect(rows(got)).toEqual(rows(want));
  });

  it("analyzePlan runs the query on Quiver and reports the engine's metrics", async () => {
    const plan = await theirs.query().where("id < 5").analyzePlan();
    expect(plan).toMatch(/AnalyzeExec/);
    expect(plan).toMatch(/ProjectionExec.*output_rows=5/);
  });

  it("engine errors reach the client as Quiver's JSON errors naming the column", async () => {
    await expect(theirs.query().where("nope > 1").toArrow()).rejects.toThrow(/nope/);
    await expect(theirs.query().select(["nope"]).toArrow()).rejects.toThrow(/nope/);
    await expect(remote.openTable("missing").then((t) => t.countRows())).rejects.toThrow(/missing/);
  });
});

describe("query validation", () => {
  it("an empty alias name is a 400 naming columns.column_aliases, and no column comes back", async () => {
    const r = await q.call("POST", "/v1/table/items/query", { k: 1, vector: null, columns: { column_aliases: { "": "id" } } });
    expect(r.status).toBe(400);
    expect(r.json.code).toBe(13);
    expect(r.json.detail).toMatch(/^columns\.column_aliases: /);
    // The LanceDB client's {alias: expression} map: same rule.
    const legacy = await q.call("POST", "/v1/table/items/query", { k: 1, vector: null, columns: { "": "id" } });
    expect(legacy.status).toBe(400);
    expect(legacy.json.detail).toMatch(/^columns: /);
    const ok = await q.call("POST", "/v1/table/items/query", { k: 1, vector: null, columns: { column_aliases: { i: "id" } } });
    expect(ok.status).toBe(200);
  });
});
