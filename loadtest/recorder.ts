// What a run measured: latencies of successful requests in microseconds in HDR histograms (the
// whole run, each workload, and the current second), answers by status, and a per-second timeline.
// Failed requests are counted, not put in the latency histograms: a fast 503 must not make the
// latency look better.
import { build, encodeIntoCompressedBase64, type Histogram } from "hdr-histogram-js";

const newHistogram = () =>
  build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3, useWebAssembly: false });

/** Latency figures in milliseconds. */
export interface LatencySummary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  p999: number;
  max: number;
}

export interface TimelinePoint {
  /** Seconds since the measured part began, at the end of this interval. */
  t: number;
  requests: number;
  ok: number;
  errors: number;
  /** Answers a second (all statuses). */
  rate: number;
  p50: number;
  p95: number;
  p99: number;
  p999: number;
  max: number;
}

export interface WorkloadFigures {
  requests: number;
  errors: number;
  latency_ms: LatencySummary;
}

export interface Recorder {
  record(workload: string, status: number, error: string | undefined, micros: number): void;
  /** Closes the current interval as a timeline point at `t` seconds. */
  roll(t: number): void;
  /** Figures so far, cheap enough for a progress line. */
  now(): { requests: number; errors: number; p50: number; p99: number };
  /** A percentile of the successful requests' latency so far, ms. */
  percentile(p: number): number;
  done(seconds: number): RunFigures;
}

export interface RunFigures {
  seconds: number;
  requests: number;
  ok: number;
  errors: number;
  /** Successful answers a second. */
  throughput: number;
  /** Answers by status ("200", "503", …) and transport errors by code ("ECONNRESET"). */
  by_status: Record<string, number>;
  latency_ms: LatencySummary;
  /** [percentile, ms] pairs from 0 to 99.999 (the HDR percentile plot). */
  percentiles: [number, number][];
  /** The whole run's histogram (µs), HdrHistogram's compressed base64 form. */
  hdr: string;
  timeline: TimelinePoint[];
  workloads: Record<string, WorkloadFigures>;
}

const ms = (us: number) => Math.round(us) / 1000;

export function summarize(h: Histogram): LatencySummary {
  // HDR answers a bucket's highest equivalent value, which can exceed the largest value recorded.
  const at = (p: number) => ms(Math.min(h.getValueAtPercentile(p), h.maxValue));
  const n = h.totalCount;
  return {
    count: n,
    min: n ? ms(h.minNonZeroValue) : 0,
    mean: n ? ms(h.mean) : 0,
    p50: at(50),
    p90: at(90),
    p95: at(95),
    p99: at(99),
    p999: at(99.9),
    max: ms(h.maxValue),
  };
}

/** Percentiles spaced evenly in log(1 / (1 − p)), as HdrHistogram's percentile plots are. */
function percentileCurve(h: Histogram): [number, number][] {
  if (!h.totalCount) return [];
  const out: [number, number][] = [];
  for (let x = 0; x <= 5.0001; x += 0.1) {
    const p = Math.min(100 * (1 - 10 ** -x), 99.999);
    out.push([Number(p.toFixed(4)), ms(Math.min(h.getValueAtPercentile(p), h.maxValue))]);
  }
  return out;
}

export function recorder(): Recorder {
  const all = newHistogram();
  const interval = newHistogram();
  // The last closed interval's histogram, so a short tail can be folded into it.
  const previous = newHistogram();
  const perWorkload = new Map<string, { h: Histogram; requests: number; errors: number }>();
  const byStatus: Record<string, number> = {};
  const timeline: TimelinePoint[] = [];
  let requests = 0;
  let errors = 0;
  let iRequests = 0;
  let iErrors = 0;
  let lastT = 0;
  let prevT = 0;
  return {
    record(workload, status, error, micros) {
      const key = status ? String(status) : (error ?? "error");
      byStatus[key] = (byStatus[key] ?? 0) + 1;
      let w = perWorkload.get(workload);
      if (!w) perWorkload.set(workload, (w = { h: newHistogram(), requests: 0, errors: 0 }));
      requests++;
      iRequests++;
      w.requests++;
      if (status >= 200 && status < 300) {
        const v = Math.max(1, Math.round(micros));
        all.recordValue(v);
        interval.recordValue(v);
        w.h.recordValue(v);
      } else {
        errors++;
        iErrors++;
        w.errors++;
      }
    },
    roll(t) {
      const s = summarize(interval);
      const dt = t - lastT;
      timeline.push({
        t: Number(t.toFixed(3)),
        requests: iRequests,
        ok: iRequests - iErrors,
        errors: iErrors,
        rate: dt > 0 ? iRequests / dt : 0,
        p50: s.p50,
        p95: s.p95,
        p99: s.p99,
        p999: s.p999,
        max: s.max,
      });
      previous.reset();
      previous.add(interval);
      interval.reset();
      iRequests = iErrors = 0;
      prevT = lastT;
      lastT = t;
    },
    percentile: (p) => ms(Math.min(all.getValueAtPercentile(p), all.maxValue)),
    now: () => ({ requests, errors, p50: ms(all.getValueAtPercentile(50)), p99: ms(all.getValueAtPercentile(99)) }),
    done(seconds) {
      // A tail shorter than half a second joins the last point: its rate alone would be noise.
      if (timeline.length && seconds - lastT < 0.5) {
        const p = timeline.pop()!;
        interval.add(previous);
        iRequests += p.requests;
        iErrors += p.errors;
        lastT = prevT;
      }
      if (iRequests || seconds - lastT > 0.05) this.roll(seconds);
      return {
        seconds,
        requests,
        ok: requests - errors,
        errors,
        throughput: (requests - errors) / seconds,
        by_status: byStatus,
        latency_ms: summarize(all),
        percentiles: percentileCurve(all),
        hdr: encodeIntoCompressedBase64(all),
        timeline,
        workloads: Object.fromEntries([...perWorkload].map(([k, w]) => [k, { requests: w.requests, errors: w.errors, latency_ms: summarize(w.h) }])),
      };
    },
  };
}
