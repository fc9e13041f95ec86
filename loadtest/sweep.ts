// A recall–QPS sweep, as VectorDBBench and ann-benchmarks draw them: every combination of the swept
// query fields (nprobes, refine_factor, ef, …) is a point; each point gets a recall pass against
// the exact answers and, in every round, a closed loop of --duration seconds (after --warmup)
// whose throughput and latency are its figures. Rounds go forward, then backward, so drift over
// the run (caches warming, the machine's other work) spreads over the points instead of favouring
// the first; the searches each point's runs made are labelled by the path the server counted
// (quiver_search_path_total: serving index or engine).
import { closedLoop, DISCARD, type Driven, type Load, type Sink } from "./drive.js";
import type { Measuring } from "./measure.js";
import { interval } from "./noise.js";
import type { Options } from "./options.js";
import type { RecallFigures } from "./recall.js";
import { recorder } from "./recorder.js";
import type { SweepFigures, SweepPoint } from "./report.js";
import { countsBetween, searchPaths } from "./server-metrics.js";

/** Every combination of the axes' values, the first axis varying fastest. */
export function sweepPoints(axes: Options["sweep"]): Record<string, unknown>[] {
  let points: Record<string, unknown>[] = [{}];
  for (const a of [...axes].reverse()) points = points.flatMap((p) => a.values.map((v) => ({ [a.name]: v, ...p })));
  // Keep the axes' order in each point's fields.
  return points.map((p) => Object.fromEntries(axes.map((a) => [a.name, p[a.name]])));
}

/** The narrowest of equal points: the smallest value of the first swept field that differs (non-numbers keep their order). */
function narrowest(points: Pick<SweepPoint, "params" | "label">[]): string {
  const rank = (a: Pick<SweepPoint, "params">, b: Pick<SweepPoint, "params">) => {
    for (const k of Object.keys(a.params)) {
      // NaN (a non-number) is falsy too: the next field decides.
      const d = Number(a.params[k]) - Number(b.params[k]);
      if (d) return d;
    }
    return 0;
  };
  return [...points].sort(rank)[0].label;
}

/**
 * Points whose recall passes got the very same rows in the same order for every query. Exact
 * answers at every one of them (recall 1.0) say only that the narrowest setting already finds the
 * exact rows, not whether the server honours the setting; inexact identical answers mean the
 * swept field changed nothing there.
 */
export function identicalPoints(points: Pick<SweepPoint, "label" | "params" | "recall">[]): string[] {
  const by = new Map<string, Pick<SweepPoint, "label" | "params" | "recall">[]>();
  for (const p of points) if (p.recall) by.set(p.recall.answers, [...(by.get(p.recall.answers) ?? []), p]);
  return [...by.values()]
    .filter((same) => same.length > 1)
    .map((same) => {
      const head = `sweep points ${same.map((p) => p.label).join(", ")} answered every recall query with the same rows in the same order`;
      if (same.every((p) => p.recall!.mean === 1)) {
        return `${head}, all exact (recall 1.0): the narrowest setting, ${narrowest(same)}, is already exact here, so the wider ones cannot raise recall: their throughput differences are what the wider search costs, or noise; sweep narrower settings (or a larger k or table) to see recall traded for throughput`;
      }
      return `${head}: the server does not honour the swept setting there (on Quiver's serving index only ef widens a search), so their throughput differences are noise, not settings`;
    });
}

const labelOf = (params: Record<string, unknown>, names: string[]) => names.map((n) => `${n}=${params[n]}`).join(" ");

/** `load(sink, seconds, params)`: a closed loop's load with the point's fields in every query. */
export async function runSweep(
  o: Options,
  m: Measuring,
  load: (sink: Sink, seconds: number, params: Record<string, unknown>) => Load,
  recalls: (RecallFigures | null)[] | null,
  signal?: AbortSignal,
): Promise<{ driven: Driven; sweep: SweepFigures }> {
  const names = o.sweep.map((a) => a.name);
  const params = sweepPoints(o.sweep);
  const points: SweepPoint[] = params.map((p, i) => ({
    params: p,
    label: labelOf(p, names),
    series: labelOf(p, names.slice(1)),
    runs: [],
    qps: interval([]),
    p50_ms: interval([]),
    p99_ms: interval([]),
    service_p99_ms: interval([]),
    requests: 0,
    errors: 0,
    recall: recalls?.[i] ?? null,
    paths: m.scrape ? {} : null,
  }));
  const perPoint = o.warmup + o.duration;
  let left = o.repeat * points.length;
  let sent = 0;
  let measured = 0;
  for (let round = 0; round < o.repeat && !signal?.aborted; round++) {
    const order = round % 2 ? [...points].reverse() : points;
    for (const p of order) {
      if (signal?.aborted) break;
      m.tick.label = `sweep ${p.label}${o.repeat > 1 ? `, round ${round + 1}/${o.repeat}` : ""}`;
      // Planned anew at each point: a loop's last answers and the scrapes around it outlast its seconds.
      m.tick.end = m.tick.elapsed() + left-- * perPoint;
      if (o.warmup > 0) await closedLoop(load(DISCARD, o.warmup, p.params));
      const before = await m.scrape?.read();
      const pointRec = recorder();
      const tee: Sink = {
        record: (w, s, e, us, svc, b) => (m.rec.record(w, s, e, us, svc, b), pointRec.record(w, s, e, us, svc)),
        outstanding: (n) => (m.rec.outstanding(n), pointRec.outstanding(n)),
        backlog: () => {},
      };
      const from = m.tick.elapsed();
      const d = await closedLoop(load(tee, o.duration, p.params));
      const to = m.tick.elapsed();
      const after = await m.scrape?.read();
      sent += d.sent;
      measured += d.seconds;
      const f = pointRec.done(d.seconds);
      p.runs.push({ qps: f.throughput, p50_ms: f.latency_ms.p50, p99_ms: f.latency_ms.p99, service_p99_ms: f.service_ms.p99, requests: f.requests, errors: f.errors, seconds: d.seconds, from: Number(from.toFixed(3)), to: Number(to.toFixed(3)) });
      if (p.paths && before && after) {
        for (const [k, v] of Object.entries(countsBetween(searchPaths(before), searchPaths(after)))) p.paths[k] = (p.paths[k] ?? 0) + v;
      }
    }
  }
  for (const p of points) {
    p.qps = interval(p.runs.map((r) => r.qps));
    p.p50_ms = interval(p.runs.map((r) => r.p50_ms));
    p.p99_ms = interval(p.runs.map((r) => r.p99_ms));
    p.service_p99_ms = interval(p.runs.map((r) => r.service_p99_ms));
    p.requests = p.runs.reduce((a, r) => a + r.requests, 0);
    p.errors = p.runs.reduce((a, r) => a + r.errors, 0);
  }
  return {
    // The measured loops' time alone: the warm-ups between them are not the sweep's throughput.
    driven: { sent, seconds: measured, unsent: 0, late: 0, max_backlog: 0 },
    sweep: { axes: o.sweep, rounds: o.repeat, points },
  };
}
