// Configuration: flags > environment (QUIVER_*) > JSON config file > defaults, validated once at startup.
// The option table below is the single definition; docs/configuration.md's table mirrors it (test/readme.test.ts).
import { readFileSync } from "node:fs";
import { availableParallelism, hostname } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

/** Is this data directory (or a location inside it) on an object store (s3://, gs://, az://)? */
export const isRemote = (p: string) => /^(s3|gs|az):\/\//i.test(p);

type Kind = "string" | "int" | "number" | "bool";
interface Option {
  key: string;
  kind: Kind;
  def: string | number | boolean | undefined;
  min?: number;
  max?: number;
  doc: string;
}

export const options = [
  { key: "host", kind: "string", def: "127.0.0.1", doc: "address to listen on" },
  { key: "port", kind: "int", def: 8080, min: 0, doc: "port to listen on (0 picks a free one)" },
  { key: "data-dir", kind: "string", def: "./data", doc: "where the catalog and the tables live: a local directory (a path or file://) or an object store URI (s3://bucket/prefix, gs://bucket/prefix, az://container/prefix); see Object storage" },
  { key: "storage-option", kind: "string", def: undefined, doc: "an object store option for LanceDB as `key=value` (repeatable; e.g. `region=eu-west-1`, `endpoint=…`, `allow_http=true`); environment: QUIVER_STORAGE_OPTIONS as a JSON object; config file: `storage-options` as an object. Values are never logged" },
  { key: "state-dir", kind: "string", def: undefined, doc: "local directory for this process's own state (job records, the generated admin.key; what replicas share is in `<data-dir>/.system/`); default `<data-dir>/.quiver`; required when the data directory is on an object store" },
  { key: "storage-timeout-ms", kind: "int", def: 20_000, min: 100, doc: "on start, how long an object store may take to answer before Quiver gives up with an error" },
  { key: "workers", kind: "int", def: availableParallelism(), min: 1, doc: "threads of the worker pool that decodes large Arrow uploads, and of each compute sandbox process that runs user code (default: core count)" },
  { key: "worker-heap-mb", kind: "int", def: 1024, min: 64, doc: "JavaScript heap limit of each worker thread; a task past it fails alone and its worker is replaced" },
  { key: "max-json-body", kind: "int", def: 1 << 20, min: 1, doc: "largest JSON request body, bytes" },
  { key: "max-json-depth", kind: "int", def: 64, min: 2, doc: "deepest nesting of arrays and objects in a JSON body or JSON rows (a struct row counts one per level); deeper is answered 400" },
  { key: "max-arrow-body", kind: "int", def: 256 << 20, min: 1, doc: "largest Arrow IPC request body, bytes" },
  { key: "max-decoded-body", kind: "int", def: 256 << 20, min: 1, max: 2 ** 31 - 1, doc: "most bytes a write's rows may decode to: an Arrow IPC body's compressed buffers and dictionary-encoded columns expanded (checked from its metadata before either is), JSON rows' strings at their bytes, and every row at least its table's width, absent and null values included; more are answered 400 (see docs/security.md, Bounded decoding)" },
  { key: "max-value-bytes", kind: "int", def: 16 << 20, min: 1, max: 2 ** 31 - 1, doc: "largest one value a write may store, bytes (a string, a binary, a list's items, a struct's fields): values sent as JSON rows or Arrow IPC, and what an update's or an added column's SQL expression or an alter_columns cast makes of the stored values, are checked against it; larger is answered 400 naming the column, nothing stored (see docs/security.md, Bounded decoding)" },
  { key: "max-in-flight", kind: "int", def: 256, min: 1, doc: "requests executing at once; more are answered 503 Slow down" },
  { key: "max-expression-length", kind: "int", def: 65_536, min: 1, doc: "longest SQL expression (filter, predicate, where, column expression, SQL UDF body) accepted, characters; longer ones are answered 400" },
  { key: "max-expression-cost", kind: "int", def: 160, min: 1, doc: "most operators, keyword operators and parentheses in one SQL expression (a bound on its depth, over which the engine recurses; the lowest crash measured is at 689, see docs/security.md); more are answered 400" },
  { key: "max-expression-array", kind: "int", def: 1024, min: 1, doc: "most elements (array items or characters) one value of a SQL expression may build in one row, through array_repeat, repeat, lpad, rpad, array_resize, range and the like, whose sizes must then be literals; more are answered 400 (see docs/security.md, Expression memory)" },
  { key: "max-expression-copies", kind: "int", def: 16, min: 1, doc: "most times one value of a SQL expression may hold one column's value (repeat(s, n), concat(s, s, …), replace growing s); more are answered 400" },
  { key: "max-body-readers", kind: "int", def: 128, min: 1, doc: "requests whose body is still arriving; they hold no execution slot, and more are answered 503 Slow down" },
  { key: "max-body-readers-per-address", kind: "int", def: 32, min: 1, doc: "request bodies arriving at once from one client address; more are answered 503 Slow down" },
  { key: "max-body-readers-per-credential", kind: "int", def: 64, min: 1, doc: "request bodies arriving at once for one credential; more are answered 503 Slow down" },
  { key: "max-identity-body-readers", kind: "int", def: 16, min: 1, doc: "request bodies arriving at once from clients that send no credential header (their credential is the JSON body's `identity`, read up to max-json-body); more are answered 503 Slow down" },
  { key: "max-identity-body", kind: "int", def: 64 << 10, min: 2, doc: "largest JSON body from a client that sends no credential header, bytes: its credential is the body's `identity`, and the body is read and parsed before anything knows who sent it; a larger one is answered 413 at once, unread (send x-api-key or Authorization instead)" },
  { key: "body-timeout-ms", kind: "int", def: 8000, min: 100, doc: "time a request body may take to arrive, plus its size at body-min-rate; past it the answer is 408 and the connection is closed (kept below uWS's own ~10 s cut of stalled uploads, which answers nothing)" },
  { key: "body-min-rate", kind: "int", def: 65_536, min: 1, doc: "slowest body upload accepted, bytes per second: a body of N bytes gets body-timeout-ms + N / body-min-rate seconds" },
  { key: "response-idle-ms", kind: "int", def: 30_000, min: 100, doc: "a client that takes no response bytes for this long is disconnected" },
  { key: "query-timeout-ms", kind: "int", def: 30_000, min: 10, doc: "longest a query (query, count_rows, analyze_plan) may run, from its body's arrival to its last result byte; a request's `x-request-timeout-ms` header may ask for less. Past it the engine's work stops and the answer is 503 with reason `deadline` (or, mid-stream, a cut connection); see docs/security.md, Query deadlines" },
  { key: "write-timeout-ms", kind: "int", def: 60_000, min: 10, doc: "longest a write or admin request may run, from its body's arrival to its answer; a request's `x-request-timeout-ms` header may ask for less. Past it the answer is 503 with reason `deadline`, and a write whose commit has not begun is abandoned (never committed after); one whose commit had begun says so, and a retry under the same Idempotency-Key gets its answer; see docs/operations.md, Deadlines" },
  { key: "max-large-responses", kind: "int", def: 2, min: 1, doc: "query results streaming at once (the engine holds read-ahead for each); more wait up to response-wait-ms, then 503 Slow down" },
  { key: "max-response-buffer-bytes", kind: "int", def: 256 << 20, min: 65_536, doc: "response bytes buffered for clients that have not taken them yet, all responses together; past it new query results wait up to response-wait-ms, then 503 Slow down" },
  { key: "response-wait-ms", kind: "int", def: 5000, min: 0, doc: "how long a query result may wait for a turn under max-large-responses or max-response-buffer-bytes" },
  { key: "rate-limit-rps", kind: "int", def: 0, min: 0, doc: "requests per second per credential (bursts up to one second's worth); more are answered 503 Slow down with Retry-After (0: no limit)" },
  { key: "rate-limit-concurrent", kind: "int", def: 0, min: 0, doc: "requests in flight per credential; more are answered 503 Slow down (0: no limit)" },
  { key: "idempotency-window-ms", kind: "int", def: 86_400_000, min: 1000, doc: "how long a mutation's result is kept under its Idempotency-Key, so a retry returns it instead of applying again" },
  { key: "orphan-min-age-ms", kind: "int", def: 3_600_000, min: 0, doc: "unreferenced table directories younger than this are never reclaimed (on start, or by POST /v1/admin/reclaim)" },
  { key: "drain-delay-ms", kind: "int", def: 10_000, min: 0, doc: "on SIGTERM, how long the server keeps serving (answers closing their connections) while `/readyz` answers 503, so load balancers take it out of rotation before it stops listening; longer than the balancer's check interval × failures to mark a server down (HAProxy's defaults: 2 s × 3). SIGINT, or a second signal, skips it" },
  { key: "shutdown-deadline-ms", kind: "int", def: 30_000, min: 0, doc: "after the drain delay, how long requests in flight may take to finish (one still running then is answered 503 with Connection: close) and then the services take to close (at least 3 s: serving indexes saved, job records stored); the process exits within drain delay + this + 4 s" },
  { key: "batch-max", kind: "int", def: 64, min: 0, doc: "most concurrent vector searches on one table sent to the engine as one multi-vector search (0: no batching); see Query batching" },
  { key: "batch-slots", kind: "int", def: 2, min: 1, doc: "engine calls one group of compatible vector searches runs at once; a free one takes the waiting searches once they are 1/slots (rounded down) of the group's searches in flight, counting those just answered (their clients are about to send the next); the calls take turns, starting at least 1/slots of an engine call apart" },
  { key: "serving", kind: "string", def: "on", doc: "on: vector searches of a table's indexed vector column are answered in the worker pool from a serving index (HNSW, in memory, one copy shared by the workers) where it can, LanceDB answering the rest; off: LanceDB answers every search (a table's `quiver.serving` property overrides it); see docs/design.md, Serving index" },
  { key: "serving-memory-mb", kind: "int", def: 2048, min: 0, doc: "most memory all serving indexes together may hold, growth included; a table whose index would not fit, or grows past it, is served by LanceDB (one log line, and `quiver_serving_tables{state=\"memory\"}`); each tenant has a fair share that another tenant's arrival reclaims" },
  { key: "serving-ef", kind: "int", def: 64, min: 1, doc: "the least width (HNSW's ef) a serving-index search keeps candidates for: each index calibrates its own at build time (the narrowest reaching recall@10 0.97 on a sample of its rows held out), and searches use the wider of the two; a request's `ef` sets the width, its `nprobes` scales the default (× nprobes / 20), its `refine_factor` raises it to k × refine_factor" },
  { key: "serving-pin-ms", kind: "int", def: 3_600_000, min: 0, doc: "at a shutdown each saved serving index's version is tagged `quiver-serving-<replica>`, which maintenance keeps (with every later version) so the restart brings the index forward instead of rebuilding it; the restart deletes the tag, and maintenance deletes one whose version was committed longer ago than this (a replica that never came back); see docs/design.md, Serving index" },
  { key: "start-retry-ms", kind: "int", def: 600_000, min: 0, doc: "at start, how long a data directory on object storage that does not answer (no answer within --storage-timeout-ms, a refused connection) is tried again, with backoff from 1 s to 30 s, each try logged; the server listens meanwhile, `/readyz` answering 503 `storage`; past it, or at an error the store answers, the start fails (exit 1); 0: fail at the first" },
  { key: "warm-tables", kind: "string", def: "", doc: "tables (`ns$table`, comma-separated) whose serving indexes are loaded or built at start before `/readyz` answers 200; empty: the tables whose serving indexes were saved at the last shutdown; see docs/operations.md, Production checklist" },
  { key: "warm-timeout-ms", kind: "int", def: 120_000, min: 0, doc: "longest `/readyz` answers 503 `warming` at start while serving indexes load; past it the server is ready anyway (`quiver_warm_timed_out` 1) and LanceDB answers the tables still warming" },
  { key: "batch-measure-ms", kind: "int", def: 30_000, min: 0, doc: "how often batching is measured against sending searches alone (a second of each); it stays on only where batched searches take measurably less time (0: never measured, batching stays on)" },
  { key: "max-queue", kind: "int", def: 1024, min: 0, doc: "large uploads waiting for an ingest thread; more are answered 503 Slow down" },
  { key: "ingest-inline-max-bytes", kind: "int", def: 32 << 10, min: 0, doc: "plain Arrow IPC request bodies and bodies of JSON rows up to this size are decoded on the main thread (JSON rows only where they can build at most 16,384 values: a row per 3 bytes times the table's columns); larger ones, and compressed or dictionary-encoded Arrow of any size, in the worker pool, so uploads do not stall queries" },
  { key: "consistency-interval-ms", kind: "int", def: 1000, min: 0, doc: "how stale a cached table or catalog, or the check that a version a request names still has its files, may be before it is re-checked for writes (and cleanups) by other processes (0: check on every request)" },
  { key: "keep-fresh-ms", kind: "int", def: 10_000, min: 0, doc: "how long after its last read a cached table, the catalog and the view definitions keep being re-checked in the background (at three quarters of the consistency interval), so a read after a pause does not wait for storage (0: never; off below a 200 ms interval)" },
  { key: "managed-versioning", kind: "bool", def: false, doc: "tell LanceDB's REST namespace client that tables' versions are managed here: it then commits each version through `version/create` (and reads versions through Quiver), so Quiver sees every commit at once" },
  { key: "index-builds", kind: "int", def: 1, min: 1, doc: "index builds running at once; more wait as Queued" },
  { key: "backfill-jobs", kind: "int", def: 2, min: 1, doc: "column backfills running at once; more wait as Queued" },
  { key: "backfill-tasks", kind: "int", def: 1, min: 1, max: 16, doc: "tasks a backfill of a JavaScript, WebAssembly or Python column is split into (contiguous ranges of its rows), which any replica with a free slot runs, `--backfill-jobs` at once on each; set it to the number of replicas (1: a backfill runs as one job)" },
  { key: "job-lease-ms", kind: "int", def: 30_000, min: 200, doc: "how long a replica holds a running job without renewing its lease (renewed while the job runs, on a timer of its own): a replica that dies has its jobs taken over by another after this, a third more (twice the store's latency where that is longer) and twice --max-clock-skew-ms; see docs/operations.md, Leases and clocks" },
  { key: "max-clock-skew-ms", kind: "int", def: 2000, min: 0, doc: "most this replica's clock may differ from the data directory's store (an object's Last-Modified; on local disk the file system's clock), measured at start on a file it writes in `.system/`: past it the start fails (exit 1) naming both. Other replicas' job leases count as held for twice this longer (each replica may be this far off), so a clock running ahead takes over no live job. The default sits above the second Last-Modified is given in, and costs a dead replica's jobs 4 s more before a takeover; see docs/operations.md, Leases and clocks" },
  { key: "max-queued-jobs-per-credential", kind: "int", def: 32, min: 1, doc: "background jobs (index builds, backfills, view refreshes) one credential may have Queued at once; more are answered 503 Slow down with Retry-After" },
  { key: "max-queued-jobs-per-table", kind: "int", def: 16, min: 1, doc: "background jobs one table (or view) may have Queued at once, whoever submitted them; more are answered 503 Slow down with Retry-After" },
  { key: "engine-metadata-cache-mb", kind: "int", def: 64, min: 1, doc: "most memory LanceDB's metadata cache (manifests and file footers of the versions and fragments read) holds, all tables, the catalog and the system tables together; past it the least recently used go (LanceDB's own default is 1 GiB for each connection); see docs/performance.md, Memory per table" },
  { key: "max-tables-per-tenant", kind: "int", def: 10_000, min: 1, doc: "tables (views included) one tenant, a top-level namespace, may hold, all its nested namespaces together (tables at the root count as one tenant); a create, declare, register or rename into it past this is refused with 403 naming the quota" },
  { key: "max-namespaces-per-tenant", kind: "int", def: 10_000, min: 1, doc: "namespaces one tenant, a top-level namespace, may hold below it (top-level namespaces count as the root's); a namespace create past this is refused with 403 naming the quota" },
  { key: "max-tags-per-table", kind: "int", def: 1000, min: 1, doc: "tags one table may hold (a tenant's bound is this times its tables); a tag create past this is refused with 403 naming the quota, nothing written" },
  { key: "max-branches-per-table", kind: "int", def: 100, min: 1, doc: "branches one table may hold besides main (a tenant's bound is this times its tables); a branch create past this is refused with 403 naming the quota, nothing written; lower than tags since a branch create and the branch list read every branch of the table" },
  { key: "max-running-jobs-per-tenant", kind: "int", def: 1, min: 1, doc: "jobs of one kind (index builds, backfills, ...) a tenant, the top-level namespace of the job's table, runs at once while another tenant's job of that kind waits as Queued: the next free slot goes to the waiting tenant, and a resumable job (backfill, view refresh, maintenance) of a tenant past it is queued again to free one (it resumes from its checkpoint); alone, a tenant may use every slot" },
  { key: "max-job-seconds", kind: "int", def: 3600, min: 0, doc: "longest a background job may run, seconds from its start (a takeover keeps it): past it, it is stopped as a cancel stops it (what it committed stays) and its record ends Failed saying so (0: no bound)" },
  { key: "udf-timeout-ms", kind: "int", def: 10_000, min: 10, doc: "longest a JavaScript, Python or WebAssembly UDF may run on one batch before its job fails" },
  { key: "tenant-sandboxes", kind: "int", def: 8, min: 1, doc: "credential scopes (a credential's longest namespace prefix covering the object; an unscoped credential's: the object's top-level namespace) whose user code has a compute sandbox process of its own in the server at once, for the checks of add_columns, alter_columns and view create; another tenant waits for one to go idle (docs/security.md)" },
  { key: "sandbox-memory-mb", kind: "int", def: undefined, min: 256, doc: "most writable memory (the kernel's data limit, RLIMIT_DATA) of each compute sandbox process: every thread's heap, typed arrays, WebAssembly and Python memory, SQLite's; past it allocations fail, and a sandbox within 1/16 of it is killed, its tasks failing with an error naming it (default: --workers x --worker-heap-mb + 1024; docs/security.md)" },
  { key: "unsafe-shared-sandbox", kind: "bool", def: false, doc: "where the host cannot isolate the compute sandbox (Linux namespaces through util-linux, as root or with unprivileged user namespaces), run user code anyway in a weaker sandbox that shares the host's files, processes and signals, instead of refusing it (docs/security.md)" },
  { key: "spare-processes", kind: "string", def: "on", doc: "on: one compute sandbox process, and one maintenance and one view-refresh job process, are kept started ahead, so that a tenant's first check and a short job do not wait for a process start (0.3–1.7 s on a loaded 2-core machine); off: each starts when it is needed, and none is started that may go unused (less CPU where checks and jobs are rare: the test suite runs with it off)" },
  { key: "udf-wasm-memory-mb", kind: "int", def: 256, min: 1, doc: "largest memory a WebAssembly UDF instance may grow to" },
  { key: "refresh-jobs", kind: "int", def: 2, min: 1, doc: "materialized-view refreshes running at once; more wait as Queued" },
  { key: "auto-refresh-min-rows", kind: "int", def: 1, min: 1, doc: "source rows that must have changed since an auto_refresh view's last refresh before it refreshes again" },
  { key: "auto-refresh-cooldown-ms", kind: "int", def: 5000, min: 0, doc: "least time between two automatic refreshes of one view" },
  { key: "maintenance-jobs", kind: "int", def: 1, min: 1, doc: "table maintenance jobs (compaction, index upkeep, version cleanup) running at once; more wait as Queued; see docs/maintenance.md" },
  { key: "retain-versions-ms", kind: "int", def: 7 * 86_400_000, min: 0, doc: "versions newer than this are not removed by maintenance (unless past --maintenance-max-versions), so time travel within it works (default 7 days); see docs/maintenance.md" },
  { key: "maintenance-max-index-segments", kind: "int", def: 16, min: 0, doc: "segments a vector index may have before maintenance rebuilds it whole with its build's parameters (each fold of new rows adds one, and fragments of different segments are never compacted together); 0: never; see docs/maintenance.md" },
  { key: "maintenance-max-versions", kind: "int", def: 100, min: 0, doc: "versions a table branch keeps at most: maintenance removes older ones even inside --retain-versions-ms (tagged versions, branch starts, a view's source version and versions read explicitly stay); every re-check of a table lists its versions; 0: no bound" },
  { key: "auto-maintenance", kind: "string", def: "on", doc: "on: maintain tables by themselves after commits and on the sweep; off: only on request (a table's `quiver.maintenance` property overrides it); see docs/maintenance.md" },
  { key: "maintenance-small-fragments", kind: "int", def: 20, min: 0, doc: "small fragments (under Lance's compaction target) a table branch may hold before it is maintained (0: never for this reason)" },
  { key: "maintenance-unindexed-rows", kind: "int", def: 10_000, min: 0, doc: "rows its indexes do not cover yet (all indexes together) a table branch may hold before it is maintained (0: never for this reason)" },
  { key: "maintenance-deleted-percent", kind: "int", def: 10, min: 0, max: 100, doc: "deleted rows, as a percentage of the rows their fragments hold, a table branch may carry before it is maintained (compaction rewrites such fragments without them; 0: never for this reason)" },
  { key: "maintenance-cooldown-ms", kind: "int", def: 0, min: 0, doc: "least time between the starts of two automatic maintenance jobs of one table branch (0: none; --maintenance-max-share paces them)" },
  { key: "maintenance-max-share", kind: "int", def: 50, min: 1, max: 100, doc: "most of its time, in percent, a table branch spends in automatic maintenance: after a job that took d, the next waits d x (100 - share) / share; while a threshold is passed the next starts as soon as that allows" },
  { key: "commit-spacing-ms", kind: "int", def: 200, min: 0, doc: "while a table branch holds --maintenance-small-fragments small fragments or more, its appends and merge inserts start a commit at most this often (up to twice as long as the fragments grow past the threshold, five times during an index rebuild; commits of 1,000 rows or more never wait), so writers arriving meanwhile share one commit and one fragment; 0: never spaced; see docs/maintenance.md" },
  { key: "maintenance-sweep-ms", kind: "int", def: 600_000, min: 0, doc: "how often every table's main branch is checked (tables other processes write); 0: no sweep" },
  { key: "auto-backfill-delay-ms", kind: "int", def: 1000, min: 0, doc: "after a write to a table with auto_backfill columns, how long to wait for more writes before the follow-up backfill starts" },
  { key: "location-role", kind: "string", def: "read", doc: "least role whose table descriptions carry the table's storage location (read, write or admin); a client given it can open the files itself, see Security" },
  { key: "api-keys", kind: "string", def: undefined, doc: "comma-separated `key:role[:prefix|prefix]` (role: read, write, admin)" },
  { key: "jwt-jwks-url", kind: "string", def: undefined, doc: "JWKS URL to verify bearer JWTs against" },
  { key: "jwt-public-key", kind: "string", def: undefined, doc: "PEM public key (or a path to one) to verify bearer JWTs" },
  { key: "jwt-issuer", kind: "string", def: undefined, doc: "required `iss` of bearer JWTs" },
  { key: "jwt-audience", kind: "string", def: undefined, doc: "required `aud` of bearer JWTs" },
  { key: "jwt-role-claim", kind: "string", def: "role", doc: "JWT claim holding the role (string or array; highest wins)" },
  { key: "jwt-prefix-claim", kind: "string", def: "namespaces", doc: "JWT claim holding namespace prefixes (array or `|`-separated); absent means all" },
  { key: "jwt-max-lifetime-s", kind: "int", def: 86_400, min: 1, doc: "longest a bearer JWT may be valid, seconds: `exp` is required, and a token whose `exp` lies further than this past its `iat` (or past now) is refused with 401" },
  { key: "log-level", kind: "string", def: "info", doc: "debug, info, warn or error" },
  { key: "access-log-sample", kind: "number", def: 0.01, min: 0, max: 1, doc: "share of successful requests logged with one access line at level info (0 to 1; at level debug, every request)" },
  { key: "access-log-error-sample", kind: "number", def: 1, min: 0, max: 1, doc: "share of failed requests (status 400 and up) logged with one access line at level info" },
  { key: "metrics-public", kind: "bool", def: false, doc: "serve `GET /metrics` without a credential (otherwise it needs the read role)" },
  { key: "replica-name", kind: "string", def: hostname(), doc: "this replica's name: the `replica` label of every metric series, and where a job ran (default: the host name; give replicas sharing a host their own)" },
  { key: "config", kind: "string", def: undefined, doc: "JSON file with any of these keys (kebab-case)" },
] as const satisfies readonly Option[];

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** The data directory is on an object store (s3://, gs://, az://). */
  remote: boolean;
  /** Options LanceDB gets for the data directory's object store (may hold keys: never logged). */
  storageOptions: Record<string, string>;
  /** Quiver's own state: a local directory. */
  stateDir: string;
  storageTimeoutMs: number;
  workers: number;
  maxJsonBody: number;
  maxArrowBody: number;
  maxDecodedBody: number;
  maxValueBytes: number;
  maxJsonDepth: number;
  maxInFlight: number;
  batchMax: number;
  batchSlots: number;
  batchMeasureMs: number;
  maxQueue: number;
  serving: string;
  servingMemoryMb: number;
  servingEf: number;
  servingPinMs: number;
  startRetryMs: number;
  warmTables: string;
  warmTimeoutMs: number;
  maxBodyReaders: number;
  maxBodyReadersPerAddress: number;
  maxBodyReadersPerCredential: number;
  maxIdentityBodyReaders: number;
  maxIdentityBody: number;
  maxExpressionLength: number;
  maxExpressionCost: number;
  maxExpressionArray: number;
  maxExpressionCopies: number;
  bodyTimeoutMs: number;
  bodyMinRate: number;
  responseIdleMs: number;
  queryTimeoutMs: number;
  writeTimeoutMs: number;
  maxLargeResponses: number;
  maxResponseBufferBytes: number;
  responseWaitMs: number;
  rateLimitRps: number;
  rateLimitConcurrent: number;
  idempotencyWindowMs: number;
  orphanMinAgeMs: number;
  drainDelayMs: number;
  shutdownDeadlineMs: number;
  ingestInlineMaxBytes: number;
  consistencyIntervalMs: number;
  keepFreshMs: number;
  managedVersioning: boolean;
  indexBuilds: number;
  backfillJobs: number;
  backfillTasks: number;
  jobLeaseMs: number;
  maxClockSkewMs: number;
  maxQueuedJobsPerCredential: number;
  maxQueuedJobsPerTable: number;
  engineMetadataCacheMb: number;
  maxTablesPerTenant: number;
  maxNamespacesPerTenant: number;
  maxTagsPerTable: number;
  maxBranchesPerTable: number;
  maxRunningJobsPerTenant: number;
  maxJobSeconds: number;
  udfTimeoutMs: number;
  udfWasmMemoryMb: number;
  tenantSandboxes: number;
  /** Resolved at load: given, or derived from --workers and --worker-heap-mb. */
  sandboxMemoryMb: number;
  unsafeSharedSandbox: boolean;
  spareProcesses: string;
  autoBackfillDelayMs: number;
  maintenanceJobs: number;
  retainVersionsMs: number;
  autoMaintenance: string;
  maintenanceSmallFragments: number;
  maintenanceUnindexedRows: number;
  maintenanceDeletedPercent: number;
  maintenanceCooldownMs: number;
  maintenanceMaxShare: number;
  maintenanceMaxVersions: number;
  maintenanceMaxIndexSegments: number;
  maintenanceSweepMs: number;
  commitSpacingMs: number;
  refreshJobs: number;
  autoRefreshMinRows: number;
  autoRefreshCooldownMs: number;
  workerHeapMb: number;
  locationRole: string;
  apiKeys?: string;
  jwtJwksUrl?: string;
  jwtPublicKey?: string;
  jwtIssuer?: string;
  jwtAudience?: string;
  jwtRoleClaim: string;
  jwtPrefixClaim: string;
  jwtMaxLifetimeS: number;
  logLevel: string;
  accessLogSample: number;
  accessLogErrorSample: number;
  metricsPublic: boolean;
  replicaName: string;
}

/** Quiver's own state inside a local data directory (keys, job records, links) when no --state-dir is given; never a table. */
export const privateDirOf = (dataDir: string) => path.join(dataDir, ".quiver");

/** A sandbox's memory besides its threads' heaps, by default: Node itself, thread stacks, Python interpreters (about 135 MB each, measured). */
const SANDBOX_MARGIN_MB = 1024;

const camel = (k: string) => k.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const envName = (k: string) => "QUIVER_" + k.toUpperCase().replace(/-/g, "_");

function coerce(opt: Option, raw: unknown, source: string): string | number | boolean {
  const where = `${opt.key} (from ${source})`;
  if (opt.kind === "string") return String(raw);
  if (opt.kind === "bool") {
    if (typeof raw === "boolean") return raw;
    if (/^(1|true|yes)$/i.test(String(raw))) return true;
    if (/^(0|false|no)$/i.test(String(raw))) return false;
    throw new Error(`${where} must be true or false, got ${JSON.stringify(raw)}`);
  }
  if (opt.kind === "number") {
    const n = typeof raw === "number" ? raw : String(raw).trim() === "" ? NaN : Number(raw);
    if (!Number.isFinite(n)) throw new Error(`${where} must be a number, got ${JSON.stringify(raw)}`);
    return bounded(opt, n, where);
  }
  const n = typeof raw === "number" ? raw : /^-?\d+$/.test(String(raw).trim()) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n)) throw new Error(`${where} must be an integer, got ${JSON.stringify(raw)}`);
  return bounded(opt, n, where);
}

function bounded(opt: Option, n: number, where: string): number {
  if (opt.min !== undefined && n < opt.min) throw new Error(`${where} must be >= ${opt.min}, got ${n}`);
  if (opt.max !== undefined && n > opt.max) throw new Error(`${where} must be <= ${opt.max}, got ${n}`);
  return n;
}

/** `quiver --help`: every option as a flag, its QUIVER_* variable and its default, from the table above. */
export function helpText(version: string): string {
  const lines = [`quiver ${version}: a REST server for Lance tables`, "", "Usage: node --single-threaded-gc dist/src/main.js [options]   (or: npm start -- [options])", ""];
  lines.push("Each option is a flag, a QUIVER_* variable or a key of the --config file; flags win, then variables, then the file.", "");
  for (const o of options as readonly Option[]) {
    const value = o.kind === "bool" ? "" : o.kind === "string" ? " VALUE" : " N";
    const def = o.def === undefined ? "" : ` (default ${o.key === "workers" ? "the core count" : o.key === "replica-name" ? "the host name" : JSON.stringify(o.def)})`;
    lines.push(`  --${o.key}${value}   ${envName(o.key)}${def}`, `      ${o.doc}`);
  }
  lines.push("  --help      this text", "  --version   the version", "");
  return lines.join("\n");
}

/** Variables the project's other programs read (the load tester, the test suite's browser) and the tests' clock offset (src/util/clock.ts): not options, not typos. */
const OTHER_VARIABLES = new Set(["QUIVER_STORAGE_OPTIONS", "QUIVER_API_KEY", "QUIVER_LOADTEST_GENERATOR", "QUIVER_TEST_CHROMIUM", "QUIVER_TEST_CLOCK_OFFSET_MS"]);

/** QUIVER_* variables that name no option (a typo such as QUIVER_SERVNG would otherwise be ignored without a word). */
export function unknownVariables(env: NodeJS.ProcessEnv = process.env): string[] {
  const known = new Set((options as readonly Option[]).map((o) => envName(o.key)));
  return Object.keys(env).filter((k) => k.startsWith("QUIVER_") && !known.has(k) && !OTHER_VARIABLES.has(k)).sort();
}

export function loadConfig(argv: string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): Config {
  const { values } = parseArgs({
    args: argv,
    // A bool option is a bare flag (`--metrics-public`); the environment and the file give true/false.
    options: Object.fromEntries(
      (options as readonly Option[]).map((o) => [o.key, { type: o.kind === "bool" ? ("boolean" as const) : ("string" as const), multiple: o.key === "storage-option" }]),
    ),
    strict: true,
    allowPositionals: false,
  });
  const configPath = (values.config as string | undefined) ?? env[envName("config")];
  let file: Record<string, unknown> = {};
  if (configPath) {
    file = JSON.parse(readFileSync(configPath, "utf8")) as Record<string, unknown>;
    for (const k of Object.keys(file)) {
      if (k === "storage-options" || k === "storage-option") continue;
      if (!options.some((o) => o.key === k)) throw new Error(`config file ${configPath}: unknown key ${k}`);
    }
  }
  const out: Record<string, unknown> = {};
  for (const opt of options as readonly Option[]) {
    if (opt.key === "config" || opt.key === "storage-option") continue;
    const flag = values[opt.key];
    const fromEnv = env[envName(opt.key)];
    let v: unknown;
    if (flag !== undefined) v = coerce(opt, flag, `--${opt.key}`);
    else if (fromEnv !== undefined && fromEnv !== "") v = coerce(opt, fromEnv, envName(opt.key));
    else if (file[opt.key] !== undefined) v = coerce(opt, file[opt.key], configPath as string);
    else v = opt.def;
    if (v !== undefined) out[camel(opt.key)] = v;
  }
  const cfg = out as unknown as Config;
  cfg.storageOptions = storageOptionsOf(values["storage-option"] as string[] | undefined, env, file, configPath);
  const given = cfg.dataDir.trim();
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(given) && !/^file:\/\//i.test(given) && !isRemote(given)) {
    throw new Error(`data-dir ${JSON.stringify(given)}: unsupported scheme; use a local path, file://, s3://, gs:// or az://`);
  }
  cfg.remote = isRemote(given);
  if (cfg.remote) {
    const m = /^([a-z0-9]+):\/\/([^/]+)(\/.*)?$/i.exec(given);
    if (!m) throw new Error(`data-dir ${JSON.stringify(given)}: an object store URI needs a bucket or container, e.g. s3://bucket/prefix`);
    cfg.dataDir = `${m[1].toLowerCase()}://${m[2]}${(m[3] ?? "").replace(/\/+$/, "")}`;
    if (cfg.stateDir === undefined) {
      throw new Error(`state-dir is required when data-dir is on an object store (${cfg.dataDir}): Quiver keeps its job records, computed-value versions and keys in a local directory (--state-dir or QUIVER_STATE_DIR)`);
    }
  } else {
    cfg.dataDir = path.resolve(given.replace(/^file:\/\//i, ""));
  }
  cfg.sandboxMemoryMb ??= cfg.workers * cfg.workerHeapMb + SANDBOX_MARGIN_MB;
  cfg.stateDir = cfg.stateDir === undefined ? privateDirOf(cfg.dataDir) : path.resolve(cfg.stateDir);
  if (!["on", "off"].includes(cfg.autoMaintenance)) throw new Error(`auto-maintenance must be on or off, got ${JSON.stringify(cfg.autoMaintenance)}`);
  if (!["on", "off"].includes(cfg.spareProcesses)) throw new Error(`spare-processes must be on or off, got ${JSON.stringify(cfg.spareProcesses)}`);
  if (!["on", "off"].includes(cfg.serving)) throw new Error(`serving must be on or off, got ${JSON.stringify(cfg.serving)}`);
  if (!["read", "write", "admin"].includes(cfg.locationRole)) throw new Error(`location-role must be read, write or admin, got ${JSON.stringify(cfg.locationRole)}`);
  checkEngineEnvironment(env);
  return cfg;
}

/**
 * LanceDB reads these from the environment when it first needs its CPU runtime, and a value it
 * cannot take panics there: that search fails, and every later write and search with it (measured,
 * docs/operations.md). Checked at start instead, so a typo is one line and no server.
 */
const ENGINE_COUNTS: [name: string, least: number][] = [
  ["LANCE_CPU_THREADS", 1],
  ["LANCE_IO_CORE_RESERVATION", 0],
];

function checkEngineEnvironment(env: NodeJS.ProcessEnv): void {
  for (const [name, least] of ENGINE_COUNTS) {
    const v = env[name];
    if (v !== undefined && !(/^\d{1,9}$/.test(v) && Number(v) >= least)) {
      throw new Error(`${name} (read by LanceDB from the environment) must be a whole number of at least ${least}, got ${JSON.stringify(v)}`);
    }
  }
}

/** Storage options: repeated `--storage-option key=value` > QUIVER_STORAGE_OPTIONS (a JSON object) > the config file's `storage-options`. */
function storageOptionsOf(flags: string[] | undefined, env: NodeJS.ProcessEnv, file: Record<string, unknown>, configPath: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  const fromFile = file["storage-options"] ?? file["storage-option"];
  const put = (obj: unknown, where: string) => {
    if (!obj || typeof obj !== "object" || Array.isArray(obj)) throw new Error(`${where} must be a JSON object of storage options`);
    for (const [k, v] of Object.entries(obj)) {
      if (!["string", "number", "boolean"].includes(typeof v)) throw new Error(`${where}: storage option ${k} must be a string`);
      out[k] = String(v);
    }
  };
  if (fromFile !== undefined) put(fromFile, `config file ${configPath}: storage-options`);
  const raw = env.QUIVER_STORAGE_OPTIONS;
  if (raw !== undefined && raw !== "") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      // Not echoed: it may hold an account key.
      throw new Error("QUIVER_STORAGE_OPTIONS must be a JSON object of storage options (it is not valid JSON)");
    }
    put(parsed, "QUIVER_STORAGE_OPTIONS");
  }
  for (const f of flags ?? []) {
    const at = f.indexOf("=");
    if (at <= 0) throw new Error(`--storage-option must be key=value, got a value without "=" (key ${JSON.stringify(f.split("=")[0].slice(0, 40))})`);
    out[f.slice(0, at).trim()] = f.slice(at + 1);
  }
  return out;
}
