// What a run measured: latencies of successful requests in microseconds in HDR histograms (the
// whole run, each workload, and the current second), answers by status, and a per-second timeline.
// Each answer has two times: latency from when the request was due (the open loop's corrected
// latency; in a closed loop a request is due when it is sent) and service time from when it was
// sent, so a wait in the harness's own queue shows as the gap between them. Failed requests are
// counted, not put in the latency histograms: a fast 503 must not make the latency look better.
import { build, decodeFromCompressedBase64, encodeIntoCompressedBase64, type Histogram } from "hdr-histogram-js";

export const newHistogram = () =>
  build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3, useWebAssembly: false });

/** A histogram from its compressed base64 form (as reports store it). */
export const decodeHistogram = (base64: string): Histogram => {
  const h = newHistogram();
  h.add(decodeFromCompressedBase64(base64, 32, false));
  return h;
};

export const encodeHistogram = (h: Histogram): string => encodeIntoCompressedBase64(h);

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

/** Percentiles of a period (ms): of every answer's latency, and of service time (from each send). */
export interface PeriodPercentiles {
  p50: number;
  p95: number;
  p99: number;
  p999: number;
  max: number;
  service_p50: number;
  service_p99: number;
}

export interface TimelinePoint extends PeriodPercentiles {
  /** Seconds since the measured part began, at the end of this interval. */
  t: number;
  requests: number;
  ok: number;
  errors: number;
  /** Answers a second (all statuses). */
  rate: number;
  /** The most requests the harness had outstanding at once in this interval. */
  outstanding: number;
  /** Open loop: the most due requests waiting for a connection at once in this interval. */
  backlog: number | null;
  /** This interval's histograms (µs, compressed base64), so runs of several generators merge exactly. */
  hdr: string;
  service_hdr: string;
}

export interface WorkloadFigures {
  requests: number;
  errors: number;
  latency_ms: LatencySummary;
  hdr: string;
}

export interface Recorder {
  /** `micros`: from when the request was due; `serviceMicros`: from when it was sent; `body`: the answer's (the first failure's is kept). */
  record(workload: string, status: number, error: string | undefined, micros: number, serviceMicros: number, body?: Buffer): void;
  /** Requests outstanding now (the interval keeps the most). */
  outstanding(n: number): void;
  /** Due requests waiting for a connection now (open loop; the interval keeps the most). */
  backlog(n: number): void;
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
  /** From when each request was due (open loop: corrected for coordinated omission). */
  latency_ms: LatencySummary;
  /** From when each request was sent to its answer: what the server (and network) took. */
  service_ms: LatencySummary;
  /** [percentile, ms] pairs from 0 to 99.999 (the HDR percentile plot). */
  percentiles: [number, number][];
  service_percentiles: [number, number][];
  /** The whole run's histograms (µs), HdrHistogram's compressed base64 form. */
  hdr: string;
  service_hdr: string;
  timeline: TimelinePoint[];
  workloads: Record<string, WorkloadFigures>;
  /** The first failed answer, status and the start of its body (or the transport error), so a failing run shows why. */
  error_sample: string | null;
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
export function percentileCurve(h: Histogram): [number, number][] {
  if (!h.totalCount) return [];
  const out: [number, number][] = [];
  for (let x = 0; x <= 5.0001; x += 0.1) {
    const p = Math.min(100 * (1 - 10 ** -x), 99.999);
    out.push([Number(p.toFixed(4)), ms(Math.min(h.getValueAtPercentile(p), h.maxValue))]);
  }
  return out;
}

/** A timeline point's figures from its interval's histograms and counts. */
export function timelinePoint(
  t: number,
  dt: number,
  counts: { requests: number; errors: number; outstanding: number; backlog: number | null },
  latency: Histogram,
  service: Histogram,
): TimelinePoint {
  const s = summarize(latency);
  const sv = summarize(service);
  return {
    t: Number(t.toFixed(3)),
    requests: counts.requests,
    ok: counts.requests - counts.errors,
    errors: counts.errors,
    rate: dt > 0 ? counts.requests / dt : 0,
    p50: s.p50,
    p95: s.p95,
    p99: s.p99,
    p999: s.p999,
    max: s.max,
    service_p50: sv.p50,
    service_p99: sv.p99,
    outstanding: counts.outstanding,
    backlog: counts.backlog,
    hdr: encodeHistogram(latency),
    service_hdr: encodeHistogram(service),
  };
}

export function recorder(): Recorder {
  const all = newHistogram();
  const allService = newHistogram();
  const interval = newHistogram();
  const intervalService = newHistogram();
  // The last closed interval's histograms, so a short tail can be folded into it.
  const previous = newHistogram();
  const previousService = newHistogram();
  const perWorkload = new Map<string, { h: Histogram; requests: number; errors: number }>();
  const byStatus: Record<string, number> = {};
  const timeline: TimelinePoint[] = [];
  let requests = 0;
  let errors = 0;
  let errorSample: string | null = null;
  const fresh = () => ({ requests: 0, errors: 0, outstanding: 0, backlog: null as number | null });
  let iv = fresh();
  let prevIv = fresh();
  let lastT = 0;
  let prevT = 0;
  return {
    record(workload, status, error, micros, serviceMicros, body) {
      const key = status ? String(status) : (error ?? "error");
      byStatus[key] = (byStatus[key] ?? 0) + 1;
      let w = perWorkload.get(workload);
      if (!w) perWorkload.set(workload, (w = { h: newHistogram(), requests: 0, errors: 0 }));
      requests++;
      iv.requests++;
      w.requests++;
      if (status >= 200 && status < 300) {
        const v = Math.max(1, Math.round(micros));
        const sv = Math.max(1, Math.round(serviceMicros));
        all.recordValue(v);
        interval.recordValue(v);
        allService.recordValue(sv);
        intervalService.recordValue(sv);
        w.h.recordValue(v);
      } else {
        errorSample ??= status ? `${status} ${body?.subarray(0, 300).toString() ?? ""}`.trim() : (error ?? "error");
        errors++;
        iv.errors++;
        w.errors++;
      }
    },
    outstanding(n) {
      if (n > iv.outstanding) iv.outstanding = n;
    },
    backlog(n) {
      if (iv.backlog === null || n > iv.backlog) iv.backlog = n;
    },
    roll(t) {
      timeline.push(timelinePoint(t, t - lastT, iv, interval, intervalService));
      previous.reset();
      previous.add(interval);
      previousService.reset();
      previousService.add(intervalService);
      interval.reset();
      intervalService.reset();
      prevIv = iv;
      iv = fresh();
      prevT = lastT;
      lastT = t;
    },
    percentile: (p) => ms(Math.min(all.getValueAtPercentile(p), all.maxValue)),
    now: () => ({ requests, errors, p50: ms(all.getValueAtPercentile(50)), p99: ms(all.getValueAtPercentile(99)) }),
    done(seconds) {
      // A tail shorter than half a second joins the last point: its rate alone would be noise.
      if (timeline.length && seconds - lastT < 0.5) {
        timeline.pop();
        interval.add(previous);
        intervalService.add(previousService);
        iv = {
          requests: iv.requests + prevIv.requests,
          errors: iv.errors + prevIv.errors,
          outstanding: Math.max(iv.outstanding, prevIv.outstanding),
          backlog: iv.backlog === null && prevIv.backlog === null ? null : Math.max(iv.backlog ?? 0, prevIv.backlog ?? 0),
        };
        lastT = prevT;
      }
      if (iv.requests || seconds - lastT > 0.05) this.roll(seconds);
      return {
        seconds,
        requests,
        ok: requests - errors,
        errors,
        throughput: (requests - errors) / seconds,
        by_status: byStatus,
        latency_ms: summarize(all),
        service_ms: summarize(allService),
        percentiles: percentileCurve(all),
        service_percentiles: percentileCurve(allService),
        hdr: encodeHistogram(all),
        service_hdr: encodeHistogram(allService),
        timeline,
        workloads: Object.fromEntries([...perWorkload].map(([k, w]) => [k, { requests: w.requests, errors: w.errors, latency_ms: summarize(w.h), hdr: encodeHistogram(w.h) }])),
        error_sample: errorSample,
      };
    },
  };
}
