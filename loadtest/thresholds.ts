// Pass/fail bounds on a run's figures, as k6's thresholds are: `--threshold p99<50ms,errors<0.1%,recall>0.95`.
// The program exits 3 when one fails (0 when all hold), so a CI pipeline can gate on a load test.
// Figures come from the run (medians with --repeat; the best held step of an SLO search); a
// sweep passes when one of its points meets every bound, and that point is named.
import { badInput } from "./input-error.js";
import type { Report, SweepPoint } from "./report.js";

export interface Threshold {
  /** As written, e.g. `p99<50ms`. */
  expr: string;
  metric: string;
  op: "<" | "<=" | ">" | ">=";
  value: number;
}

export interface ThresholdResult {
  expr: string;
  /** The run's figure in the bound's units (ms, %, /s, a ratio); null when the run has none. */
  value: number | null;
  pass: boolean;
}

const LATENCY = ["p50", "p90", "p95", "p99", "p999", "max", "mean"] as const;
type LatencyKey = (typeof LATENCY)[number];
const METRICS = [...LATENCY, ...LATENCY.map((k) => `service_${k}`), "errors", "error_rate", "unsent", "unsent_rate", "throughput", "recall", "best_rate"];
const UNIT_MS: Record<string, number> = { "": 1, ms: 1, s: 1000, us: 0.001, "µs": 0.001 };

/** `p99<50ms,errors<0.1%,recall>0.95` → bounds; throws naming the part it cannot read. */
export function parseThresholds(spec: string): Threshold[] {
  return spec.split(",").map((part) => part.trim()).filter(Boolean).map((expr) => {
    const m = /^([a-z_][a-z0-9_]*(?:\.\d+)?)\s*(<=|>=|<|>)\s*(-?[\d.]+(?:e-?\d+)?)\s*(ms|s|us|µs|%|\/s)?$/i.exec(expr);
    if (!m) throw badInput(`--threshold: cannot read ${JSON.stringify(expr)} (expected e.g. p99<50ms, errors<0.1%, recall>0.95, throughput>500/s)`);
    let metric = m[1].toLowerCase().replace("99.9", "999").replace(/^(rps|qps)$/, "throughput");
    const unit = m[4] ?? "";
    let value = Number(m[3]);
    if (unit === "%" && (metric === "errors" || metric === "unsent")) metric = metric === "errors" ? "error_rate" : "unsent_rate";
    if (!METRICS.includes(metric)) throw badInput(`--threshold ${expr}: unknown figure ${m[1]} (one of ${METRICS.join(", ")})`);
    const latency = metric.replace(/^service_/, "");
    if ((LATENCY as readonly string[]).includes(latency)) {
      if (!(unit in UNIT_MS)) throw badInput(`--threshold ${expr}: a latency bound takes ms, s or us`);
      value *= UNIT_MS[unit];
    } else if (unit && !(metric.endsWith("_rate") && metric !== "best_rate" && unit === "%") && !(["throughput", "best_rate"].includes(metric) && unit === "/s")) {
      throw badInput(`--threshold ${expr}: ${metric} takes no unit ${unit}`);
    }
    if (!Number.isFinite(value)) throw badInput(`--threshold ${expr}: not a number`);
    return { expr, metric, op: m[2] as Threshold["op"], value };
  });
}

const holds = (t: Threshold, v: number | null): boolean =>
  v !== null && Number.isFinite(v) && (t.op === "<" ? v < t.value : t.op === "<=" ? v <= t.value : t.op === ">" ? v > t.value : v >= t.value);

type Figures = (metric: string) => number | null;

/**
 * A run's figures (the median over repeats where there are several). A latency is no figure when
 * no request succeeded (it would read 0 and pass any bound); a request due but never sent (open
 * loop, client behind) counts as failed in the error share, as it would for the user it stands for.
 */
function runFigures(r: Report): Figures {
  const run = r.run;
  const rep = r.repeats?.intervals;
  const best = r.ramp?.best ?? null;
  const due = run ? run.requests + run.unsent : 0;
  return (metric) => {
    const service = metric.startsWith("service_");
    const key = metric.replace(/^service_/, "") as LatencyKey;
    if ((LATENCY as readonly string[]).includes(key)) {
      if (!best && !run?.ok) return null;
      // An SLO search's latency is its best held step's; a repeat's, the median over the runs.
      if (best) return (service ? best.service_ms : best.latency_ms)[key];
      const repKey = `${service ? "service_" : ""}${key}` as keyof NonNullable<typeof rep>;
      if (rep?.[repKey]) return rep[repKey]!.median;
      return run ? (service ? run.service_ms : run.latency_ms)[key] : null;
    }
    switch (metric) {
      case "errors":
        return rep?.errors?.median ?? run?.errors ?? null;
      case "error_rate":
        return best ? 100 * best.error_rate : run && due ? (100 * (run.errors + run.unsent)) / due : null;
      case "unsent":
        return run?.unsent ?? null;
      case "unsent_rate":
        return run && due ? (100 * run.unsent) / due : null;
      case "throughput":
        return best?.achieved ?? rep?.throughput?.median ?? run?.throughput ?? null;
      case "best_rate":
        return rep?.best_rate?.median ?? r.ramp?.best_rate ?? null;
      case "recall":
        return r.recall?.mean ?? null;
      default:
        return null;
    }
  };
}

function pointFigures(p: SweepPoint): Figures {
  return (metric) => {
    // A point where no request succeeded has no latency (see runFigures).
    if (p.requests === p.errors && /^(service_)?p\d+$/.test(metric)) return null;
    switch (metric) {
      case "p50":
        return p.p50_ms.median;
      case "p99":
        return p.p99_ms.median;
      case "service_p99":
        return p.service_p99_ms.median;
      case "throughput":
        return p.qps.median;
      case "errors":
        return p.errors;
      case "error_rate":
        return p.requests ? (100 * p.errors) / p.requests : null;
      case "recall":
        return p.recall?.mean ?? null;
      default:
        return null;
    }
  };
}

const check = (ts: Threshold[], f: Figures): ThresholdResult[] => ts.map((t) => ({ expr: t.expr, value: f(t.metric), pass: holds(t, f(t.metric)) }));

/** Every bound checked; for a sweep, at its first point meeting all of them (else the one meeting most, fastest first). */
export function evaluate(ts: Threshold[], r: Report): NonNullable<Report["thresholds"]> {
  if (r.sweep?.points.length) {
    const scored = r.sweep.points.map((p) => ({ p, checks: check(ts, pointFigures(p)) }));
    const best = scored.reduce((a, b) => {
      const pa = a.checks.filter((c) => c.pass).length;
      const pb = b.checks.filter((c) => c.pass).length;
      return pb > pa || (pb === pa && b.p.qps.median > a.p.qps.median && pa < ts.length) ? b : a;
    });
    return { pass: best.checks.every((c) => c.pass), checks: best.checks, point: best.p.label };
  }
  const checks = check(ts, runFigures(r));
  return { pass: checks.every((c) => c.pass), checks, point: null };
}
