// Pool tasks of the serving index (src/serving/indexes.ts): reading a saved index into its shared
// memory, writing rows into it (one writer at a time per index), mapping its row ids to slots after a build or a load,
// evaluating a filter over its records into a shared bitmap, and searching it (any number at
// once), answering each search as the Arrow IPC file the engine would send, so the main thread
// only passes bytes on.
import { readSync } from "node:fs";
import { BroadcastChannel } from "node:worker_threads";
import { arrow } from "../engine/arrow.js";
import { calibrationHits, checkSaved, connect, graphOf, link, refresh, rowIdOf, search, type Graph } from "./graph.js";
import { concatNumbers } from "../util/typed-concat.js";
import { moved } from "../util/moved.js";
import { rowsAt, type RowsAt } from "./row-slots.js";
import { applyBatch, encodeAnswer, knownOf, type Applied, type AnswerPlan, type CachedColumn, type Found } from "./rows.js";
import { filterPlan, runFilter, type FilterTask, type ValueIndex } from "./predicate.js";

/** An index as a task names it: its memory, and a key for this thread's view of it. */
export interface IndexRef {
  key: string;
  memory: WebAssembly.Memory;
  columns: CachedColumn[];
}

const views = new Map<string, Graph>();
// An index replaced or dropped: its view goes, so its memory can be freed.
const dropped = new BroadcastChannel("quiver-serving");
dropped.onmessage = (e) => views.delete((e as { data: string }).data);
dropped.unref();

function viewOf(ix: IndexRef): Graph {
  let g = views.get(ix.key);
  if (!g) {
    // Views of indexes that were dropped or rebuilt go with their keys; a handful stay.
    if (views.size >= 16) views.delete(views.keys().next().value!);
    views.set(ix.key, (g = graphOf(ix.memory)));
  }
  return g;
}

export interface LoadTask {
  /** The saved index's file, open on the main thread (so the file checked there is the one read). */
  fd: number;
  /** Where its index bytes start, and how many there are. */
  at: number;
  bytes: number;
  /** An empty memory of that size (graph.ts, savedGraphMemory). */
  memory: WebAssembly.Memory;
}

/** Read a saved index's bytes straight into its memory and check them: O(bytes), off the event loop. */
export function servingLoad(task: LoadTask): void {
  const into = new Uint8Array(task.memory.buffer, 0, task.bytes);
  for (let done = 0; done < task.bytes; ) {
    const n = readSync(task.fd, into, done, task.bytes - done, task.at + done);
    if (n === 0) throw new Error("serving index: its saved file ends early");
    done += n;
  }
  checkSaved(task.memory, task.bytes);
}

export interface ApplyTask {
  index: IndexRef;
  vectorColumn: string;
  /** The table version the rows are part of from. */
  version: number;
  /** Arrow IPC files of rows with `_rowid`, the vector column and the cached columns. */
  batches: Uint8Array[];
  /** Slots of rows gone at the version (a row equal to one is that row moved: its row id changed). */
  removed: Int32Array;
  /** Rows still there that may have changed: their row ids and slots. */
  changedIds: BigUint64Array;
  changedSlots: Int32Array;
  /** Link each new row at once (a sync); a build links them afterwards, in several threads (servingLink). */
  link: boolean;
}

/** Write rows into the index (rows.ts, applyBatch). One writer at a time per index. */
export function servingApply(task: ApplyTask): Applied {
  const g = viewOf(task.index);
  refresh(g);
  const known = knownOf(g, task.removed, task.changedIds, task.changedSlots);
  const out: Applied = { remapSlots: [], remapIds: [], replaced: [], written: 0, vectorless: [] };
  for (const bytes of task.batches) {
    for (const batch of arrow.tableFromIPC(bytes).batches) applyBatch(g, task.index.columns, batch, task.vectorColumn, task.version, known, out, task.link);
  }
  return out;
}

export interface LinkTask {
  index: IndexRef;
  lane: number;
  /** Slots [from, to) to link: written, with their levels, not linked yet. */
  from: number;
  to: number;
}

/** Link written slots into the graph; other threads link other slots of the same index meanwhile. */
export function servingLink(task: LinkTask): void {
  const g = viewOf(task.index);
  for (let s = task.from; s < task.to; s++) link(g, s, task.lane);
}

export interface CalibrateTask {
  index: IndexRef;
  lane: number;
  /** Rows held out as queries (graph.ts, calibrationSample), searched at each width at `version`. */
  sample: Int32Array;
  widths: number[];
  version: number;
}

/** The nearest rows searches at each width found, then those there were (graph.ts, calibrationHits). */
export function servingCalibrate(task: CalibrateTask): Int32Array {
  return calibrationHits(viewOf(task.index), task.lane, task.sample, task.widths, task.version);
}

/** Link the live rows no walk reaches (graph.ts, connect), as the index's writer; returns how many. */
export function servingConnect(task: { index: IndexRef }): number {
  const g = viewOf(task.index);
  refresh(g);
  return connect(g, 0);
}

export interface RowsTask {
  index: IndexRef;
  version: number;
}

/** The row-id map of the slots alive at `version` (row-slots.ts, rowsAt), its buckets moved: a pass over every slot, off the event loop. */
export function servingRows(task: RowsTask): RowsAt {
  const g = viewOf(task.index);
  refresh(g);
  const rows = rowsAt(g, task.version);
  return moved(rows, [rows.buckets.buffer]);
}

export interface ServingFilterTask extends FilterTask {
  index: IndexRef;
}

/** Whether the serving index evaluates a filter itself (predicate.ts, filterPlan): its parse is as long as the filter. */
export const servingFilterPlan = filterPlan;

/** Evaluate a filter over an index's records (predicate.ts, runFilter): the slots passing, and its value index as extended (its arrays shared, not copied). */
export function servingFilter(task: ServingFilterTask): { passing: number; values: ValueIndex | null } {
  return runFilter(viewOf(task.index), task);
}

/** One search: its query vectors and what it admits. */
export interface SearchQuery {
  /** The query vectors, one after another. */
  vectors: Float32Array;
  k: number;
  offset: number;
  ef: number;
  exact: boolean;
  version: number;
  bits: Uint32Array | null;
  passing: number;
  postfilter: boolean;
  lower: number;
  upper: number;
}

export interface SearchTask {
  index: IndexRef;
  lane: number;
  plan: AnswerPlan;
  queries: SearchQuery[];
  /** Answer with the rows found (row ids and distances) for the caller to complete, not an IPC file. */
  hitsOnly: boolean;
}

/** Rows found for a search answered by the caller (columns the index does not cache). */
export type FoundRows = Found;

export function servingSearch(task: SearchTask): (Uint8Array | FoundRows)[] {
  const g = viewOf(task.index);
  return task.queries.map((q) => {
    const n = q.vectors.length / g.dim;
    const found = Array.from({ length: n }, (_, i) => {
      const r = search(g, task.lane, q.vectors.subarray(i * g.dim, (i + 1) * g.dim), { ...q, k: q.k + q.offset });
      return { slots: r.slots.subarray(q.offset), distances: r.distances.subarray(q.offset) };
    });
    const slots = concatNumbers(found.map((f) => f.slots), Int32Array);
    const distances = concatNumbers(found.map((f) => f.distances), Float32Array);
    const queries = Int32Array.from(found.flatMap((f, i) => Array.from(f.slots, () => i)));
    if (task.hitsOnly) return { rowIds: BigUint64Array.from(slots, (s) => rowIdOf(g, s)), distances, queries };
    return encodeAnswer(g, task.index.columns, task.plan, { slots, distances, queries });
  });
}
