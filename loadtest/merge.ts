// Runs of several generators (child processes, or hosts whose reports --merge combines) as one:
// HDR histograms added (so every percentile is the one of all the answers together, not an average
// of percentiles), counts and rates added, timelines joined second by second (generators started
// together, as --generators and --start-at make them).
import type { Histogram } from "hdr-histogram-js";
import { decodeHistogram, encodeHistogram, newHistogram, percentileCurve, summarize, timelinePoint, type TimelinePoint } from "./recorder.js";
import type { ClientFigures, Report, RunResult } from "./report.js";

/** The histogram holding every value of the given ones. */
export function mergeHistograms(encoded: string[]): Histogram {
  const h = newHistogram();
  for (const e of encoded) h.add(decodeHistogram(e));
  return h;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

function mergeTimelines(timelines: TimelinePoint[][]): TimelinePoint[] {
  const n = Math.max(0, ...timelines.map((t) => t.length));
  return Array.from({ length: n }, (_, i) => {
    const pts = timelines.map((t) => t[i]).filter(Boolean);
    const t = Math.max(...pts.map((p) => p.t));
    const backlogs = pts.map((p) => p.backlog).filter((b): b is number => b !== null);
    const point = timelinePoint(
      t,
      1,
      { requests: sum(pts.map((p) => p.requests)), errors: sum(pts.map((p) => p.errors)), outstanding: sum(pts.map((p) => p.outstanding)), backlog: backlogs.length ? sum(backlogs) : null },
      mergeHistograms(pts.map((p) => p.hdr)),
      mergeHistograms(pts.map((p) => p.service_hdr)),
    );
    // Each generator's own rate over its own interval, added.
    point.rate = sum(pts.map((p) => p.rate));
    return point;
  });
}

/** One run from the runs of several generators that ran at the same time. */
export function mergeRuns(runs: RunResult[]): RunResult {
  const all = mergeHistograms(runs.map((r) => r.hdr));
  const service = mergeHistograms(runs.map((r) => r.service_hdr));
  const seconds = Math.max(...runs.map((r) => r.seconds));
  const requests = sum(runs.map((r) => r.requests));
  const errors = sum(runs.map((r) => r.errors));
  const byStatus: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.by_status)) byStatus[k] = (byStatus[k] ?? 0) + v;
  const names = [...new Set(runs.flatMap((r) => Object.keys(r.workloads)))];
  const workloads = Object.fromEntries(
    names.map((name) => {
      const parts = runs.map((r) => r.workloads[name]).filter(Boolean);
      const h = mergeHistograms(parts.map((w) => w.hdr));
      return [name, { requests: sum(parts.map((w) => w.requests)), errors: sum(parts.map((w) => w.errors)), latency_ms: summarize(h), hdr: encodeHistogram(h) }];
    }),
  );
  const targets = runs.map((r) => r.target_rate);
  return {
    seconds,
    requests,
    ok: requests - errors,
    errors,
    // Each generator's successful answers over its own time, added: the rate they made together.
    throughput: sum(runs.map((r) => r.throughput)),
    by_status: byStatus,
    latency_ms: summarize(all),
    service_ms: summarize(service),
    percentiles: percentileCurve(all),
    service_percentiles: percentileCurve(service),
    hdr: encodeHistogram(all),
    service_hdr: encodeHistogram(service),
    timeline: mergeTimelines(runs.map((r) => r.timeline)),
    workloads,
    error_sample: runs.find((r) => r.error_sample)?.error_sample ?? null,
    sent: sum(runs.map((r) => r.sent)),
    unsent: sum(runs.map((r) => r.unsent)),
    late: sum(runs.map((r) => r.late)),
    max_backlog: sum(runs.map((r) => r.max_backlog)),
    connections: sum(runs.map((r) => r.connections)),
    target_rate: targets.every((t) => t === null) ? null : sum(targets.map((t) => t ?? 0)),
  };
}

export function mergeClients(clients: ClientFigures[], requests: number): ClientFigures {
  const cpu = sum(clients.map((c) => c.cpu_seconds));
  return {
    cpu_seconds: cpu,
    cpu_cores: sum(clients.map((c) => c.cpu_cores)),
    cpu_us_per_request: (cpu * 1e6) / Math.max(1, requests),
    event_loop_p99_ms: Math.max(...clients.map((c) => c.event_loop_p99_ms)),
    event_loop_max_ms: Math.max(...clients.map((c) => c.event_loop_max_ms)),
  };
}

/** Reports of one workload run on several hosts at once, as one (the server's view from the first that has it). */
export function mergeReports(reports: Report[], sources: string[]): Report {
  const withRun = reports.filter((r) => r.run);
  if (withRun.length !== reports.length) throw new Error("--merge: every report needs a closed or open loop run (not a ramp, sweep or recall)");
  const modes = new Set(reports.map((r) => r.mode));
  if (modes.size !== 1 || reports.some((r) => r.ramp || r.sweep)) throw new Error("--merge: the reports must be closed or open loops of one mode");
  const run = mergeRuns(reports.map((r) => r.run!));
  const first = reports[0];
  return {
    ...first,
    started_at: reports.map((r) => r.started_at).sort()[0],
    finished_at: reports.map((r) => r.finished_at).sort().reverse()[0],
    run,
    client: mergeClients(reports.map((r) => r.client!).filter(Boolean), run.requests),
    server: reports.find((r) => r.server)?.server ?? null,
    repeats: null,
    warnings: [...new Set(reports.flatMap((r) => r.warnings ?? []))],
    thresholds: null,
    merged: { parts: reports.length, sources },
    interrupted: reports.some((r) => r.interrupted),
  };
}
