// Prometheus metrics (GET /metrics): one registry, the recorders the layers call, and the gauges
// read off live state at scrape time. Everything that is state (in flight, pool, jobs, open
// tables) costs nothing until a scrape asks for it. The per-request series are plain numbers per
// operation, handed to prom-client only when scraped: its own labelled counter and histogram cost
// ~0.6 µs a request (label checks and hashing), 15% of an in-process namespace describe
// (`npm run bench:micro`), against ~0.05 µs for these.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricValueWithName } from "prom-client";

const registry = new Registry();

/** Latency buckets from 1 ms to 10 s. */
const LATENCY = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What one operation's requests added up to. */
interface OpStats {
  /** Requests by status class (index: status / 100; 0 for aborted). */
  byClass: number[];
  /** Requests per latency bucket (not cumulative; the last is past 10 s). */
  buckets: number[];
  sum: number;
  count: number;
}
const CLASSES = ["aborted", "1xx", "2xx", "3xx", "4xx", "5xx"];
const byOperation = new Map<string, OpStats>();

new Counter({
  name: "quiver_requests_total",
  help: "Requests answered, by operation (the route table's name) and status class",
  labelNames: ["operation", "status_class"] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [operation, s] of byOperation) {
      s.byClass.forEach((n, i) => n > 0 && this.inc({ operation, status_class: CLASSES[i] }, n));
    }
  },
});

const LATENCY_NAME = "quiver_request_duration_seconds";
// A histogram in prom-client's exported shape, read off byOperation (registered as any metric is).
const latency = {
  name: LATENCY_NAME,
  help: "Time from the request line to the last byte written, by operation",
  type: "histogram",
  aggregator: "sum",
  get() {
    const values: MetricValueWithName<string>[] = [];
    for (const [operation, s] of byOperation) {
      let acc = 0;
      LATENCY.forEach((le, i) => {
        acc += s.buckets[i];
        values.push({ metricName: `${LATENCY_NAME}_bucket`, labels: { le, operation }, value: acc });
      });
      values.push({ metricName: `${LATENCY_NAME}_bucket`, labels: { le: "+Inf", operation }, value: s.count });
      values.push({ metricName: `${LATENCY_NAME}_sum`, labels: { operation }, value: s.sum });
      values.push({ metricName: `${LATENCY_NAME}_count`, labels: { operation }, value: s.count });
    }
    return { name: LATENCY_NAME, help: latency.help, type: "histogram", values, aggregator: "sum" };
  },
};
registry.registerMetric(latency as unknown as Histogram);
const unavailable = new Counter({
  name: "quiver_unavailable_total",
  help: "503 answers by reason",
  labelNames: ["reason"] as const,
  registers: [registry],
});
const poolTasks = new Histogram({
  name: "quiver_pool_task_seconds",
  help: "Worker-pool task time (queue wait included), by task kind",
  labelNames: ["task"] as const,
  buckets: LATENCY,
  registers: [registry],
});
const jobRows = new Counter({
  name: "quiver_job_rows_processed_total",
  help: "Rows processed by background jobs, by job kind",
  labelNames: ["kind"] as const,
  registers: [registry],
});
const batchSize = new Histogram({
  name: "quiver_batch_size",
  help: "Query vectors per engine call of batchable vector searches (1: a search that ran alone)",
  buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
  registers: [registry],
});
const batchWait = new Histogram({
  name: "quiver_batch_wait_seconds",
  help: "Time a batchable vector search waited for a free engine slot before its engine call",
  buckets: [0, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [registry],
});
const batchIdle = new Histogram({
  name: "quiver_batch_idle_seconds",
  help: "Time no engine call of batchable vector searches was running before the next started (the engine's idle time between batches)",
  buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1],
  registers: [registry],
});
const catalogRefreshes = new Counter({
  name: "quiver_catalog_refreshes_total",
  help: "Checks of the catalog for changes made by other processes",
  registers: [registry],
});
const FRESHNESS_CACHES = ["table", "catalog", "views"] as const;
const freshnessChecks = new Counter({
  name: "quiver_freshness_checks_total",
  help: "Re-checks of cached state against storage for other processes' changes, by cache; ahead=true: in the background before a read needed one (--keep-fresh-ms)",
  labelNames: ["cache", "ahead"] as const,
  registers: [registry],
});
for (const cache of FRESHNESS_CACHES) for (const ahead of ["true", "false"]) freshnessChecks.inc({ cache, ahead }, 0);

/** What maintenance looks at, per table branch (src/engine/maintenance.ts, tableFigures). */
export interface TableFigureSample {
  fragments: number;
  small_fragments: number;
  unindexed_rows: number;
  deleted_rows: number;
  versions: number;
  bytes: number;
}

// Per table branch, its figures as last read (by `stats`, an automatic maintenance check or a
// maintenance job's look before it starts). Bounded: past MAX_TABLES the least recently read
// table's series go, so a deployment with many tables exports those in use, not every one.
const MAX_TABLES = 1000;
/**
 * Whether a table (by object id) is in the catalog as this replica knows it: the series of a table
 * dropped or renamed (here, or by another replica once this one's catalog sees it) are no longer
 * exported, and its figures are forgotten.
 */
const known = (table: string) => sources?.tableExists(table) ?? true;
const figures = new Map<string, { table: string; branch: string; sample: TableFigureSample }>();

export function recordTableFigures(table: string, branch: string | null, sample: TableFigureSample): void {
  const key = `${table}\u0000${branch ?? ""}`;
  figures.delete(key);
  figures.set(key, { table, branch: branch ?? "main", sample });
  if (figures.size > MAX_TABLES) figures.delete(figures.keys().next().value!);
}

const TABLE_GAUGES: [keyof TableFigureSample, string][] = [
  ["fragments", "fragments"],
  ["small_fragments", "fragments under Lance's compaction target"],
  ["unindexed_rows", "rows its indexes do not cover yet (all indexes together)"],
  ["deleted_rows", "rows deleted but still in their fragments"],
  ["versions", "versions kept"],
  ["bytes", "data and index bytes the current version references"],
];
for (const [field, what] of TABLE_GAUGES) {
  new Gauge({
    name: `quiver_table_${field}`,
    help: `Per table branch, as last read: ${what}`,
    labelNames: ["table", "branch"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, { table, branch, sample }] of figures) {
        if (known(table)) this.set({ table, branch }, sample[field]);
        else figures.delete(key);
      }
    },
  });
}

/**
 * Why a 503 was answered: the one list the refusals, the 503 errors, the access log and the metric
 * share. A module that answers 503 for a new reason adds it here (listed reasons are exported at 0
 * from the start, so alerts can be written before the first one happens).
 */
const UNAVAILABLE_REASONS = [
  "in_flight",
  "draining",
  "not_ready",
  "pool_queue",
  "body_readers",
  "address_body_readers",
  "credential_body_readers",
  "identity_body_readers",
  "large_responses",
  "response_buffer",
  "rate_limit",
  "concurrency_limit",
  "job_queue",
  "deadline",
  "storage",
  "write_contention",
  "shutdown_deadline",
] as const;
export type UnavailableReason = (typeof UNAVAILABLE_REASONS)[number];
for (const r of UNAVAILABLE_REASONS) unavailable.inc({ reason: r }, 0);

let drainingRefused = 0;
/** 503 `draining` answers so far, counts carried from earlier processes included (util/stop-refusals.ts). */
export const drainingRefusals = () => drainingRefused;
/** Starts the `draining` count where the last process on this state directory left it. */
export function carryDrainingRefusals(n: number): void {
  drainingRefused += n;
  unavailable.inc({ reason: "draining" }, n);
}

/** One finished request: `status` 0 when the client went away before an answer. */
export function recordRequest(operation: string, status: number, seconds: number, reason?: UnavailableReason): void {
  let s = byOperation.get(operation);
  if (!s) {
    s = { byClass: CLASSES.map(() => 0), buckets: [...LATENCY.map(() => 0), 0], sum: 0, count: 0 };
    byOperation.set(operation, s);
  }
  s.byClass[status >= 100 && status < 600 ? (status / 100) | 0 : 0]++;
  let b = 0;
  while (b < LATENCY.length && seconds > LATENCY[b]) b++;
  s.buckets[b]++;
  s.sum += seconds;
  s.count++;
  if (status === 503) unavailable.inc({ reason: reason ?? "other" });
  if (status === 503 && reason === "draining") drainingRefused++;
  if (reason === "deadline") deadlines.inc({ operation });
}

const deadlines = new Counter({
  name: "quiver_request_deadline_exceeded_total",
  help: "Requests stopped at their deadline (--query-timeout-ms or their x-request-timeout-ms), by operation",
  labelNames: ["operation"] as const,
  registers: [registry],
});

// Engine result batches pulled and not yet computed: what LanceDB is working on for queries now.
let engineReads = 0;
new Gauge({
  name: "quiver_engine_reads_running",
  help: "Query result batches the engine is computing now (pulled, not yet answered); a query whose client left or whose deadline passed pulls no more",
  registers: [registry],
  collect() {
    this.set(engineReads);
  },
});

/** An engine pull started (+1) or ended (-1). */
export function recordEngineRead(delta: number): void {
  engineReads += delta;
}

/** Why a job record became Failed (the replica that stored it counts it). */
const JOB_FAILURE_REASONS = ["error", "restart", "shutdown", "replica_lost", "unknown_kind"] as const;
export type JobFailureReason = (typeof JOB_FAILURE_REASONS)[number];
const jobFailures = new Counter({
  name: "quiver_job_failures_total",
  help: "Jobs this replica recorded as Failed, by kind and reason: error (the job's own), restart or shutdown (a kind that cannot resume, interrupted here), replica_lost (a kind that cannot resume, whose replica stopped renewing its lease), unknown_kind",
  labelNames: ["kind", "reason"] as const,
  registers: [registry],
  collect() {
    // Every kind's reasons from the start, so an alert's rate has a series before the first failure.
    for (const { kind } of sources?.jobsHere() ?? []) for (const reason of JOB_FAILURE_REASONS) this.inc({ kind, reason }, 0);
  },
});
const jobTakeovers = new Counter({
  name: "quiver_job_lease_takeovers_total",
  help: "Jobs this replica took over from another replica whose lease lapsed (it died or lost the store), by kind",
  labelNames: ["kind"] as const,
  registers: [registry],
  collect() {
    for (const { kind } of sources?.jobsHere() ?? []) this.inc({ kind }, 0);
  },
});
const maintenanceDuration = new Histogram({
  name: "quiver_maintenance_duration_seconds",
  help: "Maintenance jobs run by this replica, from start to end, by result (succeeded, failed)",
  labelNames: ["result"] as const,
  buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
  registers: [registry],
});

export const recordJobFailure = (kind: string, reason: JobFailureReason) => jobFailures.inc({ kind, reason });
export const recordJobTakeover = (kind: string) => jobTakeovers.inc({ kind });
export const recordMaintenanceDuration = (result: "succeeded" | "failed", seconds: number) => maintenanceDuration.observe({ result }, seconds);

// Per table branch past a maintenance threshold: since when (ms since the epoch), as this replica's
// last automatic check found it. Bounded like the figures.
const overdue = new Map<string, { table: string; branch: string; since: number }>();

/** The automatic check found `table`'s `branch` past a threshold since `since`, or (null) not past any. */
export function recordMaintenanceDue(table: string, branch: string | null, since: number | null): void {
  const key = `${table}\u0000${branch ?? ""}`;
  overdue.delete(key);
  if (since === null) return;
  overdue.set(key, { table, branch: branch ?? "main", since });
  if (overdue.size > MAX_TABLES) overdue.delete(overdue.keys().next().value!);
}

new Gauge({
  name: "quiver_maintenance_lag_seconds",
  help: "Per table branch past a maintenance threshold (small fragments, unindexed rows, deleted rows, versions kept): how long it has been, as this replica's automatic checks found; no series when under every threshold",
  labelNames: ["table", "branch"] as const,
  registers: [registry],
  collect() {
    this.reset();
    const now = Date.now();
    for (const [key, { table, branch, since }] of overdue) {
      if (known(table)) this.set({ table, branch }, (now - since) / 1000);
      else overdue.delete(key);
    }
  },
});

/**
 * Commits that lost a race with another writer (another replica, a job process, LanceDB's own
 * client) and were answered 409 ConcurrentModification, after the engine's own retries: `data`
 * (insert, merge, update, delete), `schema` (column and metadata changes), `version` (a managed
 * version someone else committed first).
 */
const COMMIT_CONFLICTS = ["data", "schema", "version"] as const;
const commitConflicts = new Counter({
  name: "quiver_commit_conflicts_total",
  help: "Commits that lost a race with another writer and were answered 409, by kind (data, schema, version)",
  labelNames: ["kind"] as const,
  registers: [registry],
});
for (const kind of COMMIT_CONFLICTS) commitConflicts.inc({ kind }, 0);

/**
 * Commit attempts repeated after a lost race, as far as this process sees them: LanceDB's own
 * retries of a merge insert (its attempts past the first) on tables (`table`), the shared system
 * tables (`system`) and the catalog (`catalog`); a combined group commit that failed, whose writes
 * were then committed one by one (`group_commit`, one per write).
 */
const COMMIT_RETRIES = ["table", "system", "catalog", "group_commit", "contention"] as const;
const commitRetries = new Counter({
  name: "quiver_commit_retries_total",
  help: "Commit attempts repeated after a failed or lost commit, by kind (table, system and catalog: LanceDB's merge-insert retries; group_commit: writes of a failed combined commit committed alone; contention: a write's commit tried again after the engine gave it up to other writers)",
  labelNames: ["kind"] as const,
  registers: [registry],
});
for (const kind of COMMIT_RETRIES) commitRetries.inc({ kind }, 0);

export const recordCommitConflict = (kind: (typeof COMMIT_CONFLICTS)[number]) => commitConflicts.inc({ kind });
export const recordCommitRetries = (kind: (typeof COMMIT_RETRIES)[number], n: number) => n > 0 && commitRetries.inc({ kind }, n);

/**
 * Quiver's own requests to an object store (its files beside LanceDB's, src/util/store-files.ts);
 * LanceDB's reads and writes of tables run in its native code and are not seen here.
 */
const objectStoreLatency = new Histogram({
  name: "quiver_object_store_request_duration_seconds",
  help: "Quiver's own object-store requests (managed versions' manifests, markers, _refs records, listings for orphan reclaim and sizes; not LanceDB's table I/O), by store (s3, gs, az) and operation, failed ones included",
  labelNames: ["store", "operation"] as const,
  buckets: LATENCY,
  registers: [registry],
});
const objectStoreErrors = new Counter({
  name: "quiver_object_store_errors_total",
  help: "Quiver's own object-store requests that failed (an error from the store or the network; a missing object looked up is not one), by store and operation",
  labelNames: ["store", "operation"] as const,
  registers: [registry],
});

const objectStoreThrottled = new Counter({
  name: "quiver_object_store_throttled_total",
  help: "Object-store requests refused for load after the SDK's own retries (HTTP 429, or 503: S3's SlowDown, Azure's ServerBusy), by store and operation: Quiver's own (as quiver_object_store_errors_total), and engine (a request answered 503 because the store throttled LanceDB's I/O)",
  labelNames: ["store", "operation"] as const,
  registers: [registry],
});

/** A request failed because the store throttled LanceDB's own requests (operation `engine`: their I/O is not seen otherwise). */
export const recordObjectStoreThrottled = (store: string) => objectStoreThrottled.inc({ store, operation: "engine" });

/** `failed`: the request's error, "throttled" when the store refused it for load. */
export function recordObjectStoreRequest(store: string, operation: string, seconds: number, failed: false | "error" | "throttled"): void {
  objectStoreLatency.observe({ store, operation }, seconds);
  // At 0 from the first request, so an alert on the error rate has a series to read.
  objectStoreErrors.inc({ store, operation }, failed ? 1 : 0);
  objectStoreThrottled.inc({ store, operation }, failed === "throttled" ? 1 : 0);
}

export const recordPoolTask = (task: string, seconds: number) => poolTasks.observe({ task }, seconds);
export const recordJobRows = (kind: string, rows: number) => rows > 0 && jobRows.inc({ kind }, rows);
export const recordCatalogRefresh = () => catalogRefreshes.inc();
export const recordFreshnessCheck = (cache: (typeof FRESHNESS_CACHES)[number], ahead: boolean) => freshnessChecks.inc({ cache, ahead: String(ahead) });

/** One engine call of batchable searches: its query vectors, and how long each search waited for it. */
export function recordSearchBatch(vectors: number, waitsSeconds: number[]): void {
  batchSize.observe(vectors);
  for (const w of waitsSeconds) batchWait.observe(w);
}

const batchChosen = new Gauge({
  name: "quiver_batch_chosen",
  help: "1 while concurrent vector searches the engine answers are batched, 0 while they go alone: measured every 30 s, batching kept only where it measurably shortens searches",
  registers: [registry],
});
batchChosen.set(1);
export const recordBatchChoice = (batching: boolean) => batchChosen.set(batching ? 1 : 0);

/** The engine had no batchable search running for this long before a batch started. */
export function recordSearchIdle(seconds: number): void {
  batchIdle.observe(seconds);
}

// Which path each vector search took (the serving index, or the engine and why), counted as plain
// numbers on the search path and handed to prom-client when scraped.
const searchPaths = new Map<string, { path: string; reason: string; n: number }>();
new Counter({
  name: "quiver_search_path_total",
  help: "Vector searches by the path that answered them: serving (the serving index) or engine (LanceDB), with the reason the engine answered (version, branch, option:<name>, not_built, stale, memory, evicted, disabled, failed, filter)",
  labelNames: ["path", "reason"] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const { path, reason, n } of searchPaths.values()) this.inc({ path, reason }, n);
  },
});

/** One vector search answered by `path`; `reason`: why the engine answered ("" when the serving index did). */
export function recordSearchPath(path: "serving" | "engine", reason: string): void {
  const key = `${path}\u0000${reason}`;
  const s = searchPaths.get(key);
  if (s) s.n++;
  else searchPaths.set(key, { path, reason, n: 1 });
}

const servingBuild = new Histogram({
  name: "quiver_serving_build_seconds",
  help: "Time to build a table's serving index from its rows (or to load a saved one: loaded=true)",
  labelNames: ["loaded"] as const,
  buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
  registers: [registry],
});
export const recordServingBuild = (seconds: number, loaded: boolean) => servingBuild.observe({ loaded: String(loaded) }, seconds);

const servingSync = new Histogram({
  name: "quiver_serving_sync_seconds",
  help: "Time to bring a serving index to a table's new version, by how its rows were found: taken (an insert's new rows, by row id), scanned (rows above the highest row id), compared (every row id read and compared: after compactions, deletes, updates)",
  labelNames: ["read"] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});
export const recordServingSync = (read: "taken" | "scanned" | "compared", seconds: number) => servingSync.observe({ read }, seconds);

const servingSyncVersions = new Counter({
  name: "quiver_serving_sync_versions_total",
  help: "Versions serving indexes' syncs followed, by how each one's operation was known: known (an append this replica committed, known without a read), read (its manifest read from the table's store, one GET on an object store: another replica's commit, a job's); read per sync (over quiver_serving_sync_seconds_count) is the store round trips a sync waits for before its rows",
  labelNames: ["how"] as const,
  registers: [registry],
});
export const recordServingSyncVersion = (known: boolean) => servingSyncVersions.inc({ how: known ? "known" : "read" });

const servingEvictions = new Counter({
  name: "quiver_serving_evictions_total",
  help: "Serving indexes dropped to keep all of them within --serving-memory-mb, LanceDB then answering their tables: share (another tenant asked for room while the table's tenant held more than its share), growth (the index grew past what was left)",
  labelNames: ["cause"] as const,
  registers: [registry],
});
export const recordServingEviction = (cause: "share" | "growth") => servingEvictions.inc({ cause });

/** One table's serving index, as /metrics reports it. */
export interface ServingSample {
  table: string;
  /** ready, building, rebuilding, memory (over --serving-memory-mb), evicted (its tenant's room reclaimed), disabled, failed. */
  state: string;
  bytes: number;
  /** Of `bytes`, the cached columns' fields and values. */
  columnBytes: number;
  /** Of `bytes`, the value indexes of equality filters and the bitmaps of the filters last used. */
  filterBytes: number;
  rows: number;
  tombstones: number;
  /** Rows no search could reach, linked again since the index was built or loaded. */
  relinked: number;
  /** The search width calibrated at build time (0: not yet) and the recall@10 its held-out rows found at it. */
  calibratedEf: number;
  calibratedRecall: number;
}

// One source per server (tests run several in one process); each removes itself when it closes.
const servingSources = new Set<() => ServingSample[]>();
// A replica that did not drop or rename a table keeps its index until it learns of it: not exported meanwhile.
const serving = () => [...servingSources].flatMap((read) => read()).filter((s) => known(s.table));
/** Where the serving index gauges read from (src/serving/indexes.ts); the returned function stops it. */
export function watchServing(read: () => ServingSample[]): () => void {
  servingSources.add(read);
  return () => void servingSources.delete(read);
}

const SERVING_GAUGES: [keyof ServingSample, string, string][] = [
  ["bytes", "quiver_serving_index_bytes", "Memory a table's serving index holds (vectors, graph and cached columns, one copy shared by every worker; its row-id map, value indexes and filter bitmaps on the main thread)"],
  ["rows", "quiver_serving_index_rows", "Rows a table's serving index answers (at its version)"],
  ["tombstones", "quiver_serving_index_tombstones", "Rows deleted or replaced since a table's serving index was built, still held until it is rebuilt"],
  ["relinked", "quiver_serving_index_relinked", "Rows of a table's serving index that no search could reach, linked again since it was built or loaded (the graph's health: a count that keeps rising means its links degrade)"],
  ["calibratedEf", "quiver_serving_index_calibrated_ef", "The search width (HNSW's ef) a table's serving index calibrated on a sample of its own rows held out as queries: the narrowest reaching recall@10 0.97 there; searches without ef use it or --serving-ef, the wider"],
  ["calibratedRecall", "quiver_serving_index_calibrated_recall", "Recall@10 the sample of quiver_serving_index_calibrated_ef found at that width, against exact search"],
];
for (const [field, name, help] of SERVING_GAUGES) {
  new Gauge({
    name,
    help,
    labelNames: ["table"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const s of serving()) if (s.state === "ready") this.set({ table: s.table }, s[field] as number);
    },
  });
}
new Gauge({
  name: "quiver_serving_index_part_bytes",
  help: "Of quiver_serving_index_bytes, what each part holds: index (the vectors, their links, row ids and versions, the row-id map), columns (the cached columns' fields and values), filters (value indexes of equality filters, bitmaps of the filters last used)",
  labelNames: ["table", "part"] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const s of serving()) {
      if (s.state !== "ready") continue;
      this.set({ table: s.table, part: "index" }, s.bytes - s.columnBytes - s.filterBytes);
      this.set({ table: s.table, part: "columns" }, s.columnBytes);
      this.set({ table: s.table, part: "filters" }, s.filterBytes);
    }
  },
});
new Gauge({
  name: "quiver_serving_tables",
  help: "Tables with a vector index, by their serving index's state: ready, building, rebuilding (a restore, overwrite, column change or vector index replacement: LanceDB serves it meanwhile), memory (does not fit --serving-memory-mb, or grew past it: LanceDB serves it), evicted (another tenant reclaimed the room its tenant held past its share: LanceDB serves it), disabled, failed",
  labelNames: ["state"] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const state of ["ready", "building", "rebuilding", "memory", "evicted", "disabled", "failed"]) this.set({ state }, 0);
    for (const s of serving()) this.inc({ state: s.state });
  },
});

/** Live state, read when /metrics is scraped. */
export interface MetricSources {
  inFlight(): number;
  /** Seconds the oldest request holding a slot has run (0 when none does). */
  oldestSeconds(): number;
  pool(): { threads: number; busy: number; queued: number; max: number };
  /** Job records by kind and state (index builds are kind `create_index`), zeros included; with `visible`, those on the tables (object ids) it accepts only. */
  jobs(visible?: (objectId: string) => boolean): { kind: string; state: string; count: number }[];
  /** Whether the catalog, as this replica knows it, holds this table (object id). */
  tableExists(objectId: string): boolean;
  /** This replica's own runs and slots, by kind, zeros included. */
  jobsHere(): { kind: string; running: number; slots: number }[];
  openTables(): number;
  /** Whether the server is draining for a shutdown. */
  draining(): boolean;
  /** At start: the tables whose serving indexes still warm, and whether --warm-timeout-ms passed with some left. */
  warm(): { tables: number; timedOut: boolean };
}

let sources: MetricSources | null = null;

/**
 * Where the state gauges read from; also starts the process metrics (memory, CPU, event-loop delay
 * from perf_hooks.monitorEventLoopDelay, GC). Every series carries `replica`: this replica's name
 * (--replica-name), so series of several replicas stay apart where they are gathered. Called once
 * by the server process, not by jobs' child processes, which record nothing anyone scrapes.
 */
let replicaLabel: { replica?: string } = {};
/**
 * The event-loop delay's sampling timer, in ms. prom-client's 10 ms woke an idle server 100 times a
 * second, a third of its idle CPU; a stall still delays the next sample by its length, so p99 and
 * max (docs/alerts.yml alerts at 100 ms) still see it.
 */
const LOOP_DELAY_SAMPLE_MS = 100;

export function watch(s: MetricSources, replica: string): void {
  replicaLabel = { replica };
  registry.setDefaultLabels(replicaLabel);
  if (!sources) collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: LOOP_DELAY_SAMPLE_MS });
  sources = s;
}

const gauge = (name: string, help: string, read: (g: Gauge) => void, labelNames: string[] = []) =>
  new Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      if (sources) read(this);
    },
  });

gauge("quiver_requests_in_flight", "Requests holding an admission slot", (g) => g.set(sources!.inFlight()));

// The most requests in flight at once in this wall-clock second and the one before: a scrape once a
// second then sees every peak, where quiver_requests_in_flight sees only the moment of the scrape
// (a load tester's closed loop of 8 read as 1 there). Two numbers, no timer.
const peak = { second: 0, now: 0, before: 0 };

/** Requests in flight just rose to `n` (the server's admission calls this). */
export function recordInFlight(n: number): void {
  const second = Math.floor(performance.now() / 1000);
  if (second !== peak.second) {
    peak.before = second === peak.second + 1 ? peak.now : 0;
    peak.now = 0;
    peak.second = second;
  }
  if (n > peak.now) peak.now = n;
}

gauge("quiver_in_flight_max", "The most requests holding an admission slot at once over this second and the one before", (g) => {
  recordInFlight(sources!.inFlight());
  g.set(Math.max(peak.now, peak.before));
});
gauge("quiver_oldest_request_seconds", "How long the oldest request holding an admission slot has been running (a request that never ends never reaches quiver_request_duration_seconds; this rises instead)", (g) => g.set(sources!.oldestSeconds()));
gauge("quiver_pool_threads", "Worker-pool threads started (they start on demand and stop when idle)", (g) => g.set(sources!.pool().threads));
gauge("quiver_pool_threads_max", "Worker-pool threads at most (--workers)", (g) => g.set(sources!.pool().max));
gauge("quiver_pool_threads_busy", "Worker-pool threads running a task", (g) => g.set(sources!.pool().busy));
gauge("quiver_pool_queue_length", "Worker-pool tasks waiting for a thread", (g) => g.set(sources!.pool().queued));
gauge("quiver_open_table_handles", "Cached open table handles", (g) => g.set(sources!.openTables()));
gauge("quiver_warm_tables", "Tables whose serving indexes still load or build at start (`/readyz` answers 503 warming until none, or --warm-timeout-ms)", (g) => g.set(sources!.warm().tables));
gauge("quiver_warm_timed_out", "1 when --warm-timeout-ms passed at start with serving indexes still warming (the server is ready anyway; LanceDB answers those tables meanwhile), else 0", (g) => g.set(sources!.warm().timedOut ? 1 : 0));
gauge("quiver_draining", "1 while the server drains for a shutdown (readiness answers 503), else 0", (g) => g.set(sources!.draining() ? 1 : 0));
gauge(
  "quiver_replica_jobs_running",
  "Background jobs this replica runs now (it holds their lease), by kind; quiver_jobs counts the whole store, the same on every replica",
  (g) => {
    for (const { kind, running } of sources!.jobsHere()) g.set({ kind }, running);
  },
  ["kind"],
);
gauge(
  "quiver_replica_job_slots",
  "Jobs of each kind this replica runs at once at most (--index-builds, --backfill-jobs, ...)",
  (g) => {
    for (const { kind, slots } of sources!.jobsHere()) g.set({ kind }, slots);
  },
  ["kind"],
);

const JOBS_HELP = "Background jobs kept (up to the store's retention), by kind and state; index builds are kind create_index";

/**
 * quiver_jobs, counted over the jobs of the tables `visible` accepts (all without it): job records
 * name their table, which no label here shows, so the counts are scoped where they are counted, in
 * a registry of their own per scrape.
 */
async function jobCounts(visible?: (objectId: string) => boolean): Promise<string> {
  if (!sources) return "";
  const own = new Registry();
  own.setDefaultLabels(replicaLabel);
  const g = new Gauge({ name: "quiver_jobs", help: JOBS_HELP, labelNames: ["kind", "state"] as const, registers: [own] });
  for (const { kind, state, count } of sources.jobs(visible)) g.set({ kind, state }, count);
  return `\n${await own.metrics()}`;
}

export const metricsContentType = registry.contentType;

// Labels whose value is a catalog object's id: a series carrying one tells of that object (a
// table's size, its name), so it is shown only to a scrape that may see the object.
const OBJECT_LABEL = /[{,](?:table|namespace)="((?:[^"\\]|\\.)*)"/g;
const unescapeLabel = (v: string) => v.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));

/**
 * The text exposition; with `visible`, without the series labelled with an object (a table or
 * namespace, by its object id) that `visible` refuses.
 */
export async function renderMetrics(visible?: (objectId: string) => boolean): Promise<string> {
  const [text, jobs] = await Promise.all([registry.metrics(), jobCounts(visible)]);
  if (!visible) return text + jobs;
  const shown = (line: string) => line.startsWith("#") || [...line.matchAll(OBJECT_LABEL)].every((m) => visible(unescapeLabel(m[1])));
  return text.split("\n").filter(shown).join("\n") + jobs;
}
