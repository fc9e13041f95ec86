// One load test from options to report: read the sources, warm up, then measure in the chosen mode
// with a 1-second tick that closes a timeline interval, scrapes the server's /metrics and shows the
// progress line.
import { existsSync, readFileSync } from "node:fs";
import { cpus, loadavg, platform, release, totalmem } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { closedLoop, openLoop, type Driven, type Load, type RecordAnswer } from "./drive.js";
import { baseHeaders, callJson, client, type Client } from "./http.js";
import type { Options } from "./options.js";
import { progress, progressText } from "./progress.js";
import { measureRecall, type RecallFigures } from "./recall.js";
import { recorder, type Recorder, type RunFigures } from "./recorder.js";
import { requestsCounted, scraper, type ServerPoint } from "./server-metrics.js";
import { loadSources } from "./sources.js";
import { requests } from "./workload.js";

export interface RampStep {
  rate: number;
  /** Successful answers a second. */
  achieved: number;
  p50_ms: number;
  /** The SLO's percentile. */
  slo_ms: number;
  error_rate: number;
  unsent: number;
  pass: boolean;
}

export interface Report {
  tool: "quiver-loadtest";
  started_at: string;
  finished_at: string;
  /** The options, credentials left out. */
  options: Omit<Options, "apiKey">;
  machine: { cpus: number; model: string; memory_gib: number; platform: string; release: string; loadavg: number[] };
  versions: { node: string; harness: string; server: string | null };
  mode: Options["mode"];
  run: (RunFigures & Driven & { connections: number; target_rate: number | null }) | null;
  /**
   * The harness's own cost while measuring: CPU, and its event loop's delay (a stalled harness
   * sends late and reads answers late, which shows as latency; compare before blaming the server).
   */
  client: { cpu_seconds: number; cpu_us_per_request: number; event_loop_p99_ms: number; event_loop_max_ms: number } | null;
  server: { points: ServerPoint[]; requests_counted: number | null; error: string | null } | null;
  ramp: { slo_ms: number; percentile: number; steps: RampStep[]; best_rate: number | null } | null;
  recall: RecallFigures | null;
  /** True when the run was stopped early (Ctrl-C): the figures cover the time it ran. */
  interrupted: boolean;
}

/** The nearest package.json's version (loadtest/ when run from source, dist/loadtest/ when built). */
function harnessVersion(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, "package.json");
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
    if (path.dirname(dir) === dir) return "unknown";
  }
}

async function serverVersion(c: Client, headers: Record<string, string>): Promise<string | null> {
  try {
    return ((await callJson(c, headers, "GET", "/v1/openapi.json")) as { info?: { version?: string } }).info?.version ?? null;
  } catch {
    return null;
  }
}

const redactHeaders = (h: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(h).map(([k, v]) => [k, /authorization|api-key|token|secret|cookie/i.test(k) ? "<redacted>" : v]));

/** `signal` stops the measured part early; the report then covers what ran (`interrupted`). */
export async function runLoadtest(o: Options, out: NodeJS.WriteStream = process.stderr, signal?: AbortSignal): Promise<Report> {
  const started = new Date();
  const headers = baseHeaders(o.apiKey, o.headers);
  const aux = client(o.url, 1, o.timeout * 1000);
  const load = client(o.url, o.connections, o.timeout * 1000);
  const show = progress(o.quiet, out);
  try {
    const server = await serverVersion(aux, headers);
    const sources = await loadSources(o, aux, headers);
    const { apiKey: _key, ...withoutKey } = o;
    const report: Report = {
      tool: "quiver-loadtest",
      started_at: started.toISOString(),
      finished_at: "",
      options: { ...withoutKey, headers: redactHeaders(o.headers) },
      machine: {
        cpus: cpus().length,
        model: cpus()[0]?.model ?? "unknown",
        memory_gib: Number((totalmem() / 2 ** 30).toFixed(1)),
        platform: platform(),
        release: release(),
        loadavg: loadavg().map((x) => Number(x.toFixed(2))),
      },
      versions: { node: process.version, harness: harnessVersion(), server },
      mode: o.mode,
      run: null,
      client: null,
      server: null,
      ramp: null,
      recall: null,
      interrupted: false,
    };
    if (o.mode === "recall") {
      report.recall = await measureRecall(o, aux, headers, sources.vectors);
    } else {
      const next = requests(o, sources, headers);
      const l = (record: RecordAnswer, seconds: number, first: number): Load => ({ client: load, next, record, connections: o.connections, seconds, first, signal });
      const firstRate = o.mode === "ramp" ? o.rampStart : o.rate;
      const drive = (load: Load, rate: number) => (o.mode === "closed" ? closedLoop(load) : openLoop(load, rate));
      const warm = o.warmup > 0 ? await drive(l(() => {}, o.warmup, 0), firstRate) : { sent: 0 };
      const measured = await measure(o, aux, headers, show, async (rec, tick) => {
        if (o.mode !== "ramp") {
          tick.label = o.mode === "closed" ? `closed ${o.connections} conn` : `open ${o.rate}/s`;
          return { driven: await drive(l(rec.record, o.duration, warm.sent), o.rate), ramp: null };
        }
        let first = warm.sent;
        const step = async (rate: number): Promise<RampStep> => {
          const stepRec = recorder();
          tick.label = `ramp ${rate.toFixed(0)}/s`;
          tick.stepEnd = tick.elapsed() + o.stepDuration;
          const d = await openLoop(
            l((w, s, e, us) => (rec.record(w, s, e, us), stepRec.record(w, s, e, us)), o.stepDuration, first),
            rate,
          );
          first += d.sent;
          const f = stepRec.done(d.seconds);
          const pct = stepRec.percentile(o.sloPercentile);
          const errorRate = f.requests ? f.errors / f.requests : 0;
          const pass = f.ok > 0 && pct <= o.sloMs && errorRate <= o.maxErrorRate && d.unsent <= 0.01 * (d.sent + d.unsent);
          return { rate, achieved: f.ok / d.seconds, p50_ms: f.latency_ms.p50, slo_ms: pct, error_rate: errorRate, unsent: d.unsent, pass };
        };
        const steps: RampStep[] = [];
        let lo: number | null = null;
        let hi: number | null = null;
        for (let rate = o.rampStart; rate <= o.rampMax && !signal?.aborted; rate *= o.rampFactor) {
          const s = await step(rate);
          steps.push(s);
          if (!s.pass) {
            hi = rate;
            break;
          }
          lo = rate;
        }
        // Bisect between the last rate that held the SLO and the first that did not.
        for (let b = 0; b < o.bisect && hi !== null && !signal?.aborted; b++) {
          const rate = ((lo ?? 0) + hi) / 2;
          const s = await step(rate);
          steps.push(s);
          if (s.pass) lo = rate;
          else hi = rate;
        }
        const driven = { sent: first - warm.sent, seconds: tick.elapsed(), unsent: 0, late: 0, max_backlog: 0 };
        return { driven, ramp: { slo_ms: o.sloMs, percentile: o.sloPercentile, steps, best_rate: lo } };
      });
      report.run = { ...measured.figures, ...measured.driven, connections: o.connections, target_rate: o.mode === "open" ? o.rate : null };
      report.server = measured.server;
      report.client = { ...measured.client, cpu_us_per_request: (measured.client.cpu_seconds * 1e6) / Math.max(1, measured.figures.requests) };
      report.ramp = measured.ramp;
    }
    report.interrupted = signal?.aborted ?? false;
    report.finished_at = new Date().toISOString();
    return report;
  } finally {
    show.end();
    aux.close();
    load.close();
  }
}

interface Tick {
  label: string;
  /** When the current ramp step ends (s since the start), for the time-left figure. */
  stepEnd: number | null;
  elapsed(): number;
}

/** Runs `body` with a recorder, a 1-second tick (timeline, /metrics scrape, progress) and the scrapes before and after. */
async function measure<T extends { driven: Driven }>(
  o: Options,
  aux: Client,
  headers: Record<string, string>,
  show: ReturnType<typeof progress>,
  body: (rec: Recorder, tick: Tick) => Promise<T>,
) {
  const rec = recorder();
  const scrape = o.metrics ? scraper(aux, headers, o.metricsPath) : null;
  await scrape?.sample(0);
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const elapsed = () => (performance.now() - t0) / 1000;
  const tick: Tick = { label: o.mode, stepEnd: null, elapsed };
  let last = rec.now();
  let lastT = 0;
  let scraping: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    const t = elapsed();
    rec.roll(t);
    scraping = scraping.then(() => scrape?.sample(t));
    const now = rec.now();
    const total = o.mode === "ramp" ? tick.stepEnd ?? t : o.duration;
    show.show(progressText({ label: `[${tick.label}]`, elapsed: t, total, rate: (now.requests - last.requests) / (t - lastT), p50: now.p50, p99: now.p99, errors: now.errors }));
    last = now;
    lastT = t;
  }, 1000);
  let result: T;
  try {
    result = await body(rec, tick);
  } finally {
    clearInterval(timer);
  }
  const seconds = elapsed();
  const cpu = process.cpuUsage(cpu0);
  loopDelay.disable();
  await scraping;
  await scrape?.sample(elapsed());
  const counted = scrape?.first && scrape.last ? requestsCounted(scrape.last) - requestsCounted(scrape.first) : null;
  return {
    ...result,
    figures: rec.done(seconds),
    client: {
      cpu_seconds: (cpu.user + cpu.system) / 1e6,
      event_loop_p99_ms: loopDelay.percentile(99) / 1e6,
      event_loop_max_ms: loopDelay.max / 1e6,
    },
    server: scrape ? { points: scrape.points, requests_counted: counted, error: scrape.error } : null,
  };
}
