// Job kind "backfill": compute a virtual column's values, in a child process at the lowest CPU
// priority (workers/processes/backfill.ts says how, and why). The server records each commit the process
// reports (in the job's progress, and in the column's list of value versions) before the next
// report is handled, so a stop, a failure or a crash loses at most the checkpoint in progress,
// and a run that resumes after a restart skips every row already written. With --backfill-tasks
// N a client's backfill is split into N tasks (./backfill-task.ts) that any replica may run, and
// the backfill's own run follows them.
import { isolation } from "../../../workers/sandbox-launch.js";
import type { BackfillMessage, BackfillProgress, BackfillRequest, BackfillRun } from "../../../workers/protocol.js";
import type { Catalog } from "../../catalog/catalog.js";
import { requireTable } from "../../catalog/lookup.js";
import { objectIdOf } from "../../catalog/names.js";
import { ApiError, Code } from "../../errors.js";
import { errorPolicy, type ErrorHandlingBody } from "../../compute/error-handling.js";
import { udfDefinition, type UdfLimits } from "../../compute/udf.js";
import type { ValueVersions, ValuesKey } from "../../compute/value-versions.js";
import { definitionHash, fromFieldMetadata, runnable, virtualColumnOf, type VirtualColumn } from "../../compute/virtual-column.js";
import { namedBranch, type Tables } from "../../engine/tables.js";
import { tableSchema, tableVersion } from "../../engine/table-info.js";
import type { Exclusive, JobContext, JobKind, Jobs, Running } from "../jobs.js";
import type { JobRecord } from "../store.js";
import { recordJobRows } from "../../metrics.js";
import { LOWEST_PRIORITY, runInBackground } from "./background.js";

export const BACKFILL = "backfill";
/** One share of a backfill split over the replicas (./backfill-task.ts). */
export const BACKFILL_TASK = "backfill_task";

export interface BackfillSpec extends BackfillRun {
  [k: string]: unknown;
  /** The definition the backfill was asked for; a different one at start fails the job. */
  definition: string;
  /** Queued by a write to a table with auto_backfill columns. */
  auto: boolean;
  /** Tasks the backfill is split into, which any replica may run (1: it runs alone, as one job). */
  tasks?: number;
}

export interface BackfillDeps {
  catalog: Catalog;
  tables: Tables;
  versions: ValueVersions;
  workers: number;
  workerHeapMb: number;
  sandboxMemoryMb: number;
  unsafeSharedSandbox: boolean;
  limits: UdfLimits;
  limit: number;
  /** The job scheduler, to queue a split backfill's tasks and follow them. */
  jobs: () => Jobs;
}

// dist/src/jobs/kinds/backfill.js → dist/workers/processes/backfill.js
const BACKFILL_PROCESS = new URL("../../../workers/processes/backfill.js", import.meta.url);

/** Run a backfill, or one task's share of it, in its child process. */
export async function runBackfill(deps: BackfillDeps, job: JobContext<BackfillSpec>): Promise<Running> {
  const { catalog, tables, versions } = deps;
  const spec = job.rec.spec;
  const entry = await requireTable(catalog, job.rec.table);
  const t = await tables.open(entry, { branch: spec.branch, fresh: true });
  const { fields } = await tableSchema(t);
  const vc = virtualColumnOf(fields, spec.column);
  if (!vc) throw new Error(`column ${JSON.stringify(spec.column)} is no longer a virtual column`);
  if (definitionHash(vc) !== spec.definition) throw new Error(`the definition of column ${JSON.stringify(spec.column)} changed since this backfill was submitted; submit a new backfill`);
  const valuesKey: ValuesKey = { location: entry.location!, branch: spec.branch, column: spec.column, definition: spec.definition };
  // The other UDF columns this one's commits may keep fresh: those that do not read it.
  const others = new Map<string, ValuesKey>();
  for (const f of fields) {
    const o = fromFieldMetadata(f.name, f.metadata);
    if (!o || o.column === spec.column || !runnable(o) || runnable(o) === "sql" || o.inputs.some((p) => p.split(".")[0] === spec.column)) continue;
    others.set(o.column, { ...valuesKey, column: o.column, definition: definitionHash(o) });
  }
  const request: BackfillRequest = {
    root: tables.root,
    storage: tables.storageOptions,
    entry,
    run: spec,
    // Decided here, once: the child opens its table store once and computes straight away.
    compute: runnable(vc) === "sql" ? { kind: "sql" } : { kind: "udf", udf: udfDefinition(vc, deps.limits) },
    progress: (job.rec.progress ?? {}) as BackfillProgress,
    fresh: [...(await versions.get(valuesKey))],
    others: await Promise.all([...others.values()].map(async (k) => ({ column: k.column, fresh: [...(await versions.get(k))] }))),
    workers: deps.workers,
    workerHeapMb: deps.workerHeapMb,
    sandboxMemoryMb: deps.sandboxMemoryMb,
    unsafeSharedSandbox: deps.unsafeSharedSandbox,
    // Found once by the server: the job process starts its sandbox without looking again.
    isolation: runnable(vc) === "sql" ? undefined : await isolation(deps.unsafeSharedSandbox),
  };
  // Rows counted once, where they are computed (a split backfill's own record only sums its tasks').
  let counted = (job.rec.progress as BackfillProgress | undefined)?.rows_done ?? 0;
  const handle = async (m: BackfillMessage) => {
    if (m.tracked) {
      for (const v of m.committed) await versions.add(valuesKey, v);
      for (const c of m.freshFor) for (const v of m.committed) await versions.add(others.get(c)!, v);
    }
    await job.report(m.progress as Record<string, unknown>);
    if (m.progress.rows_done !== undefined) {
      recordJobRows(job.rec.operation, m.progress.rows_done - counted);
      counted = m.progress.rows_done;
    }
    const version = m.committed.at(-1);
    if (version !== undefined) tables.commits.announce({ table: entry, branch: namedBranch(spec.branch) ?? null, version, change: "backfill", rows: null, byCachedHandle: false });
  };
  return runInBackground<BackfillRequest, BackfillMessage>(BACKFILL_PROCESS, LOWEST_PRIORITY, request, handle, { mayCommit: job.mayCommit });
}

const TASK_POLL_MS = 250;
const COUNTS = ["rows_total", "rows_done", "rows_computed", "rows_skipped", "rows_failed"] as const;

/** The progress of a split backfill: its tasks' summed, their commits and failed rows together. */
function progressOf(tasks: (JobRecord | undefined)[]): BackfillProgress {
  const ps = tasks.map((t) => (t?.progress ?? {}) as BackfillProgress);
  const out: BackfillProgress = { versions: [...new Set(ps.flatMap((p) => p.versions ?? []))].sort((a, b) => a - b), failed_rows: ps.flatMap((p) => p.failed_rows ?? []) };
  for (const c of COUNTS) out[c] = ps.reduce((n, p) => n + (p[c] ?? 0), 0);
  return out;
}

/**
 * A backfill split into tasks: queued once (every task reads the same version, so their shares
 * are one plan cut in contiguous address ranges), then followed until all succeed; a task that
 * fails or is canceled fails the backfill (a cancel of it with the reason, which ends the other
 * tasks with it). Canceling the backfill cancels its tasks: the job scheduler asks it of them in
 * the same commit (see backfillKind's parts and partOf) and ends them all in one commit once every
 * run stopped, the backfill's counts summed from theirs as committed (summary); a shutdown or a
 * takeover leaves them running (the backfill resumes following them).
 */
async function splitBackfill(deps: BackfillDeps, job: JobContext<BackfillSpec>): Promise<Running> {
  const spec = job.rec.spec;
  const jobs = deps.jobs();
  let ids = job.rec.progress?.tasks as string[] | undefined;
  if (!ids) {
    const entry = await requireTable(deps.catalog, job.rec.table);
    const readVersion = spec.readVersion ?? (await tableVersion(await deps.tables.open(entry, { branch: spec.branch, fresh: true })));
    const queued: string[] = [];
    for (let k = 0; k < spec.tasks!; k++) {
      // Each task queued is a commit to the shared job records (a second or more on a slow store):
      // a cancel asked meanwhile (or a takeover) stops the planning. A cancel ends the tasks queued
      // so far with the backfill (they name it: partOf); after a takeover they are canceled here
      // (the new run queues its own).
      if (!(await job.mayCommit())) {
        if ((await jobs.get(job.rec.id))?.cancelAt === undefined) for (const id of queued) await jobs.cancel((await jobs.get(id))!);
        throw new Error("the backfill was stopped while its tasks were being queued");
      }
      const task: BackfillSpec = { ...spec, readVersion, tasks: 1, part: [k, spec.tasks!], backfill: job.rec.id };
      queued.push((await jobs.submit(BACKFILL_TASK, [...job.rec.table], task, job.rec.owner ?? "")).id);
    }
    ids = queued;
    await job.report({ tasks: ids, read_version: readVersion });
  }
  const taskIds = ids;
  let stopping = false;
  let failing = false;
  let reported = "";
  const done = (async () => {
    while (!stopping) {
      const tasks = await Promise.all(taskIds.map((id) => jobs.get(id)));
      // Stored only when it changed: each report is a commit to the shared job records.
      const progress = progressOf(tasks);
      const text = JSON.stringify(progress);
      if (text !== reported) await job.report(progress as Record<string, unknown>);
      reported = text;
      const lost = tasks.findIndex((t) => !t || t.status === "Failed" || t.status === "Canceled");
      if (lost >= 0 && !failing) {
        // Asked, not awaited: the cancel stops this run (its end waits for this run's).
        failing = true;
        const t = tasks[lost];
        const reason = t ? `task ${t.id} of this backfill is ${t.status}${t.error ? `: ${t.error}` : ""}` : `task ${taskIds[lost]} of this backfill is gone`;
        void jobs.get(job.rec.id).then((r) => r && jobs.cancel(r, reason)).catch(() => undefined);
      }
      if (tasks.every((t) => t!.status === "Succeeded")) return;
      await new Promise((r) => setTimeout(r, TASK_POLL_MS));
    }
  })();
  return {
    done,
    // A cancel ends the tasks with this backfill (the scheduler's); a shutdown queues it again, a takeover follows them elsewhere.
    async stop() {
      stopping = true;
      await done.catch(() => undefined);
    },
  };
}

/** Split a backfill only where its tasks can share it: UDF columns, all fragments, asked for by a client. */
const splits = (spec: BackfillSpec) => (spec.tasks ?? 1) > 1 && !spec.part && spec.numFrags === null && !spec.auto;

export function backfillKind(deps: BackfillDeps): JobKind<BackfillSpec> {
  return {
    name: BACKFILL,
    limit: deps.limit,
    interrupted: "resume",
    start: (job) => (splits(job.rec.spec) ? splitBackfill(deps, job) : runBackfill(deps, job)),
    parts: (rec) => (Array.isArray(rec.progress?.tasks) ? (rec.progress.tasks as string[]) : []),
    // A backfill not split has no tasks: it keeps the progress it committed.
    summary: (_rec, tasks) => (tasks.length > 0 ? (progressOf(tasks) as Record<string, unknown>) : undefined),
    describe: describeBackfill,
  };
}

/** What a backfill's record, or a task's, shows. */
export function describeBackfill({ spec, progress, startedAt, finishedAt, status }: JobRecord & { spec: BackfillSpec }): Record<string, string | undefined> {
      const p = (progress ?? {}) as BackfillProgress;
      const end = finishedAt ?? (status === "Running" ? Date.now() : undefined);
      const seconds = startedAt !== undefined && end !== undefined ? (end - startedAt) / 1000 : 0;
      const str = (v: number | undefined) => (v === undefined ? undefined : String(v));
      return {
        column: spec.column,
        branch: spec.branch ?? undefined,
        where: spec.where ?? undefined,
        read_version: str(p.read_version),
        rows_total: str(p.rows_total),
        rows_done: str(p.rows_done ?? 0),
        rows_computed: str(p.rows_computed ?? 0),
        rows_skipped: str(p.rows_skipped ?? 0),
        versions: (p.versions ?? []).join(","),
        rows_failed: p.rows_failed ? String(p.rows_failed) : undefined,
        failed_rows: p.failed_rows?.length ? JSON.stringify(p.failed_rows) : undefined,
        rows_per_second: seconds > 0 ? String(Math.round((p.rows_computed ?? 0) / seconds)) : undefined,
        auto: spec.auto ? "true" : undefined,
        tasks: Array.isArray(progress?.tasks) ? (progress.tasks as string[]).join(",") : undefined,
        backfill: typeof spec.backfill === "string" ? spec.backfill : undefined,
        task: spec.part ? `${spec.part[0] + 1} of ${spec.part[1]}` : undefined,
      };
}

const DEFAULT_TASK_SIZE = 2048;
const DEFAULT_CHECKPOINT = 10_000;

/** Backfill parameters a request may give (lance-namespace `AlterTableBackfillColumnsRequest`). */
export interface BackfillParams {
  where?: string | null;
  read_version?: number | null;
  task_size?: number | null;
  concurrency?: number | null;
  intra_applier_concurrency?: number | null;
  checkpoint_size?: number | null;
  min_checkpoint_size?: number | null;
  max_checkpoint_size?: number | null;
  num_frags?: number | null;
  batch_checkpoint_flush_interval_seconds?: number | null;
  error_handling?: ErrorHandlingBody | null;
}

/** The job spec of a backfill of `vc` (checked by the caller), with the defaults filled in. */
export function backfillSpec(vc: VirtualColumn, branch: string | null, key: string[] | null, p: BackfillParams, workers: number, auto = false, tasks = 1): BackfillSpec {
  const lo = p.min_checkpoint_size ?? 1;
  const hi = p.max_checkpoint_size ?? Infinity;
  return {
    column: vc.column,
    branch,
    definition: definitionHash(vc),
    where: p.where ?? null,
    readVersion: p.read_version ?? null,
    taskSize: p.task_size ?? DEFAULT_TASK_SIZE,
    concurrency: (p.concurrency ?? workers) * (p.intra_applier_concurrency ?? 1),
    checkpointSize: Math.max(lo, Math.min(p.checkpoint_size ?? DEFAULT_CHECKPOINT, hi)),
    numFrags: p.num_frags ?? null,
    flushSeconds: p.batch_checkpoint_flush_interval_seconds ?? null,
    key,
    errors: errorPolicy(p.error_handling),
    auto,
    // A SQL column is LanceDB's own refresh, in one call.
    tasks: runnable(vc) === "sql" ? 1 : tasks,
  };
}

/** One backfill of a column (on one branch) at a time, across replicas. */
export const backfillExclusive = (id: readonly string[], column: string, branch: string | null): Exclusive => ({
  slot: JSON.stringify([BACKFILL, objectIdOf(id), branch, column]),
  busy: (job) => new ApiError(Code.ConcurrentModification, `column ${JSON.stringify(column)} is already being backfilled (job ${job}); cancel it or wait for it`),
});
