// Background work tracked as transactions, by kind. Each kind registers itself (name, how many
// run at once on a replica, what happens to a run whose replica stopped, how to start one and what
// its record shows); this module knows no kind. Records live in the replicas' shared store
// (./store.ts) and wait as Queued in submission order until a replica has a free slot for their
// kind, taken fairly between owners (see nextFair). A replica runs a job under a lease it renews
// while the job runs; a job whose lease lapsed (its replica died) is taken over by another replica
// (resumed from its last checkpoint, or Failed for kinds that cannot resume). Every state change is
// stored before it is reported, and a change made elsewhere (a cancel through another replica) is
// seen by the running replica within a poll. A cancel of a Running job is asked on its record: the
// run checks the record right before each commit, stops, and only then is the record Canceled, so
// no commit lands after its finishedAt and its counts are what it committed. A job made of parts
// (a split backfill's tasks) is canceled with them: one commit asks it of all, each run lets go of
// its lease once stopped, and one commit ends them all (see settle), so that no reader sees the job
// ended with a part still Running, or a part Canceled while the job runs on. A replica that already
// runs jobs of a kind waits a little before taking another, so that idle replicas take it first.
// Queued records are bounded per owner and per table. While another tenant's job of a kind waits, a
// tenant (the top-level namespace of the job's table) runs at most max-running-jobs-per-tenant of
// that kind: the next start goes to a tenant below it, and a resumable run of a tenant above it is
// queued again (it resumes from its checkpoint) so that a waiting tenant gets its slot. A run past
// max-job-seconds is canceled as a client's cancel is, and its record ends Failed saying so.
import { randomUUID } from "node:crypto";
import { objectIdOf, sameId, tenantOf } from "../catalog/names.js";
import { ApiError, Code } from "../errors.js";
import { log } from "../log.js";
import { recordJobFailure, recordJobTakeover, type JobFailureReason } from "../metrics.js";
import { wallClock } from "../util/clock.js";
import type { SystemTables } from "../util/system-table.js";
import { isTerminal, openStore, STATUSES, type JobFilter, type JobRecord } from "./store.js";

/** A started job: `done` settles when it ends; `stop` makes it end early (resolves once stopped). */
export interface Running {
  done: Promise<void>;
  stop(): Promise<void>;
}

/** What a kind's start() gets: the record and a way to record progress durably. */
export interface JobContext<S = Record<string, unknown>> {
  readonly rec: Readonly<JobRecord> & { readonly spec: S };
  /** Merge `progress` into the record's progress and persist it. */
  report(progress: Record<string, unknown>): Promise<void>;
  /**
   * Whether the run may commit now, asked right before each commit: false once a cancel was asked
   * or the record is no longer this replica's (the run is then being stopped).
   */
  mayCommit(): Promise<boolean>;
}

export interface JobKind<S = any> {
  /** The record's `operation`, e.g. "create_index". */
  name: string;
  /** Jobs of this kind running at once on one replica; more wait as Queued. */
  limit: number;
  /**
   * A record left Running by a replica that stopped (a restart, a crash, a shutdown): "resume"
   * queues or takes it over (start() continues from its progress), "fail" marks it Failed (its
   * work died with the process).
   */
  interrupted: "resume" | "fail";
  start(job: JobContext<S>): Promise<Running>;
  /** The jobs a record's run is made of (a split backfill's tasks): a cancel of it is asked of them at once, in one commit, and they end with it in one. */
  parts?(rec: JobRecord & { spec: S }): string[];
  /** The record a record of this kind is a part of (a task's backfill): its records queued before `parts` lists them are its parts too. */
  partOf?(rec: JobRecord & { spec: S }): string | undefined;
  /** What a canceled record's progress becomes from its parts' as they stopped (a split backfill: their counts summed); undefined: it keeps its own. */
  summary?(rec: JobRecord & { spec: S }, parts: JobRecord[]): Record<string, unknown> | undefined;
  /** Records of one group (the tasks of one backfill) spread over replicas: a replica holding one waits longer for the next. */
  group?(rec: JobRecord & { spec: S }): string | undefined;
  /** The properties DescribeTransaction reports for a record of this kind (undefined: not shown). */
  describe(rec: JobRecord & { spec: S }): Record<string, string | undefined>;
}

/** How many records may wait as Queued at once (Config's max-queued-jobs-per-*). */
export interface QueueBounds {
  maxQueuedJobsPerCredential: number;
  maxQueuedJobsPerTable: number;
}

export interface JobsOptions extends QueueBounds {
  /** Jobs of one kind a tenant runs at once while another tenant's job of that kind is Queued. */
  maxRunningJobsPerTenant: number;
  /** How long a job may run, seconds (0: no bound). */
  maxJobSeconds: number;
  /** This replica's id (stable across its restarts: a restart takes its own leases back at once). */
  replica: string;
  /** How long a lease lasts without a heartbeat: a dead replica's jobs are taken over after it. */
  jobLeaseMs: number;
  /** How far each replica's clock may be off the store's (checked at start): others' leases are judged with twice this to spare. */
  maxClockSkewMs: number;
}

/** One job of a kind that at most one may be active at a time (a column's backfill, a view's refresh). */
export interface Exclusive {
  slot: string;
  /** The 409 to answer while job `holder` has the slot. */
  busy(holder: string): Error;
}

export interface Jobs {
  /**
   * Recover what a previous run of this replica left Running and begin running jobs: called once
   * the server listens, so a second start on a taken port (which fails there) never touches the
   * live server's jobs. Until then jobs are accepted and stay Queued. Resolves after the first
   * look (what a previous run left Running is resumed or Failed by then).
   */
  start(): Promise<void>;
  /** 503 Slow down when a job for `owner` on `table` would pass the queue bounds now (submit checks too). */
  admit(table: readonly string[], owner: string): void;
  /** Queue a job for `owner` (see JobRecord.owner); 503 Slow down past the queue bounds; `exclusive`'s 409 while its slot is held. */
  submit(kind: string, table: string[], spec: Record<string, unknown>, owner: string, exclusive?: Exclusive): Promise<JobRecord>;
  /** The record as stored now (whichever replica runs it). */
  get(id: string): Promise<JobRecord | undefined>;
  /** Every record kept (finished ones too, up to the store's retention), or those the filter selects, as stored now. */
  all(of?: JobFilter): Promise<JobRecord[]>;
  /** Queued and Running records as of this replica's last look (at most a poll old), oldest first. */
  active(): JobRecord[];
  /**
   * A renamed table's Queued and Running records follow it to its new id: its data stays where it
   * was, and a drop under the new name must find the jobs still writing there.
   */
  retarget(from: readonly string[], to: string[]): Promise<void>;
  /** Store the properties of `rec` (set through AlterTransaction); the record as stored after. */
  save(rec: JobRecord): Promise<JobRecord>;
  /**
   * Cancel a Queued or Running record and its parts; resolves with the stored record once it is
   * Canceled and its runs have stopped (on another replica: once that replica let go, or its lease
   * lapsed). With `reason` (Quiver's own, e.g. a part of it failed) it ends Failed with it.
   */
  cancel(rec: JobRecord, reason?: string): Promise<JobRecord>;
  /** The properties Quiver reports for a record (read-only to clients), by key. */
  reported(rec: JobRecord): Record<string, string | undefined>;
  /** Records this replica has seen, by kind and status; every registered kind and status, zeros included; with `visible`, those on the tables (object ids) it accepts only. */
  counts(visible?: (objectId: string) => boolean): { kind: string; state: string; count: number }[];
  /** This replica's own runs and slots, by kind; every registered kind, zeros included. */
  runningHere(): { kind: string; running: number; slots: number }[];
  /**
   * A shutdown began: claim no job from now on (another replica runs them from the start), and
   * put back to Queued the records this replica holds but has not started. Runs going on go on
   * until close().
   */
  drain(): Promise<void>;
  /** Stop running work for a shutdown: resumable jobs are queued again, the others fail. */
  close(): Promise<void>;
}

const RESTART_MESSAGE = "interrupted by a server restart";
const SHUTDOWN_MESSAGE = "interrupted by a server shutdown";
const LAPSED_MESSAGE = "interrupted: the replica running it stopped";

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The owner of follow-up work Quiver queues itself after writes to table `id`. */
export const autoOwner = (id: readonly string[]) => `auto:${objectIdOf(id)}`;

/** Whose share of the job slots a record takes: the top-level namespace of its table ("" at the root). */
const tenantOfJob = (r: JobRecord) => tenantOf(objectIdOf(r.table));

/** A full queue: try again once some of the queued work has started. */
const RETRY_AFTER_S = 5;

const queueFull = (message: string) => new ApiError(Code.ServiceUnavailable, message, 503, { retryAfterS: RETRY_AFTER_S, reason: "job_queue" });

/**
 * The record to start next among those due: one of a group this replica runs none of, then the
 * oldest one of the owner whose last start is longest ago (an owner never started first), so
 * owners take turns however many jobs each has queued. `due` is in submission order.
 */
function nextFair(due: JobRecord[], lastStart: Map<string, number>, holdsGroup: (r: JobRecord) => boolean): JobRecord {
  let best = due[0];
  const rank = (r: JobRecord): [number, number] => [holdsGroup(r) ? 1 : 0, lastStart.get(r.owner ?? "") ?? -Infinity];
  let bestRank = rank(best);
  for (const r of due) {
    const k = rank(r);
    if (k[0] < bestRank[0] || (k[0] === bestRank[0] && k[1] < bestRank[1])) [best, bestRank] = [r, k];
  }
  return best;
}

/** A run of this replica: its handle once started, and the record the kind sees. */
interface Run {
  rec: JobRecord;
  handle?: Running;
  /** Settles once the kind's start did (close() waits for it: a run still starting has no handle to stop). */
  started?: Promise<unknown>;
  /** The handle's stop, once asked (asked once). */
  stopCall?: Promise<void>;
  stopping?: Promise<void>;
  /** Told to stop (a stopped run's end is no outcome). */
  stopped?: boolean;
  /** How the run ended by itself, once it did: from then on nothing stops it (an index build's stop drops what it built). */
  outcome?: { status: "Succeeded" | "Failed"; error?: string };
  /** Stopped to give its slot to another tenant: its record is Queued again once it stopped. */
  yielded?: boolean;
  /** Past max-job-seconds: its cancel was asked. */
  overdue?: boolean;
}

function stopRun(run: Run): Promise<void> {
  run.stopped = true;
  if (!run.handle) return Promise.resolve();
  run.stopCall ??= run.handle.stop().catch(() => undefined);
  return run.stopCall;
}

/**
 * How a run that ended by itself is stored: a failure after a cancel was asked is the cancel's (its
 * process was stopped): the lease is let go, and settle ends the record with its group.
 */
function ending(s: JobRecord, outcome: NonNullable<Run["outcome"]>, now: number): JobRecord {
  if (s.cancelAt !== undefined && outcome.status === "Failed") return { ...s, lease: undefined };
  return { ...s, status: outcome.status, error: outcome.error, finishedAt: now, lease: undefined };
}

/** A record whose cancel took effect: Failed with the reason where Quiver asked it (see JobRecord.cancelReason), Canceled otherwise. */
const canceled = (s: JobRecord, now: number): JobRecord =>
  s.cancelReason !== undefined
    ? { ...s, status: "Failed", error: s.cancelReason, finishedAt: now, lease: undefined }
    : { ...s, status: "Canceled", finishedAt: now, lease: undefined };

export async function openJobs(system: SystemTables, stateDir: string, kinds: JobKind[], describeError: (err: unknown) => string, opts: JobsOptions): Promise<Jobs> {
  const store = await openStore(system, stateDir);
  const byName = new Map(kinds.map((k) => [k.name, k]));
  const me = opts.replica;
  const leaseMs = opts.jobLeaseMs;
  // Often enough that a cancel elsewhere stops a run within about a second, and a lease is renewed
  // well before it lapses.
  const pollMs = Math.max(50, Math.min(1000, Math.floor(leaseMs / 4)));
  // A cancel waiting for another replica's run to stop looks this often.
  const cancelPollMs = Math.min(100, pollMs);
  // How long a replica that runs n jobs of a kind lets a record wait before it takes it: n times
  // this (once more for a group it holds one of). An idle replica looks within a poll and takes
  // it first; a replica alone takes it a moment later. A look's own time counts: on a loaded
  // machine reading the records took longer than a poll, and a busy replica took a second task
  // before the idle one had looked (seen in CI). Other replicas' looks take about as long as this
  // one's last few.
  const recentLooks: number[] = [];
  const spreadMs = () => 2 * (pollMs + Math.max(0, ...recentLooks));
  // A commit is allowed only while the lease has at least this long left: a replica that could not
  // renew it (the store out of reach) stops committing well before another may take the job over.
  const commitMarginMs = leaseMs / 3;
  // The store's latency as this replica sees it, its event loop's delays included: the longest of
  // its last few lease renewals and reads of the active records.
  const recentStoreMs: number[] = [];
  const timed = async <T>(call: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      return await call();
    } finally {
      if (recentStoreMs.push(performance.now() - started) > 8) recentStoreMs.shift();
    }
  };
  const storeMs = () => Math.max(0, ...recentStoreMs);
  // Another replica takes a lease over (or a cancel ends its record) only this long after it
  // expired: a commit granted at the margin has two thirds of a lease to land, and an overloaded
  // replica's late renewal still counts (with a 3 s test lease at load average 10+, a commit landed
  // after a takeover, and once after a cancel's `finished_at`); on a store (or a replica) slower
  // than that, twice its latency, so a renewal on its way lands first.
  const graceMs = () => Math.max(leaseMs / 3, 2 * storeMs());
  // The holder's clock and this one may each be --max-clock-skew-ms off the store's: a lease is
  // judged by this one's clock with twice that to spare, so a clock running ahead takes no live lease.
  const skewMarginMs = 2 * opts.maxClockSkewMs;
  /** When a lease is no replica's any longer (its holder died, or stopped renewing it), by this replica's clock. */
  const lapsesAt = (l: NonNullable<JobRecord["lease"]>) => l.expires + graceMs() + skewMarginMs;
  const lapsed = (l: JobRecord["lease"], now: number) => l === undefined || lapsesAt(l) < now;
  const runs = new Map<string, Run>();
  /** When each owner's job last started (this replica), for nextFair. */
  const lastStart = new Map<string, number>();
  let closed = false;
  let started = false;
  /** Set by drain(): no claims from then on. */
  let draining = false;
  let timer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;

  const lease = () => ({ replica: me, expires: wallClock() + leaseMs });
  const mine = (r: JobRecord) => r.status === "Running" && r.lease?.replica === me;
  /** Running here, with no cancel asked. */
  const mineToRun = (r: JobRecord | undefined) => r !== undefined && mine(r) && r.cancelAt === undefined;
  const failed = (r: JobRecord | undefined, reason: JobFailureReason) => r?.status === "Failed" && recordJobFailure(r.operation, reason);

  /** After a record ended: its slot is free again. */
  const ended = async (r: JobRecord | undefined) => {
    if (r && isTerminal(r.status) && r.slot) await store.release(r.slot, r.id);
  };

  /** store.update, telling whether `change` made the change stored (its last try is the one that counts). */
  async function apply(id: string, change: (r: JobRecord) => JobRecord | undefined): Promise<{ rec: JobRecord | undefined; changed: boolean }> {
    let changed = false;
    const rec = await store.update(id, (s) => {
      const next = change(s);
      changed = next !== undefined;
      return next;
    });
    return { rec, changed };
  }

  /** Store this run's end, unless the record changed hands meanwhile (taken over elsewhere: that stays). */
  async function finish(id: string, outcome: NonNullable<Run["outcome"]>) {
    const { rec, changed } = await apply(id, (s) => (mine(s) ? ending(s, outcome, wallClock()) : undefined));
    if (changed) failed(rec, "error");
    await ended(rec);
    if (rec?.cancelAt !== undefined) await settle(id);
  }

  /**
   * The record is no longer this replica's to run (taken over), or a cancel was asked: stop the
   * run, then let go of the lease; a cancel's record ends only now, after its last commit, with
   * its group (settle).
   */
  function letGo(id: string): Promise<void> {
    const run = runs.get(id);
    // A run that ended is recorded by finish(), which leaves a record changed elsewhere as it is.
    if (!run || run.outcome) return Promise.resolve();
    run.stopping ??= (async () => {
      // A run still starting has no handle yet: stopped once it has one.
      await run.started;
      await stopRun(run);
      const r = await store.update(id, (s) => {
        if (s.lease?.replica !== me) return undefined;
        if (s.status === "Running" && run.yielded && s.cancelAt === undefined) return { ...s, status: "Queued", queuedAt: wallClock(), lease: undefined };
        return { ...s, lease: undefined };
      });
      await ended(r);
      if (r?.cancelAt !== undefined) await settle(id);
    })().catch((err: unknown) => log.error("cannot record a job's end", { id, error: String(err) }));
    return run.stopping;
  }

  /** Run `rec`, which this replica holds the lease of. */
  async function launch(kind: JobKind, rec: JobRecord): Promise<void> {
    const run: Run = { rec };
    runs.set(rec.id, run);
    const report = async (progress: Record<string, unknown>) => {
      const r = await store.update(rec.id, (s) => (mine(s) ? { ...s, progress: { ...s.progress, ...progress }, lease: lease() } : undefined));
      if (!r || !mine(r)) return void letGo(rec.id);
      run.rec.progress = r.progress;
      if (r.cancelAt !== undefined) void letGo(rec.id);
    };
    const mayCommit = async () => {
      if (run.stopped || closed) return false;
      let r = await store.read(rec.id).catch(() => undefined);
      // A lease this close to its end was not renewed in time: renewed now, or no commit.
      if (mineToRun(r) && r!.lease!.expires - wallClock() <= commitMarginMs) r = await store.update(rec.id, (s) => (mine(s) ? { ...s, lease: lease() } : undefined)).catch(() => undefined);
      // A part queued as its parent's cancel was asked (a task queued while its backfill plans)
      // may not have been asked yet: its parent's cancel stops it as well.
      const parent = kind.partOf?.(rec);
      if (mineToRun(r) && parent !== undefined && (await store.read(parent).catch(() => undefined))?.cancelAt !== undefined) {
        r = await store.update(rec.id, (s) => (mine(s) && s.cancelAt === undefined ? { ...s, cancelAt: wallClock() } : undefined)).catch(() => undefined);
      }
      if (mineToRun(r)) return true;
      void letGo(rec.id);
      return false;
    };
    try {
      try {
        const starting = kind.start({ rec: run.rec, report, mayCommit });
        run.started = starting.catch(() => undefined);
        run.handle = await starting;
      } catch (err) {
        return await finish(rec.id, { status: "Failed", error: describeError(err) });
      }
      // A stop (a shutdown) may end it before it is awaited below: that is no unhandled rejection.
      run.handle.done.catch(() => undefined);
      // Canceled, taken over or closing while it was starting: the handle did not exist when that was seen.
      const now = await store.read(rec.id);
      if (closed) await stopRun(run);
      else if (!mineToRun(now)) void letGo(rec.id);
      const outcome: NonNullable<Run["outcome"]> = await run.handle.done.then(
        () => ({ status: "Succeeded" }),
        (err: unknown) => ({ status: "Failed", error: describeError(err) }),
      );
      if (!run.stopped) run.outcome = outcome;
      if (!run.stopping && !closed) await finish(rec.id, outcome);
      await run.stopping;
    } finally {
      // Once closing, close() records how each run ended (one that stopped while close() waited too).
      if (!closed) runs.delete(rec.id);
    }
  }

  /** Claim `r` (Queued, or Running under a lapsed lease) for this replica and run it; false when another replica got it first. */
  async function claim(r: JobRecord, takeover: boolean): Promise<boolean> {
    const kind = byName.get(r.operation);
    const now = wallClock();
    const claimable = (s: JobRecord) =>
      takeover ? s.status === "Running" && (lapsed(s.lease, now) || s.lease!.replica === me) : s.status === "Queued";
    const resume = !kind || kind.interrupted === "resume";
    let reason: JobFailureReason = "error";
    const { rec: got, changed } = await apply(r.id, (s) => {
      // Its run is gone: what it committed is all there is, and it ends with its group (settle).
      if (!claimable(s) || s.cancelAt !== undefined) return undefined;
      if (!kind) {
        reason = "unknown_kind";
        return { ...s, status: "Failed", finishedAt: now, error: `unknown job kind ${JSON.stringify(s.operation)}`, lease: undefined };
      }
      if (takeover && !resume) {
        reason = s.lease?.replica === me ? "restart" : "replica_lost";
        return { ...s, status: "Failed", finishedAt: now, error: s.lease?.replica === me ? RESTART_MESSAGE : LAPSED_MESSAGE, lease: undefined };
      }
      return { ...s, status: "Running", startedAt: takeover ? s.startedAt : now, lease: lease(), replica: me };
    });
    if (!got || !kind || !mine(got)) {
      if (changed) failed(got, reason);
      await ended(got);
      if (got?.cancelAt !== undefined) await settle(got.id);
      return false;
    }
    if (takeover && r.lease?.replica !== me) {
      recordJobTakeover(got.operation);
      log.info("took over a job", { id: got.id, operation: got.operation, from: r.lease?.replica });
    }
    lastStart.set(got.owner ?? "", now);
    void launch(kind, got)
      .catch((err: unknown) => log.error("job failed to run", { id: got.id, error: String(err) }))
      .finally(() => void tick());
    return true;
  }

  /** The renewal in flight: close() waits for it, so nothing writes a lease after it returns. */
  let renewing: Promise<void> | null = null;
  /**
   * Renew this replica's leases that are due, all in one commit, on a timer of their own: a look
   * held up by claims, cancels or a slow listing never delays them. Due once a third of the lease
   * passed, sooner by twice the store's latency, so that a renewal through a slow store (or a
   * loaded replica) lands before the lease runs out. A run still starting (a job process being
   * spawned) is renewed too.
   */
  function renew(): void {
    if (closed || renewing) return;
    const now = wallClock();
    const byId = new Map(store.mirrored().map((r) => [r.id, r]));
    const dueIds = [...runs]
      .filter(([id, run]) => !run.stopping && !run.outcome && mineToRun(byId.get(id)) && byId.get(id)!.lease!.expires - now < (leaseMs * 2) / 3 + 2 * storeMs())
      .map(([id]) => id);
    if (dueIds.length === 0) return;
    renewing = timed(() => store.updateMany(dueIds, (s) => (mine(s) ? { ...s, lease: lease() } : undefined)))
      .then((after) => {
        const stored = new Map(after.map((r) => [r.id, r]));
        for (const id of dueIds) if (!mineToRun(stored.get(id))) void letGo(id);
      })
      .catch((err: unknown) => log.error("cannot renew the jobs' leases", { jobs: dueIds, error: String(err) }))
      .finally(() => (renewing = null));
  }

  let ticking: Promise<void> | null = null;
  let again = false;
  /** One look at the shared records: notice changes to this replica's runs, take over lapsed ones, start queued ones (leases are renewed by renew()). */
  function tick(): Promise<void> {
    if (closed || !started) return Promise.resolve();
    if (ticking) {
      again = true;
      return ticking;
    }
    ticking = (async () => {
      do {
        again = false;
        const lookStart = performance.now();
        await look().catch((err: unknown) => log.error("cannot read the job records", { error: String(err) }));
        if (recentLooks.push(performance.now() - lookStart) > 8) recentLooks.shift();
      } while (again && !closed);
    })().finally(() => (ticking = null));
    return ticking;
  }

  /** This replica's runs of `kind`, and of them those in `r`'s group. */
  function held(kind: JobKind, r: JobRecord): { load: number; same: number } {
    const group = kind.group?.(r);
    let load = 0;
    let same = 0;
    for (const run of runs.values()) {
      if (run.rec.operation !== kind.name) continue;
      load++;
      if (group !== undefined && kind.group!(run.rec) === group) same++;
    }
    return { load, same };
  }

  /** Whether this replica takes `r` now, waiting for others since `since`: at once when it runs no job of its kind. */
  function due(kind: JobKind, r: JobRecord, since: number, now: number): boolean {
    const { load, same } = held(kind, r);
    return load === 0 || now - since >= spreadMs() * (load + same);
  }

  async function look(): Promise<void> {
    const active = (await timed(() => store.readActive())).sort((a, b) => a.createdAt - b.createdAt);
    const now = wallClock();
    const byId = new Map(store.mirrored().map((r) => [r.id, r]));
    for (const [id, run] of runs) {
      if (!run.handle || run.stopping || run.outcome || mineToRun(byId.get(id))) continue;
      const now = await store.read(id);
      if (!mineToRun(now)) void letGo(id);
    }
    overdue(now);
    // Records whose cancel was asked and that no replica runs: ended with their group, one settle a group.
    const settled = new Set<string>();
    for (const r of active) {
      const group = byName.get(r.operation)?.partOf?.(r) ?? r.id;
      if (r.cancelAt === undefined || runs.has(r.id) || !stopped(r, now) || settled.has(group)) continue;
      settled.add(group);
      await settle(r.id).catch((err: unknown) => log.error("cannot end a canceled job", { id: r.id, error: String(err) }));
    }
    const free = new Map(kinds.map((k) => [k.name, k.limit - [...runs.values()].filter((run) => run.rec.operation === k.name).length]));
    // A replica's own records from before its restart are its to resume at once; lapsed ones of
    // others count as queued since their lease ran out.
    for (const r of active) {
      if (closed || draining) return;
      if (r.status !== "Running" || runs.has(r.id) || r.cancelAt !== undefined) continue;
      const own = r.lease === undefined || r.lease.replica === me;
      if (!own && !lapsed(r.lease, now)) continue;
      const kind = byName.get(r.operation);
      if (kind && !own && ((free.get(kind.name) ?? 0) <= 0 || !due(kind, r, lapsesAt(r.lease!), now))) continue;
      if ((await claim(r, true)) && kind) free.set(kind.name, (free.get(kind.name) ?? 0) - 1);
    }
    for (const kind of kinds) {
      let left = free.get(kind.name) ?? 0;
      const queued = active.filter((r) => r.operation === kind.name && r.status === "Queued" && r.cancelAt === undefined);
      const running = new Map<string, number>();
      for (const r of active) if (r.operation === kind.name && r.status === "Running") running.set(tenantOfJob(r), (running.get(tenantOfJob(r)) ?? 0) + 1);
      const below = (r: JobRecord) => (running.get(tenantOfJob(r)) ?? 0) < opts.maxRunningJobsPerTenant;
      if (left <= 0 && queued.some(below)) yieldSlot(kind, running);
      while (left > 0 && !closed && !draining) {
        let ready = queued.filter((r) => due(kind, r, r.queuedAt ?? r.createdAt, now));
        // A tenant at its cap starts another only while no tenant below it waits.
        if (ready.some(below)) ready = ready.filter(below);
        if (ready.length === 0) break;
        const r = nextFair(ready, lastStart, (x) => held(kind, x).same > 0);
        queued.splice(queued.indexOf(r), 1);
        if (await claim(r, false)) {
          left--;
          running.set(tenantOfJob(r), (running.get(tenantOfJob(r)) ?? 0) + 1);
        }
      }
    }
    if (Math.random() < 0.01) await store.prune();
  }

  /**
   * A tenant below its cap waits for a slot of `kind` here: stop this replica's latest-started run
   * of a tenant above the cap, so that its record is Queued again and resumes later. Kinds whose
   * runs cannot resume keep running (their work would be lost); one run at a time.
   */
  function yieldSlot(kind: JobKind, running: Map<string, number>): void {
    if (kind.interrupted !== "resume" || [...runs.values()].some((run) => run.yielded && !run.outcome)) return;
    let last: Run | undefined;
    for (const run of runs.values()) {
      if (run.rec.operation !== kind.name || !run.handle || run.stopping || run.outcome) continue;
      if ((running.get(tenantOfJob(run.rec)) ?? 0) <= opts.maxRunningJobsPerTenant) continue;
      if (!last || (run.rec.startedAt ?? 0) > (last.rec.startedAt ?? 0)) last = run;
    }
    if (!last) return;
    last.yielded = true;
    log.info("queued a job again to give its slot to another tenant", { id: last.rec.id, operation: kind.name, tenant: tenantOfJob(last.rec) });
    void letGo(last.rec.id);
  }

  /** Cancel this replica's runs past max-job-seconds (from their start, which a takeover keeps), with the reason on their records. */
  function overdue(now: number): void {
    const maxMs = opts.maxJobSeconds * 1000;
    if (maxMs <= 0) return;
    for (const run of runs.values()) {
      if (run.overdue || run.stopping || run.outcome || run.rec.startedAt === undefined || now - run.rec.startedAt <= maxMs) continue;
      run.overdue = true;
      const reason = `the job ran longer than ${opts.maxJobSeconds} s (max-job-seconds) and was stopped; what it committed before stays`;
      void cancelJob(run.rec, reason).catch((err: unknown) => log.error("cannot stop a job past its run time", { id: run.rec.id, error: String(err) }));
    }
  }

  function admit(table: readonly string[], owner: string): void {
    const queued = store.mirrored().filter((r) => r.status === "Queued");
    if (queued.filter((r) => r.owner === owner).length >= opts.maxQueuedJobsPerCredential) {
      throw queueFull(`this credential already has ${opts.maxQueuedJobsPerCredential} background jobs queued (max-queued-jobs-per-credential); retry when some have started`);
    }
    if (queued.filter((r) => sameId(r.table, table)).length >= opts.maxQueuedJobsPerTable) {
      throw queueFull(`table ${JSON.stringify(objectIdOf(table))} already has ${opts.maxQueuedJobsPerTable} background jobs queued (max-queued-jobs-per-table); retry when some have started`);
    }
  }

  /** Whether no replica runs `r` now: never started, its lease let go or lapsed, or this replica's with no run here (a restart). */
  const stopped = (r: JobRecord, now: number) => r.status === "Queued" || lapsed(r.lease, now) || (r.lease!.replica === me && !runs.has(r.id));

  /** The record a cancel of `r` ends with: the one `r` is a part of while that one's cancel is asked, else `r` itself. */
  async function rootOf(r: JobRecord): Promise<JobRecord> {
    const parent = byName.get(r.operation)?.partOf?.(r);
    if (parent === undefined) return r;
    const p = await store.read(parent);
    return p && !isTerminal(p.status) && p.cancelAt !== undefined ? p : r;
  }

  /** `root` and its parts: those its kind lists, and the active records naming it (queued before it listed them). */
  async function groupOf(root: JobRecord): Promise<string[]> {
    const kind = byName.get(root.operation);
    if (!kind?.parts) return [root.id];
    const named = (await store.readActive()).filter((r) => byName.get(r.operation)?.partOf?.(r) === root.id).map((r) => r.id);
    return [...new Set([root.id, ...kind.parts(root), ...named])];
  }

  /** Ask a cancel of `id` and its parts, in one commit (Queued: Canceled at once; Running: its runs stop first). The record as stored after. */
  async function askCancel(id: string, cancelReason?: string): Promise<JobRecord | undefined> {
    const r = await store.read(id);
    if (!r || isTerminal(r.status) || r.cancelAt !== undefined) return r;
    const now = wallClock();
    const ids = await groupOf(r);
    // A Queued record with parts (queued again at a shutdown, its tasks running on) ends with them.
    const group = await store.updateMany(ids, (s) => {
      if (isTerminal(s.status) || s.cancelAt !== undefined) return undefined;
      if (s.id === id && s.status === "Queued" && ids.length === 1) return { ...s, status: "Canceled", finishedAt: now };
      return { ...s, cancelAt: now, cancelReason: s.id === id ? cancelReason : undefined };
    });
    await Promise.all(group.map(ended));
    return group.find((s) => s.id === id);
  }

  /**
   * Move the cancel of `id`'s group on: ask it of the parts not asked yet (queued meanwhile), stop
   * this replica's runs of it, and once no replica runs any, end them all in one commit (the root
   * with its kind's summary of its parts). A record whose lease lapsed counts as stopped: its replica
   * may commit nothing by then (see commitMarginMs), and a replica that renews such a lease after
   * the lapse keeps its record out of that commit (ended by the next settle).
   */
  async function settle(id: string): Promise<void> {
    const r = await store.read(id);
    if (!r || isTerminal(r.status) || r.cancelAt === undefined) return;
    const root = await rootOf(r);
    const ids = await groupOf(root);
    const askedAt = wallClock();
    const group = await store.updateMany(ids, (s) => (isTerminal(s.status) || s.cancelAt !== undefined ? undefined : { ...s, cancelAt: askedAt }));
    const live = group.filter((s) => !isTerminal(s.status) && !stopped(s, wallClock()));
    for (const s of live) if (runs.has(s.id)) void letGo(s.id);
    if (live.length > 0) return;
    const now = wallClock();
    const summary = byName.get(root.operation)?.summary?.(group.find((s) => s.id === root.id) ?? root, group.filter((s) => s.id !== root.id));
    const after = await store.updateMany(ids, (s) => {
      if (isTerminal(s.status) || s.cancelAt === undefined || !stopped(s, now)) return undefined;
      return canceled(s.id === root.id && summary ? { ...s, progress: { ...s.progress, ...summary } } : s, now);
    });
    failed(after.find((s) => s.id === root.id && s.finishedAt === now), "error");
    await Promise.all(after.map(ended));
  }

  /** Cancel `rec` and its parts; resolves with the stored record once its runs stopped. `reason`: Quiver's own (see JobRecord.cancelReason). */
  async function cancelJob(rec: JobRecord, reason?: string): Promise<JobRecord> {
    const r = await askCancel(rec.id, reason);
    if (!r) return rec;
    await untilEnded(r.id);
    return (await store.read(r.id)) ?? r;
  }

  /** Wait until `id`'s group stopped and ended; a run whose replica died ends when its lease lapses. */
  async function untilEnded(id: string): Promise<void> {
    if (runs.has(id)) await letGo(id);
    for (;;) {
      await settle(id);
      const r = await store.read(id);
      if (!r || isTerminal(r.status)) return;
      await new Promise((res) => setTimeout(res, cancelPollMs));
    }
  }

  return {
    start() {
      if (started) return Promise.resolve();
      started = true;
      timer = setInterval(() => void tick(), pollMs);
      timer.unref();
      renewTimer = setInterval(renew, pollMs);
      renewTimer.unref();
      return tick();
    },
    counts(visible) {
      const n = new Map<string, number>();
      for (const r of store.mirrored()) {
        const key = `${r.operation}\u0000${r.status}`;
        if (!visible || visible(objectIdOf(r.table))) n.set(key, (n.get(key) ?? 0) + 1);
      }
      return kinds.flatMap((k) => STATUSES.map((state) => ({ kind: k.name, state, count: n.get(`${k.name}\u0000${state}`) ?? 0 })));
    },
    runningHere() {
      return kinds.map((k) => ({ kind: k.name, running: [...runs.values()].filter((run) => run.rec.operation === k.name && !run.outcome).length, slots: k.limit }));
    },
    admit,
    async submit(kind, table, spec, owner, exclusive) {
      if (!byName.has(kind)) throw new Error(`unknown job kind ${JSON.stringify(kind)}`);
      admit(table, owner);
      const rec: JobRecord = { id: randomUUID(), status: "Queued", operation: kind, table, spec, owner, properties: {}, createdAt: wallClock() };
      if (exclusive) {
        const holder = await store.hold(exclusive.slot, rec.id);
        if (holder !== null) throw exclusive.busy(holder);
        rec.slot = exclusive.slot;
      }
      try {
        await store.insert(rec);
      } catch (err) {
        if (rec.slot) await store.release(rec.slot, rec.id);
        throw err;
      }
      void tick();
      return rec;
    },
    get: (id) => store.read(id),
    all: (of) => store.readAll(of),
    async retarget(from, to) {
      const ids = (await store.readAll({ table: from, active: true })).map((r) => r.id);
      if (ids.length > 0) await store.updateMany(ids, (s) => (isTerminal(s.status) || !sameId(s.table, from) ? undefined : { ...s, table: to }));
    },
    active: () => store.mirrored().filter((r) => !isTerminal(r.status)).sort((a, b) => a.createdAt - b.createdAt),
    async save(rec) {
      return (await store.update(rec.id, (s) => ({ ...s, properties: rec.properties }))) ?? rec;
    },
    cancel: (rec, reason) => cancelJob(rec, reason),
    reported(rec) {
      const end = rec.finishedAt ?? (rec.status === "Running" ? wallClock() : undefined);
      return {
        operation: rec.operation,
        table: objectIdOf(rec.table),
        created_at: iso(rec.createdAt),
        started_at: iso(rec.startedAt),
        finished_at: iso(rec.finishedAt),
        duration_ms: rec.startedAt !== undefined && end !== undefined ? String(end - rec.startedAt) : undefined,
        error_message: rec.error,
        cancel_requested_at: rec.status === "Running" ? iso(rec.cancelAt) : undefined,
        replica: rec.replica,
        ...byName.get(rec.operation)?.describe(rec),
      };
    },
    async drain() {
      draining = true;
      const now = wallClock();
      const unstarted = store.mirrored().filter((r) => mine(r) && !runs.has(r.id));
      await Promise.all(
        unstarted.map((r) =>
          apply(r.id, (s) => (mine(s) && !runs.has(s.id) && s.cancelAt === undefined ? { ...s, status: "Queued", queuedAt: now, lease: undefined } : undefined))
            .then(({ changed }) => changed && log.info("handed a job back at drain", { id: r.id, operation: r.operation }))
            .catch((err: unknown) => log.error("cannot hand a job back at drain", { id: r.id, error: String(err) })),
        ),
      );
    },
    async close() {
      closed = true;
      clearInterval(timer);
      clearInterval(renewTimer);
      await ticking;
      await renewing;
      await Promise.all(
        [...runs.entries()].map(async ([id, run]) => {
          await run.started;
          const resume = byName.get(run.rec.operation)?.interrupted === "resume";
          // A run asked to cancel stops first and then is Canceled (its last commit before its finishedAt).
          const canceling = !run.outcome && (await store.read(id))?.cancelAt !== undefined;
          if (canceling) await stopRun(run);
          // Otherwise stored first, so a replica that looks meanwhile queues it (or sees it Failed) instead of waiting for the lease.
          // A run that ended meanwhile keeps its outcome, and is not stopped.
          const now = wallClock();
          const end = (s: JobRecord): JobRecord =>
            run.outcome
              ? ending(s, run.outcome, now)
              : s.cancelAt !== undefined
                ? { ...s, lease: undefined }
                : resume
                  ? { ...s, status: "Queued", queuedAt: now, lease: undefined }
                  : { ...s, status: "Failed", finishedAt: now, error: SHUTDOWN_MESSAGE, lease: undefined };
          const { rec: r, changed } = await apply(id, (s) => (mine(s) ? end(s) : undefined));
          if (changed) failed(r, run.outcome ? "error" : "shutdown");
          if (!run.outcome && !canceling) await stopRun(run);
          await ended(r);
          if (r?.cancelAt !== undefined) await settle(id);
        }).map((p) => p.catch((err: unknown) => log.error("cannot record a job's stop", { error: String(err) }))),
      );
    },
  };
}
