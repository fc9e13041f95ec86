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

/** Requests the server answered, except its own metrics scrapes (the harness's count excludes them too). */
export const requestsCounted = (s: Scrape) => sum(s, "quiver_requests_total", (k) => label(k, "operation") !== "GetMetrics");

export interface ServerPoint {
  t: number;
  /** Requests answered a second, as the server counted them (scrapes excluded). */
  requests_per_s: number;
  /** CPU the server process used, in cores (1 = one core busy). */
  cpu_cores: number;
  event_loop_p99_ms: number | null;
  in_flight: number | null;
  pool_busy: number | null;
  pool_queue: number | null;
  rss_mb: number | null;
  /** 503s a second by reason (only reasons that happened). */
  unavailable_per_s: Record<string, number>;
  /** Mean size of query batches in this interval, when the server exports batch sizes. */
  batch_size_mean: number | null;
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

export function serverPoint(prev: Scrape, cur: Scrape, t: number, dt: number): ServerPoint {
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
    pool_busy: gauge(cur, "quiver_pool_threads_busy"),
    pool_queue: gauge(cur, "quiver_pool_queue_length"),
    rss_mb: gauge(cur, "process_resident_memory_bytes", 1 / 2 ** 20),
    unavailable_per_s: unavailable,
    batch_size_mean: batchMean(prev, cur),
  };
}

export interface Scraper {
  /** Scrapes now; the figures since the last scrape join the timeline at `t`. */
  sample(t: number): Promise<void>;
  readonly first: Scrape | null;
  readonly last: Scrape | null;
  readonly points: ServerPoint[];
  /** Why scraping stopped (e.g. 401 or 404), when it did. */
  readonly error: string | null;
}

export function scraper(c: Client, headers: Record<string, string>, path: string): Scraper {
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
      if (last) points.push(serverPoint(last, cur, t, Math.max(1e-3, t - lastT)));
      else first = cur;
      last = cur;
      lastT = t;
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
