// Job records and the job-kind registry, in process: the append-only store (reload, torn lines,
// compaction, the earlier whole-file format) and the scheduler (per-kind limits, progress, cancel,
// what a restart and a shutdown do to each kind).
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openJobs, type JobKind, type Running } from "../../src/jobs/jobs.js";
import { openStore, type JobRecord } from "../../src/jobs/store.js";

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(path.join(tmpdir(), "quiver-jobs-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const rec = (id: string, status: JobRecord["status"] = "Queued"): JobRecord => ({
  id, status, operation: "k", table: ["t"], spec: {}, properties: {}, createdAt: Date.now(),
});
const lines = (dir: string) => readFileSync(path.join(dir, "transactions.jsonl"), "utf8").split("\n").filter(Boolean).length;

describe("job store", () => {
  it("a change appends one line; reopening replays to the last state", async () => {
    const dir = tempDir();
    const s = openStore(dir);
    const a = rec("a");
    await s.put(a);
    await s.put(rec("b"));
    a.status = "Running";
    a.progress = { rows: 5 };
    await s.put(a);
    expect(lines(dir)).toBe(3);
    await s.close();
    const again = openStore(dir);
    expect(again.get("a")).toMatchObject({ status: "Running", progress: { rows: 5 } });
    expect(again.all().map((r) => r.id).sort()).toEqual(["a", "b"]);
    await again.close();
  });

  it("a torn last line (a crash mid-append) is skipped", async () => {
    const dir = tempDir();
    const s = openStore(dir);
    await s.put(rec("a"));
    await s.close();
    appendFileSync(path.join(dir, "transactions.jsonl"), '{"id":"b","sta');
    const again = openStore(dir);
    expect(again.all().map((r) => r.id)).toEqual(["a"]);
    await again.close();
  });

  it("superseded lines are compacted away", async () => {
    const dir = tempDir();
    const s = openStore(dir);
    const a = rec("a");
    for (let i = 0; i < 2_100; i++) {
      a.progress = { i };
      void s.put(a);
      if (i % 100 === 0) await s.flush();
    }
    await s.flush();
    await s.put(a);
    expect(lines(dir)).toBeLessThan(200);
    await s.close();
    expect(openStore(dir).get("a")?.progress).toEqual({ i: 2_099 });
  });

  it("records of the earlier whole-file format are carried over", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "transactions.json"), JSON.stringify([rec("old", "Succeeded")]));
    const s = openStore(dir);
    expect(s.get("old")?.status).toBe("Succeeded");
    await s.put(rec("new"));
    await s.close();
    expect(openStore(dir).all().map((r) => r.id).sort()).toEqual(["new", "old"]);
  });
});

/** A kind whose runs end when the test says so. */
function controlled(name: string, limit: number, interrupted: "resume" | "fail") {
  const runs = new Map<string, { finish(): void; fail(e: Error): void; stopped: boolean }>();
  const kind: JobKind = {
    name,
    limit,
    interrupted,
    async start({ rec, report }) {
      let finish!: () => void;
      let fail!: (e: Error) => void;
      const done = new Promise<void>((res, rej) => ((finish = res), (fail = rej)));
      const run = { finish, fail, stopped: false };
      runs.set(rec.id, run);
      await report({ started: ((rec.progress?.started as number) ?? 0) + 1 });
      const handle: Running = {
        done,
        async stop() {
          run.stopped = true;
          finish();
        },
      };
      return handle;
    },
    describe: (r) => ({ started_times: String(r.progress?.started ?? 0) }),
  };
  return { kind, runs };
}

const settle = () => new Promise((r) => setTimeout(r, 30));
/** Retry `check` until it passes (the store writes in the background), for at most 10 s. */
async function eventually(check: () => void, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return check();
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}
const statusOf = (jobs: ReturnType<typeof openJobs>, id: string) => jobs.get(id)!.status;
/** openJobs, started as the server starts it once it listens. */
function started(...args: Parameters<typeof openJobs>): ReturnType<typeof openJobs> {
  const jobs = openJobs(...args);
  jobs.start();
  return jobs;
}
const BOUNDS = { maxQueuedJobsPerCredential: 100, maxQueuedJobsPerTable: 100 };

describe("job kinds", () => {
  it("each kind runs up to its own limit; the rest wait as Queued, in order", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    const b = controlled("b", 2, "fail");
    const jobs = started(dir, [a.kind, b.kind], String, BOUNDS);
    const as = [await jobs.submit("a", ["t"], {}, "o"), await jobs.submit("a", ["t"], {}, "o")];
    const bs = [await jobs.submit("b", ["t"], {}, "o"), await jobs.submit("b", ["t"], {}, "o"), await jobs.submit("b", ["t"], {}, "o")];
    await eventually(() => {
      expect(as.map((r) => statusOf(jobs, r.id))).toEqual(["Running", "Queued"]);
      expect(bs.map((r) => statusOf(jobs, r.id))).toEqual(["Running", "Running", "Queued"]);
    });
    a.runs.get(as[0].id)!.finish();
    b.runs.get(bs[0].id)!.fail(new Error("boom"));
    await eventually(() => {
      expect(as.map((r) => statusOf(jobs, r.id))).toEqual(["Succeeded", "Running"]);
      expect(bs.map((r) => statusOf(jobs, r.id))).toEqual(["Failed", "Running", "Running"]);
      expect(jobs.get(bs[0].id)!.error).toBe("Error: boom");
      expect(jobs.reported(jobs.get(as[1].id)!)).toMatchObject({ operation: "a", table: "t", started_times: "1" });
    });
    await jobs.close();
  });

  it("a freed slot goes to the owner whose last start is longest ago, not to the oldest record", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    const jobs = started(dir, [a.kind], String, BOUNDS);
    const first = await jobs.submit("a", ["t"], {}, "A");
    const moreA = [await jobs.submit("a", ["t"], {}, "A"), await jobs.submit("a", ["t"], {}, "A")];
    const b = await jobs.submit("a", ["u"], {}, "B");
    const c = await jobs.submit("a", ["u"], {}, "C");
    await eventually(() => expect(statusOf(jobs, first.id)).toBe("Running"));
    const order: string[] = [];
    let running = first.id;
    for (let i = 0; i < 4; i++) {
      await eventually(() => expect(a.runs.has(running)).toBe(true));
      a.runs.get(running)!.finish();
      let started: JobRecord | undefined;
      await eventually(() => expect((started = jobs.active().find((r) => r.status === "Running" && r.id !== running))).toBeDefined());
      order.push(started!.owner!);
      running = started!.id;
    }
    expect(moreA.map((r) => statusOf(jobs, r.id))).toContain("Running");
    expect([b, c].map((r) => statusOf(jobs, r.id))).toEqual(["Succeeded", "Succeeded"]);
    expect(order).toEqual(["B", "C", "A", "A"]);
    await jobs.close();
  });

  it("queued records are bounded per owner and per table: past either, 503 with Retry-After", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    const jobs = started(dir, [a.kind], String, { maxQueuedJobsPerCredential: 2, maxQueuedJobsPerTable: 3 });
    await jobs.submit("a", ["t"], {}, "A"); // starts: Running records are not bounded
    await eventually(() => expect(jobs.active()[0].status).toBe("Running"));
    await jobs.submit("a", ["t"], {}, "A");
    await jobs.submit("a", ["t"], {}, "A");
    const perOwner = await jobs.submit("a", ["u"], {}, "A").catch((e: unknown) => e);
    expect(perOwner).toMatchObject({ status: 503, retryAfterS: 5, reason: "job_queue" });
    expect(String((perOwner as Error).message)).toMatch(/max-queued-jobs-per-credential/);
    await jobs.submit("a", ["t"], {}, "B");
    const perTable = await jobs.submit("a", ["t"], {}, "C").catch((e: unknown) => e);
    expect(perTable).toMatchObject({ status: 503, reason: "job_queue" });
    expect(String((perTable as Error).message)).toMatch(/"t".*max-queued-jobs-per-table/);
    await jobs.submit("a", ["v"], {}, "C");
    expect(jobs.active()).toHaveLength(5);
    await jobs.close();
  });

  it("cancel stops a running job and a queued one never starts", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    const jobs = started(dir, [a.kind], String, BOUNDS);
    const [r1, r2] = [await jobs.submit("a", ["t"], {}, "o"), await jobs.submit("a", ["t"], {}, "o")];
    await settle();
    await jobs.cancel(jobs.get(r2.id)!);
    await jobs.cancel(jobs.get(r1.id)!);
    await eventually(() => {
      expect(a.runs.get(r1.id)!.stopped).toBe(true);
      expect(a.runs.has(r2.id)).toBe(false);
      expect([statusOf(jobs, r1.id), statusOf(jobs, r2.id)]).toEqual(["Canceled", "Canceled"]);
    });
    await jobs.close();
  });

  it("after a crash, resumable runs start again with their progress; the others are Failed", async () => {
    const dir = tempDir();
    const r = controlled("r", 1, "resume");
    const f = controlled("f", 1, "fail");
    const jobs = started(dir, [r.kind, f.kind], String, BOUNDS);
    const [jr, jf] = [await jobs.submit("r", ["t"], {}, "o"), await jobs.submit("f", ["t"], {}, "o")];
    await settle();
    // No close(): the process "died" with both Running on disk.
    const r2 = controlled("r", 1, "resume");
    const again = started(dir, [r2.kind, controlled("f", 1, "fail").kind], String, BOUNDS);
    await eventually(() => {
      expect(again.get(jr.id)).toMatchObject({ status: "Running", progress: { started: 2 } });
      expect(again.get(jf.id)).toMatchObject({ status: "Failed", error: "interrupted by a server restart" });
    });
    r2.runs.get(jr.id)!.finish();
    await eventually(() => {
      expect(statusOf(again, jr.id)).toBe("Succeeded");
    });
    await again.close();
  });

  it("a shutdown stops resumable runs and queues them again; the others are Failed", async () => {
    const dir = tempDir();
    const r = controlled("r", 1, "resume");
    const f = controlled("f", 1, "fail");
    const jobs = started(dir, [r.kind, f.kind], String, BOUNDS);
    const [jr, jf] = [await jobs.submit("r", ["t"], {}, "o"), await jobs.submit("f", ["t"], {}, "o")];
    await settle();
    await jobs.close();
    expect(r.runs.get(jr.id)!.stopped).toBe(true);
    const after = openStore(dir);
    expect(after.get(jr.id)?.status).toBe("Queued");
    expect(after.get(jf.id)).toMatchObject({ status: "Failed", error: "interrupted by a server shutdown" });
    await after.close();
  });

  it("a record of a kind this server does not know fails on start-up", async () => {
    const dir = tempDir();
    const s = openStore(dir);
    await s.put({ ...rec("x"), operation: "gone" });
    await s.close();
    const jobs = started(dir, [], String, BOUNDS);
    await eventually(() => {
      expect(jobs.get("x")).toMatchObject({ status: "Failed", error: 'unknown job kind "gone"' });
    });
    await jobs.close();
  });
});
