// The report as one self-contained HTML page (inline CSS and SVG, no script, nothing fetched), and
// the page comparing two reports with their ratios.
import type { Report } from "./run.js";
import { esc, lineChart, percentileX, PERCENTILE_TICKS, type Series } from "./svg.js";

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555;margin:2px 0}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f5}
.grid-charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{border:1px solid #e5e7eb;background:#fff;font-size:11px}
svg .title{font-size:13px;font-weight:600}svg .axis{fill:#444}
svg line.grid{stroke:#eee}svg path.series{stroke-width:1.8}
svg line.slo{stroke:#111;stroke-dasharray:6 4}svg .slo-label{font-weight:600}
.pass{color:#15803d}.fail{color:#b91c1c}
pre{background:#f4f4f5;padding:8px;overflow:auto}
`;

const n = (v: number | null | undefined, digits = 2) => (v === null || v === undefined || !Number.isFinite(v) ? "–" : Number(v.toFixed(digits)).toLocaleString("en-US"));

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>\n`;

const table = (head: string[], rows: (string | number)[][]) =>
  `<table><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>${rows
    .map((r) => `<tr>${r.map((c) => `<td>${typeof c === "number" ? n(c) : c}</td>`).join("")}</tr>`)
    .join("")}</table>`;

function header(r: Report): string {
  const o = r.options;
  const what = o.workloads.map((w) => (o.workloads.length > 1 ? `${w.kind}×${w.weight}` : w.kind)).join(", ");
  const how = r.mode === "closed" ? `closed loop, ${o.connections} connections` : r.mode === "open" ? `open loop at ${o.rate}/s, ${o.connections} connections` : r.mode === "ramp" ? `SLO search: p${o.sloPercentile} ≤ ${o.sloMs} ms` : "recall";
  return `<h1>Load test: ${esc(how)}</h1>
<p class="meta">${esc(o.url)} · table ${esc(o.table || "–")} · ${esc(what)} · answers as ${esc(o.accept)} · ${esc(r.started_at)}</p>
<p class="meta">machine: ${r.machine.cpus} × ${esc(r.machine.model)}, ${r.machine.memory_gib} GiB, ${esc(r.machine.platform)} ${esc(r.machine.release)}, load ${r.machine.loadavg.join(" ")} · Node ${esc(r.versions.node)} · harness ${esc(r.versions.harness)} · server ${esc(r.versions.server ?? "unknown")}</p>`;
}

function summaryTable(r: Report): string {
  const run = r.run!;
  const rows: (string | number)[][] = [
    ["requests", run.requests],
    ["successful answers a second", run.throughput],
    ["errors", run.errors],
    ["seconds measured", run.seconds],
  ];
  if (run.target_rate !== null) {
    rows.push(["target rate /s", run.target_rate], ["sent late (> 1 ms after due)", run.late], ["never sent (client behind)", run.unsent], ["most requests waiting at once", run.max_backlog]);
  }
  if (r.server) rows.push(["requests the server counted", r.server.requests_counted ?? "–"]);
  if (r.client) {
    rows.push(["harness CPU µs a request", r.client.cpu_us_per_request], ["harness event-loop delay p99 / max ms", `${n(r.client.event_loop_p99_ms)} / ${n(r.client.event_loop_max_ms)}`]);
  }
  const l = run.latency_ms;
  const lat = table(["latency ms", "min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"], [["all successful", l.min, l.mean, l.p50, l.p90, l.p95, l.p99, l.p999, l.max]].concat(
    Object.entries(run.workloads).map(([name, w]) => [esc(name), w.latency_ms.min, w.latency_ms.mean, w.latency_ms.p50, w.latency_ms.p90, w.latency_ms.p95, w.latency_ms.p99, w.latency_ms.p999, w.latency_ms.max]),
  ));
  const statuses = table(["answer", "count"], Object.entries(run.by_status).map(([k, v]) => [esc(k), v]));
  const work = table(["workload", "requests", "errors"], Object.entries(run.workloads).map(([k, w]) => [esc(k), w.requests, w.errors]));
  return `<h2>Summary</h2><div class="grid-charts"><div>${table(["figure", "value"], rows)}</div><div>${statuses}${work}</div></div>${lat}`;
}

function clientCharts(r: Report): string[] {
  const tl = r.run!.timeline;
  const pick = (f: (p: (typeof tl)[number]) => number): [number, number][] => tl.map((p) => [p.t, f(p)]);
  return [
    lineChart({ title: "Throughput", x: "seconds", y: "answers / s", series: [{ name: "successful", points: pick((p) => (p.rate * p.ok) / Math.max(1, p.requests)) }, { name: "errors", points: pick((p) => (p.rate * p.errors) / Math.max(1, p.requests)) }] }),
    lineChart({ title: "Latency over time", x: "seconds", y: "ms", series: (["p50", "p95", "p99", "p999"] as const).map((k) => ({ name: k === "p999" ? "p99.9" : k, points: pick((p) => p[k]) })) }),
    lineChart({ title: "Latency distribution (HDR percentiles)", x: "percentile", y: "ms", xTicks: PERCENTILE_TICKS, series: [{ name: "latency", points: r.run!.percentiles.map(([p, v]) => [percentileX(p), v]) }] }),
    lineChart({ title: "Error rate", x: "seconds", y: "% of answers", series: [{ name: "errors", points: pick((p) => (p.requests ? (100 * p.errors) / p.requests : 0)) }] }),
  ];
}

function serverCharts(r: Report): string[] {
  if (!r.server) return [];
  const pts = r.server.points;
  const pick = (f: (p: (typeof pts)[number]) => number | null): [number, number][] => pts.flatMap((p) => { const v = f(p); return v === null ? [] : [[p.t, v] as [number, number]]; });
  const reasons = [...new Set(pts.flatMap((p) => Object.keys(p.unavailable_per_s)))];
  const charts = [
    lineChart({ title: "Server: requests it answered", x: "seconds", y: "requests / s", series: [{ name: "server count", points: pick((p) => p.requests_per_s) }, { name: "harness answers", points: r.run!.timeline.map((p) => [p.t, p.rate]) }] }),
    lineChart({ title: "Server: CPU", x: "seconds", y: "cores busy", series: [{ name: "process CPU", points: pick((p) => p.cpu_cores) }] }),
    lineChart({ title: "Server: event-loop delay p99", x: "seconds", y: "ms", series: [{ name: "event-loop p99", points: pick((p) => p.event_loop_p99_ms) }] }),
    lineChart({ title: "Server: in flight and worker pool", x: "seconds", y: "requests / tasks", series: [{ name: "in flight", points: pick((p) => p.in_flight) }, { name: "pool busy", points: pick((p) => p.pool_busy) }, { name: "pool queue", points: pick((p) => p.pool_queue) }] }),
    lineChart({ title: "Server: 503s by reason", x: "seconds", y: "503 / s", series: reasons.length ? reasons.map((k) => ({ name: k, points: pick((p) => p.unavailable_per_s[k] ?? 0) })) : [{ name: "none", points: pick(() => 0) }] }),
  ];
  if (pts.some((p) => p.batch_size_mean !== null)) charts.push(lineChart({ title: "Server: query batch size", x: "seconds", y: "mean batch", series: [{ name: "mean", points: pick((p) => p.batch_size_mean) }] }));
  return charts;
}

function rampSection(r: Report): string {
  const ramp = r.ramp!;
  const steps = [...ramp.steps].sort((a, b) => a.rate - b.rate);
  const chart = lineChart({
    title: `Rate against p${ramp.percentile}`,
    x: "target rate / s",
    y: `p${ramp.percentile} ms`,
    hline: { y: ramp.slo_ms, label: `SLO ${ramp.slo_ms} ms` },
    series: [{ name: `p${ramp.percentile}`, points: steps.map((s) => [s.rate, s.slo_ms]), dots: true }, { name: "p50", points: steps.map((s) => [s.rate, s.p50_ms]), dots: true }],
  });
  const best = ramp.best_rate === null ? `<p class="fail">No rate tried held p${ramp.percentile} ≤ ${ramp.slo_ms} ms.</p>` : `<p class="pass">Highest rate holding p${ramp.percentile} ≤ ${ramp.slo_ms} ms: <b>${n(ramp.best_rate, 1)}/s</b>.</p>`;
  const rows = ramp.steps.map((s) => [s.rate, s.achieved, s.p50_ms, s.slo_ms, 100 * s.error_rate, s.unsent, s.pass ? '<span class="pass">yes</span>' : '<span class="fail">no</span>']);
  return `<h2>SLO search</h2>${best}<div class="grid-charts">${chart}<div>${table(["target /s", "achieved /s", "p50 ms", `p${ramp.percentile} ms`, "errors %", "never sent", "holds"], rows)}</div></div>`;
}

function recallSection(r: Report): string {
  const c = r.recall!;
  return `<h2>Recall</h2>${table(["figure", "value"], [[`mean recall@${c.k}`, n(c.mean, 4)], ["lowest", n(c.min, 4)], ["queries", c.queries], ["search p50 ms", c.search_p50_ms], ["exact search p50 ms", c.exact_p50_ms]])}`;
}

export function reportPage(r: Report): string {
  const parts = [header(r)];
  if (r.interrupted) parts.push('<p class="fail">Stopped early (Ctrl-C): the figures cover the time it ran.</p>');
  if (r.run) {
    parts.push(summaryTable(r), `<h2>Client</h2><div class="grid-charts">${clientCharts(r).join("")}</div>`);
    if (r.server) parts.push(`<h2>Server (/metrics)</h2>${r.server.error ? `<p class="fail">Scraping stopped: ${esc(r.server.error)}</p>` : ""}<div class="grid-charts">${serverCharts(r).join("")}</div>`);
  }
  if (r.ramp) parts.push(rampSection(r));
  if (r.recall) parts.push(recallSection(r));
  parts.push(`<h2>Options</h2><details><summary>as run (credentials left out)</summary><pre>${esc(JSON.stringify(r.options, null, 2))}</pre></details>`);
  return page(`Load test ${r.started_at}`, parts.join("\n"));
}

/** Figures of a report worth comparing, by name; null where the run has none. */
function figures(r: Report): [string, number | null][] {
  const run = r.run;
  const l = run?.latency_ms;
  return [
    ["successful answers / s", run?.throughput ?? null],
    ["errors", run?.errors ?? null],
    ["p50 ms", l?.p50 ?? null],
    ["p95 ms", l?.p95 ?? null],
    ["p99 ms", l?.p99 ?? null],
    ["p99.9 ms", l?.p999 ?? null],
    ["max ms", l?.max ?? null],
    ["mean server CPU (cores)", r.server?.points.length ? r.server.points.reduce((a, p) => a + p.cpu_cores, 0) / r.server.points.length : null],
    ["SLO search: best rate / s", r.ramp?.best_rate ?? null],
    ["recall", r.recall?.mean ?? null],
  ];
}

export function comparePage(a: Report, b: Report, names: [string, string]): string {
  const fa = figures(a);
  const fb = figures(b);
  const rows = fa
    .map(([name, va], i) => [name, va, fb[i][1]] as const)
    .filter(([, va, vb]) => va !== null || vb !== null)
    .map(([name, va, vb]) => [esc(name), n(va), n(vb), va && vb !== null ? `${n(vb / va, 3)}×` : "–"]);
  const both = (f: (r: Report) => [number, number][]): Series[] => [
    { name: names[0], points: f(a) },
    { name: names[1], points: f(b) },
  ];
  const charts: string[] = [];
  if (a.run && b.run) {
    charts.push(
      lineChart({ title: "Latency distribution (HDR percentiles)", x: "percentile", y: "ms", xTicks: PERCENTILE_TICKS, series: both((r) => r.run!.percentiles.map(([p, v]) => [percentileX(p), v])) }),
      lineChart({ title: "Throughput", x: "seconds", y: "answers / s", series: both((r) => r.run!.timeline.map((p) => [p.t, p.rate])) }),
      lineChart({ title: "p99 over time", x: "seconds", y: "ms", series: both((r) => r.run!.timeline.map((p) => [p.t, p.p99])) }),
    );
  }
  if (a.ramp && b.ramp) {
    charts.push(lineChart({ title: `Rate against p${a.ramp.percentile}`, x: "target rate / s", y: "ms", hline: { y: a.ramp.slo_ms, label: `SLO ${a.ramp.slo_ms} ms` }, series: both((r) => [...r.ramp!.steps].sort((x, y) => x.rate - y.rate).map((s) => [s.rate, s.slo_ms])).map((s) => ({ ...s, dots: true })) }));
  }
  const body = `<h1>Two load tests side by side</h1>
<p class="meta">A: ${esc(names[0])}</p>${header(a).replace("<h1>", "<h3>").replace("</h1>", "</h3>")}
<p class="meta">B: ${esc(names[1])}</p>${header(b).replace("<h1>", "<h3>").replace("</h1>", "</h3>")}
<h2>Figures (ratio = B / A)</h2>${table(["figure", "A", "B", "B / A"], rows)}
<div class="grid-charts">${charts.join("")}</div>`;
  return page("Load test comparison", body);
}
