// The threads that search the serving indexes: a Piscina pool of `--workers` threads running the
// tasks of src/serving/thread.ts. A thread runs one task at a time; searches that arrive while
// every thread is busy wait here and leave together in the next free thread's task (one task
// hop, ~65 µs of Piscina's, shared by all of them), taking turns between the answer plans they
// wait under. Each search task gets a scratch lane of the index memory of its own.
import { Piscina } from "piscina";
import type { Applied, AnswerPlan } from "./rows.js";
import { LANES } from "./graph.js";
import { recordPoolTask } from "../metrics.js";
import type { FilterSource, Operand, ValueIndex } from "./predicate.js";
import type { RowsAt } from "./row-slots.js";
import type { ApplyTask, CalibrateTask, FoundRows, IndexRef, LinkTask, LoadTask, RowsTask, SearchQuery, SearchTask, ServingFilterTask } from "./thread.js";

export interface ServingPool {
  /** Read a saved index's file into its memory (store.ts, loadIndex), as the index's writer. */
  load(task: LoadTask): Promise<void>;
  /** Write rows into an index (the caller keeps one writer at a time per index). */
  apply(task: ApplyTask): Promise<Applied>;
  /** Link written slots [from, to) of an index (tasks of one build run on every thread at once). */
  link(index: IndexRef, from: number, to: number): Promise<void>;
  /** Of rows held out as queries, the nearest rows searches at each width found, then those there were (a calibration's part). */
  calibrate(index: IndexRef, sample: Int32Array, widths: number[], version: number): Promise<Int32Array>;
  /** Link the live rows no walk reaches (as the index's writer, after a build or between syncs); returns how many. */
  connect(index: IndexRef): Promise<number>;
  /** The map of an index's row ids to its slots alive at `version`, after a build or a load (no writer may run meanwhile). */
  rows(index: IndexRef, version: number): Promise<RowsAt>;
  /** Whether the index evaluates a filter itself, and the column of the value index it looks up. */
  filterPlan(source: FilterSource): Promise<{ point: Operand | null } | null>;
  /** Evaluate a filter over an index's records into a shared bitmap (the caller keeps one task at a time per value index). */
  filter(task: ServingFilterTask): Promise<{ passing: number; values: ValueIndex | null }>;
  /** One search: an IPC answer, or the rows found when `hitsOnly`. */
  search(index: IndexRef, plan: AnswerPlan, query: SearchQuery, hitsOnly: boolean): Promise<Uint8Array | FoundRows>;
  /** Threads, tasks running, searches waiting. */
  stats(): { threads: number; busy: number; queued: number };
  /** Threads the pool runs (tasks at once). */
  size: number;
  destroy(): Promise<void>;
}

interface Waiting {
  query: SearchQuery;
  resolve(r: Uint8Array | FoundRows): void;
  reject(e: unknown): void;
}

interface Group {
  index: IndexRef;
  plan: AnswerPlan;
  hitsOnly: boolean;
  waiting: Waiting[];
}

/** Most searches one task takes: enough to spread a burst over the threads, not to hold one long. */
const MOST_A_TASK = 32;

export function createServingPool(threads: number, workerHeapMb?: number): ServingPool {
  // Lane 0 is the writer's; a search task takes another, so threads past LANES - 1 would idle.
  const size = Math.min(threads, LANES - 1);
  const pool = new Piscina({
    // dist/src/serving/pool.js → dist/src/serving/thread.js
    filename: new URL("./thread.js", import.meta.url).href,
    minThreads: size,
    maxThreads: size,
    idleTimeout: 2 ** 31 - 1,
    ...(workerHeapMb ? { resourceLimits: { maxOldGenerationSizeMb: workerHeapMb } } : {}),
  });
  const lanes = Array.from({ length: LANES - 1 }, (_, i) => LANES - 1 - i);
  const groups = new Map<string, Group>();
  let running = 0;
  let queued = 0;

  function next(): void {
    while (running < size && queued > 0) {
      // The group first in line: the one whose key was queued first (Map order), moved to the back.
      const [key, g] = groups.entries().next().value!;
      groups.delete(key);
      const take = Math.min(MOST_A_TASK, Math.max(1, Math.ceil(queued / size)), g.waiting.length);
      const batch = g.waiting.splice(0, take);
      queued -= batch.length;
      if (g.waiting.length) groups.set(key, g);
      void runSearches(g, batch);
    }
  }

  async function runSearches(g: Group, batch: Waiting[]): Promise<void> {
    running++;
    const lane = lanes.pop()!;
    const started = performance.now();
    try {
      const task: SearchTask = { index: g.index, lane, plan: g.plan, queries: batch.map((w) => w.query), hitsOnly: g.hitsOnly };
      const answers = (await pool.run(task, { name: "servingSearch" })) as (Uint8Array | FoundRows)[];
      batch.forEach((w, i) => w.resolve(answers[i]));
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      lanes.push(lane);
      running--;
      recordPoolTask("serving_search", (performance.now() - started) / 1000);
      next();
    }
  }

  /** A task without a scratch lane of the searches' (an index's one writer's, or a filter's). */
  async function writerTask(name: string, metric: string, task: unknown, transferList: ArrayBuffer[]): Promise<unknown> {
    running++;
    const started = performance.now();
    try {
      return await pool.run(task, { name, transferList });
    } finally {
      running--;
      recordPoolTask(metric, (performance.now() - started) / 1000);
      next();
    }
  }

  /** A task that walks the graph beside the searches, in a scratch lane of its own. */
  async function laneTask<T>(name: string, metric: string, task: (lane: number) => LinkTask | CalibrateTask): Promise<T> {
    running++;
    const lane = lanes.pop()!;
    const started = performance.now();
    try {
      return (await pool.run(task(lane), { name })) as T;
    } finally {
      lanes.push(lane);
      running--;
      recordPoolTask(metric, (performance.now() - started) / 1000);
      next();
    }
  }

  return {
    load: (task) => writerTask("servingLoad", "serving_load", task, []) as Promise<void>,
    apply: (task) => writerTask("servingApply", "serving_apply", task, task.batches.map((b) => b.buffer as ArrayBuffer)) as Promise<Applied>,
    link: (index, from, to) => laneTask("servingLink", "serving_link", (lane) => ({ index, lane, from, to })),
    calibrate: (index, sample, widths, version) => laneTask("servingCalibrate", "serving_calibrate", (lane) => ({ index, lane, sample, widths, version })),
    connect: (index) => writerTask("servingConnect", "serving_connect", { index }, []) as Promise<number>,
    rows: (index, version) => writerTask("servingRows", "serving_rows", { index, version } satisfies RowsTask, []) as Promise<RowsAt>,
    filterPlan: (source) => writerTask("servingFilterPlan", "serving_filter", source, []) as Promise<{ point: Operand | null } | null>,
    filter: (task) => writerTask("servingFilter", "serving_filter", task, []) as Promise<{ passing: number; values: ValueIndex | null }>,
    search(index, plan, query, hitsOnly) {
      return new Promise((resolve, reject) => {
        const key = `${index.key}\u0000${plan.key}\u0000${hitsOnly}`;
        let g = groups.get(key);
        if (!g) groups.set(key, (g = { index, plan, hitsOnly, waiting: [] }));
        g.waiting.push({ query, resolve, reject });
        queued++;
        next();
      });
    },
    stats: () => ({ threads: pool.threads.length, busy: running, queued }),
    size,
    destroy: () => pool.destroy(),
  };
}
