// Everything an operation may use, built once at startup, bottom up: the catalog and the tables,
// the worker pool, then the job kinds (each given only what it uses), the jobs that run them, and
// what follows every commit (subscribers of the after-commit event, src/engine/commits.ts).
import { mkdirSync } from "node:fs";
import type { Principal } from "./auth/principal.js";
import type { Config } from "./config.js";
import { openCatalog, type Catalog, type Entry } from "./catalog/catalog.js";
import { SEP } from "./catalog/names.js";
import { openClaims, type Claims } from "./catalog/claims.js";
import { openManifestTable } from "./engine/manifest-table.js";
import { openSystemTables, SYSTEM_DIR, type SystemTables } from "./engine/system-tables.js";
import { openIndexSpecs } from "./engine/index-specs.js";
import { engineReason } from "./engine/messages.js";
import { withDeadline } from "./engine/storage.js";
import { createSearchBatcher, type SearchBatcher } from "./engine/search-batcher.js";
import { CHOICE, createBatchChoice } from "./engine/batch-choice.js";
import { openTables, type Tables } from "./engine/tables.js";
import { createGroupCommit, type GroupCommit } from "./engine/group-commit.js";
import { createCommitSpacing } from "./engine/commit-spacing.js";
import { useMetadataCache } from "./engine/session.js";
import { openJobs, type Jobs } from "./jobs/jobs.js";
import { backfillKind } from "./jobs/kinds/backfill.js";
import { backfillTaskKind } from "./jobs/kinds/backfill-task.js";
import { indexBuildKind } from "./jobs/kinds/index-build.js";
import { maintenanceKind } from "./jobs/kinds/maintenance.js";
import { stopSpares } from "./jobs/kinds/background.js";
import { startLauncher, stopLauncher } from "./jobs/kinds/launcher.js";
import { createReadLeases, type ReadLeases } from "./engine/read-leases.js";
import { createVersionChecks, type VersionChecks } from "./engine/version-checks.js";
import { tableDir } from "./engine/versions.js";
import { openValueVersions, type ValueVersions } from "./compute/value-versions.js";
import { openViews, type Views } from "./compute/views.js";
import { viewRefreshKind } from "./jobs/kinds/view-refresh.js";
import { autoBackfill, autoRefresh } from "./jobs/triggers/after-commit.js";
import { autoMaintenance } from "./jobs/triggers/auto-maintenance.js";
import { replicaId } from "./util/replica-id.js";
import { createTenantCompute, type TenantCompute } from "../workers/compute-tenants.js";
import { lockStateDir } from "./util/state-lock.js";
import { createContainerOf, joinPath, useStorageOptions } from "./util/store-files.js";
import { measureSkew } from "./util/clock.js";
import { writeProblem } from "./util/writable.js";
import { log } from "./log.js";
import { createWorkerPool, type WorkerPool } from "../workers/pool.js";
import type { ComputeSize } from "../workers/protocol.js";
import { createServingIndexes, dataOf, type ServingIndexes } from "./serving/index.js";

/** Where a start or a shutdown is, and what readiness answers (src/operations/health.ts). */
export interface Lifecycle {
  /** From the signal on: readiness answers 503, and every answer closes its connection. */
  draining: boolean;
  /** Once the server stopped listening (after the drain delay): new requests are refused. */
  closed: boolean;
  /** While every slot of --max-in-flight is taken (set by the front end): not ready. */
  full: boolean;
  /** Why this replica cannot serve (a data or state directory it cannot write), found at start; null when it can. */
  unready: string | null;
  /** Tables whose serving indexes still load or build at start (`warm`): not ready while any does, until --warm-timeout-ms. */
  warming: number;
  /** --warm-timeout-ms passed with tables still warming: ready anyway. */
  warmTimedOut: boolean;
}

export interface Services {
  config: Config;
  catalog: Catalog;
  /** Quiver's state shared by every replica on the data directory (its `.system/` tables). */
  system: SystemTables;
  /** Table directories being created by any replica, which reclaiming orphans leaves alone. */
  claims: Claims;
  tables: Tables;
  /** Appends to one table branch that wait for a commit share the next one. */
  appends: GroupCommit;
  /** Runs queries, batching concurrent compatible vector searches into one engine call. */
  searches: SearchBatcher;
  /** Vector searches answered in the worker pool from in-memory indexes kept at the tables' latest versions. */
  serving: ServingIndexes;
  /** Background work (index builds, backfills, view refreshes) tracked as durable transactions. */
  jobs: Jobs;
  /** Worker threads for what JavaScript computes off the event loop (large uploads, UDFs). */
  pool: WorkerPool;
  /** The compute sandbox processes, one per tenant, where UDF and table-function checks run (started on first use). */
  compute: TenantCompute;
  /** Which commits wrote each virtual column's values (what a backfill may skip). */
  valueVersions: ValueVersions;
  /** Materialized views' definitions and last refreshes. */
  views: Views;
  /** Versions reads opened explicitly, kept by cleanups for a while. */
  readLeases: ReadLeases;
  /** Whether versions a request names can still be read, kept for the consistency interval. */
  versionChecks: VersionChecks;
  /** Set by the front end as it shuts down (src/server.ts, drain). */
  lifecycle: Lifecycle;
  /**
   * Load (or build) the serving indexes of the tables to warm (--warm-tables, else those saved at
   * the last shutdown), counting `lifecycle.warming` down; resolves when all are done or at
   * --warm-timeout-ms, whichever comes first.
   */
  warm(): Promise<void>;
  /**
   * Release what the services hold (called after the server drained), within `deadlineMs`: a
   * step still running then is logged and left (the process exits).
   */
  close(deadlineMs?: number): Promise<void>;
}

/** A step that runs this long is logged as what the shutdown waits for. */
const SLOW_STEP_MS = 1000;

/**
 * Run `steps` one after the other within `deadlineMs`: one slower than SLOW_STEP_MS is logged
 * while it runs; at the deadline the step running is logged and left, and the rest skipped. A
 * step given a share of the deadline is left when that is spent, and the next ones run.
 */
async function inTurn(deadlineMs: number, steps: [string, () => unknown, number?][]): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (const [i, [name, step, share = 1]] of steps.entries()) {
    const slow = setTimeout(() => log.info("shutdown waits for a step", { step: name }), SLOW_STEP_MS);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stepMs = Math.min(until - Date.now(), share * deadlineMs);
    // No deadline (Infinity) is no timer: setTimeout would take it as 1 ms.
    const late = new Promise<"late">((res) => Number.isFinite(stepMs) && (timer = setTimeout(() => res("late"), Math.max(0, stepMs))));
    const ended = await Promise.race([Promise.resolve().then(step).then(() => "ok" as const), late]).catch((err: unknown) => {
      log.error("a shutdown step failed", { step: name, error: String(err) });
      return "failed" as const;
    });
    clearTimeout(slow);
    clearTimeout(timer);
    if (ended === "late" && share < 1) {
      log.warn("shutdown step overran its share of the deadline: going on without it", { step: name, ms: stepMs });
    } else if (ended === "late") {
      const skipped = steps.slice(i + 1).map(([n]) => n);
      return log.warn("shutdown deadline passed: exiting without waiting for a step", { step: name, skipped, deadlineMs });
    }
  }
}

/** The longest wait between two tries of a data directory that does not answer at start. */
const RETRY_MAX_MS = 30_000;
/** A store that did not answer (rather than one that answered with an error): tried again. */
const UNANSWERED = /no answer within|connection refused|error sending request|timed out|dns error/i;

/**
 * `open()`, tried again while the data directory does not answer (an object store starting, paused
 * or cut off), until `until` (--start-retry-ms from the start) with backoff: each try logged, `waiting` told the cause (the
 * server listens, not ready, meanwhile). An error the store answered ends the start at once.
 */
async function untilAnswered<T>(config: Config, until: number, waiting: (cause: string) => Promise<void>, open: () => Promise<T>): Promise<T> {
  for (let attempt = 1, delay = 1000; ; attempt++, delay = Math.min(2 * delay, RETRY_MAX_MS)) {
    try {
      const opened = await open();
      if (attempt > 1) log.info("the data directory answers", { dataDir: config.dataDir, attempt });
      return opened;
    } catch (err) {
      const cause = (err as Error)?.message ?? String(err);
      if (!config.remote || !UNANSWERED.test(cause) || Date.now() + delay > until) throw err;
      log.warn("the data directory does not answer: not ready, trying again", { attempt, retryInMs: delay, cause, startRetryMs: config.startRetryMs });
      await waiting(cause);
      await new Promise((res) => setTimeout(res, delay));
    }
  }
}

/**
 * The tables a start warms: those --warm-tables names (a name the catalog lacks is logged and
 * left), else those whose serving indexes were saved at the last shutdown and are still there.
 */
async function warmSet(config: Config, catalog: Catalog, serving: ServingIndexes): Promise<Entry[]> {
  if (config.serving !== "on" && config.warmTables === "") return [];
  if (config.warmTables !== "") {
    const named = config.warmTables.split(",").map((s) => s.trim()).filter((s) => s !== "");
    const found = named.map((id) => catalog.get(id.split(SEP))).filter((e): e is Entry => e?.type === "table");
    const missing = named.filter((id) => !found.some((e) => e.objectId === id));
    if (missing.length) log.warn("--warm-tables names tables that do not exist; they are not waited for", { tables: missing });
    return found;
  }
  const saved = await serving.saved();
  return catalog.allTables().filter((e) => saved.has(dataOf(e)));
}

/** A start fails when this replica's clock is `skewMs` off the store's, more than --max-clock-skew-ms. */
function checkClock(config: Config, skewMs: number): void {
  const where = config.remote ? "the object store" : "the data directory's file system";
  if (Math.abs(skewMs) <= config.maxClockSkewMs) return log.info("clock checked against the data directory's", { skewMs, maxClockSkewMs: config.maxClockSkewMs });
  throw new Error(
    `this replica's clock is ${Math.abs(skewMs)} ms ${skewMs > 0 ? "ahead of" : "behind"} the clock of ${where} (at least; measured on a file it wrote in ${joinPath(config.dataDir, SYSTEM_DIR)}), more than --max-clock-skew-ms ${config.maxClockSkewMs}: it would misjudge the job leases other replicas hold. Set the clock right (NTP) or raise --max-clock-skew-ms`,
  );
}

/** The compute sandboxes' size, and how they may start (these four only: the configuration holds keys). */
const sandboxSize = (c: Config): ComputeSize => ({ workers: c.workers, workerHeapMb: c.workerHeapMb, sandboxMemoryMb: c.sandboxMemoryMb, unsafeSharedSandbox: c.unsafeSharedSandbox });

/**
 * `credential` answers what the API key with a stable id may do now (src/auth/authenticate.ts):
 * refreshes of a view read its source on behalf of the key that defined it.
 */
export async function createServices(config: Config, credential: (key: string) => Principal | null, waiting: (cause: string) => Promise<void> = async () => undefined): Promise<Services> {
  const privateDir = config.stateDir;
  mkdirSync(privateDir, { recursive: true, mode: 0o700 });
  // Before anything is opened: of two starts on one state directory, one goes on.
  await lockStateDir(privateDir);
  // While this process is still small: job processes are forked from it, never from the server.
  startLauncher();
  // An object store that does not answer (a wrong endpoint, a network cut) fails the start in
  // bounded time with one line, instead of LanceDB's retries for minutes.
  const reach = <T>(p: Promise<T>) =>
    config.remote
      ? withDeadline(p, config.storageTimeoutMs, `no answer within ${config.storageTimeoutMs} ms (is the endpoint reachable and are the storage options right? see --storage-timeout-ms)`).catch((err: unknown) => {
          throw new Error(`cannot open the data directory ${config.dataDir}: ${engineReason(err).replace(/\s*\n\s*/g, " ")}`);
        })
      : p;
  if (config.remote) useStorageOptions(config.storageOptions);
  useMetadataCache(config.engineMetadataCacheMb);
  // Opens that may run again: tried again while the store does not answer (openJobs starts work, and is not).
  const retryUntil = Date.now() + config.startRetryMs;
  const retried = <T>(open: () => Promise<T>) => untilAnswered(config, retryUntil, waiting, () => reach(open()));
  const manifest = await untilAnswered(config, retryUntil, waiting, async () => {
    if (config.remote && (await reach(createContainerOf(config.dataDir)))) log.warn("created the data directory's container, which did not exist", { dataDir: config.dataDir });
    return reach(openManifestTable(config.dataDir, privateDir, config.storageOptions));
  });
  // Once the data directory exists (opening the catalog made it): one this process cannot write
  // serves reads but fails every write, so it is not ready, saying why.
  const unwritable = [...(config.remote ? [] : [config.dataDir]), privateDir].map(writeProblem).find((p) => p !== null) ?? null;
  if (unwritable) log.error("not ready: a directory is not writable", { cause: unwritable });
  // At the store's first answer, before anything judges a lease: a clock off the store's by more
  // than the bound misjudges other replicas' leases.
  if (!unwritable) {
    const skewMs = await retried(() => measureSkew(joinPath(config.dataDir, SYSTEM_DIR))).catch((err: unknown) => {
      log.warn("the clock was not checked against the data directory's", { error: engineReason(err) });
      return 0;
    });
    checkClock(config, skewMs);
  }
  const freshness = { intervalMs: config.consistencyIntervalMs, keepMs: config.keepFreshMs };
  const catalog = await openCatalog(manifest, freshness, config.dataDir);
  const tables = await retried(() => openTables(config.dataDir, freshness, config.storageOptions));
  const pool = createWorkerPool(config);
  // A tenant's checks queue in its own sandbox: a few per worker, so one tenant's slow code holds
  // few of the server's request slots; the sandboxes yield the CPU to the server's own work.
  const spare = config.spareProcesses === "on";
  const compute = createTenantCompute({ ...sandboxSize(config), sandboxes: config.tenantSandboxes, spare, admitted: config.workers * 4, niceness: 10 });
  const system = openSystemTables(config.dataDir, config.storageOptions);
  const [valueVersions, views, claims, indexSpecs] = await retried(() => Promise.all([openValueVersions(system, privateDir), openViews(system, privateDir, freshness), openClaims(system), openIndexSpecs(system)]));
  const readLeases = createReadLeases();
  const versionChecks = createVersionChecks(config.consistencyIntervalMs);
  const replica = replicaId(privateDir, config.replicaName);
  const backfills = { catalog, tables, versions: valueVersions, ...sandboxSize(config), limits: config, limit: config.backfillJobs, jobs: () => jobs, replica };
  const jobs: Jobs = await reach(openJobs(
    system,
    privateDir,
    [
      indexBuildKind({ catalog, tables, specs: indexSpecs, limit: config.indexBuilds }),
      backfillKind(backfills),
      backfillTaskKind(backfills),
      viewRefreshKind({ catalog, tables, views, ...sandboxSize(config), timeoutMs: config.udfTimeoutMs, limit: config.refreshJobs, spare, credential }),
      maintenanceKind({ catalog, tables, retention: { views, leases: readLeases, servingPinMs: config.servingPinMs }, jobs: () => jobs, retainMs: config.retainVersionsMs, maxVersions: config.maintenanceMaxVersions, maxIndexSegments: config.maintenanceMaxIndexSegments, specs: indexSpecs, versionChecks, limit: config.maintenanceJobs, spare }),
    ],
    engineReason,
    { ...config, replica },
  ));
  const auto = autoBackfill({ jobs, tables, workers: config.workers, delayMs: config.autoBackfillDelayMs });
  const refreshes = autoRefresh({ jobs, tables, views, catalog, workers: config.workers, minRows: config.autoRefreshMinRows, cooldownMs: config.autoRefreshCooldownMs, credential });
  const spacing = createCommitSpacing(config.commitSpacingMs);
  const maintenance = autoMaintenance({
    jobs,
    tables,
    catalog,
    spacing,
    settings: {
      enabled: config.autoMaintenance === "on",
      smallFragments: config.maintenanceSmallFragments,
      unindexedRows: config.maintenanceUnindexedRows,
      deletedPercent: config.maintenanceDeletedPercent,
      cooldownMs: config.maintenanceCooldownMs,
      maxSharePercent: config.maintenanceMaxShare,
      maxIndexSegments: config.maintenanceMaxIndexSegments,
      sweepMs: config.maintenanceSweepMs,
    },
  });
  const serving = createServingIndexes(config, tables, replica);
  const toWarm = await warmSet(config, catalog, serving);
  // What follows every commit: one subscriber a line; the serving index's update before the write is answered.
  tables.commits.subscribeAwaited(serving.committed);
  tables.onRemoved(serving.forget);
  tables.beforeMove(serving.beforeMove);
  const forgetVersions = (entry: Entry) => {
    if (entry.location) versionChecks.forget(tableDir(tables.root, entry));
  };
  tables.onRemoved(forgetVersions);
  const lifecycle: Lifecycle = { draining: false, closed: false, full: false, unready: unwritable, warming: toWarm.length, warmTimedOut: false };
  const onCommit = tables.commits.subscribe;
  onCommit((c) => (c.byCachedHandle || c.branch !== null ? undefined : tables.evict(c.table.objectId)));
  onCommit(auto.committed);
  onCommit(refreshes.committed);
  onCommit(maintenance.committed);
  // A version deleted from the history may be published again with other files.
  onCommit((c) => (c.change === "history" ? forgetVersions(c.table) : undefined));
  return {
    config,
    catalog,
    system,
    claims,
    tables,
    appends: createGroupCommit(tables, spacing, (parts) => pool.joinFiles(parts)),
    searches: createSearchBatcher({ batchMax: config.batchMax, slots: config.batchSlots, choice: createBatchChoice({ ...CHOICE, everyMs: config.batchMeasureMs }) }),
    serving,
    jobs,
    pool,
    compute,
    valueVersions,
    views,
    readLeases,
    versionChecks,
    lifecycle,
    async warm() {
      if (toWarm.length === 0) return;
      const started = Date.now();
      log.info("not ready until serving indexes are warm", { tables: toWarm.map((e) => e.objectId), timeoutMs: config.warmTimeoutMs });
      const done = Promise.all(
        toWarm.map((e) =>
          serving
            .warm(e)
            .catch((err: unknown) => log.warn("warming a serving index failed; LanceDB serves the table", { table: e.objectId, error: String(err) }))
            .finally(() => lifecycle.warming--),
        ),
      );
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((res) => (timer = setTimeout(() => res("late"), config.warmTimeoutMs)));
      const ended = await Promise.race([done, late]);
      clearTimeout(timer);
      if (ended === "late") {
        lifecycle.warmTimedOut = true;
        log.warn("ready before every serving index is warm: --warm-timeout-ms passed; LanceDB serves the tables still warming", { tables: lifecycle.warming, timeoutMs: config.warmTimeoutMs });
      } else log.info("serving indexes warm: ready", { tables: toWarm.length, seconds: (Date.now() - started) / 1000 });
    },
    async close(deadlineMs = Infinity) {
      await inTurn(deadlineMs, [
        // At most half: a serving index not saved is rebuilt after the restart, a job not handed back waits for its lease.
        ["saving serving indexes", () => serving.close(), 0.5],
        [
          "stopping triggers and caches",
          () => {
            auto.close();
            refreshes.close();
            maintenance.close();
            stopSpares();
            catalog.close();
            tables.close();
            views.close();
          },
        ],
        ["recording the jobs' stops", () => jobs.close()],
        [
          "stopping the worker pool, compute sandboxes and claims",
          () => {
            stopLauncher();
            return Promise.all([pool.destroy(), compute.close(), claims.close()]);
          },
        ],
        // Last: the steps above write system tables (jobs' stops, claims), and a compaction their
        // commits started must not write after the process says it has closed.
        ["finishing the system tables' compactions", () => system.close()],
      ]);
    },
  };
}
