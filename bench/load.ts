// Load harness, one run, closed loops on keep-alive connections. Dataset: node dist/bench/generate.js
// (same flags); with --gaussian-dir, also a clustered Gaussian dataset there (--gaussian-clusters
// centres, generated on first use), since what batching and the serving index gain depends on the
// data. For each dataset it starts three Quivers: two answering searches with LanceDB
// (--serving off), one with query batching (the defaults) and one without (--batch-max 0), and one
// with the serving index (the defaults; its build or load timed), and reports:
//   1. recall@10 of indexed search against exact search, 50 queries sent at once (so they batch),
//      for the engine and for the serving index, unfiltered and filtered;
//   2. query kinds against LanceDB in process at --concurrency in flight, alternating rounds:
//      filtered vector search (batched, unbatched, the engine one search a call and its
//      multi-vector limit), full-text search and hybrid search (the engine one search a call);
//   3. vector search at each concurrency in --levels: Quiver's serving index, Quiver batched,
//      Quiver unbatched and LanceDB in process (one search a call, toArrow; and one multi-vector
//      call of as many vectors as there are clients, the engine's limit for batching), alternating
//      rounds; medians, ratios, the issues' bounds, and from the batched server's /metrics the
//      batch sizes, the engine's idle time between batches and the searches' wait;
//   4. the serving index under a write stream (8 clients inserting 2,000 single rows, each found by
//      the next search carrying its version; then deleted), against the quiet table, second by
//      second, in each of --rounds rounds (the bound on the median round), and a second quiet
//      phase measured the same way: the measure's own spread on the machine; and the same under the
//      load-test mix (an open loop of --mix-rate requests a second, 10% of them inserts of 20 rows).
//      Each round starts once the background jobs of the writes before have settled, and each
//      phase reports the seconds in which one ran;
//   5. the serving index with each worker count of --serving-workers, at the levels of
//      --worker-levels (each server loads the index the first one saved).
// On the first dataset also: other operations (multi-vector search, count, describe, a mix), and
// namespace describe against a bare uWS echo, alternating rounds, as ratios of req/s and of server
// CPU per request.
//
//   node dist/bench/load.js --data-dir ./bench-data [--gaussian-dir ./gaussian-data] [--levels 1,8,32,128]
//        [--rounds 3] [--duration 10] [--warmup 2] [--concurrency 32] [--echo-concurrency 64]
//        [--kinds vector_filter,fts,hybrid] [--ops multi_vector,count,describe,mix] [--workers N]
//        [--batch-max N] [--batch-slots N] [--gaussian-clusters 64] [--serving-workers 1,2,4]
//        [--worker-levels 32,128] [--write-stream on|off] [--mix-rate 200]
import * as lancedb from "@lancedb/lancedb";
import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { tmpdir } from "node:os";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { queryVectors, type Spec } from "./dataset.js";
import { BENCH_TABLE, datasetArgs, datasetName, generate } from "./generate.js";
import { Conn } from "./http-client.js";
import { openLoop, type OpenLoopRequest } from "./open-loop.js";
import { parsePrometheus } from "../loadtest/server-metrics.js";
import { cpuSeconds, startEcho, startQuiver, type QuiverProcess } from "./quiver-process.js";
import { usesStableRowIds } from "../src/engine/versions.js";
import { closedLoop, header, line, summary, type Result } from "./stats.js";

const { values } = parseArgs({
  strict: false,
  options: {
    levels: { type: "string", default: "1,8,32,128" },
    concurrency: { type: "string", default: "32" },
    "echo-concurrency": { type: "string", default: "64" },
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    kinds: { type: "string", default: "vector_filter,fts,hybrid" },
    ops: { type: "string", default: "multi_vector,count,describe,mix" },
    workers: { type: "string" },
    "batch-max": { type: "string" },
    "batch-slots": { type: "string" },
    "gaussian-dir": { type: "string" },
    "gaussian-clusters": { type: "string", default: "64" },
    "serving-workers": { type: "string", default: "1,2,4" },
    "worker-levels": { type: "string", default: "32,128" },
    "write-stream": { type: "string", default: "on" },
    "mix-rate": { type: "string", default: "200" },
    k: { type: "string", default: "10" },
    rounds: { type: "string", default: "3" },
    nprobes: { type: "string", default: "20" },
  },
});
const { dataDir, spec, rowIds } = datasetArgs();
const LEVELS = String(values.levels).split(",").filter(Boolean).map(Number);
const C = Number(values.concurrency);
const ECHO_C = Number(values["echo-concurrency"]);
const D = Number(values.duration);
const WARM = Number(values.warmup);
const K = Number(values.k);
const NPROBES = Number(values.nprobes);
const KEY = "bench-admin-key";
const NS = "benchns";
const ROUNDS = Number(values.rounds);
const MIX_RATE = Number(values["mix-rate"]);
const HEADERS = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
const QUERY = `/v1/table/${BENCH_TABLE}/query`;

const PATH_HEADER = "x-quiver-search-path";
const TEXTS = ["apple river", "quick brown fox", "nebula", "summit willow", "piano"];
const FILTER = "category = 'beta'";

/** One dataset's query vectors and request bodies, serialised once so the client spends its time on the wire only. */
interface Workload {
  name: string;
  dataDir: string;
  vectors: number[][];
  ops: Record<string, Op>;
}
type Op = { path: string; bodies: Buffer[] };

function workload(name: string, dir: string, s: Spec): Workload {
  const vectors = queryVectors(s, 1000).map((v) => Array.from(v));
  const bodies = (extra: (i: number) => object) =>
    vectors.map((v, i) => Buffer.from(JSON.stringify({ vector: { single_vector: v }, k: K, nprobes: NPROBES, ...extra(i) })));
  const json = (xs: object[]) => xs.map((x) => Buffer.from(JSON.stringify(x)));
  return {
    name,
    dataDir: dir,
    vectors,
    ops: {
      vector: { path: QUERY, bodies: bodies(() => ({})) },
      vector_filter: { path: QUERY, bodies: bodies(() => ({ filter: FILTER })) },
      hybrid: { path: QUERY, bodies: bodies((i) => ({ full_text_query: { string_query: { query: TEXTS[i % TEXTS.length] } } })) },
      multi_vector: {
        path: QUERY,
        bodies: json(vectors.map((_, i) => ({ vector: { multi_vector: [0, 1, 2, 3].map((j) => vectors[(i + j * 250) % vectors.length]) }, k: K, nprobes: NPROBES }))),
      },
      fts: { path: QUERY, bodies: json(TEXTS.map((query) => ({ full_text_query: { string_query: { query } }, k: K }))) },
      count: { path: `/v1/table/${BENCH_TABLE}/count_rows`, bodies: json([{ predicate: FILTER }]) },
      describe: { path: `/v1/namespace/${NS}/describe`, bodies: [Buffer.from("{}")] },
    },
  };
}
const MIX = ["vector", "vector_filter", "fts", "count", "describe"];

const pickFor = (w: Workload, op: string) => (loop: number, i: number) => {
  const o = w.ops[op === "mix" ? MIX[(loop + i) % MIX.length] : op];
  return { path: o.path, body: o.bodies[(loop * 31 + i) % o.bodies.length] };
};

/** The batched searches' series of a server's /metrics, name{labels} → value. */
async function batchSeries(url: URL): Promise<Map<string, number>> {
  const conn = new Conn(url.hostname, Number(url.port));
  try {
    const r = await conn.request("GET", "/metrics", `x-api-key: ${KEY}\r\n`, null);
    const out = new Map<string, number>();
    for (const l of r.body.toString().split("\n")) {
      const m = /^(quiver_batch_\S+) (\S+)$/.exec(l);
      // Keyed without the replica label every series carries (one server is scraped).
      if (m) out.set(m[1].replace(/,?replica="[^"]*"/, "").replace("{}", ""), Number(m[2]));
    }
    return out;
  } finally {
    conn.close();
  }
}

/** How a phase's searches were batched: from the difference of two /metrics readings. */
function batching(before: Map<string, number>, after: Map<string, number>, seconds: number): string {
  const d = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
  const calls = d("quiver_batch_size_count");
  if (calls === 0) return "no batchable engine calls";
  let below = 0;
  const hist: string[] = [];
  for (const le of ["1", "2", "4", "8", "16", "32", "64", "128", "256", "+Inf"]) {
    const n = d(`quiver_batch_size_bucket{le="${le}"}`);
    if (n - below > 0) hist.push(`≤${le}: ${n - below}`);
    below = n;
  }
  const idle = d("quiver_batch_idle_seconds_sum");
  const wait = d("quiver_batch_wait_seconds_sum") / Math.max(1, d("quiver_batch_wait_seconds_count"));
  return (
    `${calls} engine calls, ${f1(d("quiver_batch_size_sum") / calls)} vectors each; vectors a call ${hist.join(", ")}; ` +
    `engine idle between batches ${f1((idle / seconds) * 100)}% of the phase; mean wait for a batch ${f1(wait * 1000)} ms`
  );
}

/**
 * One closed-loop phase over HTTP (after a warm-up of the same), `c` connections. With the
 * server's `pid`, also the server's CPU time per answered request (µs), which the client's own
 * speed does not cap; with `batches`, how its searches were batched.
 */
async function httpPhase(w: Workload, url: URL, name: string, op: string, c: number, opts: { pid?: number; batches?: boolean; serving?: boolean } = {}): Promise<Result & { cpuUs?: number }> {
  const pick = pickFor(w, op);
  const conns = Array.from({ length: c }, () => new Conn(url.hostname, Number(url.port)));
  // With `serving`, an answer the engine gave instead counts as an error (named by its reason).
  const phase = (n: string, s: number) =>
    closedLoop(n, c, s, async (loop, i) => {
      const { path: p, body } = pick(loop, i);
      const r = await conns[loop].request("POST", p, HEADERS, body);
      if (r.status !== 200) return `${r.status} ${r.body.toString().slice(0, 120)}`;
      return opts.serving && !r.head.includes(`${PATH_HEADER}: serving`) ? `not served: ${/x-quiver-search-path: ([^\r]*)/.exec(r.head)?.[1]}` : null;
    });
  try {
    if (WARM > 0) await phase(name, WARM);
    const m0 = opts.batches ? await batchSeries(url) : null;
    const cpu0 = opts.pid ? cpuSeconds(opts.pid) : null;
    // The server's main thread (its thread id is its pid) runs the uWS loop: near 100% busy, it is the limit.
    const main0 = opts.pid ? cpuSeconds(opts.pid, opts.pid) : null;
    const client0 = process.cpuUsage();
    const r = await phase(name, D);
    const cpu1 = opts.pid ? cpuSeconds(opts.pid) : null;
    const main1 = opts.pid ? cpuSeconds(opts.pid, opts.pid) : null;
    const client = process.cpuUsage(client0);
    const cpuUs = cpu0 !== null && cpu1 !== null && r.ok ? ((cpu1 - cpu0) * 1e6) / r.ok : undefined;
    const busy =
      main0 !== null && main1 !== null
        ? `  main thread ${f0((100 * (main1 - main0)) / r.seconds)}% busy, this client ${f0((client.user + client.system) / 1e4 / r.seconds)}%`
        : "";
    console.log(line(r) + (cpuUs !== undefined ? `  server CPU ${cpuUs.toFixed(1)} µs/request` : "") + busy);
    if (m0) console.log(`    ${batching(m0, await batchSeries(url), r.seconds)}`);
    return { ...r, cpuUs };
  } finally {
    conns.forEach((x) => x.close());
  }
}

type EngineOp = (vs: number[][], text: string) => Promise<unknown>;

/** A query kind straight into LanceDB in this process, one search per call (as Quiver builds it). */
const engineOps = (table: lancedb.Table): Record<string, EngineOp> => ({
  vector: (vs) => table.vectorSearch(vs[0]).limit(K).nprobes(NPROBES).toArrow(),
  vector_filter: (vs) => table.vectorSearch(vs[0]).where(FILTER).limit(K).nprobes(NPROBES).toArrow(),
  fts: (_vs, text) => table.query().fullTextSearch(text).limit(K).toArrow(),
  hybrid: (vs, text) => table.vectorSearch(vs[0]).fullTextSearch(text).limit(K).nprobes(NPROBES).toArrow(),
});

/** The same workload in this process, straight into LanceDB, one search per call. */
async function enginePhase(w: Workload, table: lancedb.Table, op: string, c: number): Promise<Result> {
  const run = engineOps(table)[op];
  const phase = (n: string, s: number) =>
    closedLoop(n, c, s, async (loop, i) => {
      const k = loop * 31 + i;
      await run([w.vectors[k % w.vectors.length]], TEXTS[k % TEXTS.length]);
      return null;
    });
  if (WARM > 0) await phase("engine", WARM);
  const r = await phase(`engine ${op} c=${c}`, D);
  console.log(line(r));
  return r;
}

/**
 * The engine's own limit for batched search: one multi-vector call of `c` vectors at a time (so `c`
 * vectors in flight, as with `c` clients), in this process. Its QPS is counted in vectors.
 */
async function limitPhase(w: Workload, table: lancedb.Table, c: number, filter: string | null = null): Promise<Result> {
  const phase = (n: string, s: number) =>
    closedLoop(n, 1, s, async (_loop, i) => {
      const vs = Array.from({ length: c }, (_, j) => w.vectors[(i * c + j) % w.vectors.length]);
      const q = table.vectorSearch(c === 1 ? vs[0] : vs).limit(K).nprobes(NPROBES);
      await (filter ? q.where(filter) : q).toArrow();
      return null;
    });
  if (WARM > 0) await phase("engine multi-vector", WARM);
  const r = await phase(`engine ${c} vectors a call${filter ? " + filter" : ""}`, D);
  const counted = { ...r, ok: r.ok * c };
  console.log(`${line(r)}  (${f0(summary(counted).qps)} vectors/s)`);
  return counted;
}

/**
 * recall@10 with all `n` indexed queries in flight at once (so a batching server batches them),
 * and each query's answer: ids and distances.
 */
async function recall(w: Workload, url: URL, extra: object, n = 50, exactUrl = url): Promise<{ recall: number; answers: { ids: number[]; distances: number[] }[] }> {
  const conns = Array.from({ length: n }, () => new Conn(url.hostname, Number(url.port)));
  const { arrow } = await import("../src/engine/arrow.js");
  const query = async (conn: Conn, body: object) => {
    const r = await conn.request("POST", QUERY, HEADERS, Buffer.from(JSON.stringify(body)));
    if (r.status !== 200) throw new Error(`recall query: ${r.status} ${r.body}`);
    const t = arrow.tableFromIPC(r.body);
    return { ids: Array.from(t.getChild("id")!.toArray() as Int32Array), distances: Array.from(t.getChild("_distance")!.toArray() as Float32Array) };
  };
  const base = (v: number[]) => ({ vector: { single_vector: v }, k: 10, columns: { column_names: ["id"] } });
  const answers = await Promise.all(w.vectors.slice(0, n).map((v, i) => query(conns[i], { ...base(v), nprobes: NPROBES, ...extra })));
  let hits = 0;
  const exactConn = new Conn(exactUrl.hostname, Number(exactUrl.port));
  for (const [i, v] of w.vectors.slice(0, n).entries()) {
    const exact = new Set((await query(exactConn, { ...base(v), ...extra, bypass_vector_index: true })).ids);
    hits += answers[i].ids.filter((id) => exact.has(id)).length;
  }
  conns.forEach((c) => c.close());
  exactConn.close();
  return { recall: hits / (n * 10), answers };
}

/** Batched against unbatched answers: how many have the same ids, and the same distances. */
function sameAnswers(a: Awaited<ReturnType<typeof recall>>, b: Awaited<ReturnType<typeof recall>>) {
  const eq = (x: number[], y: number[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return {
    ids: a.answers.filter((x, i) => eq(x.ids, b.answers[i].ids)).length,
    distances: a.answers.filter((x, i) => eq(x.distances, b.answers[i].distances)).length,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Median over rounds of each figure (QPS and each percentile taken separately). */
function medians(rs: Result[]) {
  const ss = rs.map(summary);
  return { qps: median(ss.map((s) => s.qps)), p50: median(ss.map((s) => s.p50)), p99: median(ss.map((s) => s.p99)) };
}

/** Each round's ratio of one figure, Quiver's phase against the engine's phase of the same round. */
const eachRound = (a: Result[], b: Result[], of: (s: ReturnType<typeof summary>) => number) =>
  `rounds ${a.map((r, i) => (of(summary(r)) / of(summary(b[i]))).toFixed(2)).join("/")}`;

const f0 = (x: number) => x.toFixed(0);
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const bound = (ok: boolean) => (ok ? "met" : "SHORT");

interface Servers {
  batched: URL;
  unbatched: URL;
  batchedPid: number;
  serving: URL;
}

/** Filtered vector, full-text and hybrid search at C in flight against the engine in process. */
async function kinds(w: Workload, table: lancedb.Table, servers: Servers, out: string[], bounds: string[]): Promise<void> {
  for (const op of String(values.kinds).split(",").filter(Boolean)) {
    console.log(`\n${op}, ${C} in flight, ${ROUNDS} alternating rounds (${w.name})`);
    console.log(header());
    const rounds: Record<"serving" | "batched" | "unbatched" | "engine" | "limit", Result[]> = { serving: [], batched: [], unbatched: [], engine: [], limit: [] };
    const multi = op === "vector_filter";
    for (let i = 0; i < ROUNDS; i++) {
      if (multi) rounds.serving.push(await httpPhase(w, servers.serving, `quiver ${op} serving index`, op, C, { serving: true }));
      rounds.batched.push(await httpPhase(w, servers.batched, `quiver ${op}${multi ? " batched" : ""}`, op, C, { batches: multi }));
      if (multi) rounds.unbatched.push(await httpPhase(w, servers.unbatched, `quiver ${op} unbatched`, op, C));
      rounds.engine.push(await enginePhase(w, table, op, C));
      if (multi) rounds.limit.push(await limitPhase(w, table, C, FILTER));
    }
    const e = medians(rounds.engine);
    const l = multi ? medians(rounds.limit) : null;
    const row = (name: string, m: ReturnType<typeof medians>) =>
      `| ${w.name} | ${op} | ${name} | ${f0(m.qps)} | ${f1(m.p50)} | ${f1(m.p99)} | ${f2(m.qps / e.qps)} | ${l ? f2(m.qps / l.qps) : "–"} | ${f2(m.p99 / e.p99)} |`;
    const q = medians(rounds.batched);
    if (multi) {
      const sv = medians(rounds.serving);
      out.push(row("Quiver, serving index", sv));
      bounds.push(`${w.name}: filtered search (${FILTER}, prefilter) on the serving index ${f2(sv.qps / e.qps)}x the per-call engine, ${eachRound(rounds.serving, rounds.engine, (x) => x.qps)} (bound ≥ 3: ${bound(sv.qps / e.qps >= 3)})`);
    }
    out.push(row(multi ? "Quiver, batched" : "Quiver", q));
    if (op === "fts") {
      const each = eachRound(rounds.batched, rounds.engine, (s) => s.qps);
      bounds.push(`${w.name}: full-text search ${f2(q.qps / e.qps)} of the per-call engine, ${each} (bound ≥ 0.95: ${bound(q.qps / e.qps >= 0.95)})`);
    }
    if (multi) out.push(row("Quiver, --batch-max 0", medians(rounds.unbatched)));
    out.push(row("LanceDB in process, one search a call", e));
    if (l) out.push(row(`LanceDB in process, ${C} vectors a call (the limit; QPS in vectors)`, l));
  }
}

/** Vector search at each level of LEVELS: batched, unbatched, the engine per call and its limit. */
async function levels(w: Workload, table: lancedb.Table, servers: Servers, out: string[], bounds: string[]): Promise<void> {
  for (const c of LEVELS) {
    console.log(`\nvector search, ${c} in flight (${w.name})`);
    console.log(header());
    const rounds: Record<"serving" | "batched" | "unbatched" | "engine" | "limit", Result[]> = { serving: [], batched: [], unbatched: [], engine: [], limit: [] };
    for (let i = 0; i < ROUNDS; i++) {
      rounds.serving.push(await httpPhase(w, servers.serving, `quiver serving index c=${c}`, "vector", c, { serving: true }));
      rounds.batched.push(await httpPhase(w, servers.batched, `quiver batched c=${c}`, "vector", c, { batches: true }));
      rounds.unbatched.push(await httpPhase(w, servers.unbatched, `quiver unbatched c=${c}`, "vector", c));
      rounds.engine.push(await enginePhase(w, table, "vector", c));
      rounds.limit.push(await limitPhase(w, table, c));
    }
    const [sv, b, u, e, l] = [medians(rounds.serving), medians(rounds.batched), medians(rounds.unbatched), medians(rounds.engine), medians(rounds.limit)];
    const row = (name: string, m: typeof b) =>
      `| ${w.name} | ${c} | ${name} | ${f0(m.qps)} | ${f1(m.p50)} | ${f1(m.p99)} | ${f2(m.qps / e.qps)} | ${f2(m.qps / l.qps)} | ${f2(m.p50 / e.p50)} | ${f2(m.p99 / e.p99)} |`;
    out.push(row("Quiver, serving index", sv), row("Quiver, batched", b), row("Quiver, --batch-max 0", u), row("LanceDB in process, one search a call", e), row(`LanceDB in process, ${c} vectors a call (the limit; QPS in vectors)`, l));
    if (c === 1) bounds.push(`${w.name}, 1 in flight: serving index p50 ${f2(sv.p50 / e.p50)}x the per-call engine's, ${eachRound(rounds.serving, rounds.engine, (x) => x.p50)} (bound ≤ 0.5: ${bound(sv.p50 / e.p50 <= 0.5)})`);
    if (c === 32) {
      bounds.push(
        `${w.name}, 32 in flight: serving index ${f2(sv.qps / e.qps)}x the per-call engine, ${eachRound(rounds.serving, rounds.engine, (x) => x.qps)} (bound ≥ 3: ${bound(sv.qps / e.qps >= 3)}); ` +
          `${f2(sv.qps / l.qps)}x its multi-vector limit, ${eachRound(rounds.serving, rounds.limit, (x) => x.qps)} (bound ≥ 1.3: ${bound(sv.qps / l.qps >= 1.3)})`,
      );
    }
    if (c === 1) {
      const each = eachRound(rounds.batched, rounds.engine, (s) => s.p50);
      bounds.push(`${w.name}, 1 in flight: batched p50 ${f2(b.p50 / e.p50)}x the per-call engine's, ${each} (bound ≤ 1.1: ${bound(b.p50 / e.p50 <= 1.1)})`);
    }
    if (c >= 32) {
      const each = eachRound(rounds.batched, rounds.limit, (s) => s.qps);
      bounds.push(
        `${w.name}, ${c} in flight: batched ${f2(b.qps / l.qps)} of the limit, ${each} (bound ≥ 0.9: ${bound(b.qps / l.qps >= 0.9)}); ` +
          `p99 ${f2(b.p99 / e.p99)}x the per-call engine's (bound ≤ 0.6: ${bound(b.p99 / e.p99 <= 0.6)})`,
      );
    }
  }
}

/** The sum of a metric's series with `labels` (the server adds its own, e.g. `replica`); NaN without any. */
async function metric(url: URL, name: string, labels: Record<string, string> = {}): Promise<number> {
  const conn = new Conn(url.hostname, Number(url.port));
  try {
    const scrape = parsePrometheus((await conn.request("GET", "/metrics", `x-api-key: ${KEY}\r\n`, null)).body.toString());
    const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
    const found = [...scrape].filter(([key]) => (key === name || key.startsWith(`${name}{`)) && wanted.every((w) => key.includes(w)));
    return found.length === 0 ? NaN : found.reduce((n, [, v]) => n + v, 0);
  } finally {
    conn.close();
  }
}

/** Search until the serving index answers (its first search starts its build, or its load); seconds it took, and its size. */
async function servingReady(w: Workload, url: URL): Promise<string> {
  const conn = new Conn(url.hostname, Number(url.port));
  const started = performance.now();
  try {
    for (;;) {
      const r = await conn.request("POST", QUERY, HEADERS, w.ops.vector.bodies[0]);
      if (r.status !== 200) throw new Error(`serving index: ${r.status} ${r.body.toString().slice(0, 200)}`);
      if (r.head.includes(`${PATH_HEADER}: serving`)) break;
      await new Promise((res) => setTimeout(res, 200));
    }
  } finally {
    conn.close();
  }
  const [built, loaded, bytes, index, rows] = await Promise.all([
    metric(url, "quiver_serving_build_seconds_sum", { loaded: "false" }),
    metric(url, "quiver_serving_build_seconds_sum", { loaded: "true" }),
    metric(url, "quiver_serving_index_bytes"),
    metric(url, "quiver_serving_index_part_bytes", { part: "index" }),
    metric(url, "quiver_serving_index_rows"),
  ]);
  const raw = rows * spec.dim * 4;
  const mib = (n: number) => `${f1(n / 2 ** 20)} MiB = ${f2(n / raw)}x the raw f32 vectors`;
  return (
    `serving index ready after ${f1((performance.now() - started) / 1000)} s (${loaded > 0 ? `loaded in ${f1(loaded)} s` : `built in ${f1(built)} s`}): ` +
    `${rows} rows, ${mib(bytes)} with the cached columns; the index itself ${mib(index)} (bound ≤ 1.5: ${bound(index / raw <= 1.5)})`
  );
}

/** The serving index with each worker count, at the levels of --worker-levels, in alternating rounds. */
async function workerCounts(w: Workload, state: string, out: string[], bounds: string[]): Promise<void> {
  const counts = String(values["serving-workers"]).split(",").filter(Boolean).map(Number);
  const lv = String(values["worker-levels"]).split(",").filter(Boolean).map(Number);
  if (counts.length === 0) return;
  const servers: QuiverProcess[] = [];
  const dirs: string[] = [];
  try {
    // One at a time on the state directory the first serving server saved its index to; each then
    // keeps its own state directory, so they can run side by side.
    for (const n of counts) {
      const dir = mkdtempSync(path.join(tmpdir(), "quiver-bench-state-"));
      dirs.push(dir);
      cpSync(path.join(state, "serving"), path.join(dir, "serving"), { recursive: true });
      const p = await startQuiver(w.dataDir, KEY, ["--workers", String(n), "--state-dir", dir]);
      servers.push(p);
      console.log(`--workers ${n}: ${await servingReady(w, new URL(p.url))}`);
    }
    for (const c of lv) {
      console.log(`\nserving index by worker count, ${c} in flight (${w.name})`);
      console.log(header());
      const rounds: Result[][] = counts.map(() => []);
      for (let i = 0; i < ROUNDS; i++) {
        for (const [j, p] of servers.entries()) rounds[j].push(await httpPhase(w, new URL(p.url), `serving --workers ${counts[j]} c=${c}`, "vector", c, { serving: true, pid: p.proc.pid }));
      }
      const ms = rounds.map(medians);
      ms.forEach((m, j) => out.push(`| ${w.name} | ${c} | Quiver, serving index, --workers ${counts[j]} | ${f0(m.qps)} | ${f1(m.p50)} | ${f1(m.p99)} | ${f2(m.qps / ms[0].qps)} |`));
      bounds.push(`${w.name}, ${c} in flight: serving index QPS by --workers ${counts.join("/")}: ${ms.map((m) => f0(m.qps)).join("/")} (${ms.map((m) => f2(m.qps / ms[0].qps)).join("/")} of one worker)`);
    }
  } finally {
    for (const p of servers) await p.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

/** Latencies of a closed loop of vector searches, each with the second it started in, and how many the serving index answered. */
async function timedSearches(w: Workload, url: URL, c: number, seconds: number): Promise<Searched> {
  const conns = Array.from({ length: c }, () => new Conn(url.hostname, Number(url.port)));
  const samples: { at: number; ms: number }[] = [];
  let served = 0;
  const start = performance.now();
  const stopAt = start + seconds * 1000;
  await Promise.all(
    conns.map(async (conn, loop) => {
      for (let i = 0; performance.now() < stopAt; i++) {
        const t0 = performance.now();
        const r = await conn.request("POST", QUERY, HEADERS, w.ops.vector.bodies[(loop * 31 + i) % w.ops.vector.bodies.length]);
        if (r.status !== 200) throw new Error(`search: ${r.status} ${r.body.toString().slice(0, 200)}`);
        if (r.head.includes(`${PATH_HEADER}: serving`)) served++;
        samples.push({ at: Math.floor((t0 - start) / 1000), ms: performance.now() - t0 });
      }
    }),
  );
  conns.forEach((x) => x.close());
  return { ...tail(samples, seconds), served: served / samples.length };
}

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))];

/** Searches a second, p50 and p99 of a phase's latencies, and each second's p99 (by the second each search started in). */
function tail(samples: { at: number; ms: number }[], seconds: number) {
  const bySecond = new Map<number, number[]>();
  for (const x of samples) {
    const second = bySecond.get(x.at);
    if (second) second.push(x.ms);
    else bySecond.set(x.at, [x.ms]);
  }
  const ms = samples.map((x) => x.ms);
  return { qps: samples.length / seconds, p50: median(ms), p99: p99(ms), perSecond: [...bySecond.keys()].sort((a, b) => a - b).map((k) => p99(bySecond.get(k)!)) };
}

/**
 * The serving index under a write stream: searches at C in flight alone, then while 8 clients
 * insert 2,000 single rows (JSON), each followed by a search carrying its version that must find
 * it; then the rows are deleted and a search carrying the delete's version must find none. One
 * round each of --rounds; the bound is on the median round.
 */
async function writeStream(w: Workload, url: URL, out: string[], bounds: string[]): Promise<void> {
  const writers = 8;
  const each = 250;
  console.log(`\nthe serving index under a write stream: ${C} searches in flight alone, then while ${writers} clients insert ${writers * each} single rows (${w.name}), ${ROUNDS} rounds`);
  const rounds: StreamRound[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const r = await streamRound(w, url, 10_000_000 + i * writers * each, writers, each);
    rounds.push(r);
    report(w, i, r, `while ${writers} clients insert (${r.inserted} rows in the phase and ${f1(r.writeS)} s after)`, out);
  }
  const missed = rounds.reduce((a, r) => a + r.missed, 0);
  const left = rounds.reduce((a, r) => a + r.left, 0);
  bounds.push(
    `${w.name}: under the write stream, ${tailBound(rounds)}; ` +
      `acknowledged rows not found by the next search carrying their version: ${missed} of ${rounds.reduce((a, r) => a + r.inserted, 0)}; deleted rows answered: ${left} (bounds 0: ${bound(missed === 0 && left === 0)})`,
  );
}

/** A round's searches: a quiet phase, a second one right after it, and one under writes. */
interface TailRound {
  quiet: Phase;
  /** A second quiet phase right after the first: the measure's own spread. */
  again: Phase;
  busy: Phase;
}
/** A phase's searches: their tail and the share the serving index answered. */
type Searched = ReturnType<typeof tail> & { served: number };
/** ... and the seconds in which the server ran a background job. */
type Phase = Searched & { jobSeconds: number };

/**
 * Wait until this server has run no background job and queued none for 5 seconds in a row (at
 * most 3 minutes), so that a round's quiet phases are not the maintenance of the writes before.
 */
async function settle(url: URL): Promise<void> {
  const started = performance.now();
  for (let still = 0; still < 5 && performance.now() - started < 180_000; await sleep(1000)) {
    const busy = (await metric(url, "quiver_jobs", { state: "Queued" })) + (await metric(url, "quiver_jobs", { state: "Running" }));
    still = busy > 0 ? 0 : still + 1;
  }
  console.log(`  (background jobs settled: waited ${f1((performance.now() - started) / 1000)} s)`);
}

/** A phase, sampling twice a second whether the server runs a background job meanwhile: the seconds it did. */
async function watchingJobs<T>(url: URL, phase: () => Promise<T>): Promise<T & { jobSeconds: number }> {
  const seconds = new Set<number>();
  const start = performance.now();
  let done = false;
  const sampler = (async () => {
    for (; !done; await sleep(500)) if ((await metric(url, "quiver_replica_jobs_running")) > 0) seconds.add(Math.floor((performance.now() - start) / 1000));
  })();
  try {
    return { ...(await phase()), jobSeconds: seconds.size };
  } finally {
    done = true;
    await sampler;
  }
}

/** A round's three rows of the table, and each second's p99 on the console. */
function report(w: Workload, i: number, r: TailRound, busy: string, out: string[]): void {
  const row = (name: string, m: Phase) => `| ${w.name} | ${i + 1} | ${name} | ${f0(m.qps)} | ${f1(m.p50)} | ${f1(m.p99)} | ${f1(Math.max(...m.perSecond))} | ${f2(m.served)} |`;
  out.push(row("quiet", r.quiet), row("quiet again (no writes: the measure's own spread)", r.again), row(busy, r.busy));
  console.log(out.slice(-3).join("\n"));
  const seconds = (m: Phase) => m.perSecond.map(f1).join(", ");
  console.log(`  each second's p99, ms: quiet ${seconds(r.quiet)}; quiet again ${seconds(r.again)}; under writes ${seconds(r.busy)}`);
  console.log(`  seconds in which a background job ran: quiet ${r.quiet.jobSeconds}, quiet again ${r.again.jobSeconds}, under writes ${r.busy.jobSeconds} (of ${D})`);
}

/** The searches' tail under writes against the quiet table's, in each round, and the 1.5x bound on the median round. */
function tailBound(rounds: TailRound[]): string {
  // A phase's worst second against the quiet phase's median second: above 1 even for two quiet
  // phases (the worst of several seconds, on a shared machine), so the quiet pair gives the floor.
  const worstOf = (m: Phase, r: TailRound) => Math.max(...m.perSecond) / median(r.quiet.perSecond);
  const worst = rounds.map((r) => worstOf(r.busy, r));
  const floor = rounds.map((r) => worstOf(r.again, r));
  const p99s = rounds.map((r) => r.busy.p99 / r.quiet.p99);
  const range = (xs: number[]) => `rounds ${xs.map(f2).join(", ")}`;
  return (
    `p99 ${f2(median(p99s))}x the quiet table's (${range(p99s)}), the worst second's ${f2(median(worst))}x the quiet seconds' median (${range(worst)}; bound ≤ 1.5: ${bound(median(worst) <= 1.5)}; ` +
    `the same measure of a second quiet phase: ${f2(median(floor))}x, ${range(floor)})`
  );
}

/**
 * The serving index under the load-test mix: an open loop of --mix-rate requests a second (sent
 * whether or not earlier ones were answered), vector searches alone, then with every tenth an
 * insert of 20 rows (JSON); the searches' tail second by second against the quiet table's, as the
 * write stream's. The rows are deleted after each round.
 */
async function loadTestMix(w: Workload, url: URL, out: string[], bounds: string[]): Promise<void> {
  const rows = 20;
  console.log(`\nthe serving index under the load-test mix: an open loop of ${MIX_RATE} requests/s, searches alone, then 10% of them inserts of ${rows} rows (${w.name}), ${ROUNDS} rounds`);
  const rounds: (TailRound & { inserted: number; errors: number })[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const first = 20_000_000 + i * 1_000_000;
    let next = first;
    const search = (j: number): OpenLoopRequest => ({ kind: "search", method: "POST", path: QUERY, headers: HEADERS, body: w.ops.vector.bodies[j % w.ops.vector.bodies.length] });
    const insert = (): OpenLoopRequest => {
      const batch = Array.from({ length: rows }, (_, k) => ({ id: next + k, text: "mix", category: "beta", vector: w.vectors[(next + k) % w.vectors.length] }));
      next += rows;
      return { kind: "insert", method: "POST", path: `/v1/table/${BENCH_TABLE}/insert`, headers: HEADERS, body: Buffer.from(JSON.stringify(batch)) };
    };
    await settle(url);
    const quiet = await watchingJobs(url, () => mixPhase(url, search));
    const again = await watchingJobs(url, () => mixPhase(url, search));
    const busy = await watchingJobs(url, () => mixPhase(url, (j) => (j % 10 === 9 ? insert() : search(j))));
    const conn = new Conn(url.hostname, Number(url.port));
    const del = await conn.request("POST", `/v1/table/${BENCH_TABLE}/delete`, HEADERS, Buffer.from(JSON.stringify({ predicate: `id >= ${first}` })));
    conn.close();
    if (del.status !== 200) throw new Error(`delete: ${del.status} ${del.body.toString().slice(0, 200)}`);
    const r = { quiet, again, busy, inserted: busy.inserts * rows, errors: quiet.errors + again.errors + busy.errors };
    rounds.push(r);
    report(w, i, r, `${MIX_RATE}/s, 10% inserts of ${rows} rows (${r.inserted} rows)`, out);
  }
  const errors = rounds.reduce((a, r) => a + r.errors, 0);
  bounds.push(`${w.name}: under the load-test mix (${MIX_RATE}/s, 10% inserts of ${rows} rows), ${tailBound(rounds)}; requests not answered 2xx: ${errors} (bound 0: ${bound(errors === 0)})`);
}

/** D seconds of the open loop: its searches' tail, the share the serving index answered (from /metrics), inserts answered and requests not answered 2xx. */
async function mixPhase(url: URL, next: (i: number) => OpenLoopRequest): Promise<Searched & { inserts: number; errors: number }> {
  const paths = async () => [await metric(url, "quiver_search_path_total", { path: "serving" }), await metric(url, "quiver_search_path_total")];
  const [served, all] = await paths();
  const r = await openLoop(Number(url.port), MIX_RATE, D, next);
  const [served2, all2] = await paths();
  const at = r.sentIn.get("search") ?? [];
  // The last requests of a phase may leave just after its last second: they count in that second.
  const samples = (r.latencies.get("search") ?? []).map((ms, k) => ({ at: Math.min(at[k], D - 1), ms }));
  return { ...tail(samples, D), served: (served2 - served) / (all2 - all), inserts: r.latencies.get("insert")?.length ?? 0, errors: [...r.errors.values()].reduce((a, n) => a + n, 0) };
}

interface StreamRound extends TailRound {
  inserted: number;
  /** Seconds the inserts went on after the searches' phase. */
  writeS: number;
  missed: number;
  /** Deleted rows a search at the delete's version answered (-1: it failed). */
  left: number;
}

async function streamRound(w: Workload, url: URL, first: number, writers: number, each: number): Promise<StreamRound> {
  await settle(url);
  const quiet = await watchingJobs(url, () => timedSearches(w, url, C, D));
  const again = await watchingJobs(url, () => timedSearches(w, url, C, D));
  let missed = 0;
  let inserted = 0;
  const { arrow } = await import("../src/engine/arrow.js");
  const writing = Promise.all(
    Array.from({ length: writers }, async (_, k) => {
      const conn = new Conn(url.hostname, Number(url.port));
      try {
        for (let i = 0; i < each; i++) {
          const id = first + k * each + i;
          const vector = w.vectors[(k * each + i) % w.vectors.length];
          const ins = await conn.request("POST", `/v1/table/${BENCH_TABLE}/insert`, HEADERS, Buffer.from(JSON.stringify([{ id, text: "stream", category: "beta", vector }])));
          if (ins.status !== 200) throw new Error(`insert: ${ins.status} ${ins.body.toString().slice(0, 200)}`);
          inserted++;
          const token = `x-quiver-min-version: ${JSON.parse(ins.body.toString()).version}\r\n`;
          const r = await conn.request("POST", QUERY, HEADERS + token, Buffer.from(JSON.stringify({ vector: { single_vector: vector }, k: 1, filter: `id = ${id}`, columns: { column_names: ["id"] } })));
          if (r.status !== 200 || Number(arrow.tableFromIPC(r.body).getChild("id")?.get(0)) !== id) missed++;
        }
      } finally {
        conn.close();
      }
    }),
  );
  const busy = await watchingJobs(url, () => timedSearches(w, url, C, D));
  const started = performance.now();
  await writing;
  const writeS = (performance.now() - started) / 1000;
  const conn = new Conn(url.hostname, Number(url.port));
  const del = await conn.request("POST", `/v1/table/${BENCH_TABLE}/delete`, HEADERS, Buffer.from(JSON.stringify({ predicate: `id >= ${first}` })));
  const token = `x-quiver-min-version: ${JSON.parse(del.body.toString()).version}\r\n`;
  const after = await conn.request("POST", QUERY, HEADERS + token, Buffer.from(JSON.stringify({ vector: { single_vector: w.vectors[0] }, k: 10, filter: `id >= ${first}`, columns: { column_names: ["id"] } })));
  conn.close();
  return { quiet, again, busy, inserted, writeS, missed, left: after.status === 200 ? arrow.tableFromIPC(after.body).numRows : -1 };
}

/** Describe against the bare uWS echo, alternating rounds: ratios by req/s and by server CPU. */
async function describeAgainstEcho(w: Workload, servers: Servers, echo: QuiverProcess, bounds: string[]): Promise<void> {
  console.log(`\nnamespace describe (API key) against a bare uWS echo, ${ECHO_C} connections, ${ROUNDS} alternating rounds`);
  console.log(header());
  const cheap: Record<"describe" | "echo", (Result & { cpuUs?: number })[]> = { describe: [], echo: [] };
  for (let i = 0; i < ROUNDS; i++) {
    cheap.describe.push(await httpPhase(w, servers.batched, "describe", "describe", ECHO_C, { pid: servers.batchedPid }));
    cheap.echo.push(await httpPhase(w, new URL(echo.url), "bare uWS echo", "describe", ECHO_C, { pid: echo.proc.pid }));
  }
  const [dm, em] = [medians(cheap.describe), medians(cheap.echo)];
  const cpu = (rs: { cpuUs?: number }[]) => median(rs.map((r) => r.cpuUs ?? NaN));
  const [dc, ec] = [cpu(cheap.describe), cpu(cheap.echo)];
  console.log(`describe ${f0(dm.qps)} req/s, echo ${f0(em.qps)} req/s: ratio ${(dm.qps / em.qps).toFixed(3)} (this client's ceiling shapes both)`);
  console.log(`server CPU per request: describe ${f1(dc)} µs, echo ${f1(ec)} µs: describe's throughput ceiling ${(ec / dc).toFixed(3)} of the echo's`);
  bounds.push(`describe: ${f2(dm.qps / em.qps)} of the echo by req/s, ${f2(ec / dc)} by server CPU (bound ≥ 0.40: ${bound(dm.qps / em.qps >= 0.4 && ec / dc >= 0.4)})`);
}

/** A section's markdown table; a section that measured nothing (left out by its flags) prints nothing. */
function table(title: string, columns: string[], rows: string[]): void {
  if (rows.length === 0) return;
  console.log(`\n${title}`);
  console.log(`|${columns.map((c) => (c ? ` ${c} ` : " ")).join("|")}|`);
  console.log(`|${columns.map(() => "---|").join("")}`);
  for (const r of rows) console.log(r);
}

async function main() {
  console.log(`machine: ${cpus()[0]?.model ?? "?"} x ${availableParallelism()} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}, ${new Date().toISOString()}`);
  console.log(`k=${K}, nprobes=${NPROBES}; ${D} s phases (+${WARM} s warm-up), ${ROUNDS} alternating rounds`);
  const sets: Workload[] = [workload(datasetName(spec), dataDir, spec)];
  if (values["gaussian-dir"]) {
    const dir = String(values["gaussian-dir"]);
    const gspec: Spec = { ...spec, clusters: Number(values["gaussian-clusters"]) };
    if (!existsSync(path.join(dir, `${BENCH_TABLE}.lance`))) await generate(dir, gspec, rowIds);
    sets.push(workload(datasetName(gspec), dir, gspec));
  }
  const common = values.workers ? ["--workers", String(values.workers)] : [];
  const batchedArgs = [
    ...(values["batch-max"] ? ["--batch-max", String(values["batch-max"])] : []),
    ...(values["batch-slots"] ? ["--batch-slots", String(values["batch-slots"])] : []),
  ];
  const kindRows: string[] = [];
  const levelRows: string[] = [];
  const workerRows: string[] = [];
  const streamRows: string[] = [];
  const mixRows: string[] = [];
  const bounds: string[] = [];
  for (const [n, w] of sets.entries()) {
    const version = await (await (await lancedb.connectNamespace("dir", { root: w.dataDir })).openTable(BENCH_TABLE, [])).version();
    const stable = await usesStableRowIds(path.join(w.dataDir, `${BENCH_TABLE}.lance`), version);
    console.log(`\n== dataset: ${w.name}, ${w.dataDir} (${spec.rows} x ${spec.dim}; row ids: ${stable ? "stable" : "addresses"})`);
    const db = await lancedb.connectNamespace("dir", { root: w.dataDir });
    await db.createNamespace([NS], { mode: "exist_ok", properties: { owner: "bench" } } as never).catch(() => undefined);
    const table = await db.openTable(BENCH_TABLE);
    const procs: QuiverProcess[] = [];
    const states: string[] = [];
    try {
      const engineOnly = ["--serving", "off"];
      const batched = await startQuiver(w.dataDir, KEY, [...common, ...engineOnly, ...batchedArgs]);
      procs.push(batched);
      const unbatched = await startQuiver(w.dataDir, KEY, [...common, ...engineOnly, "--batch-max", "0"]);
      procs.push(unbatched);
      const state = mkdtempSync(path.join(tmpdir(), "quiver-bench-state-"));
      states.push(state);
      const serving = await startQuiver(w.dataDir, KEY, [...common, "--state-dir", state]);
      procs.push(serving);
      const servers: Servers = { batched: new URL(batched.url), unbatched: new URL(unbatched.url), batchedPid: batched.proc.pid!, serving: new URL(serving.url) };
      console.log(`Quiver batched ${batched.url} (${batchedArgs.join(" ") || "default --batch-max, --batch-slots"}), unbatched ${unbatched.url} (--batch-max 0), both --serving off; serving index ${serving.url}`);
      const ready = await servingReady(w, servers.serving);
      console.log(`${ready}\n`);
      bounds.push(`${w.name}: ${ready}`);

      for (const refine of [0, 10]) {
        const extra = refine ? { refine_factor: refine } : {};
        const [b, u] = [await recall(w, servers.batched, extra), await recall(w, servers.unbatched, extra)];
        const same = sameAnswers(b, u);
        // The engine breaks ties among equal (quantised) distances differently in a multi-vector
        // call than in a call of one: such answers have the same distances, not the same ids.
        const line = `recall@10 (nprobes ${NPROBES}, refine_factor ${refine}), 50 queries at once: batched ${b.recall.toFixed(3)}, unbatched ${u.recall.toFixed(3)}; same ids in ${same.ids} of 50 answers, same distances in ${same.distances}`;
        console.log(line);
        bounds.push(`${w.name}: ${line} (${b.recall === u.recall ? "identical" : "DIFFERENT"})`);
      }
      // The serving index against the engine's exact search (every row measured), unfiltered and filtered.
      for (const extra of [{}, { filter: FILTER }]) {
        const [sv, en] = [await recall(w, servers.serving, extra, 50, servers.batched), await recall(w, servers.unbatched, extra, 50, servers.batched)];
        const line = `recall@10${"filter" in extra ? ` of ${FILTER} (prefilter)` : ""} against exact search, 50 queries at once: serving index ${sv.recall.toFixed(3)}, engine (nprobes ${NPROBES}) ${en.recall.toFixed(3)}`;
        console.log(line);
        bounds.push(`${w.name}: ${line} (bound ≥ 0.95: ${bound(sv.recall >= 0.95)})`);
      }

      if (n === 0) {
        console.log(`\nother operations, ${C} in flight`);
        console.log(header());
        for (const op of String(values.ops).split(",").filter(Boolean)) {
          await httpPhase(w, servers.batched, `${op} batched`, op, C);
          if (op === "multi_vector") await httpPhase(w, servers.unbatched, `${op} unbatched`, op, C);
        }
        if (String(values.ops).split(",").includes("describe")) {
          const echo = await startEcho();
          procs.push(echo);
          await describeAgainstEcho(w, servers, echo, bounds);
        }
      }
      await kinds(w, table, servers, kindRows, bounds);
      await levels(w, table, servers, levelRows, bounds);
      if (values["write-stream"] !== "off") {
        await writeStream(w, servers.serving, streamRows, bounds);
        await loadTestMix(w, servers.serving, mixRows, bounds);
      }
      await serving.stop();
      await workerCounts(w, state, workerRows, bounds);
    } finally {
      for (const p of procs) await p.stop();
      for (const d of states) rmSync(d, { recursive: true, force: true });
    }
  }
  table(`query kinds, ${C} in flight, medians of ${ROUNDS} alternating rounds (ratios to the in-process engine in the same round)`, ["data", "kind", "", "QPS", "p50 ms", "p99 ms", "QPS / per call", "QPS / limit", "p99 ratio"], kindRows);
  table(
    `vector search, medians of ${ROUNDS} alternating rounds (ratios to the in-process engine at the same number in flight: one search a call, and the multi-vector limit)`,
    ["data", "in flight", "", "QPS", "p50 ms", "p99 ms", "QPS / per call", "QPS / limit", "p50 ratio", "p99 ratio"],
    levelRows,
  );
  table(`the serving index by worker count, medians of ${ROUNDS} alternating rounds`, ["data", "in flight", "", "QPS", "p50 ms", "p99 ms", "QPS / one worker"], workerRows);
  table(`the serving index under a write stream, ${C} searches in flight, ${D} s phases`, ["data", "round", "", "QPS", "p50 ms", "p99 ms", "worst second's p99 ms", "share served by the index"], streamRows);
  table(`the serving index under the load-test mix, an open loop of ${MIX_RATE} requests/s, ${D} s phases`, ["data", "round", "", "searches/s", "p50 ms", "p99 ms", "worst second's p99 ms", "share served by the index"], mixRows);
  console.log("\nthe issues' bounds (medians):");
  for (const b of bounds) console.log(`  ${b}`);
}

await main();
