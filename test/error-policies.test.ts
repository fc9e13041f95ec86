// Per-row error policies (`error_handling`) of backfills and of udtf and chunker view refreshes:
// fail (the default), retry, skip (a backfill's row stays null, a chunker's row gets no children,
// a udtf's failing partition no output; the job counts and lists them) and a cap past which the
// job fails anyway.
import { Field, Int64, Schema, Table, Utf8 } from "apache-arrow";
import { describe, expect, it, vi } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const q = serverForFile({ args: ["--workers", "1"] });
// Several backfills or refreshes per test on a shared 2-core machine.
vi.setConfig({ testTimeout: 300_000 });
const post = (id: string, op: string, body?: unknown) => q.call("POST", `/v1/table/${id}/${op}`, body);
const wantJson = { accept: "application/json" };

// Throws for x = 3 and x = 7, every time.
const badRows = "(x) => { if (x === 3 || x === 7) throw new Error('bad ' + x); return x * 10; }";
// Throws on the first call in each worker, then works: a transient failure.
const flaky = "(() => { let calls = 0; return (x) => { if (++calls === 1) throw new Error('transient'); return x * 10; }; })()";

let tables = 0;
async function table(udf: string): Promise<string> {
  const id = `ep${++tables}`;
  expect((await post(id, "create", Array.from({ length: 20 }, (_, i) => ({ id: i, x: i })))).status).toBe(200);
  const r = await post(id, "add_columns", {
    new_columns: [{ name: "y", virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "int64" }, nullable: true }] } }],
  });
  expect(r.status, r.text).toBe(200);
  return id;
}
async function backfill(t: string, error_handling?: unknown) {
  const r = await post(t, "backfill_column", { column: "y", task_size: 5, ...(error_handling ? { error_handling } : {}) });
  expect(r.status, r.text).toBe(202);
  return settle(q, r.json.job_id, 200_000);
}
const values = async (t: string) =>
  ((await q.call("POST", `/v1/table/${t}/query`, { k: 100, columns: ["id", "y"] }, wantJson)).json as { id: number; y: number | null }[]).sort((a, b) => a.id - b.id).map((r) => r.y);

describe("backfill error_handling", () => {
  it("fail (the default): the first failing row fails the job, nothing of its checkpoint written", async () => {
    const t = await table(badRows);
    const done = await backfill(t);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/bad (3|7)/);
    expect((await values(t)).every((v) => v === null)).toBe(true);
  });

  it("retry: a transient failure is retried and the job succeeds; without retry it fails", async () => {
    expect((await backfill(await table(flaky))).status).toBe("Failed");
    const t = await table(flaky);
    const done = await backfill(t, { mode: "retry", max_attempts: 3 });
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(await values(t)).toEqual(Array.from({ length: 20 }, (_, i) => i * 10));
  });

  it("skip: failing rows stay null and are counted and listed with their messages", async () => {
    const t = await table(badRows);
    const done = await backfill(t, { mode: "skip" });
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties.rows_failed).toBe("2");
    const listed = JSON.parse(done.properties.failed_rows) as { key: string; error: string }[];
    expect(listed.map((r) => JSON.parse(r.key).id).sort()).toEqual([3, 7]);
    expect(listed.every((r) => /bad (3|7)/.test(r.error))).toBe(true);
    expect(await values(t)).toEqual(Array.from({ length: 20 }, (_, i) => (i === 3 || i === 7 ? null : i * 10)));
  });

  it("Geneva's fault_isolation skip_rows with max_skip_count: past the cap the job fails", async () => {
    const t = await table(badRows);
    const done = await backfill(t, { fault_isolation: "skip_rows", max_skip_count: 1 });
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/2 rows failed, more than error_handling.max_skip_count \(1\)/);
    const frac = await backfill(await table(badRows), { mode: "skip", max_skip_fraction: 0.05 });
    expect(frac.status).toBe("Failed");
    expect(frac.properties.error_message).toMatch(/of 20 rows failed, more than error_handling.max_skip_fraction \(0.05\)/);
  });

  it("a bad policy is 400 naming the field, and no job is made", async () => {
    const t = await table(badRows);
    for (const [eh, detail] of [
      [{ mode: "sometimes" }, /error_handling/],
      [{ mode: "fail", max_attempts: 3 }, /error_handling.max_attempts: applies to mode retry or skip/],
      [{ mode: "retry", fault_isolation: "skip_rows" }, /contradicts fault_isolation/],
      [{ mode: "skip", colour: 1 }, /error_handling/],
    ] as const) {
      const r = await post(t, "backfill_column", { column: "y", error_handling: eh });
      expect(r.status, r.text).toBe(400);
      expect(r.json.detail).toMatch(detail);
    }
    expect((await q.call("POST", "/v1/jobs/list", { table: [t] })).json.jobs).toEqual([]);
  });
});

describe("view refresh error_handling (udtf_spec.error_handling)", () => {
  const envelope = (source: string) => Buffer.from(JSON.stringify({ backend: "js", source })).toString("base64");
  const schemaOf = (names: string[]) =>
    Buffer.from(toStream(new Table(new Schema(names.map((n) => new Field(n, n === "cat" ? new Utf8() : new Int64(), true)))))).toString("base64");
  let sources = 0;
  async function source(): Promise<string> {
    const id = `evs${++sources}`;
    expect((await post(id, "create", Array.from({ length: 20 }, (_, i) => ({ id: i, x: i, cat: `c${i % 3}` })))).status).toBe(200);
    return id;
  }
  // A chunker: one child per row, failing for x = 3 and x = 7 (or as `fn` says).
  async function chunker(error_handling?: unknown, fn = "(row) => { if (row.x === 3 || row.x === 7) throw new Error('bad ' + row.x); return [{ y: row.x * 10 }]; }") {
    const src = await source();
    const view = `${src}_chunks`;
    const udtf_spec = { kind: "chunker", udtf: envelope(fn), udtf_name: "c", udtf_version: "1", input_columns: ["x"], ...(error_handling ? { error_handling } : {}) };
    const r = await q.call("POST", `/v1/materialized_view/${view}/create`, { kind: "chunker", source_query: JSON.stringify({ table: src, columns: ["id"] }), output_schema: schemaOf(["id", "y"]), udtf_spec });
    expect(r.status, r.text).toBe(201);
    return view;
  }
  // A udtf over partitions by cat, failing for partition c1.
  async function udtf(error_handling?: unknown) {
    const src = await source();
    const view = `${src}_sums`;
    const fn = "(rows) => { if (rows[0].cat === 'c1') throw new Error('bad partition'); return [{ cat: rows[0].cat, n: rows.length }]; }";
    const udtf_spec = { kind: "udtf", udtf: envelope(fn), udtf_name: "s", udtf_version: "1", partition_by: "cat", input_columns: ["cat", "x"], ...(error_handling ? { error_handling } : {}) };
    const r = await q.call("POST", `/v1/materialized_view/${view}/create`, { kind: "udtf", source_query: JSON.stringify({ table: src }), output_schema: schemaOf(["cat", "n"]), udtf_spec });
    expect(r.status, r.text).toBe(201);
    return view;
  }
  async function refresh(view: string) {
    const r = await q.call("POST", `/v1/materialized_view/${view}/refresh`, {});
    expect(r.status, r.text).toBe(202);
    return settle(q, r.json.job_id, 200_000);
  }
  const rowsOf = async (view: string) => (await q.call("POST", `/v1/table/${view}/query`, { k: 1000 }, wantJson)).json as Record<string, unknown>[];

  it("chunker, fail (the default): the refresh fails naming the row's error and the view stays empty", async () => {
    const view = await chunker();
    const done = await refresh(view);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/bad (3|7)/);
    expect(await rowsOf(view)).toEqual([]);
  });

  it("chunker, skip: failing source rows get no children and are counted and listed by source row", async () => {
    const view = await chunker({ mode: "skip" });
    const done = await refresh(view);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties.rows_failed).toBe("2");
    const listed = JSON.parse(done.properties.failed_rows) as { key: string; error: string }[];
    expect(listed.map((r) => JSON.parse(r.key).__source_row_id).sort()).toEqual(["3", "7"]);
    expect(listed.every((r) => /bad (3|7)/.test(r.error))).toBe(true);
    const ys = (await rowsOf(view)).map((r) => r.y as number).sort((a, b) => a - b);
    expect(ys).toEqual(Array.from({ length: 20 }, (_, i) => i * 10).filter((y) => y !== 30 && y !== 70));
  });

  it("chunker, retry: a transient failure is retried and the refresh succeeds", async () => {
    const flakyRows = "(() => { let calls = 0; return (row) => { if (++calls === 1) throw new Error('transient'); return [{ y: row.x * 10 }]; }; })()";
    expect((await refresh(await chunker(undefined, flakyRows))).status).toBe("Failed");
    const view = await chunker({ mode: "retry", max_attempts: 3 }, flakyRows);
    const done = await refresh(view);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(await rowsOf(view)).toHaveLength(20);
  });

  it("chunker, skip past max_skip_count: the refresh fails anyway and the view stays empty", async () => {
    const view = await chunker({ fault_isolation: "skip_rows", max_skip_count: 1 });
    const done = await refresh(view);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/2 rows failed, more than error_handling.max_skip_count \(1\)/);
    expect(await rowsOf(view)).toEqual([]);
  });

  it("udtf: fail by default; skip leaves out the failing partition, counting its rows", async () => {
    expect((await refresh(await udtf())).status).toBe("Failed");
    const view = await udtf({ mode: "skip" });
    const done = await refresh(view);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties.rows_failed).toBe("7");
    expect(JSON.parse(done.properties.failed_rows)[0].error).toMatch(/bad partition/);
    expect((await rowsOf(view)).map((r) => r.cat).sort()).toEqual(["c0", "c2"]);
  });

  it("a bad policy is a 400 at create naming the field", async () => {
    const src = await source();
    const udtf_spec = { kind: "chunker", udtf: envelope("(row) => [{ y: row.x }]"), udtf_name: "c", udtf_version: "1", input_columns: ["x"], error_handling: { mode: "fail", max_attempts: 3 } };
    const r = await q.call("POST", `/v1/materialized_view/${src}_bad/create`, { kind: "chunker", source_query: JSON.stringify({ table: src, columns: ["id"] }), output_schema: schemaOf(["id", "y"]), udtf_spec });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/error_handling.max_attempts: applies to mode retry or skip/);
  });
});
