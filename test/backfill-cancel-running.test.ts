// Issue 52: a cancel of a split backfill whose tasks run. The cancel is asked of the backfill and
// its tasks in one commit and they end together in one, so that no read of the job records shows
// the backfill ended with a task still going, or a task Canceled while the backfill runs on (the
// code before ended each task by its own commit, then the backfill). Every task's process stops
// before the answer, nothing commits after it, and the slots are free for the next job; a replica
// killed during the cancel ends it at its restart, every record Canceled together.
import { describe, expect, it, vi } from "vitest";
import { paced } from "./helpers/pace.js";
import { sample } from "./helpers/metrics.js";
import { serverForFile, type Quiver } from "./helpers/quiver.js";
import { expectCountsAsCommitted, settle, terminal } from "./helpers/transactions.js";

vi.setConfig({ testTimeout: 300_000 });
const ARGS = ["--workers", "2", "--backfill-tasks", "3", "--backfill-jobs", "3", "--auto-maintenance", "off"];
const ROWS = 1200;
// One server for the file: each test has a table of its own, and the first checks that the slots
// are free again; the last kills it and restarts it on the same directory.
const q = serverForFile({ args: ARGS });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const column = (name: string, udf: string) => ({
  new_columns: [{ name, virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "int64" }, nullable: true }] } }],
});
// Slow batches: each row spins, so a task's checkpoint takes long enough to be cut.
const slow = "(x) => { const end = Date.now() + 10; while (Date.now() < end); return x + 1; }";

interface Listed {
  job_id: string;
  job_type: string;
  status: string;
}

const list = async (q: Quiver, table: string) => (await q.call("POST", "/v1/jobs/list", { table })).json.jobs as Listed[];
const version = async (q: Quiver, table: string) => (await q.call("POST", `/v1/table/${table}/describe`, {})).json.version as number;
const filled = async (q: Quiver, table: string, col: string) => (await q.call("POST", `/v1/table/${table}/count_rows`, { predicate: `${col} IS NOT NULL` })).json as number;

/** One read of the job records agrees with itself: the backfill ended only with every task ended, and no task Canceled while the backfill goes on. */
function expectTogether(jobs: Listed[], job: string, tasks: string[], when: string) {
  const parent = jobs.find((j) => j.job_id === job)!;
  const mine = jobs.filter((j) => tasks.includes(j.job_id));
  const said = `${when}: ${JSON.stringify(mine.map((t) => t.status))}, backfill ${parent.status}`;
  if (terminal(parent.status)) for (const t of mine) expect(terminal(t.status), said).toBe(true);
  else for (const t of mine) expect(t.status, said).not.toBe("Canceled");
}

/** Start a split backfill of a slow column on `table` and wait until its 3 tasks run and some rows are committed: the job, its tasks, the version before. */
async function runningSplit(q: Quiver, table: string): Promise<{ job: string; tasks: string[]; from: number }> {
  expect((await q.call("POST", `/v1/table/${table}/create`, Array.from({ length: ROWS }, (_, i) => ({ id: i, x: i })))).status).toBe(200);
  expect((await q.call("POST", `/v1/table/${table}/add_columns`, column("z", slow))).status).toBe(200);
  const from = await version(q, table);
  const started = await q.call("POST", `/v1/table/${table}/backfill_column`, { column: "z", checkpoint_size: 20, task_size: 5 });
  expect(started.status, started.text).toBe(202);
  const job = started.json.job_id as string;
  let tasks: string[] = [];
  for (const end = Date.now() + paced(120_000); Date.now() < end; await sleep(100)) {
    const d = (await q.call("POST", `/v1/transaction/${job}/describe`, {})).json;
    tasks = d.properties.tasks ? (d.properties.tasks as string).split(",") : [];
    if (tasks.length === 0) continue;
    const states = (await list(q, table)).filter((j) => tasks.includes(j.job_id)).map((j) => j.status);
    if (states.every((s) => s === "Running") && (await filled(q, table, "z")) > 0) break;
  }
  expect(tasks).toHaveLength(3);
  return { job, tasks, from };
}

describe("a cancel of a split backfill whose tasks run", () => {
  it("ends the backfill and every task in one commit, stops every task before the answer, commits nothing after, and frees the slots", async () => {
    const { job, tasks, from } = await runningSplit(q, "run");
    // Every read of the records while the cancel goes on, and right after it.
    let watching = true;
    const reads: Listed[][] = [];
    const watcher = (async () => {
      while (watching) reads.push(await list(q, "run"));
    })();
    const c = await q.call("POST", "/v1/jobs/cancel", { job_id: job });
    expect([200, 202], c.text).toContain(c.status);
    const at = await version(q, "run");
    const rows = await filled(q, "run", "z");
    const after = await list(q, "run");
    watching = false;
    await watcher;
    expect(after.find((j) => j.job_id === job)!.status).toBe("Canceled");
    for (const t of after.filter((j) => tasks.includes(j.job_id))) expect(t.status).toBe("Canceled");
    for (const [i, read] of reads.entries()) expectTogether(read, job, tasks, `read ${i} of ${reads.length}`);
    expect(rows).toBeLessThan(ROWS);
    // No task's process commits after the answer.
    await sleep(3_000);
    expect(await version(q, "run")).toBe(at);
    expect(await filled(q, "run", "z")).toBe(rows);
    await expectCountsAsCommitted(q, "run", job, "z", from);
    // Its slots are free: nothing of it runs here, and the next backfill of the column runs to its end.
    const metrics = (await q.call("GET", "/metrics")).text;
    for (const kind of ["backfill", "backfill_task"]) expect(sample(metrics, "quiver_replica_jobs_running", { kind })).toBe(0);
    const next = await q.call("POST", "/v1/table/run/backfill_column", { column: "z" });
    expect(next.status, next.text).toBe(202);
    expect((await settle(q, next.json.job_id, 200_000)).status).toBe("Succeeded");
    expect(await filled(q, "run", "z")).toBe(ROWS);
  });

  it("a cancel of one task fails the backfill naming it, and the other tasks end with the backfill in one commit", async () => {
    const { job, tasks } = await runningSplit(q, "one");
    const c = await q.call("POST", "/v1/jobs/cancel", { job_id: tasks[1] });
    expect(c.json, c.text).toMatchObject({ cancelled: true, status: "Canceled" });
    let read: Listed[] = [];
    for (const end = Date.now() + paced(60_000); Date.now() < end; await sleep(20)) {
      read = await list(q, "one");
      const parent = read.find((j) => j.job_id === job)!;
      if (terminal(parent.status)) break;
    }
    expect(read.filter((j) => tasks.includes(j.job_id)).map((t) => t.status)).toEqual(["Canceled", "Canceled", "Canceled"]);
    const d = (await q.call("POST", `/v1/transaction/${job}/describe`, {})).json;
    expect(d.status).toBe("Failed");
    expect(d.properties.error_message).toContain(`task ${tasks[1]} of this backfill is Canceled`);
  });

  it("killed during the cancel, the replica ends it at its restart: the backfill and every task Canceled together, nothing running, nothing committed", async () => {
    const { job, tasks } = await runningSplit(q, "kill");
    // The cancel is asked; the replica dies before it is answered (its tasks may still be stopping).
    const asked = q.call("POST", "/v1/jobs/cancel", { job_id: job }).catch(() => undefined);
    let requested = false;
    for (const end = Date.now() + paced(30_000); !requested && Date.now() < end; await sleep(20)) {
      requested = (await q.call("POST", `/v1/transaction/${job}/describe`, {})).json.properties.cancel_requested_at !== undefined;
    }
    expect(requested).toBe(true);
    await q.kill();
    await asked;
    await q.restart();
    const reads: Listed[][] = [];
    for (const end = Date.now() + paced(60_000); Date.now() < end; await sleep(20)) {
      const read = await list(q, "kill");
      reads.push(read);
      if (terminal(read.find((j) => j.job_id === job)!.status)) break;
    }
    for (const [i, read] of reads.entries()) expectTogether(read, job, tasks, `read ${i} of ${reads.length}`);
    const last = reads.at(-1)!;
    expect(last.find((j) => j.job_id === job)!.status).toBe("Canceled");
    for (const t of last.filter((j) => tasks.includes(j.job_id))) expect(t.status).toBe("Canceled");
    const at = await version(q, "kill");
    const rows = await filled(q, "kill", "z");
    await sleep(3_000);
    expect(await version(q, "kill")).toBe(at);
    expect(await filled(q, "kill", "z")).toBe(rows);
    const metrics = (await q.call("GET", "/metrics")).text;
    for (const kind of ["backfill", "backfill_task"]) expect(sample(metrics, "quiver_replica_jobs_running", { kind })).toBe(0);
  });
});
