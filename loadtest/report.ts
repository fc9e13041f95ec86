// What a load test writes as PREFIX.json (and draws as PREFIX.html): the shapes every part of the
// harness fills in, and the run's context (machine, versions).
import { existsSync, readFileSync } from "node:fs";
import { cpus, loadavg, platform, release, totalmem } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Driven } from "./drive.js";
import type { LoadFigures } from "./load-phase.js";
import type { Interval } from "./noise.js";
import type { Options } from "./options.js";
import type { RecallFigures } from "./recall.js";
import type { LatencySummary, PeriodPercentiles, RunFigures } from "./recorder.js";
import type { ServerPoint } from "./server-metrics.js";
import type { ThresholdResult } from "./thresholds.js";

export type RunResult = RunFigures & Driven & { connections: number; target_rate: number | null };

/**
 * The harness's own cost while measuring: CPU, and its event loop's delay (a stalled harness
 * sends late and reads answers late, which shows as latency; compare before blaming the server).
 */
export interface ClientFigures {
  cpu_seconds: number;
  /** CPU over the measured time, in cores (one Node process saturates near 1). */
  cpu_cores: number;
  cpu_us_per_request: number;
  event_loop_p99_ms: number;
  event_loop_max_ms: number;
}

export interface ServerFigures {
  points: ServerPoint[];
  requests_counted: number | null;
  error: string | null;
}

export interface RampStep {
  rate: number;
  /** Successful answers a second. */
  achieved: number;
  p50_ms: number;
  /** The SLO's percentile. */
  slo_ms: number;
  latency_ms: LatencySummary;
  service_ms: LatencySummary;
  error_rate: number;
  unsent: number;
  pass: boolean;
  /** 1, or 2 for the one retry of a step that missed. */
  attempt: number;
}

export interface RampFigures {
  slo_ms: number;
  percentile: number;
  steps: RampStep[];
  best_rate: number | null;
  /** The highest step that held the SLO (its own figures, not an average over the steps). */
  best: RampStep | null;
}

/** One measured run: what the harness saw, what it cost, what the server said. */
export interface RunRecord {
  run: RunResult;
  client: ClientFigures;
  server: ServerFigures | null;
  ramp: RampFigures | null;
}

/** The figures of one run that repeats compare (ms, answers a second, cores). */
export interface RepeatRow extends PeriodPercentiles {
  throughput: number;
  errors: number;
  best_rate: number | null;
  server_cpu: number | null;
}

export interface SweepRun {
  qps: number;
  p50_ms: number;
  p99_ms: number;
  service_p99_ms: number;
  requests: number;
  errors: number;
  seconds: number;
  /** When the measured loop began and ended, in the run's seconds (the timeline's t): the report marks which seconds were this point's. */
  from?: number;
  to?: number;
}

export interface SweepPoint {
  /** The swept query fields of this point. */
  params: Record<string, unknown>;
  label: string;
  /** The point's series: the values of every axis but the first ("" with one axis). */
  series: string;
  runs: SweepRun[];
  qps: Interval;
  p50_ms: Interval;
  p99_ms: Interval;
  service_p99_ms: Interval;
  requests: number;
  errors: number;
  recall: RecallFigures | null;
  /** Searches by the path that served them during the point's runs (quiver_search_path_total), null without metrics. */
  paths: Record<string, number> | null;
}

export interface SweepFigures {
  axes: { name: string; values: unknown[] }[];
  rounds: number;
  points: SweepPoint[];
}

export interface DatasetFigures {
  name: string;
  description: string;
  rows: number;
  dim: number;
  queries: number;
  truth_source: "computed" | "stored" | "file";
  truth_seconds: number;
  dir: string;
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
  dataset: DatasetFigures | null;
  load: LoadFigures | null;
  /** The run shown (with --repeat, the one of median throughput), its cost and the server's view. */
  run: RunResult | null;
  client: ClientFigures | null;
  server: ServerFigures | null;
  ramp: RampFigures | null;
  /** With --repeat: every run's figures and each figure's median and range. */
  repeats: { rows: RepeatRow[]; intervals: Partial<Record<keyof RepeatRow, Interval>>; shown: number } | null;
  sweep: SweepFigures | null;
  recall: RecallFigures | null;
  /** Where the harness, not the server, may have been the limit (also printed on stderr). */
  warnings: string[];
  thresholds: { pass: boolean; checks: ThresholdResult[]; point: string | null } | null;
  /** Several generators (--generators) or reports merged (--merge): how many, and from where. */
  merged: { parts: number; sources: string[] } | null;
  /** True when the run was stopped early (Ctrl-C): the figures cover the time it ran. */
  interrupted: boolean;
}

/** The nearest package.json's version (loadtest/ when run from source, dist/loadtest/ when built). */
export function harnessVersion(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, "package.json");
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
    if (path.dirname(dir) === dir) return "unknown";
  }
}

export function machine(): Report["machine"] {
  return {
    cpus: cpus().length,
    model: cpus()[0]?.model ?? "unknown",
    memory_gib: Number((totalmem() / 2 ** 30).toFixed(1)),
    platform: platform(),
    release: release(),
    loadavg: loadavg().map((x) => Number(x.toFixed(2))),
  };
}
