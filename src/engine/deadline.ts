// What stops a query: its deadline (--query-timeout-ms, or less where the request asks) and its
// client leaving. LanceDB is given the time left as its own query timeout, and every pull of a
// result batch is raced against both here, so the answer never waits for a batch the engine is
// still computing; once nothing pulls, the engine computes no further batch (docs/security.md,
// Query deadlines).
import { ApiError, Code } from "../errors.js";
import { recordEngineRead } from "../metrics.js";
import { clearAlarm, setAlarm } from "../util/alarms.js";

/** When a request must be answered by (performance.now() clock), and the limit it was given, in ms. */
export interface Deadline {
  at: number;
  ms: number;
}

/** A query's deadline, and the signal of its client leaving (null where one call serves several clients). */
export interface Bound {
  deadline: Deadline;
  signal: AbortSignal | null;
}

export const deadlineExceeded = (d: Deadline) =>
  new ApiError(
    Code.ServiceUnavailable,
    `the query did not finish within its deadline of ${d.ms} ms and was stopped (--query-timeout-ms, or a smaller x-request-timeout-ms header); narrow it with a filter or a limit`,
    503,
    { reason: "deadline" },
  );

export const clientGone = () => new ApiError(Code.InvalidInput, "client closed the connection");

/** Milliseconds left before `d`, at least 1 (LanceDB reads 0 as no timeout); throws once it has passed. */
export function msLeft(b: Bound): number {
  const left = b.deadline.at - performance.now();
  if (left <= 0) throw deadlineExceeded(b.deadline);
  if (b.signal?.aborted) throw clientGone();
  return Math.max(1, Math.ceil(left));
}

/**
 * Whether `work` settles (either way) by `at` (performance.now() clock); false at `at` otherwise.
 * `work` runs on regardless.
 */
export function settlesBy(work: Promise<unknown>, at: number): Promise<boolean> {
  if (at === Infinity) return work.then(() => true, () => true);
  if (performance.now() >= at) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const alarm = setAlarm(at, () => resolve(false));
    const done = () => {
      clearAlarm(alarm);
      resolve(true);
    };
    work.then(done, done);
  });
}

// LanceDB's own timeout, from its query execution options.
const ENGINE_TIMEOUT = /Query timeout after \d+ ms/;

/**
 * `work`, or the deadline's error once it passes, or the client's leaving; `work` is not stopped
 * by this, only no longer awaited (its engine call ends at its batch, and none follows).
 */
export function within<T>(work: Promise<T>, b: Bound): Promise<T> {
  try {
    msLeft(b);
  } catch (err) {
    work.catch(() => undefined);
    return Promise.reject(err);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      clearAlarm(alarm);
      reject(clientGone());
    };
    const settle = () => {
      clearAlarm(alarm);
      b.signal?.removeEventListener("abort", onAbort);
    };
    const alarm = setAlarm(b.deadline.at, () => {
      b.signal?.removeEventListener("abort", onAbort);
      reject(deadlineExceeded(b.deadline));
    });
    b.signal?.addEventListener("abort", onAbort, { once: true });
    work.then(
      (v) => {
        settle();
        resolve(v);
      },
      (err) => {
        settle();
        const late = performance.now() >= b.deadline.at || ENGINE_TIMEOUT.test(String((err as Error)?.message ?? err));
        reject(late ? deadlineExceeded(b.deadline) : err);
      },
    );
  });
}

/** One engine pull, counted in quiver_engine_reads_running until the engine answers it (whoever still waits). */
export function counted<T>(pull: Promise<T>): Promise<T> {
  recordEngineRead(1);
  const done = () => recordEngineRead(-1);
  pull.then(done, done);
  return pull;
}

/**
 * One request's work: its bound, whether it was answered already (at its deadline, or its client
 * left), and how many of its commits began. A commit begins only while the request is still
 * awaited, so a write answered at its deadline never commits after (docs/operations.md, Deadlines).
 */
export interface Work {
  bound: Bound;
  /** The flag that sets the deadline, named in the answer. */
  flag: string;
  answered: boolean;
  commits: number;
}

const QUERY_FLAG = "--query-timeout-ms";

/** A write stopped at its deadline, or its client leaving, before its commit began: none begins after. */
const abandoned = (why: string) =>
  new ApiError(Code.ServiceUnavailable, `${why}; none of its table commits had begun, and none begins after this answer: it may be retried`, 503, { reason: "deadline" });

/**
 * Called as a commit of `w` is about to begin (in its table's turn of writes): throws when `w` was
 * answered already, its deadline passed or its client left, and counts the commit otherwise.
 */
export function beginCommit(w: Work | null): void {
  if (w === null) return;
  if (w.answered || performance.now() >= w.bound.deadline.at || w.bound.signal?.aborted) {
    w.answered = true;
    throw abandoned(w.bound.signal?.aborted ? "the client closed the connection" : `the request did not finish within its deadline of ${w.bound.deadline.ms} ms (${w.flag}, or a smaller x-request-timeout-ms header)`);
  }
  w.commits++;
}

/** `commit` as a commit of `w` (a tag's, a branch's): begun only while `w` is still awaited (beginCommit). */
export async function requestCommit<T>(w: Work | null, commit: () => Promise<T>): Promise<T> {
  beginCommit(w);
  return commit();
}

/**
 * Called as a catalog commit of `w` is about to begin: its first commit is refused as beginCommit
 * refuses one; once one began, the rest of its change goes on (a rename's insert then remove, a
 * cascade's removals, a create's catalog row after its table's data), never left half made.
 */
export function beginCatalogCommit(w: Work | null): void {
  if (w !== null && w.commits > 0) w.commits++;
  else beginCommit(w);
}

/** The check a catalog write of `w` runs before each of its commits (the catalog's CommitCheck). */
export const catalogCheck = (w: Work | null) => () => beginCatalogCommit(w);

/**
 * `w`'s handler raced against its deadline and its client leaving. Past either the answer is the
 * deadline's 503 (or the client's leaving), the work is marked answered so no commit of it begins
 * after, and the answer says whether one had begun (it may then take effect: a retry under the same
 * Idempotency-Key gets its answer once it ends).
 */
export async function answerBy<T>(w: Work, work: Promise<T>): Promise<T> {
  try {
    return await within(work, w.bound);
  } catch (err) {
    // A deadline's timer inside the work may fire a fraction of a millisecond before this clock
    // reads the deadline (timers count whole milliseconds): its error is lateness too.
    const late = performance.now() >= w.bound.deadline.at || (err instanceof ApiError && err.reason === "deadline");
    if (!late && !w.bound.signal?.aborted) throw err;
    w.answered = true;
    if (!late) throw err;
    const past = `the request did not finish within its deadline of ${w.bound.deadline.ms} ms (${w.flag}, or a smaller x-request-timeout-ms header)`;
    if (w.commits > 0) {
      throw new ApiError(Code.ServiceUnavailable, `${past}; its commit had begun and may take effect: retry with the same Idempotency-Key to get its answer`, 503, { reason: "deadline" });
    }
    throw w.flag === QUERY_FLAG ? err : abandoned(past);
  }
}
