// What stops a query: its deadline (--query-timeout-ms, or less where the request asks) and its
// client leaving. LanceDB is given the time left as its own query timeout, and every pull of a
// result batch is raced against both here, so the answer never waits for a batch the engine is
// still computing; once nothing pulls, the engine computes no further batch (docs/security.md,
// Query deadlines).
import { ApiError, Code } from "../errors.js";
import { recordEngineRead } from "../metrics.js";

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

// LanceDB's own timeout, from its query execution options.
const ENGINE_TIMEOUT = /Query timeout after \d+ ms/;

/**
 * A race of `within` still waiting, in the list of them soonest deadline first. One timer serves
 * the list: a timer of each race (a Timeout made, put in its list and cleared) was part of every
 * search's main-thread time (docs/performance.md).
 */
interface Race {
  bound: Bound;
  reject: (err: unknown) => void;
  onAbort: (() => void) | null;
  prev: Race | null;
  next: Race | null;
  listed: boolean;
}

const races: { head: Race | null; tail: Race | null; timer: ReturnType<typeof setTimeout> | null; timerAt: number } = { head: null, tail: null, timer: null, timerAt: Infinity };

function enlist(r: Race): void {
  // Most deadlines are the flag's from now, later than every one listed: found at the tail.
  let after = races.tail;
  while (after !== null && after.bound.deadline.at > r.bound.deadline.at) after = after.prev;
  r.prev = after;
  r.next = after === null ? races.head : after.next;
  if (after === null) races.head = r;
  else after.next = r;
  if (r.next === null) races.tail = r;
  else r.next.prev = r;
  r.listed = true;
  if (r.bound.deadline.at < races.timerAt) armRaces(r.bound.deadline.at);
}

/** Out of the list, and its abort listener removed. The timer is left as it is: it re-arms for the head when it fires. */
function unlist(r: Race): void {
  if (!r.listed) return;
  r.listed = false;
  if (r.prev === null) races.head = r.next;
  else r.prev.next = r.next;
  if (r.next === null) races.tail = r.prev;
  else r.next.prev = r.prev;
  r.prev = r.next = null;
  if (r.onAbort) r.bound.signal!.removeEventListener("abort", r.onAbort);
}

function armRaces(at: number): void {
  if (races.timer !== null) clearTimeout(races.timer);
  races.timerAt = at;
  // Timers count whole milliseconds and may fire a fraction early: a head not due yet re-arms it.
  // Not holding the process open: whoever awaits a race holds it (a socket, a caller).
  races.timer = setTimeout(expireRaces, Math.max(1, Math.ceil(at - performance.now()))).unref();
}

function expireRaces(): void {
  races.timer = null;
  races.timerAt = Infinity;
  const now = performance.now();
  while (races.head !== null && races.head.bound.deadline.at <= now) {
    const r = races.head;
    unlist(r);
    r.reject(deadlineExceeded(r.bound.deadline));
  }
  if (races.head !== null) armRaces(races.head.bound.deadline.at);
}

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
    const r: Race = { bound: b, reject, onAbort: null, prev: null, next: null, listed: false };
    if (b.signal) {
      r.onAbort = () => {
        unlist(r);
        reject(clientGone());
      };
      b.signal.addEventListener("abort", r.onAbort, { once: true });
    }
    enlist(r);
    work.then(
      (v) => {
        unlist(r);
        resolve(v);
      },
      (err) => {
        unlist(r);
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
