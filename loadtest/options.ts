// The harness's options: command-line flags, optionally over a JSON or YAML workload file (the
// flags win), checked once here so the rest of the harness reads plain, complete values.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";

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
  metrics: boolean;
  metricsPath: string;
  out: string;
  quiet: boolean;
}

export const HELP = `quiver-loadtest: load-test a Quiver (or any lance-namespace REST server)

  quiver-loadtest --url http://127.0.0.1:8080 --api-key KEY --table 'ns$docs' [options]
  quiver-loadtest --config workload.yaml [options]
  quiver-loadtest --compare run-a.json run-b.json [--out compare]

  --config FILE          options from a JSON or YAML file (flags given too win)
  --url URL              the server (http:// or https://)
  --api-key KEY          sent as Authorization: Bearer KEY (or QUIVER_API_KEY)
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
  --recall-queries N     recall: queries compared with exact search (default 50)
  --no-metrics           do not scrape the server's /metrics
  --metrics-path P       where the metrics are (default /metrics)
  --out PREFIX           writes PREFIX.json and PREFIX.html (default loadtest-<time>)
  --quiet                no progress line
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
  "no-metrics": { type: "boolean" },
  "metrics-path": { type: "string" },
  out: { type: "string" },
  quiet: { type: "boolean" },
  compare: { type: "boolean" },
  help: { type: "boolean" },
} as const;

/** Every flag, for the docs' test (each must be in --help and docs/loadtest.md). */
export const FLAG_NAMES = Object.keys(FLAGS);

export type Command = { help: true } | { compare: [string, string]; out: string } | { run: Options };

/** Reads the command line (and the file it names) into a command; throws naming a bad option. */
export function parseCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Command {
  const { values, positionals } = parseArgs({ args: argv, options: FLAGS, allowPositionals: true, strict: true });
  if (values.help) return { help: true };
  if (values.compare) {
    if (positionals.length !== 2) throw new Error("--compare takes two report files: --compare a.json b.json");
    return { compare: [positionals[0], positionals[1]], out: values.out ?? "compare" };
  }
  if (positionals.length) throw new Error(`unexpected argument: ${positionals[0]}`);
  const file = values.config ? readConfig(values.config) : {};
  // Flags over the file: the file's keys are the flag names (kebab-case or camelCase).
  const raw: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(file)) raw[kebab(k)] = v;
  for (const [k, v] of Object.entries(values)) if (v !== undefined && k !== "config") raw[k] = v;
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

function resolve(raw: Record<string, unknown>, env: NodeJS.ProcessEnv): Options {
  const url = str(raw, "url");
  if (!url) throw new Error("--url is required (the server, e.g. http://127.0.0.1:8080)");
  if (!/^https?:\/\/[^/]+/.test(url)) throw new Error(`--url: expected http://host:port or https://host, got ${url}`);
  const table = str(raw, "table");
  const mode = oneOf(raw, "mode", ["closed", "open", "ramp", "recall"] as const, "closed");
  const ws = workloads(raw);
  const needsTable = ws.some((w) => w.kind !== "raw") || mode === "recall";
  if (needsTable && !table) throw new Error("--table is required (the table id, levels joined with $: ns$docs)");
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
    apiKey: str(raw, "api-key") ?? env.QUIVER_API_KEY,
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
    columns: list(raw.columns),
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
    recallQueries: Math.floor(num(raw, "recall-queries", 50, 1)),
    metrics: raw["no-metrics"] !== true && raw.metrics !== false,
    metricsPath: str(raw, "metrics-path") ?? "/metrics",
    out: str(raw, "out") ?? `loadtest-${new Date().toISOString().replace(/[:.]/g, "-").slice(0, 19)}`,
    quiet: raw.quiet === true,
  };
}
