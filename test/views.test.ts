// Materialized views end to end: query, udtf (JavaScript and SQL, partitioned) and chunker views
// created, refreshed and read, their contents checked against a computation of the source here;
// the chunker's incremental refresh after inserts, updates and deletes; a udtf refresh skipped when
// the source did not change; auto_refresh catching up, rate-limited; a refresh killed by SIGKILL
// and finished after a restart; every validation error; writes refused; LanceDB reading a view.
import * as lancedb from "@lancedb/lancedb";
import { Field, FixedSizeList, Float32, Float64, Int64, Table, Utf8, vectorFromArray } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { fromIPC, toStream } from "./helpers/arrow.js";
import { paced } from "./helpers/pace.js";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";
import { envelope, schemaOf } from "./helpers/views.js";

const q = serverForFile({ args: ["--auto-refresh-cooldown-ms", "1500", "--workers", "1"] });
const N = 2000;
const WORDS = ["ant", "bee", "cat", "dog", "eel"];

interface Row {
  id: number;
  x: number;
  cat: string;
  text: string;
}
const make = (i: number): Row => ({ id: i, x: i / 2, cat: `c${i % 3}`, text: Array.from({ length: 1 + (i % 4) }, (_, k) => WORDS[(i + k) % WORDS.length]).join(" ") });
const ipc = (rows: Row[]) =>
  toStream(new Table({
    id: vectorFromArray(rows.map((r) => BigInt(r.id)), new Int64()),
    x: vectorFromArray(rows.map((r) => r.x), new Float64()),
    cat: vectorFromArray(rows.map((r) => r.cat), new Utf8()),
    text: vectorFromArray(rows.map((r) => r.text), new Utf8()),
  }));
const post = (p: string, body?: unknown, qs = "") => q.call("POST", `${p}${qs}`, body);

/** Every row of a table as plain objects, sorted by `key`. */
async function rowsOf(id: string, key: string[]): Promise<Record<string, unknown>[]> {
  const r = await post(`/v1/table/${id}/query`, { k: 1_000_000 });
  expect(r.status, r.text).toBe(200);
  const t = fromIPC(r.bytes);
  const out = Array.from({ length: t.numRows }, (_, i) => Object.fromEntries(t.schema.fields.map((f) => [f.name, ((v) => (typeof v === "bigint" ? Number(v) : v))(t.getChild(f.name)!.get(i))])));
  const cmp = (a: Record<string, unknown>, b: Record<string, unknown>) => {
    for (const k of key) if (a[k] !== b[k]) return (a[k] as number) < (b[k] as number) ? -1 : 1;
    return 0;
  };
  return out.sort(cmp);
}

let sources = 0;
async function source(rows: Row[]): Promise<string> {
  const id = `vs$src${++sources}`;
  expect((await post(`/v1/table/${id}/create`, ipc(rows))).status).toBe(200);
  return id;
}
async function create(view: string, body: Record<string, unknown>) {
  const r = await post(`/v1/materialized_view/${view}/create`, body);
  expect(r.status, r.text).toBe(201);
  return r.json as { version: number; job_id?: string };
}
async function refresh(view: string, body: object = {}) {
  const r = await post(`/v1/materialized_view/${view}/refresh`, body);
  expect(r.status, r.text).toBe(202);
  const done = await settle(q, r.json.job_id, 60_000);
  expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
  return done.properties;
}

const splitter = envelope({ backend: "js", source: "(row) => row.text.split(' ').map((w, i) => ({ word: w, pos: i }))" });
const chunkerBody = (src: string) => ({
  kind: "chunker",
  source_query: JSON.stringify({ table: src, columns: ["id"], filter: "id % 5 <> 4" }),
  output_schema: schemaOf([["id", "int64"], ["word", "utf8"], ["pos", "int64"]]),
  udtf_spec: { kind: "chunker", udtf: splitter, udtf_name: "split", udtf_version: "1", input_columns: ["text"] },
});
/** What the chunker view should hold for `rows`. */
const chunks = (rows: Row[]) =>
  rows
    .filter((r) => r.id % 5 !== 4)
    .flatMap((r) => r.text.split(" ").map((w, i) => ({ id: r.id, word: w, pos: i })))
    .sort((a, b) => a.id - b.id || a.pos - b.pos);
const chunkRows = async (view: string) => (await rowsOf(view, ["id", "pos"])).map(({ id, word, pos }) => ({ id, word, pos }));

beforeAll(async () => {
  expect((await post("/v1/namespace/vs/create", {})).status).toBe(200);
});

describe("the three kinds, checked against the source", () => {
  const rows = Array.from({ length: N }, (_, i) => make(i));
  let src = "";
  beforeAll(async () => {
    src = await source(rows);
  });

  it("query: LanceDB's view of a filter and a projection", async () => {
    const c = await create("vs$q1", {
      kind: "query",
      source_query: JSON.stringify({ table: src, columns: { id: "id", y: "x * 2" }, filter: "cat = 'c1'" }),
      output_schema: schemaOf([["id", "int64"], ["y", "float64"]]),
      with_no_data: false,
    });
    expect((await settle(q, c.job_id!, 60_000)).status).toBe("Succeeded");
    const got = (await rowsOf("vs$q1", ["id"])).map(({ id, y }) => ({ id, y }));
    expect(got).toEqual(rows.filter((r) => r.cat === "c1").map((r) => ({ id: r.id, y: r.x * 2 })));
  });

  it("a view is a table: indexed, versioned and counted like one", async () => {
    const ix = await post("/v1/table/vs$q1/create_scalar_index", { column: "id", index_type: "BTREE" });
    expect(ix.status, ix.text).toBe(200);
    expect((await settle(q, ix.json.transaction_id)).status).toBe("Succeeded");
    expect((await post("/v1/table/vs$q1/index/list", {})).json.indexes.map((i: { index_name: string }) => i.index_name)).toContain("id_idx");
    expect((await post("/v1/table/vs$q1/version/list", {})).json.versions.length).toBeGreaterThan(1);
    expect((await post("/v1/table/vs$q1/count_rows", { predicate: "y > 100" })).json).toBe(rows.filter((r) => r.cat === "c1" && r.x * 2 > 100).length);
    expect((await post("/v1/table/vs$q1/describe", {})).json.materialized_view).toMatchObject({ kind: "query", runs_source_query: true, last_refresh: { mode: "rebuild", rows_written: rows.filter((r) => r.cat === "c1").length } });
  });

  it("udtf (JavaScript), one partition per category; skipped while the source is unchanged", async () => {
    const c = await create("vs$u1", {
      kind: "udtf",
      source_query: JSON.stringify({ table: src }),
      output_schema: schemaOf([["cat", "utf8"], ["n", "int64"], ["sum", "float64"]]),
      udtf_spec: { kind: "udtf", udtf: envelope({ backend: "js", source: "(rows) => [{ cat: rows[0].cat, n: rows.length, sum: rows.reduce((a, r) => a + r.x, 0) }]" }), udtf_name: "agg", udtf_version: "1", partition_by: "cat", input_columns: ["cat", "x"] },
      with_no_data: false,
    });
    const first = await settle(q, c.job_id!, 60_000);
    expect(first.properties).toMatchObject({ mode: "rebuild", rows_written: "3" });
    const want = ["c0", "c1", "c2"].map((cat) => ({ cat, n: rows.filter((r) => r.cat === cat).length, sum: rows.filter((r) => r.cat === cat).reduce((a, r) => a + r.x, 0) }));
    expect(await rowsOf("vs$u1", ["cat"])).toEqual(want);
    const again = await refresh("vs$u1");
    expect(again).toMatchObject({ mode: "no_op", rows_written: "0", view_version: first.properties.view_version });
  });

  it("udtf partitioned by a vector index's IVF partitions (and the rows written after the build)", async () => {
    const n = 1000;
    const vec = (i: number) => Array.from({ length: 8 }, (_, d) => Math.sin(i * (d + 1)) + (i % 4) * 3);
    const body = toStream(new Table({
      id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(i)), new Int64()),
      vec: vectorFromArray(Array.from({ length: n }, (_, i) => vec(i)), new FixedSizeList(8, new Field("item", new Float32(), true))),
    }));
    expect((await post("/v1/table/vs$vecsrc/create", body)).status).toBe(200);
    const ix = await post("/v1/table/vs$vecsrc/create_index", { column: "vec", index_type: "IVF_FLAT", num_partitions: 4 });
    expect((await settle(q, ix.json.transaction_id, 60_000)).status).toBe("Succeeded");
    const late = toStream(new Table({
      id: vectorFromArray([BigInt(n), BigInt(n + 1)], new Int64()),
      vec: vectorFromArray([vec(1), vec(2)], new FixedSizeList(8, new Field("item", new Float32(), true))),
    }));
    expect((await post("/v1/table/vs$vecsrc/insert", late)).status).toBe(200);
    const udtf = envelope({ backend: "js", source: "(rows) => [{ n: rows.length, low: rows.reduce((m, r) => Math.min(m, r.id), Infinity) }]" });
    await create("vs$ivf", {
      kind: "udtf",
      source_query: JSON.stringify({ table: "vs$vecsrc" }),
      output_schema: schemaOf([["n", "int64"], ["low", "int64"]]),
      udtf_spec: { kind: "udtf", udtf, udtf_name: "count", udtf_version: "1", partition_by_indexed_column: "vec", input_columns: ["id"] },
    });
    await refresh("vs$ivf");
    const parts = await rowsOf("vs$ivf", ["low"]);
    // Four IVF partitions of the indexed rows, and one group of the two rows written after the build.
    expect(parts.length).toBe(5);
    expect(parts.reduce((a, p) => a + (p.n as number), 0)).toBe(n + 2);
    expect(parts.find((p) => p.low === n)).toEqual({ n: 2, low: n });
    const none = await post("/v1/materialized_view/vs$ivf2/create", { kind: "udtf", source_query: JSON.stringify({ table: src }), output_schema: schemaOf([["n", "int64"]]), udtf_spec: { kind: "udtf", udtf, udtf_name: "c", udtf_version: "1", partition_by_indexed_column: "x" } });
    expect([none.status, none.json.detail]).toEqual([400, 'udtf_spec.partition_by_indexed_column: column "x" has no IVF_FLAT, IVF_PQ or IVF_RQ index to partition by (create one first)']);
  });

  it("udtf (SQL by sql.js over the rows as table `source`)", async () => {
    await create("vs$s1", {
      kind: "udtf",
      source_query: JSON.stringify({ table: src, filter: "id < 1000" }),
      output_schema: schemaOf([["cat", "utf8"], ["n", "int64"], ["top", "float64"]]),
      udtf_spec: { kind: "udtf", udtf: envelope({ backend: "sql", sql: "SELECT cat, count(*) AS n, max(x) AS top FROM source GROUP BY cat" }), udtf_name: "agg", udtf_version: "1" },
    });
    await refresh("vs$s1");
    const low = rows.filter((r) => r.id < 1000);
    const want = ["c0", "c1", "c2"].map((cat) => ({ cat, n: low.filter((r) => r.cat === cat).length, top: Math.max(...low.filter((r) => r.cat === cat).map((r) => r.x)) }));
    expect(await rowsOf("vs$s1", ["cat"])).toEqual(want);
  });

  it("chunker: each source row's children, the parent's columns copied in, read by LanceDB's own client", async () => {
    await create("vs$c1", { ...chunkerBody(src), with_no_data: false });
    const job = (await q.call("POST", "/v1/jobs/list", { table: ["vs", "c1"] })).json.jobs[0].job_id;
    expect((await settle(q, job, 60_000)).status).toBe("Succeeded");
    expect(await chunkRows("vs$c1")).toEqual(chunks(rows));
    const db = await lancedb.connectNamespace("dir", { root: q.dataDir });
    const direct = await db.openTable("c1", ["vs"]);
    expect(await direct.countRows()).toBe(chunks(rows).length);
    expect((await direct.schema()).fields.map((f) => f.name)).toEqual(["id", "word", "pos", "__source_row_id", "__chunk"]);
  });
});

describe("chunker refreshes are incremental", () => {
  it("inserts, updates and deletes of source rows: only their children change", async () => {
    const rows = Array.from({ length: 500 }, (_, i) => make(i));
    const src = await source(rows);
    await create("vs$c2", chunkerBody(src));
    expect(await refresh("vs$c2")).toMatchObject({ mode: "rebuild" });
    const more = Array.from({ length: 20 }, (_, i) => make(500 + i));
    expect((await post(`/v1/table/${src}/insert`, ipc(more))).status).toBe(200);
    expect((await post(`/v1/table/${src}/update`, { predicate: "id IN (3, 7)", updates: [["text", "'fox'"]] })).status).toBe(200);
    expect((await post(`/v1/table/${src}/update`, { predicate: "id = 11", updates: [["id", "14"]] })).status).toBe(200);
    expect((await post(`/v1/table/${src}/delete`, { predicate: "id < 3" })).status).toBe(200);
    const now = [...rows, ...more].filter((r) => r.id >= 3).map((r) => (r.id === 3 || r.id === 7 ? { ...r, text: "fox" } : r.id === 11 ? { ...r, id: 14 } : r));
    const r = await refresh("vs$c2");
    expect(r.mode).toBe("incremental");
    expect(Number(r.rows_written)).toBeLessThan(60);
    expect(await chunkRows("vs$c2")).toEqual(chunks(now));
    expect(await refresh("vs$c2")).toMatchObject({ mode: "no_op" });
  });

  it("output_limit caps the view's rows", async () => {
    const src = await source(Array.from({ length: 100 }, (_, i) => make(i)));
    await create("vs$c3", chunkerBody(src));
    await refresh("vs$c3", { output_limit: 25 });
    expect((await post("/v1/table/vs$c3/count_rows", {})).json).toBe(25);
  });
});

describe("auto_refresh", () => {
  it("catches up after writes to the source, at most once per cooldown", async () => {
    const rows = Array.from({ length: 200 }, (_, i) => make(i));
    const src = await source(rows);
    const created = await create("vs$a1", { ...chunkerBody(src), auto_refresh: true, with_no_data: false });
    // The writes must come after the initial refresh: on a loaded machine it could otherwise run
    // after them all, leaving no automatic refresh anything to do.
    await settle(q, created.job_id!, 60_000);
    const inserts: Row[] = [];
    const writesStarted = Date.now();
    for (let k = 0; k < 6; k++) {
      const batch = Array.from({ length: 5 }, (_, i) => make(200 + k * 5 + i));
      inserts.push(...batch);
      expect((await post(`/v1/table/${src}/insert`, ipc(batch))).status).toBe(200);
      await new Promise((r) => setTimeout(r, 150));
    }
    const writesTook = Date.now() - writesStarted;
    const want = chunks([...rows, ...inserts]);
    const end = Date.now() + paced(20_000);
    while (Date.now() < end && JSON.stringify(await chunkRows("vs$a1")) !== JSON.stringify(want)) await new Promise((r) => setTimeout(r, 200));
    expect(await chunkRows("vs$a1")).toEqual(want);
    const jobs = (await q.call("POST", "/v1/jobs/list", { table: ["vs", "a1"] })).json.jobs as { job_id: string }[];
    // The initial refresh plus the automatic ones: 6 writes over ~1 s (longer on a loaded
    // machine), at most one refresh per 1.5 s cooldown, and one to catch up after the last.
    expect(jobs.length).toBeGreaterThanOrEqual(2);
    expect(jobs.length).toBeLessThanOrEqual(2 + Math.ceil(writesTook / 1500));
  });

  it("catches up after a restore of the source (an after-commit event, like a write)", async () => {
    const rows = Array.from({ length: 100 }, (_, i) => make(i));
    const src = await source(rows);
    const created = await create("vs$a2", {
      kind: "query",
      source_query: JSON.stringify({ table: src, columns: { id: "id", x: "x" } }),
      output_schema: schemaOf([["id", "int64"], ["x", "float64"]]),
      auto_refresh: true,
      with_no_data: false,
    });
    await settle(q, created.job_id!, 60_000);
    const before = (await post(`/v1/table/${src}/describe`, {})).json.version as number;
    const more = Array.from({ length: 10 }, (_, i) => make(100 + i));
    expect((await post(`/v1/table/${src}/insert`, ipc(more))).status).toBe(200);
    const until = async (want: Row[]) => {
      const ids = async () => (await rowsOf("vs$a2", ["id"])).map((r) => r.id);
      const end = Date.now() + paced(20_000);
      while (Date.now() < end && JSON.stringify(await ids()) !== JSON.stringify(want.map((r) => r.id))) await new Promise((r) => setTimeout(r, 200));
      expect(await ids()).toEqual(want.map((r) => r.id));
    };
    await until([...rows, ...more]);
    const r = await post(`/v1/table/${src}/restore`, { version: before });
    expect(r.status, r.text).toBe(200);
    await until(rows);
  });
});

describe("bad requests change nothing", () => {
  let src = "";
  beforeAll(async () => {
    src = await source(Array.from({ length: 10 }, (_, i) => make(i)));
  });
  const good = () => ({ kind: "udtf", source_query: JSON.stringify({ table: src }), output_schema: schemaOf([["n", "int64"]]), udtf_spec: { kind: "udtf", udtf: envelope({ backend: "js", source: "(rows) => [{ n: rows.length }]" }), udtf_name: "n", udtf_version: "1" } });
  const cases: [string, (b: Record<string, any>) => unknown, number, number, RegExp][] = [
    ["an unknown kind", (b) => ({ ...b, kind: "table" }), 400, 13, /^kind: must be one of query, udtf, chunker, scalar_udtf/],
    ["an output_schema that is not Arrow", (b) => ({ ...b, output_schema: "bm90IGFycm93" }), 400, 13, /^output_schema: not a base64 Arrow IPC schema/],
    ["a udtf without udtf_spec", (b) => ({ ...b, udtf_spec: null }), 400, 13, /^udtf_spec: is required for a udtf view/],
    ["a query view with udtf_spec", (b) => ({ ...b, kind: "query" }), 400, 13, /^udtf_spec: must be null for a query view/],
    ["udtf_spec.kind differing from kind", (b) => ({ ...b, udtf_spec: { ...b.udtf_spec, kind: "chunker" } }), 400, 13, /^udtf_spec\.kind: "chunker" differs/],
    ["a udtf_sha that does not match", (b) => ({ ...b, udtf_spec: { ...b.udtf_spec, udtf_sha: "00" } }), 400, 13, /^udtf_spec\.udtf_sha: is not the SHA-256/],
    ["both partition options", (b) => ({ ...b, udtf_spec: { ...b.udtf_spec, partition_by: "cat", partition_by_indexed_column: "v" } }), 400, 13, /mutually exclusive/],
    ["a JavaScript body that does not compile", (b) => ({ ...b, udtf_spec: { ...b.udtf_spec, udtf: envelope({ backend: "js", source: "(rows) => [" }) } }), 400, 13, /^udtf_spec\.udtf: /],
    ["a partition column the source lacks", (b) => ({ ...b, udtf_spec: { ...b.udtf_spec, partition_by: "nope" } }), 404, 12, /partition_by: column "nope" not found/],
    ["a missing source table", (b) => ({ ...b, source_query: JSON.stringify({ table: "vs$nope" }) }), 404, 4, /table "vs\$nope" not found/],
    ["a source_query form with a bad field", (b) => ({ ...b, source_query: JSON.stringify({ table: src, limit: -1 }) }), 400, 13, /^source_query\.limit: must be an integer >= 0/],
    ["an initial refresh of a source_query in another form", (b) => ({ ...b, source_query: "SELECT * FROM t", with_no_data: false }), 400, 13, /^source_query: an initial refresh runs only this server's form/],
    ["a query view whose output_schema differs from its query", (b) => ({ kind: "query", source_query: JSON.stringify({ table: src, columns: ["id"] }), output_schema: schemaOf([["x", "float64"]]) }), 400, 13, /^output_schema: .* differs from the columns the source query yields/],
    ["a query view that aggregates", () => ({ kind: "query", source_query: JSON.stringify({ table: src, columns: { n: "count(*)" } }), output_schema: schemaOf([["n", "int64"]]) }), 400, 13, /source_query/],
    ["a missing namespace", (b) => ({ ...b, $id: "nons$v" }), 404, 1, /namespace "nons" not found/],
  ];
  for (const [what, change, status, code, detail] of cases) {
    it(`${what} → ${status}`, async () => {
      const body = change(good()) as Record<string, unknown>;
      const id = (body.$id as string) ?? "vs$bad";
      delete body.$id;
      const r = await post(`/v1/materialized_view/${id}/create`, body);
      expect(r.status, r.text).toBe(status);
      expect(r.json.code).toBe(code);
      expect(r.json.detail).toMatch(detail);
      expect((await post(`/v1/table/${id}/exists`, {})).status).toBe(404);
    });
  }

  it("a query view over a table without stable row ids is 400 saying how to get them", async () => {
    const plain = await lancedb.connect(q.dataDir);
    await plain.createTable("plainsrc", [{ id: 1, x: 1.5 }]);
    const r = await post("/v1/materialized_view/vs$p1/create", { kind: "query", source_query: JSON.stringify({ table: "plainsrc" }), output_schema: schemaOf([["id", "float64"], ["x", "float64"]]) });
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toMatch(/^source_query\.table: query views need a source table with stable row ids/);
  });

  it("an existing id is 409; a view refuses writes; refresh errors; drop removes it", async () => {
    await create("vs$b1", good());
    const again = await post("/v1/materialized_view/vs$b1/create", good());
    expect([again.status, again.json.code]).toEqual([409, 5]);
    const ins = await post("/v1/table/vs$b1/insert", ipc([make(1)]));
    expect([ins.status, ins.json.detail]).toEqual([400, 'table "vs$b1" is a materialized view; insert changes it only by a refresh']);
    expect((await post("/v1/table/vs$b1/add_columns", { new_columns: [{ name: "z", expression: "1" }] })).status).toBe(400);
    expect((await post("/v1/table/vs$b1/delete", { predicate: "true" })).status).toBe(400);
    expect((await post("/v1/materialized_view/vs$b1/refresh", { output_limit: 3 })).json.detail).toBe("output_limit: applies to chunker views only");
    expect((await post(`/v1/materialized_view/${src}/refresh`, {})).json.detail).toMatch(/is not a materialized view/);
    expect((await post("/v1/materialized_view/vs$b1/refresh", { src_version: 99 })).status).toBe(404);
    await create("vs$b2", { ...good(), source_query: "SELECT n FROM somewhere" });
    expect((await post("/v1/materialized_view/vs$b2/refresh", {})).json.detail).toMatch(/^source_query: stored as sent; this server refreshes only its own form/);
    expect((await post("/v1/table/vs$b1/drop", {})).status).toBe(200);
    expect((await post("/v1/table/vs$b1/exists", {})).status).toBe(404);
    await create("vs$b1", good());
  });
});

describe("a refresh interrupted by SIGKILL", () => {
  it("runs again after the restart and leaves the right contents", async () => {
    const rows = Array.from({ length: 300 }, (_, i) => make(i));
    const src = await source(rows);
    const slow = envelope({ backend: "js", source: "(rows) => { const t = Date.now(); while (Date.now() - t < 1500) {} return [{ n: rows.length }]; }" });
    const c = await create("vs$k1", { kind: "udtf", source_query: JSON.stringify({ table: src }), output_schema: schemaOf([["n", "int64"]]), udtf_spec: { kind: "udtf", udtf: slow, udtf_name: "n", udtf_version: "1" }, with_no_data: false });
    const end = Date.now() + paced(10_000);
    while ((await q.call("POST", `/v1/transaction/${c.job_id}/describe`, {})).json.status !== "Running" && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    await q.kill();
    await q.restart();
    const done = await settle(q, c.job_id!, 60_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(await rowsOf("vs$k1", ["n"])).toEqual([{ n: 300 }]);
  });
});
