// Background work tracked as transactions, by kind. Each kind registers itself (name, how many
// run at once, what happens to a run interrupted by a restart, how to start one and what its
// record shows); this module knows no kind. Records wait as Queued in submission order until
// their kind has a free slot, taken fairly between owners (see nextFair); every state change is
// persisted before it is reported. Queued records are bounded per owner and per table.
import { randomUUID } from "node:crypto";
import { objectIdOf, sameId } from "../catalog/names.js";
import { ApiError, Code } from "../errors.js";
import { log } from "../log.js";
import { recordJobRows } from "../metrics.js";
import { isTerminal, openStore, STATUSES, type JobRecord } from "./store.js";

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
}

export interface JobKind<S = any> {
  /** The record's `operation`, e.g. "create_index". */
  name: string;
  /** Jobs of this kind running at once; more wait as Queued. */
  limit: number;
  /**
   * A record left Running by a restart or shutdown: "resume" queues it again (start() continues
   * from its progress), "fail" marks it Failed (its work died with the process).
   */
  interrupted: "resume" | "fail";
  start(job: JobContext<S>): Promise<Running>;
  /** The properties DescribeTransaction reports for a record of this kind (undefined: not shown). */
  describe(rec: JobRecord & { spec: S }): Record<string, string | undefined>;
}

/** How many records may wait as Queued at once (Config's max-queued-jobs-per-*). */
export interface QueueBounds {
  maxQueuedJobsPerCredential: number;
  maxQueuedJobsPerTable: number;
}

export interface Jobs {
  /**
   * Recover the records a previous process left Running and begin running jobs: called once the
   * server listens, so a second start on a taken port (which fails there) never touches the live
   * server's jobs. Until then jobs are accepted and stay Queued.
   */
  start(): void;
  /** 503 Slow down when a job for `owner` on `table` would pass the queue bounds now (submit checks too). */
  admit(table: readonly string[], owner: string): void;
  /** Queue a job for `owner` (see JobRecord.owner); 503 Slow down past the queue bounds. */
  submit(kind: string, table: string[], spec: Record<string, unknown>, owner: string): Promise<JobRecord>;
  get(id: string): JobRecord | undefined;
  /** Every record kept (finished ones too, up to the store's retention). */
  all(): JobRecord[];
  /** Queued and Running records, oldest first. */
  active(): JobRecord[];
  /** Persist a changed record (properties set through AlterTransaction). */
  save(rec: JobRecord): Promise<void>;
  /** Cancel a Queued or Running record; it is Canceled when this resolves. */
  cancel(rec: JobRecord): Promise<void>;
  /** The properties Quiver reports for a record (read-only to clients), by key. */
  reported(rec: JobRecord): Record<string, string | undefined>;
  /** Records kept, by kind and status; every registered kind and status, zeros included. */
  counts(): { kind: string; state: string; count: number }[];
  /** Stop running work for a shutdown: resumable jobs are queued again, the others fail. */
  close(): Promise<void>;
}

/** Rows a job has processed so far, as its progress counts them (cumulative `rows_done`). */
const rowsDone = (progress: Record<string, unknown> | undefined) => (typeof progress?.rows_done === "number" ? progress.rows_done : 0);

const RESTART_MESSAGE = "interrupted by a server restart";
const SHUTDOWN_MESSAGE = "interrupted by a server shutdown";

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The owner of follow-up work Quiver queues itself after writes to table `id`. */
export const autoOwner = (id: readonly string[]) => `auto:${objectIdOf(id)}`;

/** A full queue: try again once some of the queued work has started. */
const RETRY_AFTER_S = 5;

const queueFull = (message: string) => new ApiError(Code.ServiceUnavailable, message, 503, { retryAfterS: RETRY_AFTER_S, reason: "job_queue" });

/**
 * The queued record to start next: the oldest one of the owner whose last start is longest ago
 * (an owner never started first), so owners take turns however many jobs each has queued.
 * `queued` is in submission order.
 */
function nextFair(queued: JobRecord[], lastStart: Map<string, number>): JobRecord {
  let best = queued[0];
  let bestAt = lastStart.get(best.owner ?? "") ?? -Infinity;
  for (const r of queued) {
    const at = lastStart.get(r.owner ?? "") ?? -Infinity;
    if (at < bestAt) [best, bestAt] = [r, at];
  }
  return best;
}

export function openJobs(dir: string, kinds: JobKind[], describeError: (err: unknown) => string, bounds: QueueBounds): Jobs {
  const store = openStore(dir);
  const byName = new Map(kinds.map((k) => [k.name, k]));
  const running = new Map<string, Running>();
  /** When each owner's job last started (this process), for nextFair. */
  const lastStart = new Map<string, number>();
  let closed = false;

  const finish = async (rec: JobRecord, status: "Succeeded" | "Failed" | "Canceled", error?: string) => {
    rec.status = status;
    rec.finishedAt = Date.now();
    if (error !== undefined) rec.error = error;
    await store.put(rec);
  };

  /** `rec` was claimed (set Running) by pump(); it may be canceled at any await below. */
  async function start(kind: JobKind, rec: JobRecord): Promise<void> {
    await store.put(rec);
    if (rec.status !== "Running") return;
    const report = (progress: Record<string, unknown>) => {
      const before = rowsDone(rec.progress);
      rec.progress = { ...rec.progress, ...progress };
      recordJobRows(rec.operation, rowsDone(rec.progress) - before);
      return store.put(rec);
    };
    let handle: Running;
    try {
      handle = await kind.start({ rec, report });
    } catch (err) {
      if (rec.status === "Running") await finish(rec, "Failed", describeError(err));
      return;
    }
    running.set(rec.id, handle);
    // Canceled while it was starting: the handle did not exist yet when cancel() ran.
    if ((rec.status as string) !== "Running") await handle.stop();
    try {
      await handle.done;
      if (rec.status === "Running") await finish(rec, "Succeeded");
    } catch (err) {
      if (rec.status === "Running") await finish(rec, "Failed", describeError(err));
    }
  }

  function pump(): void {
    if (closed || !started) return;
    const all = store.all().sort((a, b) => a.createdAt - b.createdAt);
    for (const kind of kinds) {
      let slots = kind.limit - all.filter((r) => r.operation === kind.name && r.status === "Running").length;
      const queued = all.filter((r) => r.operation === kind.name && r.status === "Queued");
      for (; slots > 0 && queued.length > 0; slots--) {
        const rec = nextFair(queued, lastStart);
        queued.splice(queued.indexOf(rec), 1);
        rec.status = "Running"; // claimed now, so a second pump() does not start it too
        rec.startedAt = Date.now();
        lastStart.set(rec.owner ?? "", rec.startedAt);
        void start(kind, rec)
          .catch((err: unknown) => log.error("job failed to run", { id: rec.id, error: String(err) }))
          .finally(() => {
            running.delete(rec.id);
            pump();
          });
      }
    }
  }

  function admit(table: readonly string[], owner: string): void {
    const queued = store.all().filter((r) => r.status === "Queued");
    if (queued.filter((r) => r.owner === owner).length >= bounds.maxQueuedJobsPerCredential) {
      throw queueFull(`this credential already has ${bounds.maxQueuedJobsPerCredential} background jobs queued (max-queued-jobs-per-credential); retry when some have started`);
    }
    if (queued.filter((r) => sameId(r.table, table)).length >= bounds.maxQueuedJobsPerTable) {
      throw queueFull(`table ${JSON.stringify(objectIdOf(table))} already has ${bounds.maxQueuedJobsPerTable} background jobs queued (max-queued-jobs-per-table); retry when some have started`);
    }
  }

  let started = false;
  /** Recover what a previous process left behind (resumable runs queue again, the others failed) and begin running jobs. */
  function startJobs(): void {
    if (started) return;
    started = true;
    const now = Date.now();
    const fail = (r: JobRecord, error: string) => Object.assign(r, { status: "Failed", finishedAt: now, error });
    const recovered: JobRecord[] = [];
    for (const r of store.all()) {
      if (isTerminal(r.status)) continue;
      const kind = byName.get(r.operation);
      if (!kind) fail(r, `unknown job kind ${JSON.stringify(r.operation)}`);
      else if (r.status !== "Running") continue;
      else if (kind.interrupted === "resume") r.status = "Queued";
      else fail(r, RESTART_MESSAGE);
      recovered.push(r);
    }
    void Promise.all(recovered.map((r) => store.put(r))).then(pump, (err: unknown) =>
      log.error("cannot persist job records", { error: String(err) }),
    );
  }

  return {
    start: startJobs,
    counts() {
      const n = new Map<string, number>();
      for (const r of store.all()) n.set(`${r.operation}\u0000${r.status}`, (n.get(`${r.operation}\u0000${r.status}`) ?? 0) + 1);
      return kinds.flatMap((k) => STATUSES.map((state) => ({ kind: k.name, state, count: n.get(`${k.name}\u0000${state}`) ?? 0 })));
    },
    admit,
    async submit(kind, table, spec, owner) {
      if (!byName.has(kind)) throw new Error(`unknown job kind ${JSON.stringify(kind)}`);
      admit(table, owner);
      const rec: JobRecord = { id: randomUUID(), status: "Queued", operation: kind, table, spec, owner, properties: {}, createdAt: Date.now() };
      await store.put(rec);
      pump();
      return rec;
    },
    get: (id) => store.get(id),
    all: () => store.all(),
    active: () => store.all().filter((r) => !isTerminal(r.status)).sort((a, b) => a.createdAt - b.createdAt),
    save: (rec) => store.put(rec),
    async cancel(rec) {
      if (isTerminal(rec.status)) return;
      await finish(rec, "Canceled");
      await running.get(rec.id)?.stop();
    },
    reported(rec) {
      const end = rec.finishedAt ?? (rec.status === "Running" ? Date.now() : undefined);
      return {
        operation: rec.operation,
        table: objectIdOf(rec.table),
        created_at: iso(rec.createdAt),
        started_at: iso(rec.startedAt),
        finished_at: iso(rec.finishedAt),
        duration_ms: rec.startedAt !== undefined && end !== undefined ? String(end - rec.startedAt) : undefined,
        error_message: rec.error,
        ...byName.get(rec.operation)?.describe(rec),
      };
    },
    async close() {
      closed = true;
      const now = Date.now();
      const stopping: Promise<void>[] = [];
      for (const r of store.all()) {
        if (r.status !== "Running") continue;
        if (byName.get(r.operation)?.interrupted === "resume") {
          r.status = "Queued";
          const h = running.get(r.id);
          if (h) stopping.push(h.stop().catch(() => undefined));
        } else Object.assign(r, { status: "Failed", finishedAt: now, error: SHUTDOWN_MESSAGE });
        stopping.push(store.put(r));
      }
      await Promise.all(stopping);
      await store.close();
    },
  };
}
