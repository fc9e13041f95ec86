// Reading the server's /metrics in the console: the Prometheus text parsed into samples, sums,
// and request rates and p99 latency between two scrapes of the same replica.

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

export function parseMetrics(text: string): Map<string, Sample[]> {
  const out = new Map<string, Sample[]>();
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    const list = out.get(m[1]) ?? [];
    list.push({ labels, value: Number(m[3]) });
    out.set(m[1], list);
  }
  return out;
}

export const sum = (m: Map<string, Sample[]>, name: string, keep: (l: Record<string, string>) => boolean = () => true) =>
  (m.get(name) ?? []).filter((s) => keep(s.labels)).reduce((a, s) => a + s.value, 0);

/** Cumulative latency bucket counts (all operations), by upper bound. */
function buckets(m: Map<string, Sample[]>): Map<number, number> {
  const b = new Map<number, number>();
  for (const s of m.get("quiver_request_duration_seconds_bucket") ?? []) {
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    b.set(le, (b.get(le) ?? 0) + s.value);
  }
  return b;
}

/** The 0.99 quantile of the requests between two scrapes, interpolated within its bucket. */
function p99(before: Map<number, number>, after: Map<number, number>): number | null {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = 0.99 * total;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i] >= rank) {
      const lo = i ? bounds[i - 1] : 0;
      const below = i ? counts[i - 1] : 0;
      if (!Number.isFinite(bounds[i])) return lo;
      return lo + ((bounds[i] - lo) * (rank - below)) / Math.max(1, counts[i] - below);
    }
  }
  return null;
}

/** What the chart shows for one scrape: the replica that answered it, and its rate and p99 since its previous scrape. */
export interface ReplicaRate {
  replica: string;
  qps: number | null;
  p99Ms: number | null;
}

/**
 * Rates from scrapes that may each come from another replica (a console behind a balancer): a
 * rate is the difference of two scrapes of the same replica (its `replica` label), never of two
 * replicas' counters, which jumped by thousands either way. `at` is the scrape's time in ms.
 */
export function replicaRates(): (m: Map<string, Sample[]>, at: number) => ReplicaRate {
  const prev = new Map<string, { at: number; total: number; buckets: Map<number, number> }>();
  return (m, at) => {
    const replica = (m.get("quiver_requests_in_flight") ?? [])[0]?.labels.replica ?? "";
    const total = sum(m, "quiver_requests_total");
    const b = buckets(m);
    const last = prev.get(replica);
    prev.set(replica, { at, total, buckets: b });
    // A counter lower than before is a restarted replica (or two of one name): no rate from that pair.
    if (!last || total < last.total) return { replica, qps: null, p99Ms: null };
    const q = p99(last.buckets, b);
    return { replica, qps: (total - last.total) / ((at - last.at) / 1000), p99Ms: q === null ? null : q * 1000 };
  };
}
