// The few lines printed when a run ends (the report files hold everything).
import type { Interval } from "./noise.js";
import type { Report } from "./report.js";

const r2 = (v: number) => Number(v.toFixed(2));
const range = (i: Interval | undefined, digits = 1) => (!i ? "–" : `${i.median.toFixed(digits)} (${i.min.toFixed(digits)}–${i.max.toFixed(digits)})`);

export function summaryText(r: Report): string {
  const lines: string[] = r.interrupted ? ["interrupted: the figures cover the time it ran"] : [];
  if (r.dataset) lines.push(`dataset ${r.dataset.name}: ${r.dataset.description}; ${r.dataset.queries} held-out queries, ground truth ${r.dataset.truth_source}`);
  if (r.load && !r.load.skipped) {
    lines.push(`load phase: ${r.load.rows} rows in ${(r.load.create_s + r.load.insert_s).toFixed(1)} s (${r.load.rows_per_s} rows/s)${r.load.index ? `, ${r.load.index.type} built in ${r.load.index.build_s.toFixed(1)} s` : ""}`);
  }
  if (r.sweep) {
    for (const p of r.sweep.points) {
      const recall = p.recall ? `recall@${p.recall.k} ${p.recall.mean.toFixed(4)} (${p.recall.ci95[0].toFixed(4)}–${p.recall.ci95[1].toFixed(4)})` : "recall –";
      lines.push(`${p.label}: ${range(p.qps)} searches/s, p99 ${range(p.p99_ms, 2)} ms, ${recall}${p.errors ? `, ${p.errors} errors` : ""}`);
    }
  } else if (r.run) {
    const l = r.run.latency_ms;
    const s = r.run.service_ms;
    lines.push(
      `${r.run.requests} requests in ${r.run.seconds.toFixed(1)} s: ${r.run.throughput.toFixed(1)} successful/s, ${r.run.errors} errors ${JSON.stringify(r.run.by_status)}`,
      `latency ms${r.run.target_rate !== null ? " (from due)" : ""}: p50 ${l.p50}  p95 ${l.p95}  p99 ${l.p99}  p99.9 ${l.p999}  max ${l.max}`,
      `service time ms (from send): p50 ${s.p50}  p95 ${s.p95}  p99 ${s.p99}  p99.9 ${s.p999}  max ${s.max}`,
    );
    if (r.run.target_rate !== null) lines.push(`open loop: target ${r2(r.run.target_rate)}/s, ${r.run.late} sent late, ${r.run.unsent} never sent, at most ${r.run.max_backlog} waiting`);
    if (r.merged) lines.push(`merged from ${r.merged.parts} ${r.merged.sources[0]?.startsWith("generator") ? "generator processes" : "reports"}`);
    if (r.client) {
      const c = r.client;
      lines.push(`the harness used ${c.cpu_seconds.toFixed(2)} s of CPU (${c.cpu_cores.toFixed(2)} cores, ${c.cpu_us_per_request.toFixed(0)} µs a request); its event-loop delay p99 ${c.event_loop_p99_ms.toFixed(1)} ms, max ${c.event_loop_max_ms.toFixed(1)} ms`);
    }
    if (r.server?.requests_counted != null) lines.push(`the server counted ${r.server.requests_counted} requests`);
    if (r.server?.error) lines.push(`metrics: ${r.server.error}`);
  }
  if (r.repeats) {
    const i = r.repeats.intervals;
    lines.push(`over ${r.repeats.rows.length} runs, median (range): ${range(i.throughput)} successful/s, p50 ${range(i.p50, 2)} ms, p99 ${range(i.p99, 2)} ms${i.best_rate ? `, best SLO rate ${range(i.best_rate)}/s` : ""}`);
  }
  if (r.ramp) {
    const b = r.ramp.best;
    lines.push(
      !b
        ? `no rate tried held p${r.ramp.percentile} <= ${r.ramp.slo_ms} ms`
        : `highest rate holding p${r.ramp.percentile} <= ${r.ramp.slo_ms} ms: ${b.rate.toFixed(1)}/s (achieved ${b.achieved.toFixed(1)}/s, p50 ${b.p50_ms} ms, p${r.ramp.percentile} ${b.slo_ms} ms)`,
    );
  }
  if (r.recall) lines.push(`recall@${r.recall.k} over ${r.recall.queries} queries against ${r.recall.truth === "dataset" ? "the dataset's ground truth" : "exact search"}${r.recall.filter ? ` (filter ${r.recall.filter})` : ""}: mean ${r.recall.mean.toFixed(4)} (95% interval ${r.recall.ci95[0].toFixed(4)}–${r.recall.ci95[1].toFixed(4)}), lowest ${r.recall.min.toFixed(4)}`);
  if (r.thresholds) {
    const t = r.thresholds;
    lines.push(`thresholds${t.point ? ` (at ${t.point})` : ""}: ${t.checks.map((c) => `${c.expr} ${c.pass ? "holds" : "FAILS"} (${c.value === null ? "no figure" : r2(c.value)})`).join(", ")}`);
  }
  return lines.join("\n");
}
