// Continuous batching of concurrent vector searches. Searches on one table handle whose specs are
// identical but for their query vectors (one each, or a client's multi_vector list) run as ONE
// multi-vector search: LanceDB plans each vector
// alone and unions the results with a `query_index` column, so every member's rows, distances and
// order are its own search's (checked by test/batching.test.ts). No timer: a search runs at once
// while its group has a free engine slot; when all slots are busy it waits, and each slot that
// frees takes everything waiting (up to the cap) as its next batch. A lone search never waits.
import type * as lancedb from "@lancedb/lancedb";
import { ApiError, Code } from "../errors.js";
import { log } from "../log.js";
import { recordSearchBatch } from "../metrics.js";
import { arrow } from "./arrow.js";
import { emptyIpcFile } from "./ipc-out.js";
import { runQuery, type QueryResult } from "./query.js";
import type { QuerySpec } from "./query-spec.js";

export interface SearchBatcher {
  /**
   * runQuery, sharing the engine call with compatible concurrent searches where it can. `gone`
   * says whether the client has left (asked before a waiting search is sent).
   */
  run(table: lancedb.Table, spec: QuerySpec, name: string, gone?: () => boolean): Promise<QueryResult>;
}

export interface BatchOptions {
  /** Most query vectors in one engine call; 0 or 1 turns batching off. */
  batchMax: number;
  /** Engine calls one group keeps running at once before searches start to wait. */
  slots: number;
}

interface Member {
  /** One vector, or a client's own multi_vector list. */
  vectors: number[][];
  /** When it arrived (performance.now()): its wait for an engine slot is recorded. */
  since: number;
  gone?: () => boolean;
  resolve(r: QueryResult): void;
  reject(e: unknown): void;
}

interface Group {
  running: number;
  waiting: Member[];
}

const QUERY_INDEX = "query_index";

/** A full-text or hybrid query has no multi-vector form, and k = 0 is answered from the plan alone. */
const batchable = (s: QuerySpec) => s.vectors !== null && s.fts === null && s.k !== 0;

/** Everything but the vectors; their length is in the key so a wrong-dimension vector only ever
 *  shares a batch with vectors of its own length (and then falls back to running alone). */
const keyOf = (s: QuerySpec) => JSON.stringify({ ...s, vectors: s.vectors![0].length, multi: null });

const closed = () => new ApiError(Code.InvalidInput, "client closed the connection");

async function collect(result: QueryResult): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of result) parts.push(c);
  return Buffer.concat(parts);
}

type Data = import("apache-arrow").Data;

/**
 * Each member's answer from a batch's result, as an Arrow IPC file: member i sent `counts[i]`
 * vectors, numbered after those of the members before it. Its rows keep the engine's order; the
 * query_index column is dropped for a one-vector member (the engine adds none to a one-vector
 * search) and renumbered from 0 for a member that sent several. Rows of one query arrive in
 * contiguous runs, so each run is a zero-copy slice.
 */
export function splitBatch(ipc: Uint8Array, counts: number[]): Uint8Array[] {
  const table = arrow.tableFromIPC(ipc);
  const fields = table.schema.fields;
  const qi = fields.findIndex((f) => f.name === QUERY_INDEX);
  if (qi < 0) throw new Error("multi-vector result without a query_index column");
  const owner: number[] = [];
  const base: number[] = [];
  counts.forEach((n, m) => {
    base.push(owner.length);
    for (let j = 0; j < n; j++) owner.push(m);
  });
  const single = new arrow.Schema(fields.filter((_, i) => i !== qi), table.schema.metadata);
  const schemaOf = (m: number) => (counts[m] > 1 ? table.schema : single);
  const parts: import("apache-arrow").RecordBatch[][] = counts.map(() => []);
  for (const batch of table.batches) {
    const idx = batch.getChildAt(qi)!.toArray() as Int32Array;
    const cols = batch.data.children;
    for (let start = 0; start < idx.length; ) {
      let end = start + 1;
      while (end < idx.length && idx[end] === idx[start]) end++;
      const m = owner[idx[start]];
      const len = end - start;
      const children: Data[] = [];
      cols.forEach((c, i) => {
        if (i !== qi) children.push(c.slice(start, len));
        else if (counts[m] > 1) children.push(arrow.makeData({ type: new arrow.Int32(), length: len, data: new Int32Array(len).fill(idx[start] - base[m]) }));
      });
      const schema = schemaOf(m);
      parts[m].push(new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: len, nullCount: 0, children })));
      start = end;
    }
  }
  return parts.map((p, m) => (p.length ? arrow.tableToIPC(new arrow.Table(schemaOf(m), p), "file") : emptyIpcFile(schemaOf(m))));
}

export function createSearchBatcher(opts: BatchOptions): SearchBatcher {
  const groups = new WeakMap<lancedb.Table, Map<string, Group>>();

  function groupOf(table: lancedb.Table, key: string): Group {
    let byKey = groups.get(table);
    if (!byKey) groups.set(table, (byKey = new Map()));
    let g = byKey.get(key);
    if (!g) byKey.set(key, (g = { running: 0, waiting: [] }));
    return g;
  }

  /** Members run one by one: the pass-through path, and the fallback when a batch fails. */
  const alone = (table: lancedb.Table, spec: QuerySpec, name: string, m: Member) =>
    runQuery(table, { ...spec, vectors: m.vectors, multi: m.vectors.length > 1 }, name).then(m.resolve, m.reject);

  /**
   * One engine call for `ms`. `release` frees the slot as soon as the engine is done, so the next
   * batch runs while this one's answers are split and encoded.
   */
  async function runBatch(table: lancedb.Table, spec: QuerySpec, name: string, ms: Member[], release: () => void): Promise<void> {
    if (ms.length === 1) return alone(table, spec, name, ms[0]).finally(release);
    let answers: Uint8Array[];
    try {
      const ipc = await runQuery(table, { ...spec, vectors: ms.flatMap((m) => m.vectors), multi: true }, name).then(collect).finally(release);
      answers = splitBatch(ipc, ms.map((m) => m.vectors.length));
    } catch (err) {
      // The engine refused the batch (or its result was not what a batch returns): each member
      // gets the answer, or the error, of its own search.
      log.debug("search batch refused; its searches run alone", { table: name, searches: ms.length, error: String((err as Error)?.message ?? err) });
      await Promise.all(ms.map((m) => alone(table, spec, name, m)));
      return;
    }
    log.debug("search batch", { table: name, searches: ms.length, vectors: ms.reduce((n, m) => n + m.vectors.length, 0) });
    ms.forEach((m, i) => m.resolve([answers[i]]));
  }

  function dispatch(table: lancedb.Table, spec: QuerySpec, name: string, g: Group, ms: Member[], key: string): void {
    g.running++;
    const now = performance.now();
    recordSearchBatch(
      ms.reduce((n, m) => n + m.vectors.length, 0),
      ms.map((m) => (now - m.since) / 1000),
    );
    void runBatch(table, spec, name, ms, () => {
      g.running--;
      next(table, spec, name, g, key);
    });
  }

  /** The next batch: waiting members, oldest first, up to batchMax vectors (at least one member). */
  function take(g: Group): Member[] {
    const out: Member[] = [];
    let vectors = 0;
    while (g.waiting.length && (out.length === 0 || vectors + g.waiting[0].vectors.length <= opts.batchMax)) {
      const m = g.waiting.shift()!;
      // A client that left while waiting is answered (for the log) and never sent to the engine.
      if (m.gone?.()) {
        m.reject(closed());
        continue;
      }
      vectors += m.vectors.length;
      out.push(m);
    }
    return out;
  }

  function next(table: lancedb.Table, spec: QuerySpec, name: string, g: Group, key: string): void {
    const ms = take(g);
    if (ms.length) dispatch(table, spec, name, g, ms, key);
    else if (g.running === 0) groups.get(table)?.delete(key);
  }

  return {
    run(table, spec, name, gone) {
      if (opts.batchMax < 2 || !batchable(spec)) return runQuery(table, spec, name);
      const key = keyOf(spec);
      const g = groupOf(table, key);
      return new Promise<QueryResult>((resolve, reject) => {
        const m: Member = { vectors: spec.vectors!, since: performance.now(), gone, resolve, reject };
        if (g.running < opts.slots) dispatch(table, spec, name, g, [m], key);
        else g.waiting.push(m);
      });
    },
  };
}
