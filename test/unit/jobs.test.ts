// Job records and the job-kind registry, in process: the shared store (compare-and-swap changes,
// exclusive slots, the earlier local log carried over) and the scheduler (per-kind limits,
// progress, cancel, what a restart and a shutdown do to each kind), and two replicas on one store
// (a cancel through the other, a live lease left alone, a lapsed one taken over, a holder whose
// clock is behind, renewals while a look is held up).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { paced, SLOW_TEST_MS } from "../helpers/pace.js";
import { openSystemTables } from "../../src/engine/system-tables.js";
import { openJobs, type JobKind, type Jobs, type Running } from "../../src/jobs/jobs.js";
import { openStore, type JobRecord } from "../../src/jobs/store.js";

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(path.join(tmpdir(), "quiver-jobs-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  // A system table may still be compacting in the background (no one waits for it): retried until
  // it settles, up to ~45 s (0.1 s more each try), which a loaded machine needed (ENOTEMPTY at ~5 s).
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true, maxRetries: 30 });
});

const rec = (id: string, status: JobRecord["status"] = "Queued"): JobRecord => ({
  id, status, operation: "k", table: ["t"], spec: {}, properties: {}, createdAt: Date.now(),
});
const storeAt = (dir: string) => openStore(openSystemTables(dir, {}), dir);

describe("job store", () => {
  it("a change is a compare-and-swap: a racing change reads the other's result and applies on top", async () => {
    const dir = tempDir();
    const [a, b] = [await storeAt(dir), await storeAt(dir)];
    await a.insert(rec("x"));
    await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).update("x", (r) => ({ ...r, progress: { ...r.progress, [`p${i}`]: i } }))));
    const stored = await (await storeAt(dir)).read("x");
    expect(stored?.progress).toEqual({ p0: 0, p1: 1, p2: 2, p3: 3, p4: 4, p5: 5 });
    expect(stored?.rev).toBe(6);
  });

  it("a change of several records is one commit, each row guarded by its revision: rows a racing change reached first are changed on top of it", async () => {
    const dir = tempDir();
    const [a, b] = [await storeAt(dir), await storeAt(dir)];
    for (const id of ["x", "y", "z"]) await a.insert(rec(id));
    const mark = (r: JobRecord) => (r.progress?.a ? undefined : { ...r, progress: { ...r.progress, a: 1 } });
    const [many] = await Promise.all([a.updateMany(["x", "y", "z"], mark), b.update("y", (r) => ({ ...r, progress: { ...r.progress, b: 1 } })), b.update("z", (r) => ({ ...r, progress: { ...r.progress, b: 2 } }))]);
    expect(many.map((r) => r.id).sort()).toEqual(["x", "y", "z"]);
    const fresh = await storeAt(dir);
    expect((await fresh.read("x"))?.progress).toEqual({ a: 1 });
    expect((await fresh.read("y"))?.progress).toEqual({ a: 1, b: 1 });
    expect((await fresh.read("z"))?.progress).toEqual({ a: 1, b: 2 });
  });

  it("an exclusive slot has one holder until its job ends; a slot whose job ended elsewhere is taken over", async () => {
    const dir = tempDir();
    const [a, b] = [await storeAt(dir), await storeAt(dir)];
    await a.insert(rec("j1"));
    await b.insert(rec("j2"));
    const claims = await Promise.all([a.hold("col", "j1"), b.hold("col", "j2")]);
    expect(claims.filter((c) => c === null)).toHaveLength(1);
    const [winner, loser] = claims[0] === null ? ["j1", "j2"] : ["j2", "j1"];
    expect(claims).toContain(winner);
    await a.update(winner, (r) => ({ ...r, status: "Succeeded", finishedAt: Date.now() }));
    expect(await b.hold("col", loser)).toBeNull();
  });

  it("records of the earlier local log are carried over once", async () => {
    const dir = tempDir();
    const old = { ...rec("old"), status: "Succeeded" as const };
    writeFileSync(path.join(dir, "transactions.jsonl"), `${JSON.stringify({ ...old, status: "Running" })}\n${JSON.stringify(old)}\n{"id":"torn`);
    const s = await storeAt(dir);
    expect((await s.read("old"))?.status).toBe("Succeeded");
    expect((await (await storeAt(dir)).readAll()).map((r) => r.id)).toEqual(["old"]);
  });

  it("a filter on one table's active records answers its Queued and Running ones only", async () => {
    const s = await storeAt(tempDir());
    for (const r of [rec("q"), rec("run", "Running"), rec("done", "Succeeded"), rec("failed", "Failed"), rec("canceled", "Canceled"), { ...rec("other"), table: ["u"] }]) await s.insert(r);
    expect((await s.readAll({ table: ["t"], active: true })).map((r) => r.id).sort()).toEqual(["q", "run"]);
    expect((await s.readAll({ table: ["t"] })).map((r) => r.id).sort()).toEqual(["canceled", "done", "failed", "q", "run"]);
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
      // A test may fail the run while this start still awaits its first report (the record is
      // Running from the claim on): handed over below, the scheduler sees the rejection then.
      done.catch(() => undefined);
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

/** A kind whose runs go on until stopped, recording nothing. */
function idle(name: string, limit: number) {
  let running = 0;
  const kind: JobKind = {
    name,
    limit,
    interrupted: "resume",
    async start() {
      running++;
      let end!: () => void;
      const done = new Promise<void>((res) => (end = res));
      return { done, stop: async () => end() };
    },
    describe: () => ({}),
  };
  return { kind, running: () => running };
}

const settle = () => new Promise((r) => setTimeout(r, 30));
/** Retry `check` until it passes (the store writes in the background): 10 s on an idle machine, paced to its load. */
async function eventually(check: () => void | Promise<void>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + paced(timeoutMs);
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}
const statusOf = async (jobs: Jobs, id: string) => (await jobs.get(id))!.status;
const statuses = (jobs: Jobs, recs: JobRecord[]) => Promise.all(recs.map((r) => statusOf(jobs, r.id)));
/** Jobs on the store in `dir` as replica `replica`, started as the server starts them once it listens. */
async function started(dir: string, kinds: JobKind[], describeError: (e: unknown) => string, bounds: typeof BOUNDS, replica = "A", jobLeaseMs = 30_000, maxClockSkewMs = 0): Promise<Jobs> {
  const jobs = await openJobs(openSystemTables(dir, {}), dir, kinds, describeError, { ...bounds, replica, jobLeaseMs, maxClockSkewMs });
  await jobs.start();
  return jobs;
}
const BOUNDS: { maxQueuedJobsPerCredential: number; maxQueuedJobsPerTable: number; maxRunningJobsPerTenant: number; maxJobSeconds: number } = { maxQueuedJobsPerCredential: 100, maxQueuedJobsPerTable: 100, maxRunningJobsPerTenant: 1, maxJobSeconds: 0 };

describe("job kinds", () => {
  it("each kind runs up to its own limit; the rest wait as Queued, in order", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    const b = controlled("b", 2, "fail");
    const jobs = await started(dir, [a.kind, b.kind], String, BOUNDS);
    const as = [await jobs.submit("a", ["t"], {}, "o"), await jobs.submit("a", ["t"], {}, "o")];
    const bs = [await jobs.submit("b", ["t"], {}, "o"), await jobs.submit("b", ["t"], {}, "o"), await jobs.submit("b", ["t"], {}, "o")];
    await eventually(async () => {
      expect(await statuses(jobs, as)).toEqual(["Running", "Queued"]);
      expect(await statuses(jobs, bs)).toEqual(["Running", "Running", "Queued"]);
    });
    a.runs.get(as[0].id)!.finish();
    b.runs.get(bs[0].id)!.fail(new Error("boom"));
    await eventually(async () => {
      expect(await statuses(jobs, as)).toEqual(["Succeeded", "Running"]);
      expect(await statuses(jobs, bs)).toEqual(["Failed", "Running", "Running"]);
      expect((await jobs.get(bs[0].id))!.error).toBe("Error: boom");
      expect(jobs.reported((await jobs.get(as[1].id))!)).toMatchObject({ operation: "a", table: "t", started_times: "1" });
    });
    await jobs.close();
  });

  it("a freed slot goes to the owner whose last start is longest ago, not to the oldest record", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    const jobs = await started(dir, [a.kind], String, BOUNDS);
    const first = await jobs.submit("a", ["t"], {}, "A");
    const moreA = [await jobs.submit("a", ["t"], {}, "A"), await jobs.submit("a", ["t"], {}, "A")];
    const b = await jobs.submit("a", ["u"], {}, "B");
    const c = await jobs.submit("a", ["u"], {}, "C");
    await eventually(async () => expect(await statusOf(jobs, first.id)).toBe("Running"));
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
    expect(await statuses(jobs, moreA)).toContain("Running");
    expect(await statuses(jobs, [b, c])).toEqual(["Succeeded", "Succeeded"]);
    expect(order).toEqual(["B", "C", "A", "A"]);
    await jobs.close();
  });

  it("queued records are bounded per owner and per table: past either, 503 with Retry-After", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    const jobs = await started(dir, [a.kind], String, { ...BOUNDS, maxQueuedJobsPerCredential: 2, maxQueuedJobsPerTable: 3 });
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
    const jobs = await started(dir, [a.kind], String, BOUNDS);
    const [r1, r2] = [await jobs.submit("a", ["t"], {}, "o"), await jobs.submit("a", ["t"], {}, "o")];
    await settle();
    await jobs.cancel((await jobs.get(r2.id))!);
    await jobs.cancel((await jobs.get(r1.id))!);
    await eventually(async () => {
      expect(a.runs.get(r1.id)!.stopped).toBe(true);
      expect(a.runs.has(r2.id)).toBe(false);
      expect(await statuses(jobs, [r1, r2])).toEqual(["Canceled", "Canceled"]);
    });
    await jobs.close();
  });

  it("after a crash, resumable runs start again with their progress; the others are Failed", async () => {
    const dir = tempDir();
    // What replica A left behind when it died: both Running under its leases (still live).
    const lease = { replica: "A", expires: Date.now() + 60_000 };
    const store = await storeAt(dir);
    const [jr, jf] = [{ ...rec("jr"), operation: "r", status: "Running" as const, progress: { started: 1 }, lease }, { ...rec("jf"), operation: "f", status: "Running" as const, lease }];
    for (const j of [jr, jf]) await store.insert(j);
    const r2 = controlled("r", 1, "resume");
    const again = await started(dir, [r2.kind, controlled("f", 1, "fail").kind], String, BOUNDS);
    await eventually(async () => {
      expect(await again.get(jr.id)).toMatchObject({ status: "Running", progress: { started: 2 } });
      expect(await again.get(jf.id)).toMatchObject({ status: "Failed", error: "interrupted by a server restart" });
    });
    r2.runs.get(jr.id)!.finish();
    await eventually(async () => {
      expect(await statusOf(again, jr.id)).toBe("Succeeded");
    });
    await again.close();
  });

  it("a shutdown stops resumable runs and queues them again; the others are Failed", async () => {
    const dir = tempDir();
    const r = controlled("r", 1, "resume");
    const f = controlled("f", 1, "fail");
    const jobs = await started(dir, [r.kind, f.kind], String, BOUNDS);
    const [jr, jf] = [await jobs.submit("r", ["t"], {}, "o"), await jobs.submit("f", ["t"], {}, "o")];
    await eventually(() => expect([r.runs.has(jr.id), f.runs.has(jf.id)]).toEqual([true, true]));
    await jobs.close();
    expect(r.runs.get(jr.id)!.stopped).toBe(true);
    const after = await storeAt(dir);
    expect(await after.read(jr.id)).toMatchObject({ status: "Queued" });
    expect(await after.read(jf.id)).toMatchObject({ status: "Failed", error: "interrupted by a server shutdown" });
  });

  it("a shutdown while a run is still starting waits for its start, then stops it and queues it again", async () => {
    const dir = tempDir();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const seen = { begun: false, stopped: false };
    const slow: JobKind = {
      name: "slow",
      limit: 1,
      interrupted: "resume",
      async start() {
        seen.begun = true;
        await gate;
        let finish!: () => void;
        const done = new Promise<void>((r) => (finish = r));
        return { done, stop: async () => void ((seen.stopped = true), finish()) };
      },
      describe: () => ({}),
    };
    const jobs = await started(dir, [slow], String, BOUNDS);
    const j = await jobs.submit("slow", ["t"], {}, "o");
    await eventually(() => expect(seen.begun).toBe(true));
    const closing = jobs.close();
    setTimeout(release, 100);
    await closing;
    expect(seen.stopped).toBe(true);
    expect(await (await storeAt(dir)).read(j.id)).toMatchObject({ status: "Queued" });
  });

  it("a record of a kind this server does not know fails on start-up", async () => {
    const dir = tempDir();
    await (await storeAt(dir)).insert({ ...rec("x"), status: "Running", lease: { replica: "A", expires: Date.now() + 60_000 }, operation: "gone" });
    const jobs = await started(dir, [], String, BOUNDS);
    await eventually(async () => {
      expect(await jobs.get("x")).toMatchObject({ status: "Failed", error: 'unknown job kind "gone"' });
    });
    await jobs.close();
  });
});

describe("two replicas on one store", () => {
  const exclusive = (slot: string) => ({ slot, busy: (holder: string) => Object.assign(new Error(`busy: ${holder}`), { status: 409 }) });

  it("a cancel through the other replica stops the run, and resolves once it stopped", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "resume");
    const ja = await started(dir, [a.kind], String, BOUNDS, "A", 2_000);
    const jb = await started(dir, [controlled("a", 1, "resume").kind], String, BOUNDS, "B", 2_000);
    const r = await ja.submit("a", ["t"], {}, "o");
    await eventually(() => expect(a.runs.has(r.id)).toBe(true));
    const canceled = await jb.cancel((await jb.get(r.id))!);
    expect(canceled).toMatchObject({ status: "Canceled" });
    expect(canceled.lease).toBeUndefined();
    expect(a.runs.get(r.id)!.stopped).toBe(true);
    await Promise.all([ja.close(), jb.close()]);
  });

  it("a cancel of a job made of parts asks it of all in one commit, and ends them all in one once every run stopped", async () => {
    const dir = tempDir();
    const p = controlled("p", 1, "resume");
    const t = controlled("t", 2, "resume");
    const parent: JobKind = { ...p.kind, parts: (r) => r.spec.tasks as string[], summary: (_r, parts) => ({ parts: parts.length }) };
    const part: JobKind = { ...t.kind, partOf: (r) => r.spec.parent as string };
    const ja = await started(dir, [parent, part], String, BOUNDS, "A", 2_000);
    const jb = await started(dir, [parent, part], String, BOUNDS, "B", 2_000);
    const id = "00000000-0000-4000-8000-000000000001";
    const tasks = [await jb.submit("t", ["t"], { parent: id }, "o"), await jb.submit("t", ["t"], { parent: id }, "o")];
    const store = await storeAt(dir);
    await store.insert({ ...rec(id), operation: "p", spec: { tasks: tasks.map((x) => x.id) } });
    await eventually(() => expect([id, ...tasks.map((x) => x.id)].every((x) => p.runs.has(x) || t.runs.has(x))).toBe(true));
    const canceled = await ja.cancel((await ja.get(id))!);
    expect(canceled).toMatchObject({ status: "Canceled", progress: { parts: 2 } });
    const after = await Promise.all([id, ...tasks.map((x) => x.id)].map((x) => store.read(x)));
    expect(after.map((r) => r!.status)).toEqual(["Canceled", "Canceled", "Canceled"]);
    // One commit ended them: one finishedAt, each after its run stopped.
    expect(new Set(after.map((r) => r!.finishedAt)).size).toBe(1);
    expect([p.runs.get(id)!, ...tasks.map((x) => t.runs.get(x.id)!)].every((r) => r.stopped)).toBe(true);
    await Promise.all([ja.close(), jb.close()]);
  });

  it("a live lease of another replica is left alone; once it lapses the job is taken over and resumes from its progress", async () => {
    const dir = tempDir();
    const expires = Date.now() + 1_500;
    await (await storeAt(dir)).insert({ ...rec("x"), operation: "r", status: "Running", progress: { started: 1 }, lease: { replica: "dead", expires } });
    const r = controlled("r", 1, "resume");
    const jb = await started(dir, [r.kind], String, BOUNDS, "B", 400);
    await new Promise((res) => setTimeout(res, 800));
    expect(Date.now()).toBeLessThan(expires);
    expect(r.runs.has("x")).toBe(false);
    expect((await jb.get("x"))?.lease?.replica).toBe("dead");
    await eventually(async () => expect(await jb.get("x")).toMatchObject({ status: "Running", progress: { started: 2 }, lease: { replica: "B" } }));
    r.runs.get("x")!.finish();
    await eventually(async () => expect(await statusOf(jb, "x")).toBe("Succeeded"));
    await jb.close();
  });

  it("a lease that expired less than a third of a lease ago is still left alone (a commit granted at the margin may be landing)", async () => {
    const dir = tempDir();
    const expired = Date.now() - 100;
    await (await storeAt(dir)).insert({ ...rec("x"), operation: "r", status: "Running", progress: { started: 1 }, lease: { replica: "slow", expires: expired } });
    const r = controlled("r", 1, "resume");
    // A 6 s lease: taken over 2 s after it expired, not at the first look.
    const jb = await started(dir, [r.kind], String, BOUNDS, "B", 6_000);
    await new Promise((res) => setTimeout(res, 400));
    expect(Date.now()).toBeLessThan(expired + 2_000);
    expect(r.runs.has("x")).toBe(false);
    expect((await jb.get("x"))?.lease?.replica).toBe("slow");
    // Its start has run once it recorded progress (the claim is stored first).
    await eventually(async () => expect(await jb.get("x")).toMatchObject({ status: "Running", progress: { started: 2 }, lease: { replica: "B" } }));
    expect(Date.now()).toBeGreaterThanOrEqual(expired + 2_000);
    r.runs.get("x")!.finish();
    await eventually(async () => expect(await statusOf(jb, "x")).toBe("Succeeded"));
    await jb.close();
  });

  it("a lease renewed by a replica whose clock is behind this one's (by less than --max-clock-skew-ms) is left alone; once its renewals stop it is taken over", async () => {
    const dir = tempDir();
    const store = await storeAt(dir);
    // The holder's clock reads 900 ms behind this one: its leases look expired here as soon as written.
    const behindMs = 900;
    const leaseMs = 600;
    const renewed = () => ({ replica: "behind", expires: Date.now() - behindMs + leaseMs });
    await store.insert({ ...rec("x"), operation: "r", status: "Running", progress: { started: 1 }, lease: renewed() });
    let renewing = true;
    const holder = (async () => {
      while (renewing) {
        await store.update("x", (s) => (s.lease?.replica === "behind" ? { ...s, lease: renewed() } : undefined));
        await new Promise((res) => setTimeout(res, 100));
      }
    })();
    const r = controlled("r", 1, "resume");
    const jb = await started(dir, [r.kind], String, BOUNDS, "B", leaseMs, 1_000);
    // Many looks of B (one per 150 ms poll), each seeing a lease past its expiry by this clock.
    await new Promise((res) => setTimeout(res, 2_500));
    renewing = false;
    await holder;
    expect(r.runs.has("x")).toBe(false);
    expect((await jb.get("x"))?.lease?.replica).toBe("behind");
    await eventually(async () => expect(await jb.get("x")).toMatchObject({ status: "Running", progress: { started: 2 }, lease: { replica: "B" } }));
    r.runs.get("x")!.finish();
    await eventually(async () => expect(await statusOf(jb, "x")).toBe("Succeeded"));
    await jb.close();
  }, 30_000);

  it("a lease is renewed on time while its replica's look is held up taking 25 queued jobs, one after the other: the other replica takes nothing over", async () => {
    const dir = tempDir();
    const store = await storeAt(dir);
    const leaseMs = 500;
    // Queued a minute ago (due at once): A's first look claims all 25, a read and a commit each.
    for (let i = 0; i < 25; i++) await store.insert({ ...rec(`q${i}`), operation: "q", createdAt: Date.now() - 60_000 });
    // Left Running by A's previous run: A takes it back at once, in that same look, before the 25.
    await store.insert({ ...rec("x"), operation: "a", status: "Running", lease: { replica: "A", expires: Date.now() + 3_000 } });
    const b = controlled("a", 1, "resume");
    const jb = await started(dir, [b.kind], String, BOUNDS, "B", leaseMs);
    const a = controlled("a", 1, "resume");
    const q = idle("q", 25);
    // Its first look (awaited here) takes longer than a lease and its grace: renewals cannot wait for it.
    const ja = await started(dir, [a.kind, q.kind], String, BOUNDS, "A", leaseMs);
    await eventually(() => expect(q.running()).toBe(25));
    await new Promise((res) => setTimeout(res, leaseMs));
    expect(b.runs.has("x")).toBe(false);
    expect(await ja.get("x")).toMatchObject({ status: "Running", lease: { replica: "A" } });
    a.runs.get("x")!.finish();
    await eventually(async () => expect(await statusOf(ja, "x")).toBe("Succeeded"));
    await Promise.all([ja.close(), jb.close()]);
  }, SLOW_TEST_MS);

  it("a run that finished is never stopped while its end is being stored (an index build's stop drops the index it built)", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "fail");
    // A short lease: the scheduler looks (and renews) every 50 ms, so looks land while ends are stored.
    const jobs = await started(dir, [a.kind], String, BOUNDS, "A", 200);
    for (let i = 0; i < 40; i++) {
      // An exclusive slot, as index builds hold: giving it back lengthens the end being stored.
      const r = await jobs.submit("a", ["t"], {}, "o", { slot: `t/i${i}`, busy: () => new Error("busy") });
      await eventually(() => expect(a.runs.has(r.id)).toBe(true));
      await new Promise((res) => setTimeout(res, Math.random() * 50));
      a.runs.get(r.id)!.finish();
      await eventually(async () => expect(await statusOf(jobs, r.id)).toBe("Succeeded"));
      await settle();
      expect(a.runs.get(r.id)!.stopped, `run ${i}`).toBe(false);
    }
    await jobs.close();
  }, 60_000);

  it("a lapsed job of a kind that cannot resume is Failed, naming why", async () => {
    const dir = tempDir();
    await (await storeAt(dir)).insert({ ...rec("x"), operation: "f", status: "Running", lease: { replica: "dead", expires: Date.now() - 1 } });
    const jb = await started(dir, [controlled("f", 1, "fail").kind], String, BOUNDS, "B", 400);
    await eventually(async () => expect(await jb.get("x")).toMatchObject({ status: "Failed", error: "interrupted: the replica running it stopped" }));
    await jb.close();
  });

  it("an exclusive job submitted on both at once: one is queued, the other gets its 409; the slot frees when the job ends", async () => {
    const dir = tempDir();
    const a = controlled("a", 1, "resume");
    const ja = await started(dir, [a.kind], String, BOUNDS, "A", 2_000);
    const jb = await started(dir, [controlled("a", 1, "resume").kind], String, BOUNDS, "B", 2_000);
    const both = await Promise.allSettled([ja.submit("a", ["t"], {}, "o", exclusive("t/col")), jb.submit("a", ["t"], {}, "o", exclusive("t/col"))]);
    const won = both.filter((s) => s.status === "fulfilled");
    expect(won).toHaveLength(1);
    const id = (won[0] as PromiseFulfilledResult<JobRecord>).value.id;
    expect((both.find((s) => s.status === "rejected") as PromiseRejectedResult).reason).toMatchObject({ status: 409, message: `busy: ${id}` });
    await ja.cancel((await ja.get(id))!);
    await expect(jb.submit("a", ["t"], {}, "o", exclusive("t/col"))).resolves.toMatchObject({ status: "Queued" });
    await Promise.all([ja.close(), jb.close()]);
  });
});
