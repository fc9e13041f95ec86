// The harness's options: command-line flags, optionally over a JSON or YAML workload file (the
// flags win), checked once here so the rest of the harness reads plain, complete values.
import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { DISTANCES, type Distance } from "./ground-truth.js";
import { parseThresholds, type Threshold } from "./thresholds.js";

export type Mode = "closed" | "open" | "ramp" | "recall";
export type Accept = "arrow" | "json" | "ndjson";
export const KINDS = ["vector", "filtered_vector", "fts", "hybrid", "count", "describe", "insert", "raw"] as const;
export type Kind = (typeof KINDS)[number];

/** One workload of a mix. Fields beyond `kind` and `weight` override the run-wide ones for it. */
export interface WorkloadSpec {
  kind: Kind;
  weight: number;
  filter?: string;
  /** Full-text queries, used in turn. */
  text?: string[];
  /** raw: method, path (`{table}` is the table id) and body template (see docs/loadtest.md). */
  method?: string;
  path?: string;
  body?: unknown;
}

export interface Options {
  url: string;
  apiKey?: string;
  headers: Record<string, string>;
  table: string;
  mode: Mode;
  connections: number;
  rate: number;
  duration: number;
  warmup: number;
  /** Seconds a request may take before it counts as an error ("timeout"). */
  timeout: number;
  workloads: WorkloadSpec[];
  k: number;
  vectorColumn?: string;
  columns?: string[];
  filter?: string;
  text: string[];
  textColumns?: string[];
  /** Query fields merged into every query body (e.g. nprobes, bypass_vector_index). */
  extra: Record<string, unknown>;
  accept: Accept;
  queries?: string;
  sample: number;
  insertBatch: number;
  insertFormat: "arrow" | "json";
  insertRows?: string;
  sloMs: number;
  sloPercentile: number;
  rampStart: number;
  rampFactor: number;
  rampMax: number;
  stepDuration: number;
  bisect: number;
  maxErrorRate: number;
  recallQueries: number;
  /** Recall against query vectors sampled from the table's own rows (each finds itself: recall reads high). */
  sampledQueries: boolean;
  /** A dataset to load and search (`lowrank-100k`, `gaussian-20k`, or a vector file); see datasets.ts. */
  dataset?: string;
  dim: number;
  queryCount: number;
  groundTruth?: string;
  distance: Distance;
  datasetDir: string;
  loadBatch: number;
  loadConcurrency: number;
  index: string;
  indexParams: Record<string, unknown>;
  reload: boolean;
  /** Query fields to sweep, each point a closed loop and a recall pass; empty for no sweep. */
  sweep: { name: string; values: unknown[] }[];
  /** Runs (sweep: rounds over every point), alternating. */
  repeat: number;
  thresholds: Threshold[];
  /** Child processes sending the load together, their figures merged. */
  generators: number;
  /** Wall-clock time (ms since 1970) at which to start, so generators on several hosts start together. */
  startAt: number | null;
  metrics: boolean;
  metricsPath: string;
  out: string;
  quiet: boolean;
}

export const HELP = `quiver-loadtest: load-test a Quiver (or any lance-namespace REST server)

  quiver-loadtest --url http://127.0.0.1:8080 --api-key KEY --table 'ns$docs' [options]
  quiver-loadtest --config workload.yaml [options]
  quiver-loadtest --dataset lowrank-100k --sweep ef=64,128,256,512 --repeat 3
  quiver-loadtest --compare run-a.json run-b.json [--out compare]
  quiver-loadtest --merge host-1.json host-2.json [--out merged]

  --config FILE          options from a JSON or YAML file (flags given too win)
  --url URL              the server (default http://127.0.0.1:8080)
  --api-key KEY          sent as Authorization: Bearer KEY (default QUIVER_API_KEY, else a local
                         server's data/.quiver/admin.key when readable)
  --header 'name: value' another request header (repeatable)
  --table ID             the table, levels joined with $ (ns$docs)
  --mode M               closed (default), open, ramp or recall
  --connections N        keep-alive connections (default 16)
  --rate R               open loop: requests a second
  --duration S           seconds measured (default 10)
  --warmup S             seconds run first and not counted (default 1)
  --timeout S            a request unanswered after S seconds is an error (default 30)
  --workload KIND        vector, filtered_vector, fts, hybrid, count, describe, insert, raw
  --mix KIND:W,...       a weighted mix of workloads, e.g. vector:8,fts:1,insert:1
  --k N                  rows a search answers (default 10)
  --vector-column NAME   the vector column (default: the table's only vector column)
  --columns a,b          columns a query answers (default: all)
  --filter SQL           filter of filtered_vector (and of count, if given)
  --text Q               a full-text query (repeatable; default: words sampled from the table)
  --text-columns a,b     columns full-text queries search
  --extra JSON           fields merged into every query body, e.g. '{"nprobes":20}'
  --accept A             answers as arrow (default), json or ndjson
  --queries FILE         query vectors: JSON lines, a JSON array, .npy or Arrow IPC
  --sample N             vectors (or rows, for inserts) sampled from the table (default 100)
  --insert-batch N       rows an insert sends (default 100)
  --insert-format F      arrow (default) or json
  --insert-rows FILE     rows to insert: JSON lines or Arrow IPC (default: rows sampled from the table)
  --method M --path P --body JSON   the raw workload's request
  --slo-ms MS            ramp: the latency bound (default 20)
  --slo-percentile P     ramp: the percentile held to it (default 99)
  --ramp-start R         ramp: first rate (default 50)
  --ramp-factor F        ramp: rate multiplier while under the SLO (default 2)
  --ramp-max R           ramp: highest rate tried (default 100000)
  --step-duration S      ramp: seconds a step (default 5)
  --bisect N             ramp: bisection steps after the first miss (default 4)
  --max-error-rate E     ramp: a step with more errors misses the SLO (default 0.01)
  --recall-queries N     recall: queries compared with the exact answers (default 100)
  --sampled-queries      recall with vectors sampled from the table (each finds itself; reads high)
  --dataset D            load and search a dataset: lowrank-<rows>, gaussian-<rows> (e.g.
                         lowrank-100k) or a .fvecs/.bvecs/.npy/Arrow file; held-out queries
  --dim N                dimension of a generated dataset (default 128)
  --query-count N        held-out query vectors (default 1000)
  --ground-truth FILE    the dataset's own ground truth (.ivecs); else computed once and stored
  --distance D           l2 (default), cosine or dot
  --dataset-dir DIR      where ground truth and queries are stored (default loadtest-data)
  --load-batch N         rows an insert of the load phase carries (default 10000)
  --load-concurrency N   inserts in flight in the load phase (default 2)
  --index T              the vector index built: IVF_PQ (default), IVF_HNSW_SQ, ... or none
  --index-params JSON    more create_index fields, e.g. '{"num_partitions":256}'
  --reload               load the dataset again even when the table holds it
  --sweep F=V,V ...      query fields to sweep, e.g. --sweep ef=64,128,256 refine_factor=0,10
  --repeat N             runs (a sweep: rounds), alternating; medians and ranges (default 1)
  --threshold LIST       e.g. p99<50ms,errors<0.1%,recall>0.95: exit 3 when one fails
  --generators N         child processes sending the load (closed, open), figures merged
  --start-at TIME        start at this time (ISO or ms since 1970), e.g. on several hosts
  --no-metrics           do not scrape the server's /metrics
  --metrics-path P       where the metrics are (default /metrics)
  --out PREFIX           writes PREFIX.json and PREFIX.html (default loadtest-<time>)
  --quiet                no progress line
  --merge A.json B.json  one report from runs on several hosts (histograms merged, rates added)
  --version              the harness's version

Exit codes: 0 done (every --threshold held), 2 bad option or input file, 3 a threshold failed, 1 other errors.
`;

const FLAGS = {
  config: { type: "string" },
  url: { type: "string" },
  "api-key": { type: "string" },
  header: { type: "string", multiple: true },
  table: { type: "string" },
  mode: { type: "string" },
  connections: { type: "string" },
  rate: { type: "string" },
  duration: { type: "string" },
  warmup: { type: "string" },
  timeout: { type: "string" },
  workload: { type: "string" },
  mix: { type: "string" },
  k: { type: "string" },
  "vector-column": { type: "string" },
  columns: { type: "string" },
  filter: { type: "string" },
  text: { type: "string", multiple: true },
  "text-columns": { type: "string" },
  extra: { type: "string" },
  accept: { type: "string" },
  queries: { type: "string" },
  sample: { type: "string" },
  "insert-batch": { type: "string" },
  "insert-format": { type: "string" },
  "insert-rows": { type: "string" },
  method: { type: "string" },
  path: { type: "string" },
  body: { type: "string" },
  "slo-ms": { type: "string" },
  "slo-percentile": { type: "string" },
  "ramp-start": { type: "string" },
  "ramp-factor": { type: "string" },
  "ramp-max": { type: "string" },
  "step-duration": { type: "string" },
  bisect: { type: "string" },
  "max-error-rate": { type: "string" },
  "recall-queries": { type: "string" },
  "sampled-queries": { type: "boolean" },
  dataset: { type: "string" },
  dim: { type: "string" },
  "query-count": { type: "string" },
  "ground-truth": { type: "string" },
  distance: { type: "string" },
  "dataset-dir": { type: "string" },
  "load-batch": { type: "string" },
  "load-concurrency": { type: "string" },
  index: { type: "string" },
  "index-params": { type: "string" },
  reload: { type: "boolean" },
  sweep: { type: "string", multiple: true },
  repeat: { type: "string" },
  threshold: { type: "string" },
  generators: { type: "string" },
  "start-at": { type: "string" },
  merge: { type: "boolean" },
  "no-metrics": { type: "boolean" },
  "metrics-path": { type: "string" },
  out: { type: "string" },
  quiet: { type: "boolean" },
  compare: { type: "boolean" },
  help: { type: "boolean" },
  version: { type: "boolean" },
} as const;

/** Every flag, for the docs' test (each must be in --help and docs/loadtest.md). */
export const FLAG_NAMES = Object.keys(FLAGS);

export type Command = { help: true } | { version: true } | { compare: [string, string]; out: string } | { merge: string[]; out: string } | { run: Options };

/** Reads the command line (and the file it names) into a command; throws naming a bad option. */
export function parseCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Command {
  const { values, positionals } = parseArgs({ args: argv, options: FLAGS, allowPositionals: true, strict: true });
  if (values.help) return { help: true };
  if (values.version) return { version: true };
  if (values.compare) {
    if (positionals.length !== 2) throw new Error("--compare takes two report files: --compare a.json b.json");
    return { compare: [positionals[0], positionals[1]], out: values.out ?? "compare" };
  }
  if (values.merge) {
    if (positionals.length < 2) throw new Error("--merge takes two or more report files: --merge a.json b.json");
    return { merge: positionals, out: values.out ?? "merged" };
  }
  // `--sweep nprobes=5,10 refine_factor=0,10`: the words after --sweep are its axes too.
  const axes = positionals.filter((p) => /^[A-Za-z_]\w*=/.test(p));
  const stray = positionals.find((p) => !values.sweep || !axes.includes(p));
  if (stray !== undefined) throw new Error(`unexpected argument: ${stray}`);
  const file = values.config ? readConfig(values.config) : {};
  // Flags over the file: the file's keys are the flag names (kebab-case or camelCase).
  const raw: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(file)) raw[kebab(k)] = v;
  for (const [k, v] of Object.entries(values)) if (v !== undefined && k !== "config") raw[k] = v;
  if (values.sweep) raw.sweep = [...values.sweep, ...axes];
  return { run: resolve(raw, env) };
}

function readConfig(file: string): Record<string, unknown> {
  const text = readFileSync(file, "utf8");
  const data = /\.ya?ml$/i.test(file) ? parseYaml(text) : JSON.parse(text);
  if (!data || typeof data !== "object" || Array.isArray(data)) throw new Error(`${file}: expected an object of options`);
  return data as Record<string, unknown>;
}

const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`).replace(/_/g, "-");

function num(raw: Record<string, unknown>, name: string, dflt: number, min = 0, max = Infinity): number {
  const v = raw[name];
  if (v === undefined) return dflt;
  const n = typeof v === "number" ? v : Number(String(v).replace(/s$/, ""));
  if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name}: expected a number from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return n;
}

function str(raw: Record<string, unknown>, name: string): string | undefined {
  const v = raw[name];
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v === "") throw new Error(`--${name}: expected a non-empty string`);
  return v;
}

function oneOf<T extends string>(raw: Record<string, unknown>, name: string, allowed: readonly T[], dflt: T): T {
  const v = raw[name] ?? dflt;
  if (!allowed.includes(v as T)) throw new Error(`--${name}: expected one of ${allowed.join(", ")}, got ${JSON.stringify(v)}`);
  return v as T;
}

const list = (v: unknown): string[] | undefined =>
  v === undefined ? undefined : Array.isArray(v) ? v.map(String) : String(v).split(",").map((s) => s.trim()).filter(Boolean);

function json(raw: Record<string, unknown>, name: string): unknown {
  const v = raw[name];
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(v);
  } catch (e) {
    throw new Error(`--${name}: not JSON: ${(e as Error).message}`);
  }
}

function workloads(raw: Record<string, unknown>): WorkloadSpec[] {
  const kind = (k: unknown, where: string): Kind => {
    if (!KINDS.includes(k as Kind)) throw new Error(`${where}: unknown workload ${JSON.stringify(k)} (one of ${KINDS.join(", ")})`);
    return k as Kind;
  };
  const weight = (w: unknown, where: string): number => {
    const n = Number(w ?? 1);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${where}: a weight must be a positive number, got ${JSON.stringify(w)}`);
    return n;
  };
  // The file's `workloads` list, each item a workload with its own fields.
  if (Array.isArray(raw.workloads)) {
    return raw.workloads.map((w, i) => {
      if (!w || typeof w !== "object") throw new Error(`workloads[${i}]: expected an object`);
      const o = w as Record<string, unknown>;
      return { ...(o as object), kind: kind(o.kind, `workloads[${i}].kind`), weight: weight(o.weight, `workloads[${i}].weight`), text: list(o.text) } as WorkloadSpec;
    });
  }
  if (raw.mix !== undefined) {
    return String(raw.mix)
      .split(",")
      .map((part) => {
        const [k, w] = part.split(":");
        return { kind: kind(k.trim(), "--mix"), weight: weight(w ?? 1, `--mix ${part}`) };
      });
  }
  return [{ kind: kind(raw.workload ?? "vector", "--workload"), weight: 1 }];
}

/** `nprobes=5,10,20 refine_factor=0,10` (flag words) or `{nprobes: [5, 10]}` (a file) → the axes, values typed. */
function sweepAxes(v: unknown): Options["sweep"] {
  if (v === undefined) return [];
  const typed = (x: unknown) => (typeof x !== "string" ? x : /^-?\d+(\.\d+)?$/.test(x) ? Number(x) : x === "true" ? true : x === "false" ? false : x);
  const entries: [string, unknown[]][] =
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.entries(v).map(([k, vs]) => [k, Array.isArray(vs) ? vs : [vs]])
      : (Array.isArray(v) ? v : [v]).flatMap((w) => String(w).split(/\s+/).filter(Boolean)).map((w) => {
          const m = /^([A-Za-z_]\w*)=(.+)$/.exec(w);
          if (!m) throw new Error(`--sweep: expected FIELD=V1,V2,..., got ${JSON.stringify(w)}`);
          return [m[1], m[2].split(",").map((x) => x.trim())];
        });
  const axes = entries.map(([name, values]) => ({ name, values: values.map(typed) }));
  for (const a of axes) if (!a.values.length || a.values.some((x) => x === "")) throw new Error(`--sweep ${a.name}: no values`);
  if (new Set(axes.map((a) => a.name)).size !== axes.length) throw new Error("--sweep: a field is named twice");
  return axes;
}

/** A server on this machine started from this directory keeps its generated admin key here (README, "Quick start"). */
const LOCAL_ADMIN_KEY = "data/.quiver/admin.key";

function apiKey(raw: Record<string, unknown>, env: NodeJS.ProcessEnv, url: string): string | undefined {
  const given = str(raw, "api-key") ?? env.QUIVER_API_KEY;
  if (given) return given;
  if (!/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(`${url}/`) || !existsSync(LOCAL_ADMIN_KEY)) return undefined;
  try {
    return readFileSync(LOCAL_ADMIN_KEY, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Start time: ISO (2026-11-27T10:00:00Z) or ms since 1970. */
function startAt(raw: Record<string, unknown>): number | null {
  const v = raw["start-at"];
  if (v === undefined) return null;
  const t = /^\d+$/.test(String(v)) ? Number(v) : Date.parse(String(v));
  if (!Number.isFinite(t)) throw new Error(`--start-at: expected an ISO time or ms since 1970, got ${JSON.stringify(v)}`);
  return t;
}

/** The table a dataset run uses when none is named: the dataset's name as an identifier. */
const datasetTable = (dataset: string) => dataset.replace(/^.*\//, "").replace(/\.[^.]*$/, "").replace(/[^A-Za-z0-9_]/g, "_");

function resolve(raw: Record<string, unknown>, env: NodeJS.ProcessEnv): Options {
  const url = str(raw, "url") ?? "http://127.0.0.1:8080";
  if (!/^https?:\/\/[^/]+/.test(url)) throw new Error(`--url: expected http://host:port or https://host, got ${url}`);
  const dataset = str(raw, "dataset");
  const table = str(raw, "table") ?? (dataset ? datasetTable(dataset) : undefined);
  const mode = oneOf(raw, "mode", ["closed", "open", "ramp", "recall"] as const, "closed");
  const ws = workloads(raw);
  const needsTable = ws.some((w) => w.kind !== "raw") || mode === "recall";
  if (needsTable && !table) throw new Error("--table is required (the table id, levels joined with $: ns$docs)");
  const sweep = sweepAxes(raw.sweep);
  const sampledQueries = raw["sampled-queries"] === true;
  const recallOf = mode === "recall" ? "recall mode" : sweep.length ? "a sweep" : null;
  if (recallOf && !dataset && !str(raw, "queries") && !sampledQueries) {
    throw new Error(`${recallOf} measures recall on query vectors the table does not hold: give --dataset or --queries FILE (or --sampled-queries, rows of the table itself, each of which finds itself)`);
  }
  if (sweep.length && mode !== "closed") throw new Error("--sweep runs closed loops (one per point): leave out --mode");
  const generators = Math.floor(num(raw, "generators", 1, 1, 256));
  if (generators > 1 && (mode === "ramp" || mode === "recall" || sweep.length || dataset)) throw new Error("--generators runs closed and open loops (without --sweep or --dataset)");
  const repeat = Math.floor(num(raw, "repeat", 1, 1, 100));
  if (repeat > 1 && mode === "recall") throw new Error("--repeat: recall mode asks the same queries each time; its interval comes from the queries (bootstrap)");
  const threshold = raw.threshold;
  const indexParams = json(raw, "index-params") ?? {};
  if (typeof indexParams !== "object" || Array.isArray(indexParams) || indexParams === null) throw new Error("--index-params: expected a JSON object of create_index fields");
  const headers: Record<string, string> = {};
  const hs = raw.header;
  const headerList = Array.isArray(hs) ? hs : hs && typeof hs === "object" ? Object.entries(hs).map(([k, v]) => `${k}: ${v}`) : hs ? [hs] : [];
  for (const h of headerList.map(String)) {
    const i = h.indexOf(":");
    if (i <= 0) throw new Error(`--header: expected 'name: value', got ${JSON.stringify(h)}`);
    headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
  }
  // --method/--path/--body complete a raw workload given on the command line.
  for (const w of ws) {
    if (w.kind !== "raw") continue;
    w.method ??= str(raw, "method") ?? "POST";
    w.path ??= str(raw, "path");
    w.body ??= json(raw, "body");
    if (!w.path) throw new Error("the raw workload needs --path (e.g. /v1/table/{table}/describe)");
  }
  const extra = json(raw, "extra") ?? {};
  if (typeof extra !== "object" || Array.isArray(extra) || extra === null) throw new Error("--extra: expected a JSON object of query fields");
  const rate = num(raw, "rate", 0, 0);
  if (mode === "open" && !(rate > 0)) throw new Error("--rate is required in open mode (requests a second)");
  const connections = num(raw, "connections", 16, 1, 10_000);
  return {
    url: url.replace(/\/+$/, ""),
    apiKey: apiKey(raw, env, url),
    headers,
    table: table ?? "",
    mode,
    connections: Math.floor(connections),
    rate,
    duration: num(raw, "duration", 10, 0.1),
    warmup: num(raw, "warmup", 1, 0),
    timeout: num(raw, "timeout", 30, 0.001),
    workloads: ws,
    k: Math.floor(num(raw, "k", 10, 1)),
    vectorColumn: str(raw, "vector-column"),
    // A dataset run asks for ids only, as VectorDBBench's searches do.
    columns: list(raw.columns) ?? (dataset ? ["id"] : undefined),
    filter: str(raw, "filter"),
    text: list(raw.text) ?? [],
    textColumns: list(raw["text-columns"]),
    extra: extra as Record<string, unknown>,
    accept: oneOf(raw, "accept", ["arrow", "json", "ndjson"] as const, "arrow"),
    queries: str(raw, "queries"),
    sample: Math.floor(num(raw, "sample", 100, 1)),
    insertBatch: Math.floor(num(raw, "insert-batch", 100, 1)),
    insertFormat: oneOf(raw, "insert-format", ["arrow", "json"] as const, "arrow"),
    insertRows: str(raw, "insert-rows"),
    sloMs: num(raw, "slo-ms", 20, 0.001),
    sloPercentile: num(raw, "slo-percentile", 99, 1, 99.999),
    rampStart: num(raw, "ramp-start", 50, 0.1),
    rampFactor: num(raw, "ramp-factor", 2, 1.01),
    rampMax: num(raw, "ramp-max", 100_000, 0.1),
    stepDuration: num(raw, "step-duration", 5, 0.1),
    bisect: Math.floor(num(raw, "bisect", 4, 0, 20)),
    maxErrorRate: num(raw, "max-error-rate", 0.01, 0, 1),
    recallQueries: Math.floor(num(raw, "recall-queries", 100, 1)),
    sampledQueries,
    dataset,
    dim: Math.floor(num(raw, "dim", 128, 1, 65_536)),
    queryCount: Math.floor(num(raw, "query-count", 1000, 1)),
    groundTruth: str(raw, "ground-truth"),
    distance: oneOf(raw, "distance", DISTANCES, "l2"),
    datasetDir: str(raw, "dataset-dir") ?? "loadtest-data",
    loadBatch: Math.floor(num(raw, "load-batch", 10_000, 1)),
    loadConcurrency: Math.floor(num(raw, "load-concurrency", 2, 1, 256)),
    index: str(raw, "index") ?? "IVF_PQ",
    indexParams: indexParams as Record<string, unknown>,
    reload: raw.reload === true,
    sweep,
    repeat,
    thresholds: threshold === undefined ? [] : parseThresholds(String(threshold)),
    generators,
    startAt: startAt(raw),
    metrics: raw["no-metrics"] !== true && raw.metrics !== false,
    metricsPath: str(raw, "metrics-path") ?? "/metrics",
    out: str(raw, "out") ?? `loadtest-${new Date().toISOString().replace(/[:.]/g, "-").slice(0, 19)}`,
    quiet: raw.quiet === true,
  };
}
