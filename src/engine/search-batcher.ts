// Continuous batching of concurrent vector searches. Searches on one table handle whose specs are
// identical but for their query vectors (one each, or a client's multi_vector list) run as ONE
// multi-vector search: LanceDB plans each vector alone and unions the results with a
// `query_index` column, so every member's rows, distances and order are its own search's (checked
// by test/batching.test.ts). A lone search never waits: it runs at once when its group has no
// engine call running and none of its answered searches are on their way back. Otherwise a free
// slot takes the waiting searches only once they are a fair share (1/slots, rounded down) of the
// group's searches in flight, counting those just answered (their clients send the next one a
// moment later), and takes no more than that share rounded up: two batches of half the load
// overlap in the engine, where a straggler sent alone would cost a whole engine call and tip the
// load into batches of 1 and n - 1, and a batch sent at the first return into 2 and n - 2
// (docs/design.md, Query batching). The slots take turns: a call starts no sooner than an engine
// call's share after the last, so two calls never run in step. If the engine is idle and the
// awaited searches do not come back within half an engine call, what waits is sent. Searches are
// batched at all only while measurement says it helps on this machine (batch-choice.ts).
import type * as lancedb from "@lancedb/lancedb";
import { log } from "../log.js";
import { recordSearchBatch, recordSearchIdle } from "../metrics.js";
import { createBatchChoice, type BatchChoice } from "./batch-choice.js";
import { splitByQuery } from "./ipc-split.js";
import { runQuery, type QueryResult } from "./query.js";
import { clientGone, deadlineExceeded, within, type Bound, type Deadline } from "./deadline.js";
import type { QuerySpec, QueryVector } from "./query-spec.js";

export interface SearchBatcher {
  /**
   * runQuery, sharing the engine call with compatible concurrent searches where it can. `gone`
   * says whether the client has left (asked before a waiting search is sent). A search answers by
   * `b`'s deadline, waiting included; a shared engine call runs until its members' last deadline.
   */
  run(table: lancedb.Table, spec: QuerySpec, name: string, b: Bound, gone?: () => boolean): Promise<QueryResult>;
}

export interface BatchOptions {
  /** Most query vectors in one engine call; 0 or 1 turns batching off. */
  batchMax: number;
  /** Engine calls one group keeps running at once before searches start to wait. */
  slots: number;
  /** Whether batching helps, measured (by default) while serving. */
  choice?: BatchChoice;
}

interface Member {
  /** One vector, or a client's own multi_vector list. */
  vectors: QueryVector[];
  /** When it arrived (performance.now()): its wait for an engine slot is recorded. */
  since: number;
  deadline: Deadline;
  gone?: () => boolean;
  resolve(r: QueryResult): void;
  reject(e: unknown): void;
}

interface Group {
  running: number;
  /** Query vectors in the running engine calls, and in the waiting members. */
  runningVectors: number;
  waitingVectors: number;
  /** Query vectors answered and not yet followed by new searches: expected back shortly. */
  returning: number;
  /** How long the group's engine calls take, in ms (a moving average), and when the last started. */
  callMs: number;
  lastStart: number;
  /** Set while what waits is held: for returning searches, or for the slots' turn. */
  hold: ReturnType<typeof setTimeout> | null;
  waiting: Member[];
}

export const QUERY_INDEX = "query_index";

/** A full-text or hybrid query has no multi-vector form, and k = 0 is answered from the plan alone. */
const batchable = (s: QuerySpec) => s.vectors !== null && s.fts === null && s.k !== 0;

/** Everything but the vectors; their length is in the key so a wrong-dimension vector only ever
 *  shares a batch with vectors of its own length (and then falls back to running alone). */
const keyOf = (s: QuerySpec) => JSON.stringify({ ...s, vectors: s.vectors![0].length, multi: null });

/**
 * How long a free slot still waits for its turn, in ms: a call starts no sooner than an engine
 * call's share (1/slots) after the group's last one. Calls that start together contend for the
 * engine's same stages at once and return together, so their searches come back, and leave again,
 * together: in process, with a 2.5 ms pause after each call, two slots in step ran 0.80–0.83 of one
 * call's throughput, two taking turns 0.92–0.93 (docs/design.md, Query batching).
 */
function turnWait(g: Group, slots: number, now: number): number {
  return g.running > 0 ? g.lastStart + g.callMs / slots - now : 0;
}

async function collect(result: QueryResult): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of result) parts.push(c);
  return Buffer.concat(parts);
}

export function createSearchBatcher(opts: BatchOptions): SearchBatcher {
  const groups = new WeakMap<lancedb.Table, Map<string, Group>>();
  // Batching is kept only while it measurably helps (batch-choice.ts).
  const choice = opts.choice ?? createBatchChoice();

  function groupOf(table: lancedb.Table, key: string): Group {
    let byKey = groups.get(table);
    if (!byKey) groups.set(table, (byKey = new Map()));
    let g = byKey.get(key);
    if (!g) byKey.set(key, (g = { running: 0, runningVectors: 0, waitingVectors: 0, returning: 0, callMs: 0, lastStart: 0, hold: null, waiting: [] }));
    return g;
  }

  /** Members run one by one: the pass-through path, and the fallback when a batch fails. */
  const alone = (table: lancedb.Table, spec: QuerySpec, name: string, m: Member) =>
    runQuery(table, { ...spec, vectors: m.vectors, multi: m.vectors.length > 1 }, name, { deadline: m.deadline, signal: null }).then(m.resolve, m.reject);

  /**
   * One engine call for `ms`. `release` frees the slot as soon as the engine is done, so the next
   * batch runs while this one's answers are split and encoded.
   */
  async function runBatch(table: lancedb.Table, spec: QuerySpec, name: string, ms: Member[], release: () => void): Promise<void> {
    if (ms.length === 1) return alone(table, spec, name, ms[0]).finally(release);
    let answers: Uint8Array[][];
    try {
      const last = ms.reduce((d, m) => (m.deadline.at > d.at ? m.deadline : d), ms[0].deadline);
      const ipc = await runQuery(table, { ...spec, vectors: ms.flatMap((m) => m.vectors), multi: true }, name, { deadline: last, signal: null }).then(collect).finally(release);
      answers = splitByQuery(ipc, ms.map((m) => m.vectors.length), QUERY_INDEX);
    } catch (err) {
      // The engine refused the batch (or its result was not what a batch returns, or has a column
      // that cannot be split by rows): each member gets the answer, or the error, of its own search.
      log.debug("search batch refused; its searches run alone", { table: name, searches: ms.length, error: String((err as Error)?.message ?? err) });
      await Promise.all(ms.map((m) => alone(table, spec, name, m)));
      return;
    }
    log.debug("search batch", { table: name, searches: ms.length, vectors: ms.reduce((n, m) => n + m.vectors.length, 0) });
    ms.forEach((m, i) => m.resolve(answers[i]));
  }

  // Engine calls of batchable searches running, over all groups, and since when there were none:
  // the engine's idle time between batches, recorded at the start of the next. Searches sent alone
  // while batching is off count as calls too: else the time they ran read as idle at the next batch.
  let calls = 0;
  let idleSince = -1;
  const callStarts = (now: number) => {
    if (calls++ === 0 && idleSince >= 0) recordSearchIdle((now - idleSince) / 1000);
  };
  const callEnds = (end: number) => {
    if (--calls === 0) idleSince = end;
  };

  function dispatch(table: lancedb.Table, spec: QuerySpec, name: string, g: Group, ms: Member[], key: string): void {
    const vectors = ms.reduce((n, m) => n + m.vectors.length, 0);
    const now = performance.now();
    callStarts(now);
    g.running++;
    g.runningVectors += vectors;
    g.lastStart = now;
    recordSearchBatch(
      vectors,
      ms.map((m) => (now - m.since) / 1000),
    );
    void runBatch(table, spec, name, ms, () => {
      const end = performance.now();
      callEnds(end);
      g.running--;
      g.runningVectors -= vectors;
      g.returning += vectors;
      g.callMs = g.callMs === 0 ? end - now : g.callMs + (end - now - g.callMs) / 5;
      next(table, spec, name, g, key);
    });
  }

  /** Query vectors of the group in flight: running, waiting, and answered ones on their way back. */
  const inFlight = (g: Group) => g.runningVectors + g.waitingVectors + g.returning;
  /** The most query vectors one engine call takes: the group's fair share, rounded up. */
  const share = (g: Group) => Math.min(opts.batchMax, Math.ceil(inFlight(g) / opts.slots));

  /** The next batch: waiting members, oldest first, up to a fair share (at least one member). */
  function take(g: Group): Member[] {
    const out: Member[] = [];
    const most = share(g);
    let vectors = 0;
    while (g.waiting.length && (out.length === 0 || vectors + g.waiting[0].vectors.length <= most)) {
      const m = g.waiting.shift()!;
      g.waitingVectors -= m.vectors.length;
      // A client that left while waiting is answered (for the log) and never sent to the engine;
      // one past its deadline was answered already.
      if (m.gone?.() || performance.now() >= m.deadline.at) {
        m.reject(m.gone?.() ? clientGone() : deadlineExceeded(m.deadline));
        continue;
      }
      vectors += m.vectors.length;
      out.push(m);
    }
    return out;
  }

  /** Whether a free slot takes the waiting searches now (see the head of this file). */
  function ready(g: Group): boolean {
    if (g.running >= opts.slots || g.waiting.length === 0) return false;
    if (g.running === 0 && g.returning === 0) return true;
    // Rounded down here: with 33 in flight and two slots, 16 waiting go while 17 run. Rounded up,
    // they waited for the running call to end, and the engine ran one call at a time.
    return g.waitingVectors >= Math.min(opts.batchMax, Math.max(1, Math.floor(inFlight(g) / opts.slots)));
  }

  function next(table: lancedb.Table, spec: QuerySpec, name: string, g: Group, key: string): void {
    if (g.hold) clearTimeout(g.hold);
    g.hold = null;
    while (ready(g)) {
      const wait = turnWait(g, opts.slots, performance.now());
      // A turn shorter than a timer's millisecond is not waited for (calls of a millisecond or two).
      if (wait >= 1) {
        g.hold = setTimeout(() => next(table, spec, name, g, key), Math.ceil(wait));
        return;
      }
      const ms = take(g);
      if (ms.length) dispatch(table, spec, name, g, ms, key);
    }
    if (g.running > 0) return;
    if (g.waiting.length === 0 && g.returning === 0) {
      groups.get(table)?.delete(key);
      return;
    }
    // The engine is idle for this group: what waits is held for the searches on their way back,
    // and they are expected no longer than half an engine call (a client that stops never is).
    g.hold = setTimeout(() => {
      g.returning = 0;
      next(table, spec, name, g, key);
    }, g.callMs / 2);
  }

  return {
    run(table, spec, name, b, gone) {
      if (opts.batchMax < 2 || !batchable(spec)) return runQuery(table, spec, name, b);
      const since = performance.now();
      const batched = choice.batching(since);
      const timed = (p: Promise<QueryResult>) =>
        p.then((r) => {
          const now = performance.now();
          choice.done(batched, now - since, now);
          return r;
        });
      if (!batched) {
        // A top-k search's answer is whole when its first batch is ready: the call ends then.
        callStarts(since);
        return timed(runQuery(table, spec, name, b).finally(() => callEnds(performance.now())));
      }
      const key = keyOf(spec);
      const g = groupOf(table, key);
      return timed(
        within(new Promise<QueryResult>((resolve, reject) => {
          const m: Member = { vectors: spec.vectors!, since, deadline: b.deadline, gone, resolve, reject };
          g.waiting.push(m);
          g.waitingVectors += m.vectors.length;
          g.returning = Math.max(0, g.returning - m.vectors.length);
          next(table, spec, name, g, key);
        }), b),
      );
    },
  };
}
