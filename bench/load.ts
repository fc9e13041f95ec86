// Load harness, one run, closed loops on keep-alive connections. Dataset: node dist/bench/generate.js
// (same flags); with --gaussian-dir, also a clustered Gaussian dataset there (generated on first
// use), since what batching gains depends on the data. For each dataset it starts two Quivers,
// one with query batching (the defaults) and one without (--batch-max 0), and reports:
//   1. recall@10 of indexed search against exact search, 50 queries sent at once (so they batch);
//   2. query kinds against LanceDB in process at --concurrency in flight, alternating rounds:
//      filtered vector search (batched, unbatched, the engine one search a call and its
//      multi-vector limit), full-text search and hybrid search (the engine one search a call);
//   3. vector search at each concurrency in --levels: Quiver batched, Quiver unbatched and LanceDB
//      in process (one search a call, toArrow; and one multi-vector call of as many vectors as
//      there are clients, the engine's limit for batching), alternating rounds; medians, ratios,
//      the bounds, and from the batched server's /metrics the batch sizes, the engine's
//      idle time between batches and the searches' wait.
// On the first dataset also: other operations (multi-vector search, count, describe, a mix), and
// namespace describe against a bare uWS echo, alternating rounds, as ratios of req/s and of server
// CPU per request.
//
//   node dist/bench/load.js --data-dir ./bench-data [--gaussian-dir ./gaussian-data] [--levels 1,8,32,128]
//        [--rounds 3] [--duration 10] [--warmup 2] [--concurrency 32] [--echo-concurrency 64]
//        [--kinds vector_filter,fts,hybrid] [--ops multi_vector,count,describe,mix] [--workers N]
//        [--batch-max N] [--batch-slots N]
import * as lancedb from "@lancedb/lancedb";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { queryVectors, type Spec } from "./dataset.js";
import { BENCH_TABLE, datasetArgs, datasetName, generate } from "./generate.js";
import { Conn } from "./http-client.js";
import { startEcho, startQuiver, type QuiverProcess } from "./quiver-process.js";
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
    k: { type: "string", default: "10" },
    rounds: { type: "string", default: "3" },
    nprobes: { type: "string", default: "20" },
  },
});
const { dataDir, spec } = datasetArgs();
const LEVELS = String(values.levels).split(",").map(Number);
const C = Number(values.concurrency);
const ECHO_C = Number(values["echo-concurrency"]);
const D = Number(values.duration);
const WARM = Number(values.warmup);
const K = Number(values.k);
const NPROBES = Number(values.nprobes);
const KEY = "bench-admin-key";
const NS = "benchns";
const ROUNDS = Number(values.rounds);
const HEADERS = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
const QUERY = `/v1/table/${BENCH_TABLE}/query`;

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

/** CPU seconds a process has used (user + system), from /proc; null where there is no /proc. */
function cpuSeconds(pid: number): number | null {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}

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
async function httpPhase(w: Workload, url: URL, name: string, op: string, c: number, opts: { pid?: number; batches?: boolean } = {}): Promise<Result & { cpuUs?: number }> {
  const pick = pickFor(w, op);
  const conns = Array.from({ length: c }, () => new Conn(url.hostname, Number(url.port)));
  const phase = (n: string, s: number) =>
    closedLoop(n, c, s, async (loop, i) => {
      const { path: p, body } = pick(loop, i);
      const r = await conns[loop].request("POST", p, HEADERS, body);
      return r.status === 200 ? null : `${r.status} ${r.body.toString().slice(0, 120)}`;
    });
  try {
    if (WARM > 0) await phase(name, WARM);
    const m0 = opts.batches ? await batchSeries(url) : null;
    const cpu0 = opts.pid ? cpuSeconds(opts.pid) : null;
    const r = await phase(name, D);
    const cpu1 = opts.pid ? cpuSeconds(opts.pid) : null;
    const cpuUs = cpu0 !== null && cpu1 !== null && r.ok ? ((cpu1 - cpu0) * 1e6) / r.ok : undefined;
    console.log(line(r) + (cpuUs !== undefined ? `  server CPU ${cpuUs.toFixed(1)} µs/request` : ""));
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
async function recall(w: Workload, url: URL, extra: object, n = 50): Promise<{ recall: number; answers: { ids: number[]; distances: number[] }[] }> {
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
  for (const [i, v] of w.vectors.slice(0, n).entries()) {
    const exact = new Set((await query(conns[0], { ...base(v), bypass_vector_index: true })).ids);
    hits += answers[i].ids.filter((id) => exact.has(id)).length;
  }
  conns.forEach((c) => c.close());
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
}

/** Filtered vector, full-text and hybrid search at C in flight against the engine in process. */
async function kinds(w: Workload, table: lancedb.Table, servers: Servers, out: string[], bounds: string[]): Promise<void> {
  for (const op of String(values.kinds).split(",").filter(Boolean)) {
    console.log(`\n${op}, ${C} in flight, ${ROUNDS} alternating rounds (${w.name})`);
    console.log(header());
    const rounds: Record<"batched" | "unbatched" | "engine" | "limit", Result[]> = { batched: [], unbatched: [], engine: [], limit: [] };
    const multi = op === "vector_filter";
    for (let i = 0; i < ROUNDS; i++) {
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
    const rounds: Record<"batched" | "unbatched" | "engine" | "limit", Result[]> = { batched: [], unbatched: [], engine: [], limit: [] };
    for (let i = 0; i < ROUNDS; i++) {
      rounds.batched.push(await httpPhase(w, servers.batched, `quiver batched c=${c}`, "vector", c, { batches: true }));
      rounds.unbatched.push(await httpPhase(w, servers.unbatched, `quiver unbatched c=${c}`, "vector", c));
      rounds.engine.push(await enginePhase(w, table, "vector", c));
      rounds.limit.push(await limitPhase(w, table, c));
    }
    const [b, u, e, l] = [medians(rounds.batched), medians(rounds.unbatched), medians(rounds.engine), medians(rounds.limit)];
    const row = (name: string, m: typeof b) =>
      `| ${w.name} | ${c} | ${name} | ${f0(m.qps)} | ${f1(m.p50)} | ${f1(m.p99)} | ${f2(m.qps / e.qps)} | ${f2(m.qps / l.qps)} | ${f2(m.p50 / e.p50)} | ${f2(m.p99 / e.p99)} |`;
    out.push(row("Quiver, batched", b), row("Quiver, --batch-max 0", u), row("LanceDB in process, one search a call", e), row(`LanceDB in process, ${c} vectors a call (the limit; QPS in vectors)`, l));
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

async function main() {
  console.log(`machine: ${cpus()[0]?.model ?? "?"} x ${availableParallelism()} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}, ${new Date().toISOString()}`);
  console.log(`k=${K}, nprobes=${NPROBES}; ${D} s phases (+${WARM} s warm-up), ${ROUNDS} alternating rounds`);
  const sets: Workload[] = [workload(datasetName(spec), dataDir, spec)];
  if (values["gaussian-dir"]) {
    const dir = String(values["gaussian-dir"]);
    const gspec: Spec = { ...spec, clusters: 1000 };
    if (!existsSync(path.join(dir, `${BENCH_TABLE}.lance`))) await generate(dir, gspec);
    sets.push(workload(datasetName(gspec), dir, gspec));
  }
  const common = values.workers ? ["--workers", String(values.workers)] : [];
  const batchedArgs = [
    ...(values["batch-max"] ? ["--batch-max", String(values["batch-max"])] : []),
    ...(values["batch-slots"] ? ["--batch-slots", String(values["batch-slots"])] : []),
  ];
  const kindRows: string[] = [];
  const levelRows: string[] = [];
  const bounds: string[] = [];
  for (const [n, w] of sets.entries()) {
    console.log(`\n== dataset: ${w.name}, ${w.dataDir} (${spec.rows} x ${spec.dim})`);
    const db = await lancedb.connectNamespace("dir", { root: w.dataDir });
    await db.createNamespace([NS], { mode: "exist_ok", properties: { owner: "bench" } } as never).catch(() => undefined);
    const table = await db.openTable(BENCH_TABLE);
    const procs: QuiverProcess[] = [];
    try {
      const batched = await startQuiver(w.dataDir, KEY, [...common, ...batchedArgs]);
      procs.push(batched);
      const unbatched = await startQuiver(w.dataDir, KEY, [...common, "--batch-max", "0"]);
      procs.push(unbatched);
      const servers: Servers = { batched: new URL(batched.url), unbatched: new URL(unbatched.url), batchedPid: batched.proc.pid! };
      console.log(`Quiver batched ${batched.url} (${batchedArgs.join(" ") || "default --batch-max, --batch-slots"}), unbatched ${unbatched.url} (--batch-max 0)\n`);

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

      if (n === 0) {
        console.log(`\nother operations, ${C} in flight`);
        console.log(header());
        for (const op of String(values.ops).split(",").filter(Boolean)) {
          await httpPhase(w, servers.batched, `${op} batched`, op, C);
          if (op === "multi_vector") await httpPhase(w, servers.unbatched, `${op} unbatched`, op, C);
        }
        const echo = await startEcho();
        procs.push(echo);
        await describeAgainstEcho(w, servers, echo, bounds);
      }
      await kinds(w, table, servers, kindRows, bounds);
      await levels(w, table, servers, levelRows, bounds);
    } finally {
      for (const p of procs) await p.stop();
    }
  }
  console.log(`\nquery kinds, ${C} in flight, medians of ${ROUNDS} alternating rounds (ratios to the in-process engine in the same round)`);
  console.log("| data | kind | | QPS | p50 ms | p99 ms | QPS / per call | QPS / limit | p99 ratio |");
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const r of kindRows) console.log(r);
  console.log(`\nvector search, medians of ${ROUNDS} alternating rounds (ratios to the in-process engine at the same number in flight: one search a call, and the multi-vector limit)`);
  console.log("| data | in flight | | QPS | p50 ms | p99 ms | QPS / per call | QPS / limit | p50 ratio | p99 ratio |");
  console.log("|---|---|---|---|---|---|---|---|---|---|");
  for (const r of levelRows) console.log(r);
  console.log("\nthe issue's bounds (medians):");
  for (const b of bounds) console.log(`  ${b}`);
}

await main();
