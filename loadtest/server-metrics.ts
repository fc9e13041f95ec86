// The server's own view of the run: its Prometheus /metrics scraped once a second on the run's
// timeline, each scrape turned into figures against the one before (rates for counters, values for
// gauges). The names are Quiver's (src/metrics.ts, docs/operations.md) and prom-client's
// process metrics; a server without them gives empty series, not an error.
import { callText, type Client } from "./http.js";

/** One scrape: `name{labels}` → value, labels as the server wrote them. */
export type Scrape = Map<string, number>;

export function parsePrometheus(text: string): Scrape {
  const out: Scrape = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (m) out.set(m[1] + (m[2] ?? ""), Number(m[3]));
  }
  return out;
}

const label = (key: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(key)?.[1];

/** Sum of a metric's series whose labels `keep` accepts. */
function sum(s: Scrape, name: string, keep: (key: string) => boolean = () => true): number {
  let total = 0;
  for (const [k, v] of s) if ((k === name || k.startsWith(`${name}{`)) && keep(k)) total += v;
  return total;
}

/** The harness's own requests beside the workload: metrics scrapes and the table's stats (read before and after a run). */
const HARNESS_OPERATIONS = new Set(["GetMetrics", "GetTableStats"]);

/** Requests the server answered, except the harness's own scrapes and stats reads (its count excludes them too). */
export const requestsCounted = (s: Scrape) => sum(s, "quiver_requests_total", (k) => !HARNESS_OPERATIONS.has(label(k, "operation") ?? ""));

/** Vector searches by the path that served them (`serving`, `engine`) and why, as the server counted them. */
export function searchPaths(s: Scrape): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of s) {
    if (!k.startsWith("quiver_search_path_total{")) continue;
    const key = [label(k, "path") ?? "unknown", label(k, "reason")].filter(Boolean).join(": ");
    out[key] = (out[key] ?? 0) + v;
  }
  return out;
}

/** `after` − `before`, per key, keeping only keys that moved. */
export function countsBetween(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

export interface ServerPoint {
  t: number;
  /** Requests answered a second, as the server counted them (scrapes excluded). */
  requests_per_s: number;
  /** CPU the server process used, in cores (1 = one core busy). */
  cpu_cores: number;
  event_loop_p99_ms: number | null;
  in_flight: number | null;
  /** The most requests in flight at once over the last second (quiver_in_flight_max), when exported. */
  in_flight_max: number | null;
  pool_busy: number | null;
  pool_queue: number | null;
  rss_mb: number | null;
  /** 503s a second by reason (only reasons that happened). */
  unavailable_per_s: Record<string, number>;
  /** Mean size of query batches in this interval, when the server exports batch sizes. */
  batch_size_mean: number | null;
  /** The table's state as the server last read it (quiver_table_* gauges), when exported. */
  table: { fragments: number | null; unindexed_rows: number | null; versions: number | null; deleted_rows: number | null };
  /** Maintenance jobs queued or running. */
  maintenance_jobs: number | null;
  /** Share of this interval's vector searches the serving index answered (quiver_search_path_total), when any were counted. */
  serving_share: number | null;
}

/** A gauge's value (summed over its series: a server labels each with its replica's name); null when the server has none. */
const gauge = (s: Scrape, name: string, scale = 1) => ([...s.keys()].some((k) => k === name || k.startsWith(`${name}{`)) ? sum(s, name) * scale : null);

/** Mean of a `*batch*` histogram or summary over the interval, from its _sum and _count. */
function batchMean(prev: Scrape, cur: Scrape): number | null {
  const family = [...cur.keys()].map((k) => /^(\w*batch\w*)_count\b/.exec(k)?.[1]).find((n) => n);
  if (!family) return null;
  const dc = sum(cur, `${family}_count`) - sum(prev, `${family}_count`);
  return dc > 0 ? (sum(cur, `${family}_sum`) - sum(prev, `${family}_sum`)) / dc : null;
}

/** A gauge of one table (labels table, branch main), null when the server has not exported it. */
function tableGauge(s: Scrape, name: string, table: string): number | null {
  for (const [k, v] of s) if (k.startsWith(`${name}{`) && label(k, "table") === table && (label(k, "branch") ?? "main") === "main") return v;
  return null;
}

function maintenanceJobs(s: Scrape): number | null {
  const keys = [...s.keys()].filter((k) => k.startsWith("quiver_jobs{") && label(k, "kind") === "maintenance");
  if (!keys.length) return null;
  return keys.filter((k) => ["Queued", "Running"].includes(label(k, "state") ?? "")).reduce((a, k) => a + s.get(k)!, 0);
}

function servingShare(prev: Scrape, cur: Scrape): number | null {
  const moved = countsBetween(searchPaths(prev), searchPaths(cur));
  let serving = 0;
  let all = 0;
  for (const [k, v] of Object.entries(moved)) {
    all += v;
    if (k.startsWith("serving")) serving += v;
  }
  return all ? serving / all : null;
}

export function serverPoint(prev: Scrape, cur: Scrape, t: number, dt: number, table = ""): ServerPoint {
  const rate = (name: string, keep?: (k: string) => boolean) => Math.max(0, sum(cur, name, keep) - sum(prev, name, keep)) / dt;
  const unavailable: Record<string, number> = {};
  for (const k of cur.keys()) {
    if (!k.startsWith("quiver_unavailable_total{")) continue;
    const reason = label(k, "reason")!;
    const r = rate("quiver_unavailable_total", (key) => label(key, "reason") === reason);
    if (r > 0) unavailable[reason] = r;
  }
  return {
    t: Number(t.toFixed(3)),
    requests_per_s: Math.max(0, requestsCounted(cur) - requestsCounted(prev)) / dt,
    cpu_cores: rate("process_cpu_seconds_total"),
    event_loop_p99_ms: gauge(cur, "nodejs_eventloop_lag_p99_seconds", 1000),
    in_flight: gauge(cur, "quiver_requests_in_flight"),
    in_flight_max: gauge(cur, "quiver_in_flight_max"),
    pool_busy: gauge(cur, "quiver_pool_threads_busy"),
    pool_queue: gauge(cur, "quiver_pool_queue_length"),
    rss_mb: gauge(cur, "process_resident_memory_bytes", 1 / 2 ** 20),
    unavailable_per_s: unavailable,
    batch_size_mean: batchMean(prev, cur),
    table: {
      fragments: tableGauge(cur, "quiver_table_fragments", table),
      unindexed_rows: tableGauge(cur, "quiver_table_unindexed_rows", table),
      versions: tableGauge(cur, "quiver_table_versions", table),
      deleted_rows: tableGauge(cur, "quiver_table_deleted_rows", table),
    },
    maintenance_jobs: maintenanceJobs(cur),
    serving_share: servingShare(prev, cur),
  };
}

export interface Scraper {
  /** Scrapes now; the figures since the last scrape join the timeline at `t`. */
  sample(t: number): Promise<void>;
  /** Scrapes now without a timeline point (a sweep point's boundary); null when scraping failed. */
  read(): Promise<Scrape | null>;
  readonly first: Scrape | null;
  readonly last: Scrape | null;
  readonly points: ServerPoint[];
  /** Why scraping stopped (e.g. 401 or 404), when it did. */
  readonly error: string | null;
}

/** `table`: whose quiver_table_* gauges the points carry. */
export function scraper(c: Client, headers: Record<string, string>, path: string, table = ""): Scraper {
  const points: ServerPoint[] = [];
  let first: Scrape | null = null;
  let last: Scrape | null = null;
  let lastT = 0;
  let error: string | null = null;
  return {
    async sample(t) {
      if (error) return;
      let cur: Scrape;
      try {
        cur = parsePrometheus(await callText(c, headers, path));
      } catch (e) {
        error = (e as Error).message;
        return;
      }
      if (last) points.push(serverPoint(last, cur, t, Math.max(1e-3, t - lastT), table));
      else first = cur;
      last = cur;
      lastT = t;
    },
    async read() {
      if (error) return null;
      try {
        return parsePrometheus(await callText(c, headers, path));
      } catch (e) {
        error = (e as Error).message;
        return null;
      }
    },
    get first() {
      return first;
    },
    get last() {
      return last;
    },
    points,
    get error() {
      return error;
    },
  };
}
