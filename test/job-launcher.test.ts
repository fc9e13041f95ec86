// Job processes are started by the launcher (src/jobs/kinds/launcher.ts), a small process the server
// forks first, never by the server itself: forking the server held its event loop in proportion
// to its memory (workers/processes/launcher.ts). Neither the launcher nor a job process gets the
// server's QUIVER_* variables (API keys, JWT secrets).
import { readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { paced } from "./helpers/pace.js";
import { processesRunning, processTable as processes, runs } from "./helpers/processes.js";
import { removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";
import { sandboxProcesses } from "./helpers/sandbox.js";
import { idNameRows, tableCalls } from "./helpers/tables.js";
import { settle } from "./helpers/transactions.js";

let q: Quiver | undefined;
afterAll(async () => q?.stop());

const environment = (pid: number) => readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean);

describe("the job process launcher", () => {
  it("a maintenance job's process (and the spare started beside it) is the launcher's child, and neither has the server's QUIVER_* variables", async () => {
    // Started with its API keys in QUIVER_API_KEYS, and a process started ahead for the next job.
    q = await startQuiver({ args: ["--spare-processes", "on"] });
    const server = q.proc.pid!;
    const [launcher] = [...processes()].filter(([, p]) => p.ppid === server && runs(p.cmd, "launcher.js")).map(([pid]) => pid);
    expect(launcher, "the server's launcher").toBeDefined();
    const { post } = tableCalls(q);
    expect((await post("t", "create", idNameRows([1, 2, 3]))).status).toBe(200);
    const r = await post("t", "optimize", {});
    expect(r.status, r.text).toBe(202);
    expect((await settle(q, r.json.job_id, 60_000)).status).toBe("Succeeded");
    // The job's process has ended; the one started ahead for the next job waits, started the same way.
    const all = [...processes()].filter(([, p]) => runs(p.cmd, "maintenance.js"));
    const jobs = all.filter(([, p]) => p.ppid === launcher);
    expect(jobs.length).toBeGreaterThanOrEqual(1);
    expect(all.filter(([, p]) => p.ppid === server)).toEqual([]);
    for (const pid of [launcher, ...jobs.map(([pid]) => pid)]) {
      const env = environment(pid);
      expect(env.some((v) => v.startsWith("PATH="))).toBe(true);
      expect(env.filter((v) => v.toUpperCase().startsWith("QUIVER_"))).toEqual([]);
    }
  });

  it("the launcher ends with the server", async () => {
    const server = q!.proc.pid!;
    const launcher = [...processes()].find(([, p]) => p.ppid === server && runs(p.cmd, "launcher.js"))![0];
    await q!.stop();
    q = undefined;
    const end = Date.now() + paced(10_000);
    while (processes().has(launcher) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(processes().has(launcher)).toBe(false);
  });
});

describe("with --spare-processes off (as the other test servers run)", () => {
  it("a maintenance job's process is started for that job alone, and a tenant's first check starts its sandbox with no spare beside it", async () => {
    const s = await startQuiver();
    try {
      const { post } = tableCalls(s);
      expect((await post("t", "create", idNameRows([1, 2, 3]))).status).toBe(200);
      const r = await post("t", "optimize", {});
      expect(r.status, r.text).toBe(202);
      expect((await settle(s, r.json.job_id, 60_000)).status).toBe("Succeeded");
      const column = { udf_backend: "js", udf: "(id) => String(id)", input_columns: ["id"], outputs: [{ column: "y", data_type: { type: "utf8" }, nullable: true }] };
      const add = await post("t", "add_columns", { new_columns: [{ name: "y", virtual_column: column }] });
      expect(add.status, add.text).toBe(200);
      // A spare is started as the one waiting is taken: time for one to show if there were.
      await new Promise((res) => setTimeout(res, 1000));
      expect(processesRunning("maintenance.js", s.proc.pid!)).toEqual([]);
      expect(sandboxProcesses(s.proc.pid!).length).toBe(1);
    } finally {
      await s.stop();
      removeDir(s.dataDir);
    }
  });
});
