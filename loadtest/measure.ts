// The measured part of a run: a recorder, a 1-second tick that closes a timeline interval, scrapes
// the server's /metrics and shows the progress line, and the scrapes before and after; the
// harness's own CPU and event-loop delay over the same time.
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { Driven } from "./drive.js";
import type { Client } from "./http.js";
import type { Options } from "./options.js";
import { progressText, type Progress } from "./progress.js";
import { recorder, type Recorder } from "./recorder.js";
import type { ClientFigures, RunRecord } from "./report.js";
import { requestsCounted, scraper, type Scraper } from "./server-metrics.js";

export interface Tick {
  label: string;
  /** Seconds since the start at which the current part ends (for the time-left figure). */
  end: number;
  elapsed(): number;
}

/** What the body of a measurement gets: the run's recorder, the tick's label, and the scraper (null with --no-metrics). */
export interface Measuring {
  rec: Recorder;
  tick: Tick;
  scrape: Scraper | null;
}

export async function measure<T extends { driven: Driven }>(
  o: Options,
  aux: Client,
  headers: Record<string, string>,
  show: Progress,
  body: (m: Measuring) => Promise<T>,
): Promise<T & Omit<RunRecord, "run" | "ramp"> & { figures: ReturnType<Recorder["done"]> }> {
  const rec = recorder();
  const scrape = o.metrics ? scraper(aux, headers, o.metricsPath, o.table) : null;
  await scrape?.sample(0);
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const elapsed = () => (performance.now() - t0) / 1000;
  const tick: Tick = { label: o.mode, end: o.duration, elapsed };
  let last = rec.now();
  let lastT = 0;
  let scraping: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    const t = elapsed();
    rec.roll(t);
    scraping = scraping.then(() => scrape?.sample(t));
    const now = rec.now();
    show.show(progressText({ label: `[${tick.label}]`, elapsed: t, total: tick.end, rate: (now.requests - last.requests) / (t - lastT), p50: now.p50, p99: now.p99, errors: now.errors }));
    last = now;
    lastT = t;
  }, 1000);
  let result: T;
  try {
    result = await body({ rec, tick, scrape });
  } finally {
    clearInterval(timer);
  }
  const seconds = elapsed();
  const cpu = process.cpuUsage(cpu0);
  loopDelay.disable();
  await scraping;
  await scrape?.sample(elapsed());
  const counted = scrape?.first && scrape.last ? requestsCounted(scrape.last) - requestsCounted(scrape.first) : null;
  const figures = rec.done(seconds);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const client: ClientFigures = {
    cpu_seconds: cpuSeconds,
    cpu_cores: cpuSeconds / Math.max(1e-3, seconds),
    cpu_us_per_request: (cpuSeconds * 1e6) / Math.max(1, figures.requests),
    event_loop_p99_ms: loopDelay.percentile(99) / 1e6,
    event_loop_max_ms: loopDelay.max / 1e6,
  };
  return {
    ...result,
    figures,
    client,
    server: scrape ? { points: scrape.points, requests_counted: counted, error: scrape.error } : null,
  };
}
