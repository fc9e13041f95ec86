// The report as one self-contained HTML page (inline CSS and SVG, no script, nothing fetched), and
// the page comparing two reports with their ratios and whether the runs' noise tells them apart.
import { overlaps, type Interval } from "./noise.js";
import type { RepeatRow, Report, RunResult, SweepFigures, SweepPoint } from "./report.js";
import type { ServerPoint } from "./server-metrics.js";
import { esc, lineChart, percentileX, PERCENTILE_TICKS, shorten, type Series } from "./svg.js";

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555;margin:2px 0}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f5}
.grid-charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{border:1px solid #e5e7eb;background:#fff;font-size:11px}
svg .title{font-size:13px;font-weight:600}svg .axis{fill:#444}
svg line.grid{stroke:#eee}svg path.series{stroke-width:1.8}svg path.errorbar{stroke-width:1.2}
svg line.slo{stroke:#111;stroke-dasharray:6 4}svg .slo-label,svg .mark-label{font-weight:600}
.pass{color:#15803d}.fail{color:#b91c1c}.noise{color:#6b7280}
.warning{background:#fef3c7;border:1px solid #f59e0b;padding:6px 10px;margin:6px 0}
pre{background:#f4f4f5;padding:8px;overflow:auto}
`;

// toLocaleString alone keeps 3 decimals: recall 0.9998 would read "1".
const n = (v: number | null | undefined, digits = 2) => (v === null || v === undefined || !Number.isFinite(v) ? "–" : Number(v.toFixed(digits)).toLocaleString("en-US", { maximumFractionDigits: digits }));

/** A median with its range: `12.3 (11.8–13.1)`; the value alone for one run. */
const withRange = (i: Interval | undefined, digits = 2) => (!i ? "–" : i.n > 1 ? `${n(i.median, digits)} (${n(i.min, digits)}–${n(i.max, digits)})` : n(i.median, digits));

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>\n`;

const table = (head: string[], rows: (string | number | null)[][]) =>
  `<table><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>${rows
    .map((r) => `<tr>${r.map((c) => `<td>${typeof c === "number" || c === null ? n(c) : c}</td>`).join("")}</tr>`)
    .join("")}</table>`;

function how(r: Report): string {
  const o = r.options;
  if (r.sweep) return `recall–QPS sweep: ${r.sweep.axes.map((a) => `${a.name} ${a.values.join(", ")}`).join(" × ")}, ${o.connections} connections`;
  const gens = r.merged ? `, ${r.merged.parts} generators` : "";
  if (r.mode === "closed") return `closed loop, ${o.connections} connections${gens}`;
  if (r.mode === "open") return `open loop at ${r.run?.target_rate ?? o.rate}/s, ${r.run?.connections ?? o.connections} connections${gens}`;
  if (r.mode === "ramp") return `SLO search: p${o.sloPercentile} ≤ ${o.sloMs} ms`;
  return r.recall?.filter ? `recall, filter ${r.recall.filter}` : "recall";
}

function header(r: Report): string {
  const o = r.options;
  const what = o.workloads.map((w) => (o.workloads.length > 1 ? `${w.kind}×${w.weight}` : w.kind)).join(", ");
  const repeat = o.repeat > 1 ? ` · ${o.repeat} ${r.sweep ? "rounds" : "runs"}` : "";
  return `<h1>Load test: ${esc(how(r))}</h1>
<p class="meta">${esc(o.url)} · table ${esc(o.table || "–")} · ${esc(what)} · answers as ${esc(o.accept)}${repeat} · ${esc(r.started_at)}</p>
<p class="meta">machine: ${r.machine.cpus} × ${esc(r.machine.model)}, ${r.machine.memory_gib} GiB, ${esc(r.machine.platform)} ${esc(r.machine.release)}, load ${r.machine.loadavg.join(" ")} · Node ${esc(r.versions.node)} · harness ${esc(r.versions.harness)} · server ${esc(r.versions.server ?? "unknown")}</p>`;
}

function warningsBox(r: Report): string {
  return (r.warnings ?? []).map((w) => `<p class="warning">${esc(w)}</p>`).join("");
}

function thresholdsSection(r: Report): string {
  const t = r.thresholds!;
  const verdict = t.pass ? '<p class="pass">Every threshold held (exit 0).</p>' : '<p class="fail">A threshold failed (exit 3).</p>';
  const at = t.point ? `<p class="meta">Checked at the sweep's point ${esc(t.point)}.</p>` : "";
  const rows = t.checks.map((c) => [esc(c.expr), c.value, c.pass ? '<span class="pass">holds</span>' : '<span class="fail">fails</span>']);
  return `<h2>Thresholds</h2>${verdict}${at}${table(["bound", "figure", "result"], rows)}`;
}

function datasetSection(r: Report): string {
  const d = r.dataset!;
  const l = r.load;
  const rows: (string | number | null)[][] = [
    ["dataset", esc(d.description)],
    ["held-out queries", d.queries],
    ["ground truth", esc(d.truth_source === "computed" ? `computed in ${n(d.truth_seconds, 1)} s, stored in ${d.dir}` : d.truth_source === "stored" ? `stored in ${d.dir}` : "the dataset's own file")],
  ];
  if (l) {
    if (l.skipped) rows.push(["load phase", esc(`skipped: ${l.skipped}`)]);
    else {
      rows.push(
        ["table", esc(l.table)],
        ["insert batches", esc(`${l.batch_size} rows, ${l.concurrency} at a time`)],
        ["create (first batch) s", l.create_s],
        ["inserts s", l.insert_s],
        ["rows written a second", l.rows_per_s],
      );
    }
    if (l.index) rows.push([`index ${esc(l.index.type)} ${esc(JSON.stringify(l.index.params))} build s`, l.index.build_s]);
    rows.push(["fragments after the load", l.after.fragments]);
    if (l.serving_ready_s !== null) rows.push(["the server's serving index answered after s", l.serving_ready_s]);
  }
  return `<h2>Dataset and load phase</h2>${table(["figure", "value"], rows)}`;
}

const pathText = (paths: Record<string, number> | null | undefined) => {
  if (!paths || !Object.keys(paths).length) return "–";
  const total = Object.values(paths).reduce((a, b) => a + b, 0);
  return Object.entries(paths).map(([k, v]) => `${esc(k)} ${n((100 * v) / total, 0)}%`).join(", ");
};

function sweepSection(r: Report): string {
  const s = r.sweep!;
  const bySeries = new Map<string, SweepPoint[]>();
  for (const p of s.points) bySeries.set(p.series, [...(bySeries.get(p.series) ?? []), p]);
  const first = s.axes[0].name;
  const series = (f: (p: SweepPoint) => [number, number], yErr: (p: SweepPoint) => [number, number] | null): Series[] =>
    [...bySeries].map(([name, ps]) => {
      const withRecall = ps.filter((p) => p.recall);
      return {
        name: name || first,
        points: withRecall.map(f),
        dots: true,
        xErr: withRecall.map((p) => p.recall!.ci95),
        yErr: withRecall.map(yErr),
        labels: withRecall.map((p) => String(p.params[first])),
      };
    });
  const k = s.points.find((p) => p.recall)?.recall?.k ?? r.options.k;
  const charts = [
    // ann-benchmarks' picture: recall across, throughput on a log scale, the frontier of settings no other beats in both.
    lineChart({ title: "Recall against throughput", x: `recall@${k}`, y: "searches / s (log scale)", xFromData: true, yLog: true, sortX: true, frontier: true, series: series((p) => [p.recall!.mean, p.qps.median], (p) => [p.qps.min, p.qps.max]).map((x) => ({ ...x, xErr: undefined })) }),
    lineChart({ title: "Recall against p99 latency", x: `recall@${k} (bars: 95% interval over the queries)`, y: "p99 ms", xFromData: true, sortX: true, series: series((p) => [p.recall!.mean, p.p99_ms.median], (p) => [p.p99_ms.min, p.p99_ms.max]) }),
  ];
  // A point whose every answer failed has no latency to show.
  const answered = (p: SweepPoint, i: Interval) => (p.requests > p.errors ? withRange(i) : "–");
  const rows = s.points.map((p) => [
    esc(p.label),
    withRange(p.qps, 1),
    answered(p, p.p50_ms),
    answered(p, p.p99_ms),
    answered(p, p.service_p99_ms),
    p.recall ? `${n(p.recall.mean, 4)} (${n(p.recall.ci95[0], 4)}–${n(p.recall.ci95[1], 4)})` : "–",
    p.recall ? n(p.recall.min, 2) : "–",
    p.recall ? p.recall.search_p50_ms : null,
    p.errors,
    pathText(p.paths && Object.keys(p.paths).length ? p.paths : p.recall?.paths),
  ]);
  const note = `<p class="meta">Each point: a closed loop of ${r.options.duration} s at ${r.options.connections} connections per round (${s.rounds} round${s.rounds > 1 ? "s, forward then backward" : ""}; median and range), and recall@${k} of ${s.points[0]?.recall?.queries ?? 0} held-out queries against ${esc(s.points[0]?.recall?.truth === "dataset" ? "the dataset's ground truth" : "exact search")}${s.points[0]?.recall?.filter ? ` with the filter ${esc(s.points[0].recall.filter)}` : ""}, asked one at a time. One line per ${s.axes.length > 1 ? `setting of ${esc(s.axes.slice(1).map((a) => a.name).join(" × "))}` : "sweep"}, its points by rising recall (points of equal recall not joined); labels on the points: ${esc(first)} (a label with no room is left out: the table has every point); vertical bars: the range over the rounds; horizontal bars (p99 chart): the 95% interval of recall. Throughput is on a log scale; the grey band joins the Pareto frontier, the points no other point beats in both recall and throughput. Path: the searches' path as the server counted them (serving index or engine).</p>`;
  return `<h2>Recall–QPS sweep</h2>${note}<div class="grid-charts">${charts.join("")}</div>${table(["point", "searches/s", "p50 ms", "p99 ms", "service p99 ms", `recall@${k} (95% interval)`, "lowest recall", "one-client p50 ms", "errors", "path"], rows)}`;
}

const REPEAT_FIGURES: [keyof RepeatRow, string][] = [
  ["throughput", "successful/s"],
  ["errors", "errors"],
  ["p50", "p50 ms"],
  ["p95", "p95 ms"],
  ["p99", "p99 ms"],
  ["p999", "p99.9 ms"],
  ["max", "max ms"],
  ["service_p50", "service p50 ms"],
  ["service_p99", "service p99 ms"],
  ["best_rate", "best SLO rate /s"],
  ["server_cpu", "server CPU cores"],
];

function repeatsSection(r: Report): string {
  const rep = r.repeats!;
  const cols = REPEAT_FIGURES.filter(([k]) => rep.intervals[k]);
  const rows: (string | number | null)[][] = rep.rows.map((row, i) => [`run ${i + 1}${i === rep.shown ? " (shown below)" : ""}`, ...cols.map(([k]) => row[k])]);
  rows.push(["<b>median (range)</b>", ...cols.map(([k]) => withRange(rep.intervals[k]))]);
  return `<h2>Repeats</h2><p class="meta">${rep.rows.length} runs back to back; the figures below are those of the run of median throughput.</p>${table(["run", ...cols.map(([, h]) => h)], rows)}`;
}

const latencyRow = (name: string, l: RunResult["latency_ms"]) => [name, l.min, l.mean, l.p50, l.p90, l.p95, l.p99, l.p999, l.max];

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
  if (r.server) rows.push([r.sweep ? "requests the server counted (the points' warmups too)" : "requests the server counted", r.server.requests_counted ?? "–"]);
  if (r.client) {
    rows.push(
      ["harness CPU cores (µs a request)", `${n(r.client.cpu_cores)} (${n(r.client.cpu_us_per_request, 0)})`],
      ["harness event-loop delay p99 / max ms", `${n(r.client.event_loop_p99_ms)} / ${n(r.client.event_loop_max_ms)}`],
    );
  }
  const lat = table(
    ["latency ms", "min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"],
    [
      latencyRow(run.target_rate !== null ? "from due (corrected)" : "all successful", run.latency_ms),
      latencyRow("service time (from send)", run.service_ms),
      ...Object.entries(run.workloads).map(([name, w]) => latencyRow(esc(name), w.latency_ms)),
    ],
  );
  const statuses = table(["answer", "count"], Object.entries(run.by_status).map(([k, v]) => [esc(k), v]));
  const work = table(["workload", "requests", "errors"], Object.entries(run.workloads).map(([k, w]) => [esc(k), w.requests, w.errors]));
  const title = r.ramp ? "All steps together (not a capacity figure: see the SLO search)" : "Summary";
  return `<h2>${title}</h2><div class="grid-charts"><div>${table(["figure", "value"], rows)}</div><div>${statuses}${work}</div></div>${lat}`;
}

/** Where time axes end: the run's last second; for a sweep, whose seconds count only its measured loops, the timeline's. */
const timeEnd = (r: Report) => (r.run && r.sweep ? Math.max(r.run.seconds, ...r.run.timeline.map((p) => p.t), ...r.sweep.points.flatMap((p) => p.runs.map((x) => x.to ?? 0))) : r.run?.seconds);

function clientCharts(r: Report): string[] {
  const run = r.run!;
  const tl = run.timeline;
  const end = timeEnd(r)!;
  const pick = (f: (p: (typeof tl)[number]) => number): [number, number][] => tl.map((p) => [p.t, f(p)]);
  const throughput: Series[] = [
    { name: "successful", points: pick((p) => (p.rate * p.ok) / Math.max(1, p.requests)) },
    { name: "errors", points: pick((p) => (p.rate * p.errors) / Math.max(1, p.requests)) },
  ];
  if (run.target_rate !== null) throughput.push({ name: "target rate", points: [[0, run.target_rate], [end, run.target_rate]] });
  const open = run.target_rate !== null;
  // A sweep's seconds shaded by the point measured in them (the gaps: warm-ups and recall passes).
  const bands = r.sweep?.points.flatMap((p) => p.runs.flatMap((x) => (x.from === undefined || x.to === undefined ? [] : [{ from: x.from, to: x.to, label: p.label }]))).sort((a, b) => a.from - b.from);
  const charts = [
    lineChart({ title: "Throughput", x: "seconds", y: "answers / s", xMax: end, bands, series: throughput }),
    lineChart({
      title: "Latency over time",
      x: "seconds",
      y: "ms",
      xMax: end,
      bands,
      series: [
        ...(["p50", "p95", "p99", "p999"] as const).map((k) => ({ name: `${k === "p999" ? "p99.9" : k}${open ? " from due" : ""}`, points: pick((p) => p[k]) })),
        { name: "service p99", points: pick((p) => p.service_p99) },
      ],
    }),
    lineChart({
      title: "Latency distribution (HDR percentiles)",
      x: "percentile",
      y: "ms",
      xTicks: PERCENTILE_TICKS,
      series: [
        { name: open ? "from due (corrected)" : "latency", points: run.percentiles.map(([p, v]) => [percentileX(p), v]) },
        { name: "service time (from send)", points: (run.service_percentiles ?? []).map(([p, v]) => [percentileX(p), v]) },
      ],
    }),
    lineChart({ title: "Error rate", x: "seconds", y: "% of answers", xMax: end, bands, series: [{ name: "errors", points: pick((p) => (p.requests ? (100 * p.errors) / p.requests : 0)) }] }),
  ];
  if (open) {
    charts.push(
      lineChart({
        title: "Harness queue (open loop)",
        x: "seconds",
        y: "requests",
        xMax: end,
        hline: { y: run.connections, label: `${run.connections} connections` },
        series: [
          { name: "due, waiting for a connection (most a second)", points: pick((p) => p.backlog ?? 0) },
          { name: "outstanding (most a second)", points: pick((p) => p.outstanding) },
        ],
      }),
    );
  }
  return charts;
}

function serverCharts(r: Report): string[] {
  if (!r.server) return [];
  const pts = r.server.points;
  const end = timeEnd(r);
  const pick = (f: (p: ServerPoint) => number | null): [number, number][] => pts.flatMap((p) => { const v = f(p); return v === null || v === undefined ? [] : [[p.t, v] as [number, number]]; });
  const reasons = [...new Set(pts.flatMap((p) => Object.keys(p.unavailable_per_s)))];
  const hasMax = pts.some((p) => p.in_flight_max !== null && p.in_flight_max !== undefined);
  const inFlight: Series[] = [
    hasMax ? { name: "server: most in flight in the second", points: pick((p) => p.in_flight_max) } : { name: "server: in flight at the scrape", points: pick((p) => p.in_flight) },
  ];
  if (r.run) inFlight.push({ name: "harness: most outstanding in the second", points: r.run.timeline.map((p) => [p.t, p.outstanding]) });
  const charts = [
    lineChart({ title: "Server: requests it answered", x: "seconds", y: "requests / s", xMax: end, series: [{ name: "server count", points: pick((p) => p.requests_per_s) }, { name: "harness answers", points: (r.run?.timeline ?? []).map((p) => [p.t, p.rate]) }] }),
    lineChart({ title: "Server: CPU", x: "seconds", y: "cores busy", xMax: end, series: [{ name: "process CPU", points: pick((p) => p.cpu_cores) }] }),
    lineChart({ title: "Server: event-loop delay p99", x: "seconds", y: "ms", xMax: end, series: [{ name: "event-loop p99", points: pick((p) => p.event_loop_p99_ms) }] }),
    lineChart({ title: "Server: requests in flight", x: "seconds", y: "requests", xMax: end, hline: r.run ? { y: r.run.connections, label: `${r.run.connections} connections` } : undefined, series: inFlight }),
    lineChart({ title: "Server: worker pool", x: "seconds", y: "tasks", xMax: end, series: [{ name: "threads busy", points: pick((p) => p.pool_busy) }, { name: "tasks queued", points: pick((p) => p.pool_queue) }] }),
    lineChart({ title: "Server: 503s by reason", x: "seconds", y: "503 / s", xMax: end, series: reasons.length ? reasons.map((k) => ({ name: k, points: pick((p) => p.unavailable_per_s[k] ?? 0) })) : [{ name: "none", points: pick(() => 0) }] }),
  ];
  if (pts.some((p) => p.batch_size_mean !== null)) charts.push(lineChart({ title: "Server: query batch size", x: "seconds", y: "mean batch", xMax: end, series: [{ name: "mean", points: pick((p) => p.batch_size_mean) }] }));
  return charts;
}

/** The table's state over the run, small multiples (the counts differ by orders of magnitude). */
function tableState(r: Report): string {
  const pts = r.server?.points ?? [];
  const known = pts.filter((p) => p.table && (p.table.fragments !== null || p.table.unindexed_rows !== null));
  if (!known.length) return `<h2>Table state</h2><p class="meta">The server exported no table figures for ${esc(r.options.table || "the table")} (Quiver's quiver_table_* gauges).</p>`;
  const end = timeEnd(r);
  const pick = (f: (p: ServerPoint) => number | null | undefined): [number, number][] => pts.flatMap((p) => { const v = f(p); return v === null || v === undefined ? [] : [[p.t, v] as [number, number]]; });
  const charts = [
    lineChart({ title: "Table: fragments and versions", x: "seconds", y: "count", xMax: end, series: [{ name: "fragments", points: pick((p) => p.table?.fragments) }, { name: "versions kept", points: pick((p) => p.table?.versions) }] }),
    lineChart({ title: "Table: rows its indexes do not cover", x: "seconds", y: "rows", xMax: end, series: [{ name: "unindexed rows", points: pick((p) => p.table?.unindexed_rows) }, { name: "deleted rows", points: pick((p) => p.table?.deleted_rows) }] }),
    lineChart({ title: "Table: maintenance and search path", x: "seconds", y: "jobs / % of searches", xMax: end, series: [{ name: "maintenance jobs queued or running", points: pick((p) => p.maintenance_jobs) }, { name: "% served by the serving index", points: pick((p) => (p.serving_share === null || p.serving_share === undefined ? null : 100 * p.serving_share)) }] }),
  ];
  const a = known[0].table;
  const z = known[known.length - 1].table;
  const rows = (["fragments", "versions", "unindexed_rows", "deleted_rows"] as const).map((k) => [k.replace("_", " "), a[k], z[k]]);
  return `<h2>Table state</h2><div class="grid-charts">${charts.join("")}<div>${table(["", "start", "end"], rows)}</div></div>`;
}

function rampSection(r: Report): string {
  const ramp = r.ramp!;
  const steps = [...ramp.steps].sort((a, b) => a.rate - b.rate || a.attempt - b.attempt);
  // The failing point: a step whose last attempt missed (a retried miss that then held is not one).
  const final = new Map<number, (typeof steps)[number]>();
  for (const s of ramp.steps) final.set(s.rate, s);
  const missed = [...final.values()].filter((s) => !s.pass);
  const chart = lineChart({
    title: `Rate against p${ramp.percentile}`,
    x: "target rate / s",
    y: `p${ramp.percentile} ms`,
    hline: { y: ramp.slo_ms, label: `SLO ${ramp.slo_ms} ms` },
    marks: missed.map((s) => ({ x: s.rate, y: s.slo_ms, label: "missed" })),
    series: [{ name: `p${ramp.percentile}`, points: steps.map((s) => [s.rate, s.slo_ms]), dots: true }, { name: "p50", points: steps.map((s) => [s.rate, s.p50_ms]), dots: true }],
  });
  const best = ramp.best
    ? `<p class="pass">Highest rate holding p${ramp.percentile} ≤ ${ramp.slo_ms} ms: <b>${n(ramp.best.rate, 1)}/s</b> (achieved ${n(ramp.best.achieved, 1)}/s, p50 ${n(ramp.best.p50_ms)} ms, p${ramp.percentile} ${n(ramp.best.slo_ms)} ms, service p99 ${n(ramp.best.service_ms.p99)} ms, errors ${n(100 * ramp.best.error_rate)}%).</p>`
    : `<p class="fail">No rate tried held p${ramp.percentile} ≤ ${ramp.slo_ms} ms.</p>`;
  const rows = ramp.steps.map((s) => [s.rate, s.attempt > 1 ? "retry" : "", s.achieved, s.p50_ms, s.slo_ms, s.service_ms.p99, 100 * s.error_rate, s.unsent, s.pass ? '<span class="pass">yes</span>' : '<span class="fail">no</span>']);
  return `<h2>SLO search</h2>${best}<div class="grid-charts">${chart}<div>${table(["target /s", "", "achieved /s", "p50 ms", `p${ramp.percentile} ms`, "service p99 ms", "errors %", "never sent", "holds"], rows)}</div></div>`;
}

/** What a recall figure was held to: a filtered search is always held to the same filtered exact search. */
function truthText(r: Report, c: NonNullable<Report["recall"]>): string {
  if (c.truth === "dataset") return "the dataset's ground truth";
  if (!c.filter) return "exact search (bypass_vector_index)";
  return `exact search with the same filter (bypass_vector_index)${r.dataset ? ", not the dataset's unfiltered ground truth" : ""}`;
}

function recallSection(r: Report): string {
  const c = r.recall!;
  return `<h2>Recall</h2>${table(["figure", "value"], [
    [`mean recall@${c.k} (95% interval)`, `${n(c.mean, 4)} (${n(c.ci95?.[0], 4)}–${n(c.ci95?.[1], 4)})`],
    ["lowest", n(c.min, 4)],
    ["queries", c.queries],
    ["filter (every search, exact ones included)", c.filter ? `<code>${esc(c.filter)}</code>` : "none"],
    ["exact answers", esc(truthText(r, c))],
    ["search p50 ms (one at a time)", c.search_p50_ms],
    ["exact search p50 ms", c.exact_p50_ms],
    ["path", pathText(c.paths)],
  ])}`;
}

export function reportPage(r: Report): string {
  const parts = [header(r), warningsBox(r)];
  if (r.interrupted) parts.push('<p class="fail">Stopped early (Ctrl-C): the figures cover the time it ran.</p>');
  if (r.thresholds) parts.push(thresholdsSection(r));
  if (r.dataset) parts.push(datasetSection(r));
  if (r.sweep) parts.push(sweepSection(r));
  if (r.repeats) parts.push(repeatsSection(r));
  if (r.ramp) parts.push(rampSection(r));
  if (r.run) {
    parts.push(summaryTable(r), `<h2>Client</h2><div class="grid-charts">${clientCharts(r).join("")}</div>`);
    if (r.server) {
      parts.push(`<h2>Server (/metrics)</h2>${r.server.error ? `<p class="fail">Scraping stopped: ${esc(r.server.error)}</p>` : ""}<div class="grid-charts">${serverCharts(r).join("")}</div>`);
      parts.push(tableState(r));
    }
  }
  if (r.recall) parts.push(recallSection(r));
  parts.push(`<h2>Options</h2><details><summary>as run (credentials left out)</summary><pre>${esc(JSON.stringify(r.options, null, 2))}</pre></details>`);
  return page(`Load test ${r.started_at}`, parts.join("\n"));
}

/** A compared figure: its value, and its range over repeated runs when there were several. */
interface Figure {
  name: string;
  value: number | null;
  range: Interval | null;
}

/** Figures of a report worth comparing; null where the run has none. */
function figures(r: Report): Figure[] {
  const run = r.run;
  const l = run?.latency_ms;
  const rep = r.repeats?.intervals ?? {};
  const f = (name: string, value: number | null | undefined, key?: keyof RepeatRow): Figure => ({ name, value: key && rep[key] ? rep[key]!.median : (value ?? null), range: (key && rep[key]) || null });
  return [
    f("successful answers / s", run?.throughput, "throughput"),
    f("errors", run?.errors, "errors"),
    f("p50 ms", l?.p50, "p50"),
    f("p95 ms", l?.p95, "p95"),
    f("p99 ms", l?.p99, "p99"),
    f("p99.9 ms", l?.p999, "p999"),
    f("max ms", l?.max, "max"),
    f("service p50 ms", run?.service_ms?.p50, "service_p50"),
    f("service p99 ms", run?.service_ms?.p99, "service_p99"),
    f("mean server CPU (cores)", r.server?.points.length ? r.server.points.reduce((a, p) => a + p.cpu_cores, 0) / r.server.points.length : null, "server_cpu"),
    f("SLO search: best rate / s", r.ramp?.best_rate, "best_rate"),
    f("recall", r.recall?.mean),
  ];
}

/** Whether A and B's runs tell a figure apart: only ranges of repeated runs can say so. */
function noise(a: Pick<Figure, "range">, b: Pick<Figure, "range">): string {
  if (!a.range || !b.range || a.range.n < 2 || b.range.n < 2) return '<span class="noise">one run each: no noise estimate (--repeat)</span>';
  return overlaps(a.range, b.range) ? '<span class="noise">within the noise (ranges overlap)</span>' : "differs (ranges apart)";
}

/** Two sweeps point by point (points of the same label): each figure's median and range over the rounds, recall with its 95% interval. */
function sweepRows(a: SweepFigures, b: SweepFigures): (string | number | null)[][] {
  const other = new Map(b.points.map((p) => [p.label, p]));
  return a.points.flatMap((p) => {
    const q = other.get(p.label);
    if (!q) return [];
    const timed = ([["searches / s", p.qps, q.qps], ["p99 ms", p.p99_ms, q.p99_ms]] as const).map(([name, x, y]) => [esc(p.label), name, withRange(x), withRange(y), x.median ? `${n(y.median / x.median, 3)}×` : "–", noise({ range: x }, { range: y })]);
    if (!p.recall || !q.recall) return timed;
    const ci = (r: NonNullable<SweepPoint["recall"]>) => `${n(r.mean, 4)} (${n(r.ci95[0], 4)}–${n(r.ci95[1], 4)})`;
    const apart = p.recall.ci95[1] < q.recall.ci95[0] || q.recall.ci95[1] < p.recall.ci95[0];
    return [...timed, [esc(p.label), "recall", ci(p.recall), ci(q.recall), p.recall.mean ? `${n(q.recall.mean / p.recall.mean, 3)}×` : "–", apart ? "differs (intervals apart)" : '<span class="noise">within the noise (95% intervals overlap)</span>']];
  });
}

/** A warning when the two reports are not runs of one kind (a sweep against a plain run compares a mix of settings with one). */
function kinds(a: Report, b: Report): string {
  const kind = (r: Report) => (r.sweep ? "a sweep" : r.ramp ? "an SLO search" : r.run ? `a ${r.mode} loop` : "a recall check");
  return kind(a) === kind(b) ? "" : `<p class="fail">A is ${kind(a)} and B is ${kind(b)}: their figures do not measure the same thing, so the ratios below say little.</p>`;
}

export function comparePage(a: Report, b: Report, names: [string, string]): string {
  const fa = figures(a);
  const fb = figures(b);
  // A sweep's all-points figures mix its settings: its points are compared one by one instead.
  const sweeps = a.sweep && b.sweep;
  const rows = (sweeps ? [] : fa
    .map((x, i) => [x, fb[i]] as const))
    .filter(([x, y]) => x.value !== null || y.value !== null)
    .map(([x, y]) => [
      esc(x.name),
      x.range && x.range.n > 1 ? withRange(x.range) : n(x.value),
      y.range && y.range.n > 1 ? withRange(y.range) : n(y.value),
      x.value && y.value !== null ? `${n(y.value / x.value, 3)}×` : "–",
      x.value !== null && y.value !== null ? noise(x, y) : "–",
    ]);
  // Legend labels: which run, and the file's name, shortened to fit.
  const label = (i: 0 | 1) => `${i ? "B" : "A"}: ${shorten(names[i].replace(/^.*[\\/]/, ""), 28)}`;
  const both = (f: (r: Report) => [number, number][]): Series[] => [
    { name: label(0), points: f(a) },
    { name: label(1), points: f(b) },
  ];
  const charts: string[] = [];
  if (a.run && b.run) {
    const end = Math.max(a.run.seconds, b.run.seconds);
    charts.push(
      lineChart({ title: "Latency distribution (HDR percentiles)", x: "percentile", y: "ms", xTicks: PERCENTILE_TICKS, series: both((r) => r.run!.percentiles.map(([p, v]) => [percentileX(p), v])) }),
      lineChart({ title: "Throughput", x: "seconds", y: "answers / s", xMax: end, series: both((r) => r.run!.timeline.map((p) => [p.t, p.rate])) }),
      lineChart({ title: "p99 over time", x: "seconds", y: "ms", xMax: end, series: both((r) => r.run!.timeline.map((p) => [p.t, p.p99])) }),
    );
  }
  if (sweeps) {
    // One curve per sweep (its settings by rising recall), throughput on a log scale, the frontier over both.
    const withRecall = (r: Report) => r.sweep!.points.filter((p) => p.recall);
    const curve = (r: Report): [number, number][] => withRecall(r).map((p) => [p.recall!.mean, p.qps.median]);
    const labels = [a, b].map((r) => withRecall(r).map((p) => (r.sweep!.axes.length ? String(p.params[r.sweep!.axes[0].name]) : p.label)));
    charts.push(lineChart({ title: "Recall against throughput", x: "recall", y: "searches / s (log scale)", xFromData: true, yLog: true, sortX: true, frontier: true, series: both(curve).map((s, i) => ({ ...s, dots: true, labels: labels[i] })) }));
  }
  if (a.ramp && b.ramp) {
    charts.push(lineChart({ title: `Rate against p${a.ramp.percentile}`, x: "target rate / s", y: "ms", hline: { y: a.ramp.slo_ms, label: `SLO ${a.ramp.slo_ms} ms` }, series: both((r) => [...r.ramp!.steps].sort((x, y) => x.rate - y.rate).map((s) => [s.rate, s.slo_ms])).map((s) => ({ ...s, dots: true })) }));
  }
  const body = `<h1>Two load tests side by side</h1>
<p class="meta">A: ${esc(names[0])}</p>${header(a).replace("<h1>", "<h3>").replace("</h1>", "</h3>")}
<p class="meta">B: ${esc(names[1])}</p>${header(b).replace("<h1>", "<h3>").replace("</h1>", "</h3>")}
${kinds(a, b)}${sweeps ? `<h2>Sweep points (ratio = B / A)</h2><p class="meta">Points of the same settings side by side: searches a second and p99 as the median of the rounds with their range, recall with its 95% interval over the queries; a difference whose ranges overlap is within the noise.</p>${table(["point", "figure", "A", "B", "B / A", "noise"], sweepRows(a.sweep!, b.sweep!))}` : `<h2>Figures (ratio = B / A)</h2><p class="meta">With --repeat, each figure is the median of the runs with its range; a difference whose ranges overlap is within the noise.</p>${table(["figure", "A", "B", "B / A", "noise"], rows)}`}
<div class="grid-charts">${charts.join("")}</div>`;
  return page("Load test comparison", body);
}
