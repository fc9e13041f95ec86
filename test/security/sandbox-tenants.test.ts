// Item 5 of the attack on the compute sandbox: one tenant froze or slowed the others. Before, every
// tenant's definition checks shared one sandbox process: ns1 stopping it (SIGSTOP) hung ns2's
// add_columns, a Worker ns1's code started kept a core busy after its 200, 8 legal slow UDFs of ns1
// made ns2's trivial add_columns wait 26 s, a stopped backfill sandbox held admin's jobs/cancel
// for 30 s, and stopped sandboxes outlived the server. Now each tenant has its own sandbox, whose
// owner kills it when it is stopped, runs a thread of its own, or passes a deadline, and whose
// process tree dies with its parent.
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { processesRunning } from "../helpers/processes.js";
import { removeDir, serverForFile, startQuiver } from "../helpers/quiver.js";
import { addColumn, escaping, jsColumn, post, rows, sandboxProcesses, sleep, spinningThreads, TENANT_KEYS, twoTenants, W1, W2, type SandboxProcess } from "../helpers/sandbox.js";
import { paced } from "../helpers/pace.js";

// With the spare sandbox of a server in production (test servers run without one).
const ARGS = ["--udf-timeout-ms", "3000", "--workers", "2", "--spare-processes", "on"];
const q = serverForFile({ args: ARGS, env: { QUIVER_API_KEYS: TENANT_KEYS } });
beforeAll(async () => {
  await twoTenants(q, 20);
  // Both tenants' sandboxes started (and the spare): what is timed below is the attack's cost.
  for (const [t, key] of [["ns1$t", W1], ["ns2$t", W2]]) expect((await addColumn(q, t, jsColumn("(x) => String(x)"), key, 60_000)).status).toBe(200);
});

/** ns2's trivial add_columns, which another tenant's code must not hold up: its time, ms. */
async function ns2Add(): Promise<number> {
  const r = await addColumn(q, "ns2$t", jsColumn("(x) => String(x)"), W2, 60_000);
  expect(r.status, r.text).toBe(200);
  return r.ms;
}

/** The sandbox under `root` that uses the most CPU over 400 ms (the one running a busy UDF). */
async function busiest(root: number): Promise<SandboxProcess> {
  const before = new Map(sandboxProcesses(root).map((p) => [p.pid, p.cpuMs]));
  await sleep(400);
  const now = sandboxProcesses(root).map((p) => ({ ...p, used: p.cpuMs - (before.get(p.pid) ?? p.cpuMs) }));
  return now.sort((a, b) => b.used - a.used)[0];
}

/** The pid of the job process running `script` (workers/processes/<script>) under `root`. */
function jobProcess(root: number, script: string): number | undefined {
  return processesRunning(script, root)[0];
}

/** Whether `pid` still runs (a zombie waiting for its reaper does not). */
const alive = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1][0] !== "Z";
  } catch {
    return false;
  }
};

let udfs = 0;
/**
 * A UDF that spins `ms` when its source is evaluated (a definition check runs that), legal under
 * the time limit; each a different source, so no worker's compile cache skips it.
 */
const spinningAtCheck = (ms: number) => jsColumn(`(() => { const t = Date.now(); while (Date.now() - t < ${ms}); return (x) => String(x + ${++udfs}); })()`);

describe("one tenant's code against another's checks", () => {
  it("8 legal slow UDFs of ns1 (2.5 s each, limit 3 s) cost ns2's add_columns at most 2 s", { timeout: 120_000 }, async () => {
    // On 8 tables: a table's schema changes take turns, its checks with them.
    const tables = Array.from({ length: 8 }, (_, i) => `ns1$slow${i}`);
    for (const t of tables) expect((await post(q, `/v1/table/${t}/create`, rows(5), W1)).status).toBe(200);
    const ns1 = tables.map((t) => addColumn(q, t, spinningAtCheck(2500), W1, 120_000));
    await sleep(700);
    expect(await ns2Add()).toBeLessThan(2000);
    for (const r of await Promise.all(ns1)) expect(r.status, r.text).toBe(200);
  });

  it("ns1's code stopping its own sandbox (SIGSTOP from inside) stops nothing: ns2 and ns1 go on", async () => {
    const r = await addColumn(q, "ns1$t", jsColumn(escaping('p.kill(p.pid, "SIGSTOP"); leak = "stopped";')), W1, 20_000);
    expect(r.status, r.text).toBe(200);
    await sleep(300);
    expect(await ns2Add()).toBeLessThan(2000);
    expect((await addColumn(q, "ns1$t", jsColumn("(x) => String(x)"), W1, 20_000)).status).toBe(200);
    expect(sandboxProcesses(q.proc.pid!).filter((p) => p.state === "T")).toEqual([]);
  });

  it("a sandbox stopped from outside fails its task within the time limit + 2 s, is killed, and holds nobody else", async () => {
    const slow = addColumn(q, "ns1$t", spinningAtCheck(2500), W1, 60_000);
    await sleep(300);
    const victim = await busiest(q.proc.pid!);
    process.kill(victim.pid, "SIGSTOP");
    const stoppedAt = Date.now();
    expect(await ns2Add()).toBeLessThan(paced(2000));
    const r = await slow;
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toMatch(/stopped/);
    expect(Date.now() - stoppedAt).toBeLessThan(paced(3000 + 2000));
    await sleep(500);
    expect(alive(victim.pid)).toBe(false);
    expect((await addColumn(q, "ns1$t", jsColumn("(x) => String(x)"), W1, 20_000)).status).toBe(200);
  });

  it("a Worker that ns1's code starts does not outlive its check: no sandbox thread spins after it", async () => {
    const r = await addColumn(q, "ns1$t", jsColumn(escaping('new (p.getBuiltinModule("worker_threads").Worker)("for (;;);", { eval: true }); leak = "spawned";')), W1, 20_000);
    expect(r.status, r.text).toBe(200);
    expect(await ns2Add()).toBeLessThan(2000);
    await sleep(2500);
    expect(await spinningThreads(q.proc.pid!)).toBe(0);
  });
});

describe("a backfill's sandbox, stopped", () => {
  it("jobs/cancel returns at once, and the stopped sandbox is gone", { timeout: 120_000 }, async () => {
    const t = "ns1$jobs";
    expect((await post(q, `/v1/table/${t}/create`, rows(40))).status).toBe(200);
    const add = await addColumn(q, t, jsColumn("(x) => { const t = Date.now(); while (Date.now() - t < 500); return String(x); }"), W1);
    expect(add.status, add.text).toBe(200);
    const job = await post(q, `/v1/table/${t}/backfill_column`, { column: add.column, task_size: 2, concurrency: 2 }, W1);
    expect(job.status, job.text).toBe(202);
    let sandbox: SandboxProcess | undefined;
    for (let i = 0; i < 200 && !sandbox; i++) {
      const jp = jobProcess(q.proc.pid!, "backfill.js");
      if (jp) sandbox = (await busiest(jp)) ?? undefined;
      if (!sandbox) await sleep(100);
    }
    expect(sandbox).toBeDefined();
    process.kill(sandbox!.pid, "SIGSTOP");
    const started = Date.now();
    const c = await post(q, "/v1/jobs/cancel", { job_id: job.json.job_id }, W1, 15_000);
    expect(c.status, c.text).toBe(200);
    expect(c.json.cancelled).toBe(true);
    expect(Date.now() - started).toBeLessThan(paced(3000));
    await sleep(1000);
    expect(alive(sandbox!.pid)).toBe(false);
  });
});

describe("with one tenant sandbox at a time (--tenant-sandboxes 1)", () => {
  it("tenants take turns: a busy tenant's sandbox is not taken, an idle one is replaced, never handed over", { timeout: 120_000 }, async () => {
    const s = await startQuiver({ args: [...ARGS, "--tenant-sandboxes", "1"], env: { QUIVER_API_KEYS: TENANT_KEYS } });
    try {
      await twoTenants(s);
      for (const [t, key] of [["ns1$t", W1], ["ns2$t", W2], ["ns1$t", W1]]) {
        expect((await addColumn(s, t, jsColumn("(x) => String(x)"), key, 60_000)).status).toBe(200);
        // The tenant's sandbox and the spare.
        expect(sandboxProcesses(s.proc.pid!).length).toBeLessThanOrEqual(2);
      }
      const slow = addColumn(s, "ns1$t", spinningAtCheck(1500), W1, 60_000);
      await sleep(300);
      const waited = await addColumn(s, "ns2$t", jsColumn("(x) => String(x)"), W2, 60_000);
      expect(waited.status).toBe(200);
      expect(waited.ms).toBeGreaterThan(800);
      expect((await slow).status).toBe(200);
    } finally {
      await s.stop();
      removeDir(s.dataDir);
    }
  });
});

describe("when the server dies", () => {
  it("its sandboxes die with it, stopped ones and a job's too, even when the job process and its launcher cannot run", { timeout: 120_000 }, async () => {
    const s = await startQuiver({ args: ARGS, env: { QUIVER_API_KEYS: TENANT_KEYS } });
    const stopped: number[] = [];
    try {
      await twoTenants(s, 40);
      expect((await addColumn(s, "ns1$t", jsColumn("(x) => String(x)"), W1)).status).toBe(200);
      const add = await addColumn(s, "ns2$t", jsColumn("(x) => { const t = Date.now(); while (Date.now() - t < 200); return String(x); }"), W2);
      expect(add.status).toBe(200);
      expect((await post(s, "/v1/table/ns2$t/backfill_column", { column: add.column, task_size: 2, concurrency: 2 }, W2)).status).toBe(202);
      let all: SandboxProcess[] = [];
      for (let i = 0; i < 200 && !jobProcess(s.proc.pid!, "backfill.js"); i++) await sleep(100);
      for (let i = 0; i < 100 && sandboxProcesses(jobProcess(s.proc.pid!, "backfill.js") ?? -1).length === 0; i++) await sleep(100);
      all = sandboxProcesses(s.proc.pid!);
      expect(all.length).toBeGreaterThanOrEqual(2);
      // Stopped, the job process and the launcher never read their channels' end: only the
      // kernel's parent-death signal ends them (as it would a niced job process on a busy machine).
      const jobs = [jobProcess(s.proc.pid!, "launcher.js")!, jobProcess(s.proc.pid!, "backfill.js")!];
      expect(jobs.every((pid) => pid > 0)).toBe(true);
      stopped.push(...all.map((p) => p.pid), ...jobs);
      for (const pid of stopped) process.kill(pid, "SIGSTOP");
      await s.kill();
      await sleep(2000);
      expect(all.filter((p) => alive(p.pid))).toEqual([]);
      expect(jobs.filter(alive)).toEqual([]);
    } finally {
      for (const pid of stopped.filter(alive)) process.kill(pid, "SIGKILL");
      await s.kill();
      removeDir(s.dataDir);
    }
  });
});
