// Job kind "refresh_materialized_view": bring a view up to date with its source, in a child process
// at the lowest CPU priority (workers/processes/refresh.ts says how for each kind of view). The result (mode,
// rows written, source and view versions) is recorded as the view's last refresh. A refresh
// interrupted by a restart runs again: each kind's refresh is idempotent (a rebuild replaces the
// contents in one commit; a chunker's merge is keyed by source row and child).
import { isolation } from "../../../workers/sandbox-launch.js";
import type { RefreshMessage, RefreshRequest, RefreshResult, RefreshStep } from "../../../workers/protocol.js";
import { allows, type Principal } from "../../auth/principal.js";
import type { Catalog } from "../../catalog/catalog.js";
import { requireTable } from "../../catalog/lookup.js";
import { objectIdOf, sameId } from "../../catalog/names.js";
import { ApiError, Code } from "../../errors.js";
import type { ViewRecord, Views } from "../../compute/views.js";
import type { Tables } from "../../engine/tables.js";
import type { Exclusive, JobKind, Jobs } from "../jobs.js";
import type { JobRecord } from "../store.js";
import { LOWEST_PRIORITY, runInBackground } from "./background.js";
import { recordJobRows } from "../../metrics.js";

export const VIEW_REFRESH = "refresh_materialized_view";

export interface RefreshSpec {
  [k: string]: unknown;
  srcVersion: number | null;
  sourceTaskSize: number;
  outputLimit: number | null;
  concurrency: number;
  /** Queued by writes to the source of an auto_refresh view. */
  auto: boolean;
}

export interface ViewRefreshDeps {
  catalog: Catalog;
  tables: Tables;
  views: Views;
  workers: number;
  workerHeapMb: number;
  sandboxMemoryMb: number;
  unsafeSharedSandbox: boolean;
  timeoutMs: number;
  limit: number;
  /** Keep a job process started ahead for the next refresh (--spare-processes). */
  spare: boolean;
  /** The API key with this stable id as configured now (src/auth/authenticate.ts). */
  credential: (key: string) => Principal | null;
}

/**
 * Why the credential that defined `view` may not read its source now, or null when it may. Both
 * what it could do when it defined the view and what it can do now must allow the read; an API
 * key no longer configured can do nothing. A bearer token cannot be looked up without the token:
 * its role and prefixes as the view was defined are what count.
 */
export function definerRefusal(view: ViewRecord, credential: ViewRefreshDeps["credential"]): string | null {
  const source = view.definition.source?.table;
  if (!source) return null;
  const name = JSON.stringify(objectIdOf(view.id));
  const d = view.definer;
  if (!d) return `view ${name} records no defining credential (it was defined before Quiver kept one); refresh it once by hand with a key that may read its source`;
  const now = d.key.startsWith("key:") ? credential(d.key) : d;
  if (!now) return `the API key that defined view ${name} (${d.subject}) is no longer configured, so its source is not read; define the view again with a current key`;
  if (!allows(d, source, "read") || !allows(now, source, "read")) {
    return `the credential that defined view ${name} (${d.subject}) may no longer read its source ${JSON.stringify(objectIdOf(source))}`;
  }
  return null;
}

// dist/src/jobs/kinds/view-refresh.js → dist/workers/processes/refresh.js
const REFRESH_PROCESS = new URL("../../../workers/processes/refresh.js", import.meta.url);

export function viewRefreshKind(deps: ViewRefreshDeps): JobKind<RefreshSpec> {
  const { catalog, tables, views } = deps;
  return {
    name: VIEW_REFRESH,
    limit: deps.limit,
    interrupted: "resume",
    async start(job) {
      const spec = job.rec.spec;
      const entry = await requireTable(catalog, job.rec.table);
      // Fresh: the view may have been defined a moment ago through another replica.
      const view = await views.get(entry.location!, true);
      if (!view) throw new Error(`table ${JSON.stringify(entry.objectId)} is no longer a materialized view`);
      const refusal = definerRefusal(view, deps.credential);
      if (refusal) throw new Error(refusal);
      const def = view.definition;
      const source = def.source && def.kind !== "query" ? await requireTable(catalog, def.source.table) : null;
      const request: RefreshRequest = {
        root: tables.root,
        storage: tables.storageOptions,
        view: entry,
        source,
        definition: def,
        lastSourceVersion: view.lastRefresh && !view.lastRefresh.truncated ? view.lastRefresh.sourceVersion : null,
        srcVersion: spec.srcVersion,
        sourceTaskSize: spec.sourceTaskSize,
        outputLimit: spec.outputLimit,
        concurrency: spec.concurrency,
        timeoutMs: deps.timeoutMs,
        workers: deps.workers,
        workerHeapMb: deps.workerHeapMb,
        sandboxMemoryMb: deps.sandboxMemoryMb,
        unsafeSharedSandbox: deps.unsafeSharedSandbox,
        // Found once by the server: the job process starts its sandbox without looking again.
        isolation: def.kind === "query" ? undefined : await isolation(deps.unsafeSharedSandbox),
      };
      // Incremental refreshes are short: a process started ahead (--spare-processes) spares each one a process start.
      return runInBackground<RefreshRequest, RefreshMessage>(REFRESH_PROCESS, LOWEST_PRIORITY, request, async (m) => {
        if (m.type === "step") return job.report({ ...m.step });
        const r: RefreshResult = m.result;
        const lastRefresh = { sourceVersion: r.source_version, viewVersion: r.view_version, at: Date.now(), rowsWritten: r.rows_written, mode: r.mode, truncated: r.truncated };
        await views.put({ ...view, lastRefresh });
        await job.report({ ...r, rows_done: r.rows_written });
        recordJobRows(VIEW_REFRESH, r.rows_written);
        tables.commits.announce({ table: entry, branch: null, version: r.view_version, change: "refresh", rows: r.rows_written, byCachedHandle: false });
      }, { spare: deps.spare });
    },
    describe({ spec, progress }) {
      const p = (progress ?? {}) as Partial<RefreshResult & RefreshStep>;
      const str = (v: number | undefined | null) => (v === undefined || v === null ? undefined : String(v));
      return {
        mode: p.mode,
        rows_written: str(p.rows_written),
        source_version: str(p.source_version),
        view_version: str(p.view_version),
        read_version: str(p.read_version),
        rows_total: str(p.rows_total),
        rows_done: str(p.rows_done),
        rows_failed: str(p.rows_failed),
        failed_rows: p.failed_rows?.length ? JSON.stringify(p.failed_rows) : undefined,
        src_version: str(spec.srcVersion),
        auto: spec.auto ? "true" : undefined,
      };
    },
  };
}

/** The newest refresh job of view `id` kept, if any. */
export const lastRefreshJob = async (jobs: Jobs, id: readonly string[]): Promise<JobRecord | undefined> =>
  (await jobs.all({ operation: VIEW_REFRESH, table: id }))
    .reduce<JobRecord | undefined>((a, r) => (a === undefined || r.createdAt > a.createdAt ? r : a), undefined);

/** A refresh of view `id` already Queued or Running, as this replica last saw. */
export const activeRefresh = (jobs: Jobs, id: readonly string[]): JobRecord | undefined =>
  jobs.active().find((r) => r.operation === VIEW_REFRESH && sameId(r.table, id));

/** One refresh of a view at a time, across replicas. */
export const refreshExclusive = (id: readonly string[]): Exclusive => ({
  slot: JSON.stringify([VIEW_REFRESH, objectIdOf(id)]),
  busy: (job) => new ApiError(Code.ConcurrentModification, `view ${JSON.stringify(objectIdOf(id))} is already being refreshed (job ${job})`),
});

const DEFAULT_SOURCE_TASK_SIZE = 1024;

/** Refresh parameters a request may give (lance-namespace `RefreshMaterializedViewRequest`). */
export interface RefreshParams {
  src_version?: number | null;
  source_task_size?: number | null;
  output_limit?: number | null;
  concurrency?: number | null;
  intra_applier_concurrency?: number | null;
}

/** The job spec of a refresh, with the defaults filled in. */
export function refreshSpec(p: RefreshParams, workers: number, auto = false): RefreshSpec {
  return {
    srcVersion: p.src_version ?? null,
    sourceTaskSize: p.source_task_size ?? DEFAULT_SOURCE_TASK_SIZE,
    outputLimit: p.output_limit ?? null,
    concurrency: (p.concurrency ?? workers) * (p.intra_applier_concurrency ?? 1),
    auto,
  };
}
