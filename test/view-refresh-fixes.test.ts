// View refreshes and UDF errors as a Geneva user meets them: a cancel stops the refresh and keeps
// the view; output_limit does not leave a view truncated for good; bad function output is named;
// refreshes and SQL backfills show their progress; each test here failed before its fix.
import { Field, Int64, Schema, Table, Utf8 } from "apache-arrow";
import { describe, expect, it, vi } from "vitest";
import { paced } from "./helpers/pace.js";
import { toStream } from "./helpers/arrow.js";
import { serverForFile } from "./helpers/quiver.js";
import { settle, until } from "./helpers/transactions.js";
import { envelope } from "./helpers/views.js";

// A cooldown of 0: every write looks at its auto_refresh views at once (the race below).
const q = serverForFile({ args: ["--workers", "1", "--auto-refresh-cooldown-ms", "0"] });
// Several backfills or refreshes per test on a shared 2-core machine.
vi.setConfig({ testTimeout: 300_000 });
const post = (p: string, body?: unknown) => q.call("POST", p, body);
const wantJson = { accept: "application/json" };
const jsonSchema = (fields: [string, "int64" | "utf8"][]) => {
  const types = { int64: new Int64(), utf8: new Utf8() };
  return Buffer.from(toStream(new Table(new Schema(fields.map(([n, t]) => new Field(n, types[t], true)))))).toString("base64");
};

async function source(id: string, n: number, from = 0) {
  const rows = Array.from({ length: n }, (_, i) => ({ id: from + i, cat: `c${(from + i) % 3}`, text: `a b ${from + i}` }));
  const r = await post(`/v1/table/${id}/${from === 0 ? "create" : "insert"}`, rows);
  expect(r.status, r.text).toBe(200);
}
async function create(view: string, body: Record<string, unknown>) {
  const r = await post(`/v1/materialized_view/${view}/create`, body);
  expect(r.status, r.text).toBe(201);
}
async function refresh(view: string, body: object = {}) {
  const r = await post(`/v1/materialized_view/${view}/refresh`, body);
  expect(r.status, r.text).toBe(202);
  return r.json.job_id as string;
}
const rowsOf = async (id: string, columns: string[]) =>
  ((await q.call("POST", `/v1/table/${id}/query`, { k: 100_000, columns }, wantJson)).json as Record<string, unknown>[]).map((r) => JSON.stringify(r)).sort();
const describeView = async (id: string) => (await post(`/v1/table/${id}/describe`, {})).json.materialized_view;
const cancel = (job: string) => post(`/v1/transaction/${job}/alter`, { actions: [{ setStatusAction: { status: "Canceled" } }] });
/** Wait until a refresh has put some source rows through its function (so it is computing). */
async function computing(job: string) {
  const end = Date.now() + paced(120_000);
  for (;;) {
    const p = (await post(`/v1/transaction/${job}/describe`, {})).json.properties;
    if (Number(p.rows_done) > 0) return;
    if (Date.now() > end) throw new Error(`refresh ${job} shows no progress: ${JSON.stringify(p)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Slow per partition (udtf) or per row (chunker), so a refresh is still computing when canceled.
const slowUdtf = envelope({ backend: "js", source: "(rows) => { const t = Date.now(); while (Date.now() - t < 700) {} return [{ cat: rows[0].cat, n: rows.length }]; }" });
const slowChunker = envelope({ backend: "js", source: "(row) => { const t = Date.now(); while (Date.now() - t < 20) {} return row.text.split(' ').map((w) => ({ word: w })); }" });
const udtfView = (src: string) => ({
  kind: "udtf",
  source_query: JSON.stringify({ table: src }),
  output_schema: jsonSchema([["cat", "utf8"], ["n", "int64"]]),
  udtf_spec: { kind: "udtf", udtf: slowUdtf, udtf_name: "n", udtf_version: "1", partition_by: "cat", input_columns: ["cat"] },
});
const chunkerView = (src: string, udtf = slowChunker) => ({
  kind: "chunker",
  source_query: JSON.stringify({ table: src, columns: ["id"] }),
  output_schema: jsonSchema([["id", "int64"], ["word", "utf8"]]),
  udtf_spec: { kind: "chunker", udtf, udtf_name: "split", udtf_version: "1", input_columns: ["text"] },
});

describe("canceling a refresh", () => {
  it("udtf: the cancel ends the job, the refresh commits nothing and the view keeps its old contents", async () => {
    await source("rf_s1", 30);
    await create("rf_u1", udtfView("rf_s1"));
    expect((await settle(q, await refresh("rf_u1"), 200_000)).status).toBe("Succeeded");
    const before = await rowsOf("rf_u1", ["cat", "n"]);
    const last = (await describeView("rf_u1")).last_refresh;
    await source("rf_s1", 30, 30);
    const job = await refresh("rf_u1", { concurrency: 1 });
    await computing(job);
    const c = await cancel(job);
    expect(c.json.status).toBe("Canceled");
    // Long enough for the rest of the refresh (2 partitions of 700 ms) to have committed had it gone on.
    await new Promise((r) => setTimeout(r, 6000));
    expect(await rowsOf("rf_u1", ["cat", "n"])).toEqual(before);
    expect((await describeView("rf_u1")).last_refresh).toEqual(last);
    const d = await post(`/v1/transaction/${job}/describe`, {});
    expect([d.json.status, d.json.properties.rows_written]).toEqual(["Canceled", undefined]);
  });

  it("chunker: the view stays as it was, and the next refresh completes it", async () => {
    await source("rf_s2", 200);
    await create("rf_c1", chunkerView("rf_s2"));
    const job = await refresh("rf_c1", { concurrency: 1, source_task_size: 10 });
    await computing(job);
    expect((await cancel(job)).json.status).toBe("Canceled");
    // 200 rows of 20 ms: long enough for the whole refresh to have committed had it gone on.
    await new Promise((r) => setTimeout(r, 6000));
    expect(await rowsOf("rf_c1", ["id"])).toEqual([]);
    expect((await settle(q, await refresh("rf_c1"), 200_000)).status).toBe("Succeeded");
    expect((await rowsOf("rf_c1", ["id"])).length).toBe(600);
  });
});

describe("refresh progress and limits", () => {
  it("a running chunker refresh shows rows_done of rows_total and the source version it reads", async () => {
    await source("rf_s3", 200);
    await create("rf_c2", chunkerView("rf_s3"));
    const job = await refresh("rf_c2", { concurrency: 1, source_task_size: 20 });
    const seen = await until(q, job, () => true);
    let p = seen.properties;
    const end = Date.now() + paced(120_000);
    while (!(Number(p.rows_done) > 0 && Number(p.rows_done) < 200) && Date.now() < end) {
      p = (await post(`/v1/transaction/${job}/describe`, {})).json.properties;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(p).toMatchObject({ rows_total: "200", read_version: "1" });
    expect(Number(p.rows_done)).toBeGreaterThan(0);
    expect((await settle(q, job, 200_000)).status).toBe("Succeeded");
  });

  it("output_limit, then a plain refresh: the view is complete", async () => {
    await source("rf_s4", 50);
    const fast = envelope({ backend: "js", source: "(row) => row.text.split(' ').map((w) => ({ word: w }))" });
    await create("rf_c3", chunkerView("rf_s4", fast));
    expect((await settle(q, await refresh("rf_c3", { output_limit: 25 }), 200_000)).status).toBe("Succeeded");
    expect((await rowsOf("rf_c3", ["id"])).length).toBe(25);
    const done = await settle(q, await refresh("rf_c3"), 200_000);
    expect(done.properties.mode).not.toBe("no_op");
    expect((await rowsOf("rf_c3", ["id"])).length).toBe(150);
  });
});

describe("table functions whose output does not fit the view", () => {
  it("a udtf row with a field the view lacks fails the refresh naming the field", async () => {
    await source("rf_s5", 10);
    const extra = envelope({ backend: "js", source: "(rows) => [{ cat: 'x', n: rows.length, colour: 'red' }]" });
    await create("rf_u2", { ...udtfView("rf_s5"), udtf_spec: { kind: "udtf", udtf: extra, udtf_name: "n", udtf_version: "1" } });
    const done = await settle(q, await refresh("rf_u2"), 200_000);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/field "colour", which is not a column of the view/);
  });

  it("an SQL udtf writing text into an int64 column names the column and the row", async () => {
    await source("rf_s6", 10);
    const sql = envelope({ backend: "sql", sql: "SELECT cat, CASE WHEN id = 7 THEN 'c7' ELSE id END AS n FROM source ORDER BY id" });
    await create("rf_u3", { ...udtfView("rf_s6"), udtf_spec: { kind: "udtf", udtf: sql, udtf_name: "n", udtf_version: "1" } });
    const done = await settle(q, await refresh("rf_u3"), 200_000);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/returned "c7" in column "n" of its row 7, which a Int64 column cannot hold/);
  });

  it("a query view that aggregates is 400 with a sentence, not a query plan", async () => {
    await source("rf_s7", 10);
    const r = await post("/v1/materialized_view/rf_q1/create", { kind: "query", source_query: JSON.stringify({ table: "rf_s7", columns: { n: "count(*)" } }), output_schema: jsonSchema([["n", "int64"]]) });
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toBe("source_query.columns: query views cannot aggregate (no GROUP BY, count, sum, min, max or avg); use a udtf view for aggregates");
  });
});

describe("auto_refresh", () => {
  it("under a stream of writes: one look at a time, so no refresh is refused (no warning), and the view catches up", async () => {
    await source("rf_a1", 20);
    const r = await post("/v1/materialized_view/rf_av/create", {
      kind: "query",
      source_query: JSON.stringify({ table: "rf_a1", columns: ["id", "cat"] }),
      output_schema: jsonSchema([["id", "int64"], ["cat", "utf8"]]),
      auto_refresh: true,
      with_no_data: false,
    });
    expect(r.status, r.text).toBe(201);
    await settle(q, r.json.job_id, 200_000);
    // 4 clients, 8 single-row inserts each: a write's look at the view often runs while another's does.
    await Promise.all(Array.from({ length: 4 }, async (_, c) => {
      for (let i = 0; i < 8; i++) await source("rf_a1", 1, 100 + c * 8 + i);
    }));
    const want = await rowsOf("rf_a1", ["id", "cat"]);
    const end = Date.now() + paced(120_000);
    while (Date.now() < end && JSON.stringify(await rowsOf("rf_av", ["id", "cat"])) !== JSON.stringify(want)) await new Promise((res) => setTimeout(res, 200));
    expect(await rowsOf("rf_av", ["id", "cat"])).toEqual(want);
    expect(want).toHaveLength(52);
    expect(q.stderr()).not.toContain("auto refresh not started");
  });
});

describe("backfills", () => {
  it("an async JavaScript UDF fails saying Promises are not supported", async () => {
    expect((await post("/v1/table/rf_b1/create", [{ id: 1, x: 1.5 }])).status).toBe(200);
    const add = await post("/v1/table/rf_b1/add_columns", {
      new_columns: [{ name: "y", virtual_column: { udf_backend: "js", udf: "async (x) => x + 1", input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "float64" }, nullable: true }] } }],
    });
    expect(add.status, add.text).toBe(200);
    const r = await post("/v1/table/rf_b1/backfill_column", { column: "y" });
    const done = await settle(q, r.json.job_id, 200_000);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/returned a Promise: async functions are not supported/);
  });

  it("an SQL backfill reports the version it read and its rows", async () => {
    expect((await post("/v1/table/rf_b2/create", [{ id: 1, x: 1.5 }, { id: 2, x: 2.5 }])).status).toBe(200);
    const add = await post("/v1/table/rf_b2/add_columns", { new_columns: [{ name: "twice", virtual_column: { udf_backend: "sql", udf: "x * 2", input_columns: ["x"] } }] });
    expect(add.status, add.text).toBe(200);
    const done = await settle(q, (await post("/v1/table/rf_b2/backfill_column", { column: "twice" })).json.job_id, 200_000);
    expect(done.properties).toMatchObject({ read_version: String(add.json.version), rows_total: "2", rows_done: "2" });
  });
});

describe("jobs/list", () => {
  it("takes a table as a string or as an id array", async () => {
    expect((await post("/v1/table/rf_j1/create", [{ id: 1, x: 1.5 }])).status).toBe(200);
    await post("/v1/table/rf_j1/add_columns", { new_columns: [{ name: "twice", virtual_column: { udf_backend: "sql", udf: "x * 2", input_columns: ["x"] } }] });
    const job = (await post("/v1/table/rf_j1/backfill_column", { column: "twice" })).json.job_id;
    await settle(q, job, 200_000);
    for (const table of ["rf_j1", ["rf_j1"]]) {
      const r = await post("/v1/jobs/list", { table });
      expect(r.status, r.text).toBe(200);
      expect(r.json.jobs.map((j: { job_id: string }) => j.job_id)).toEqual([job]);
    }
  });
});
