// A backfill split into tasks (--backfill-tasks): each task computes a contiguous range of the
// rows, the tasks' commits race on one table, and the backfill follows them to its end, its rows
// counted once in /metrics; a cancel of the backfill cancels its tasks, nothing of theirs commits
// after they ended and its counts are what they committed. (Tasks spread over replicas:
// test/helpers/replica-scenarios.ts.)
import { describe, expect, it, vi } from "vitest";
import { sample } from "./helpers/metrics.js";
import { serverForFile } from "./helpers/quiver.js";
import { expectCountsAsCommitted, settle, until } from "./helpers/transactions.js";

// Two slots for tasks on this server, so two tasks commit to one table at once.
const q = serverForFile({ args: ["--workers", "2", "--backfill-tasks", "3", "--backfill-jobs", "2"] });
vi.setConfig({ testTimeout: 300_000 });
const post = (id: string, op: string, body?: unknown) => q.call("POST", `/v1/table/${id}/${op}`, body);
const count = async (id: string, predicate: string) => (await post(id, "count_rows", { predicate })).json as number;
const column = (name: string, udf: string) => ({
  new_columns: [{ name, virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "int64" }, nullable: true }] } }],
});
const ROWS = 3000;

describe("a backfill split into 3 tasks", () => {
  const rowsProcessed = async () => {
    const text = (await q.call("GET", "/metrics")).text;
    return ["backfill", "backfill_task"].reduce((n, kind) => n + (sample(text, "quiver_job_rows_processed_total", { kind }) ?? 0), 0);
  };

  it("computes every row once, in three ranges that together are the table, each row counted once in /metrics; a second backfill computes none", async () => {
    const processed = await rowsProcessed();
    const rows = Array.from({ length: ROWS }, (_, i) => ({ id: i, x: i }));
    expect((await post("split", "create", rows)).status).toBe(200);
    expect((await post("split", "add_columns", column("y", "(x) => x * 3"))).status).toBe(200);
    const job = await post("split", "backfill_column", { column: "y", checkpoint_size: 200 });
    expect(job.status, job.text).toBe(202);
    const done = await settle(q, job.json.job_id, 200_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties.rows_computed).toBe(String(ROWS));
    const tasks = done.properties.tasks.split(",");
    expect(tasks).toHaveLength(3);
    const described = await Promise.all(tasks.map(async (t) => (await q.call("POST", `/v1/transaction/${t}/describe`, {})).json));
    expect(described.map((d) => d.status)).toEqual(["Succeeded", "Succeeded", "Succeeded"]);
    expect(described.map((d) => d.properties.task)).toEqual(["1 of 3", "2 of 3", "3 of 3"]);
    expect(described.every((d) => d.properties.backfill === job.json.job_id)).toBe(true);
    // Three shares of one plan: a third of the rows each, none twice.
    expect(described.map((d) => Number(d.properties.rows_computed))).toEqual([1000, 1000, 1000]);
    expect(await count("split", "y = x * 3")).toBe(ROWS);
    // The backfill's own record sums its tasks': its rows are theirs, not counted again.
    expect((await rowsProcessed()) - processed).toBe(ROWS);
    const again = await post("split", "backfill_column", { column: "y" });
    expect((await settle(q, again.json.job_id, 200_000)).properties.rows_computed).toBe("0");
  });

  it("a cancel of the backfill cancels its tasks: nothing commits after they ended, and its counts are the rows committed", async () => {
    const rows = Array.from({ length: ROWS }, (_, i) => ({ id: i, x: i }));
    expect((await post("splitc", "create", rows)).status).toBe(200);
    const slow = "(x) => { const end = Date.now() + 5; while (Date.now() < end); return x + 1; }";
    expect((await post("splitc", "add_columns", column("z", slow))).status).toBe(200);
    const from = (await post("splitc", "describe", {})).json.version as number;
    const job = await post("splitc", "backfill_column", { column: "z", checkpoint_size: 50, task_size: 10 });
    expect(job.status, job.text).toBe(202);
    const running = await until(q, job.json.job_id, (s) => s === "Running", 60_000);
    expect(running.status).toBe("Running");
    await new Promise((r) => setTimeout(r, 1500));
    const tasks = ((await q.call("POST", `/v1/transaction/${job.json.job_id}/describe`, {})).json.properties.tasks as string).split(",");
    const c = await q.call("POST", "/v1/jobs/cancel", { job_id: job.json.job_id });
    expect(c.status, c.text).toBeLessThan(300);
    expect((await settle(q, job.json.job_id)).status).toBe("Canceled");
    for (const t of tasks) expect((await settle(q, t)).status).toBe("Canceled");
    const after = await count("splitc", "z IS NOT NULL");
    await new Promise((r) => setTimeout(r, 1500));
    expect(await count("splitc", "z IS NOT NULL")).toBe(after);
    expect(after).toBeLessThan(ROWS);
    await expectCountsAsCommitted(q, "splitc", job.json.job_id, "z", from);
  });
});
