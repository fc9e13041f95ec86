// The SLO search: open-loop steps from --ramp-start, the rate multiplied by --ramp-factor while a
// step holds the SLO, then --bisect halvings between the last rate that held and the first that did
// not. A step that misses is run once more before the search moves on (one stall of a shared
// machine should not end it), and the answer is the highest step that held, with its own figures.
import { openLoop, type Driven, type Load, type Sink } from "./drive.js";
import type { Measuring } from "./measure.js";
import type { Options } from "./options.js";
import { recorder } from "./recorder.js";
import type { RampFigures, RampStep } from "./report.js";

/** `load(sink, seconds, first)`: the open loop's load for a step, numbered from request `first`. */
export async function rampSearch(
  o: Options,
  m: Measuring,
  load: (sink: Sink, seconds: number, first: number) => Load,
  first: number,
  signal?: AbortSignal,
): Promise<{ driven: Driven; ramp: RampFigures }> {
  let next = first;
  const once = async (rate: number, attempt: number): Promise<RampStep> => {
    const stepRec = recorder();
    m.tick.label = `ramp ${rate.toFixed(0)}/s${attempt > 1 ? " (retry)" : ""}`;
    m.tick.end = m.tick.elapsed() + o.stepDuration;
    const tee: Sink = {
      record: (w, s, e, us, svc, b) => (m.rec.record(w, s, e, us, svc, b), stepRec.record(w, s, e, us, svc)),
      outstanding: (n) => (m.rec.outstanding(n), stepRec.outstanding(n)),
      backlog: (n) => (m.rec.backlog(n), stepRec.backlog(n)),
    };
    const d = await openLoop(load(tee, o.stepDuration, next), rate);
    next += d.sent;
    const f = stepRec.done(d.seconds);
    const pct = stepRec.percentile(o.sloPercentile);
    const errorRate = f.requests ? f.errors / f.requests : 0;
    const pass = f.ok > 0 && pct <= o.sloMs && errorRate <= o.maxErrorRate && d.unsent <= 0.01 * (d.sent + d.unsent);
    return { rate, achieved: f.ok / d.seconds, p50_ms: f.latency_ms.p50, slo_ms: pct, latency_ms: f.latency_ms, service_ms: f.service_ms, error_rate: errorRate, unsent: d.unsent, pass, attempt };
  };
  const steps: RampStep[] = [];
  const step = async (rate: number): Promise<boolean> => {
    const s = await once(rate, 1);
    steps.push(s);
    if (s.pass || signal?.aborted) return s.pass;
    const again = await once(rate, 2);
    steps.push(again);
    return again.pass;
  };
  let lo: number | null = null;
  let hi: number | null = null;
  for (let rate = o.rampStart; rate <= o.rampMax && !signal?.aborted; rate *= o.rampFactor) {
    if (!(await step(rate))) {
      hi = rate;
      break;
    }
    lo = rate;
  }
  // Bisect between the last rate that held the SLO and the first that did not.
  for (let b = 0; b < o.bisect && hi !== null && !signal?.aborted; b++) {
    const rate = ((lo ?? 0) + hi) / 2;
    if (await step(rate)) lo = rate;
    else hi = rate;
  }
  const best = steps.filter((s) => s.pass).reduce<RampStep | null>((a, s) => (a === null || s.rate > a.rate ? s : a), null);
  const driven: Driven = { sent: next - first, seconds: m.tick.elapsed(), unsent: steps.reduce((a, s) => a + s.unsent, 0), late: 0, max_backlog: 0 };
  return { driven, ramp: { slo_ms: o.sloMs, percentile: o.sloPercentile, steps, best_rate: lo, best } };
}
