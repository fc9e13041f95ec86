// The messages of every child process Quiver starts, in one module both sides import:
// - job processes (backfill, view refresh, index build; workers/processes/job-process.ts frames
//   them): the server sends `start` with the job's request, then possibly `stop`; the process
//   answers with progress messages of the job's own shape and ends with `done` or `error`; before
//   each commit it asks `may-commit`, which the server answers in order after the progress before;
// - the compute sandbox (workers/processes/compute.ts): its owner sends tasks, each answered once
//   under the same id; the sandbox says `ready` once, when its pool is up. They travel as frames of
//   workers/sandbox-channel.ts, whose reader treats every byte from the sandbox as hostile.
import type { ErrorPolicy, FailedRow } from "../src/compute/error-handling.js";
import type { Entry } from "../src/catalog/catalog.js";
import type { UdfDefinition } from "../src/compute/udf.js";
import type { ViewDefinition } from "../src/compute/views.js";
import type { IndexBuildSpec } from "../src/engine/indexes.js";
import type { Isolation } from "./sandbox-launch.js";
import type { TableRequest } from "./threads/table-functions.js";
import type { UdfRequest } from "./threads/udf.js";

// ---- job processes

export type JobCommand<R> = { type: "start"; request: R } | { type: "stop" } | MayCommit;

/** A job process that got no `start` this long after it began ends (one started ahead and never used). */
export const UNUSED_EXIT_MS = 60_000;

/**
 * Asked by a job process right before a commit, and answered with `ok`: whether the job is still
 * this replica's to run, with no cancel asked (checked against the job record at that moment).
 */
export type MayCommit = { type: "may-commit"; ok?: boolean };

// ---- the job process launcher (workers/processes/launcher.ts)

/** From the server: start a job process (`entry`, a built module, at `niceness`), pass it a message, signal it. */
export type LauncherCommand =
  | { t: "spawn"; id: number; entry: string; niceness: number }
  | { t: "send"; id: number; m: unknown }
  | { t: "kill"; id: number; signal: NodeJS.Signals };

/** To the server, about job process `id`: a message from it, its channel closed, its end, a failed start. */
export type LauncherEvent =
  | { t: "message"; id: number; m: unknown }
  | { t: "disconnect"; id: number }
  | { t: "exit"; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { t: "error"; id: number; message: string };

/** The end of a run, after any number of progress messages of the job's own shape. */
export type EndMessage = { type: "done" } | { type: "error"; message: string };

/** What every job process that computes user code is told: the size of its compute sandbox, and how it may start one. */
export interface ComputeSize {
  workers: number;
  workerHeapMb: number;
  /** --sandbox-memory-mb: the kernel's bound on a sandbox process's writable memory. */
  sandboxMemoryMb: number;
  /** --unsafe-shared-sandbox: where namespaces are unavailable, run user code in the weaker sandbox instead of refusing it. */
  unsafeSharedSandbox: boolean;
  /** How sandboxes start on this host, as the server found out: a job process need not look again. */
  isolation?: Isolation;
}

/** The job's spec as the server keeps it (see BackfillSpec in src/jobs/kinds/backfill.ts). */
export interface BackfillRun {
  column: string;
  branch: string | null;
  where: string | null;
  readVersion: number | null;
  taskSize: number;
  concurrency: number;
  checkpointSize: number;
  numFrags: number | null;
  flushSeconds: number | null;
  key: string[] | null;
  /** Per-row error policy; absent in jobs queued before policies existed (fail). */
  errors?: ErrorPolicy;
  /** One task's share of a backfill split over replicas: task k of n (src/jobs/kinds/backfill-task.ts). */
  part?: [number, number] | null;
}

export interface BackfillProgress {
  rows_failed?: number;
  /** The first failing rows (src/compute/error-handling.ts). */
  failed_rows?: FailedRow[];
  rows_total?: number;
  rows_done?: number;
  rows_computed?: number;
  rows_skipped?: number;
  versions?: number[];
  read_version?: number;
  fragments?: number[];
  /** A task's address range [from, to), fixed by its first plan (to null: the end). */
  range?: [string, string | null];
  /**
   * With a fixed read version (a task's, or one a client gave), the plan is the same on every run:
   * its length, and where the last commit left it (a resumed run goes on from there).
   */
  planned?: number;
  position?: number;
}

/** What the server sends: the job, how its values are computed, where it stands, and the commits that wrote current values. */
export interface BackfillRequest extends ComputeSize {
  root: string;
  /** The object store options for `root` (they may hold keys: sent in the request, never in argv or logs). */
  storage?: Record<string, string>;
  entry: Entry;
  run: BackfillRun;
  /** A SQL column is LanceDB's own refresh; a UDF column is computed in the sandbox. */
  compute: { kind: "sql" } | { kind: "udf"; udf: UdfDefinition };
  progress: BackfillProgress;
  /** Commits that wrote values of this definition (rows last updated by one are not stale). */
  fresh: number[];
  /** The table's other UDF columns that do not read this one, with their own lists of such commits. */
  others: { column: string; fresh: number[] }[];
}

/**
 * What a backfill reports after each commit: its progress, the commits it made, and the other
 * columns for which those commits are fresh too (every row they wrote had a fresh or no value there).
 */
export type BackfillMessage = { type: "progress"; progress: BackfillProgress; committed: number[]; tracked: boolean; freshFor: string[] };

export interface RefreshRequest extends ComputeSize {
  root: string;
  /** The object store options for `root` (they may hold keys: sent in the request, never in argv or logs). */
  storage?: Record<string, string>;
  view: Entry;
  source: Entry | null;
  definition: ViewDefinition;
  /** The source version the last refresh read; null before the first. */
  lastSourceVersion: number | null;
  srcVersion: number | null;
  sourceTaskSize: number;
  outputLimit: number | null;
  concurrency: number;
  timeoutMs: number;
}

export interface RefreshResult {
  mode: string;
  rows_written: number;
  source_version: number;
  view_version: number;
  /** output_limit left rows out. */
  truncated?: boolean;
  /** Source rows the view's skip policy left out (udtf: a failing partition's rows), and the first of them. */
  rows_failed?: number;
  failed_rows?: FailedRow[];
}

/** How far a refresh is while it runs: source rows read through its function, of those it reads. */
export interface RefreshStep {
  read_version: number;
  rows_total: number;
  rows_done: number;
}

export type RefreshMessage = { type: "progress"; result: RefreshResult } | { type: "step"; step: RefreshStep };

export interface BuildRequest {
  root: string;
  /** The object store options for `root` (they may hold keys: sent in the request, never in argv or logs). */
  storage?: Record<string, string>;
  entry: Entry;
  spec: IndexBuildSpec;
}

/** An index build reports nothing before its end. */
export type BuildMessage = never;

// ---- the compute sandbox

export type ComputeTask = { name: "udf"; request: UdfRequest } | { name: "table"; request: TableRequest };

/**
 * The owner's task frame's header (workers/sandbox-channel.ts): run one task, to be aborted past
 * `deadlineMs` of running; the request's `input` bytes travel after the header, outside it.
 */
export type ComputeCommand = { id: string; deadlineMs: number } & ComputeTask;
