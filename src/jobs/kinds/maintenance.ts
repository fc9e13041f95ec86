// Job kind "maintenance": compaction, index upkeep (rebuilding a vector index split into too many
// segments) and version cleanup of one table branch, in a child process at the lowest CPU priority
// (workers/processes/maintenance.ts). The server decides what the
// cleanup keeps (src/compute/retention.ts) before the process starts. A run interrupted by a
// restart runs again from the start: every step is idempotent; so does a run that failed with its
// cleanup asked (withCleanupRetries).
import type { MaintenanceMessage, MaintenanceProgress, MaintenanceRequest } from "../../../workers/processes/maintenance.js";
import type { Catalog, Entry } from "../../catalog/catalog.js";
import { requireTable } from "../../catalog/lookup.js";
import { objectIdOf, sameId } from "../../catalog/names.js";
import { ApiError, Code } from "../../errors.js";
import { keptVersions, type RetentionInputs } from "../../compute/retention.js";
import { exportFigures, keptBound, tableFigures } from "../../engine/maintenance.js";
import type { IndexSpecs } from "../../engine/index-specs.js";
import { treeSize } from "../../util/store-files.js";
import { namedBranch, type TableHandle, type Tables } from "../../engine/tables.js";
import { tableDir } from "../../engine/versions.js";
import type { VersionChecks } from "../../engine/version-checks.js";
import type { Exclusive, JobContext, JobKind, Jobs, Running } from "../jobs.js";
import type { JobRecord } from "../store.js";
import { LOWEST_PRIORITY, runInBackground } from "./background.js";
import { listVersions } from "../../engine/version-list.js";
import { recordMaintenanceDuration } from "../../metrics.js";
import { log } from "../../log.js";
import { errorText } from "../../engine/messages.js";

export const MAINTENANCE = "maintenance";

export interface MaintenanceSpec {
  [k: string]: unknown;
  branch: string | null;
  /** Remove old versions too (compaction and index upkeep always run). */
  cleanup: boolean;
  /** Queued by a trigger rather than a request. */
  auto: boolean;
}

export interface MaintenanceDeps {
  catalog: Catalog;
  tables: Tables;
  retention: Omit<RetentionInputs, "otherJobs">;
  /** The jobs (given late: they are made from the kinds). */
  jobs: () => Jobs;
  retainMs: number;
  /** Versions a table branch keeps at most besides those kept for a reason (0: no bound). */
  maxVersions: number;
  /** Segments a vector index may have before a job rebuilds it (0: never). */
  maxIndexSegments: number;
  /** The recorded builds of indexes (a rebuild's parameters). */
  specs: IndexSpecs;
  /** Whether versions can be read, checked against storage while a cleanup runs and forgotten after. */
  versionChecks: VersionChecks;
  limit: number;
  /** Keep a job process started ahead for the next job (--spare-processes). */
  spare: boolean;
}

// dist/src/jobs/kinds/maintenance.js → dist/workers/processes/maintenance.js
const MAINTENANCE_PROCESS = new URL("../../../workers/processes/maintenance.js", import.meta.url);

export function maintenanceKind(deps: MaintenanceDeps): JobKind<MaintenanceSpec> {
  const otherJobs = () => deps.jobs().active().filter((r) => r.operation !== MAINTENANCE);
  return {
    name: MAINTENANCE,
    limit: deps.limit,
    interrupted: "resume",
    async start(job) {
      const started = performance.now();
      const running = await withCleanupRetries(job, () => runOnce(deps, job, otherJobs));
      const took = (result: "succeeded" | "failed") => () => recordMaintenanceDuration(result, (performance.now() - started) / 1000);
      running.done.then(took("succeeded"), took("failed"));
      return running;
    },
    describe({ spec, progress }) {
      const p = (progress ?? {}) as MaintenanceProgress & { cleanup?: string; cleanup_failures?: number; last_failure?: string };
      const str = (v: number | undefined) => (v === undefined ? undefined : String(v));
      const unindexed = (f: MaintenanceProgress["before"]) => (f ? String(Object.values(f.unindexed_rows).reduce((a, b) => a + b, 0)) : undefined);
      return {
        branch: spec.branch ?? undefined,
        auto: spec.auto ? "true" : undefined,
        phase: p.phase,
        cleanup: p.cleanup,
        fragments_before: str(p.before?.fragments),
        fragments_after: str(p.after?.fragments),
        unindexed_rows_before: unindexed(p.before),
        unindexed_rows_after: unindexed(p.after),
        versions_removed: str(p.result?.versions_removed),
        bytes_removed: str(p.result?.bytes_removed),
        cleanup_failures: str(p.cleanup_failures),
        last_failure: p.last_failure,
        indexes_rebuilt: p.rebuilt
          ?.map((r) => `${r.name} (${r.segments} segments; ${r.params === "recorded" ? "its recorded parameters" : "LanceDB's defaults"}; ${r.error ? `failed: ${r.error}` : `${r.ms} ms`})`)
          .join(", "),
      };
    },
  };
}

// A run that fails once its cleanup may have begun (the engine's error, or its process ended) can
// leave versions listed whose files are gone: Lance removes old versions' files before their
// manifests. The job then runs again from the start (every step is idempotent, and a cleanup finds
// the files already gone and removes the rest), after a pause that doubles, so that a store refusing
// for a while is waited out; the job fails after CLEANUP_ATTEMPTS runs in all. The count is kept in
// the record's progress: a restart in between resumes the job (as any interrupted run) and goes on
// counting.
const CLEANUP_ATTEMPTS = 5;
const FIRST_PAUSE_MS = 2_000;

/** Failed runs so far, as the record's progress counts them (`cleanup_failures`). */
const failuresOf = (rec: JobContext<MaintenanceSpec>["rec"]) => Number((rec.progress as { cleanup_failures?: number } | undefined)?.cleanup_failures ?? 0);

/** The job's run: `once`, again while a run that was to clean up fails (above); a stop ends it wherever it is. */
async function withCleanupRetries(job: JobContext<MaintenanceSpec>, once: () => Promise<{ running: Running; cleaning: boolean }>): Promise<Running> {
  let current = await once();
  let stopped = false;
  let wake: (() => void) | null = null;
  const done = (async () => {
    for (let failures = failuresOf(job.rec); ; ) {
      try {
        return await current.running.done;
      } catch (err) {
        if (stopped || !current.cleaning || ++failures >= CLEANUP_ATTEMPTS) throw err;
        const pauseMs = FIRST_PAUSE_MS * 2 ** (failures - 1);
        log.warn("maintenance failed with its cleanup asked; it runs again", { id: job.rec.id, table: objectIdOf(job.rec.table), failures, pause_ms: pauseMs, error: errorText(err) });
        await job.report({ cleanup_failures: failures, last_failure: errorText(err) });
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pauseMs);
          wake = () => (clearTimeout(timer), resolve());
        });
        wake = null;
        if (stopped) throw err;
        current = await once();
        if (stopped) await current.running.stop();
      }
    }
  })();
  return {
    done,
    async stop() {
      stopped = true;
      wake?.();
      await current.running.stop();
      await done.catch(() => undefined);
    },
  };
}

/** One run of a maintenance job's process; `cleaning`: it was asked to remove versions. */
async function runOnce(deps: MaintenanceDeps, job: JobContext<MaintenanceSpec>, otherJobs: () => JobRecord[]): Promise<{ running: Running; cleaning: boolean }> {
  const { catalog, tables } = deps;
  const spec = job.rec.spec;
  const entry = await requireTable(catalog, job.rec.table);
  let request: MaintenanceRequest["cleanup"] = null;
  let cleanup = "not asked";
  if (spec.cleanup) {
    const table = await tables.open(entry, { branch: spec.branch, fresh: true });
    const kept = await keptVersions({ ...deps.retention, otherJobs }, entry, tableDir(tables.root, entry), table, spec.branch);
    if ("busy" in kept) cleanup = `deferred: ${kept.busy}`;
    else {
      const bound = keptBound(await listVersions(table), kept.versions);
      request = { retainMs: deps.retainMs, maxVersions: deps.maxVersions, keptFrom: Number.isFinite(bound) ? bound : null };
      const versions = [...new Set(kept.versions)].sort((a, b) => a - b).join(",") || "none";
      const newest = deps.maxVersions > 0 ? ` or beyond the newest ${deps.maxVersions}` : "";
      cleanup = `versions older than ${deps.retainMs} ms${newest}${Number.isFinite(bound) ? ` and before ${new Date(bound).toISOString()}` : ""} (kept: ${versions})`;
    }
  }
  await job.report({ cleanup });
  const run: MaintenanceRequest = {
    root: tables.root,
    storage: tables.storageOptions,
    entry,
    branch: spec.branch,
    cleanup: request,
    maxIndexSegments: deps.maxIndexSegments,
    indexSpecs: await deps.specs.of(entry.objectId, spec.branch),
  };
  const running = runInBackground<MaintenanceRequest, MaintenanceMessage>(MAINTENANCE_PROCESS, LOWEST_PRIORITY, run, async (m) => {
    await job.report(m.progress as Record<string, unknown>);
    if (m.progress.after) exportFigures(entry.objectId, namedBranch(spec.branch) ?? null, m.progress.after);
    if (m.progress.phase === "done") tables.commits.announce({ table: entry, branch: namedBranch(spec.branch) ?? null, version: null, change: "maintenance", rows: null, byCachedHandle: false });
  }, { spare: deps.spare });
  if (request) deps.versionChecks.cleaning(tableDir(tables.root, entry), running.done);
  return { running, cleaning: request !== null };
}

/** One maintenance job of a table branch at a time, across replicas. */
export const maintenanceExclusive = (id: readonly string[], branch: string | null): Exclusive => ({
  slot: JSON.stringify([MAINTENANCE, objectIdOf(id), branch]),
  busy: (job) => new ApiError(Code.ConcurrentModification, `table ${JSON.stringify(objectIdOf(id))} is already being maintained (job ${job})`),
});

/** A maintenance job Queued or Running on this table and branch, as this replica last saw. */
export function activeMaintenance(jobs: Jobs, id: readonly string[], branch: string | null): JobRecord | undefined {
  return jobs.active().find((r) => r.operation === MAINTENANCE && sameId(r.table, id) && (r.spec as MaintenanceSpec).branch === branch);
}

/** Quiver's maintenance figures of a table branch, shown beside the spec's fields of `stats`. */
export async function maintenanceFigures(deps: { jobs: Jobs; tables: Tables }, entry: Entry, table: TableHandle, branch: string | null) {
  const f = await tableFigures(table);
  exportFigures(entry.objectId, branch, f);
  const last = (await deps.jobs.all({ operation: MAINTENANCE, table: entry.id }))
    .filter((r) => r.status === "Succeeded" && (r.spec as MaintenanceSpec).branch === branch)
    .reduce<number | undefined>((at, r) => Math.max(at ?? 0, r.finishedAt ?? 0), undefined);
  return {
    small_fragments: f.small_fragments,
    unindexed_rows: f.unindexed_rows,
    index_segments: f.index_segments,
    deleted_rows: f.deleted_rows,
    versions_kept: f.versions,
    bytes_on_disk: await treeSize(tableDir(deps.tables.root, entry)),
    last_maintenance: last === undefined ? null : new Date(last).toISOString(),
  };
}
