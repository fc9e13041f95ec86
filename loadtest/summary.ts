// The few lines printed when a run ends (the report files hold everything).
import type { Report } from "./run.js";

export function summaryText(r: Report): string {
  const lines: string[] = r.interrupted ? ["interrupted: the figures cover the time it ran"] : [];
  if (r.run) {
    const l = r.run.latency_ms;
    lines.push(
      `${r.run.requests} requests in ${r.run.seconds.toFixed(1)} s: ${r.run.throughput.toFixed(1)} successful/s, ${r.run.errors} errors ${JSON.stringify(r.run.by_status)}`,
      `latency ms: p50 ${l.p50}  p95 ${l.p95}  p99 ${l.p99}  p99.9 ${l.p999}  max ${l.max}`,
    );
    if (r.run.target_rate !== null) lines.push(`open loop: target ${r.run.target_rate}/s, ${r.run.late} sent late, ${r.run.unsent} never sent, at most ${r.run.max_backlog} waiting`);
    if (r.client) {
      const c = r.client;
      lines.push(`the harness used ${c.cpu_seconds.toFixed(2)} s of CPU (${c.cpu_us_per_request.toFixed(0)} µs a request); its event-loop delay p99 ${c.event_loop_p99_ms.toFixed(1)} ms, max ${c.event_loop_max_ms.toFixed(1)} ms`);
    }
    if (r.server?.requests_counted != null) lines.push(`the server counted ${r.server.requests_counted} requests`);
    if (r.server?.error) lines.push(`metrics: ${r.server.error}`);
  }
  if (r.ramp) {
    lines.push(
      r.ramp.best_rate === null
        ? `no rate tried held p${r.ramp.percentile} <= ${r.ramp.slo_ms} ms`
        : `highest rate holding p${r.ramp.percentile} <= ${r.ramp.slo_ms} ms: ${r.ramp.best_rate.toFixed(1)}/s`,
    );
  }
  if (r.recall) lines.push(`recall@${r.recall.k} over ${r.recall.queries} queries: mean ${r.recall.mean.toFixed(4)}, lowest ${r.recall.min.toFixed(4)}`);
  return lines.join("\n");
}
