// Per-row error policies of backfills (`error_handling`): fail (the default), retry, skip (the
// row's value stays null; the job counts and lists it) and a cap past which the job fails anyway.
import { describe, expect, it, vi } from "vitest";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const q = serverForFile({ args: ["--workers", "2"] });
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
