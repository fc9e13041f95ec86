// Load harness, one run, closed loops on keep-alive connections. Dataset: node dist/bench/generate.js
// (same flags). It starts two Quivers on the data directory, one with query batching (the default
// --batch-max) and one without (--batch-max 0), and a bare uWS echo server, then reports:
//   1. recall@10 of indexed search against exact search, 50 queries sent at once (so they batch);
//   2. other operations (filtered vector search, multi-vector search, full-text, count, describe, a mix);
//   3. namespace describe against the bare uWS echo, alternating rounds, as ratios of req/s and of
//      server CPU per request;
//   4. vector search at each concurrency in --levels: Quiver batched, Quiver unbatched and LanceDB
//      in-process (one search per call, toArrow; and one multi-vector call of as many vectors as
//      there are clients, the engine's limit for batching), alternating rounds; medians and ratios.
//
//   node dist/bench/load.js --data-dir ./bench-data [--levels 1,8,32,128] [--rounds 3]
//        [--duration 10] [--warmup 2] [--concurrency 32] [--echo-concurrency 64]
//        [--ops vector_filter,multi_vector,fts,count,describe,mix] [--workers N] [--batch-max N]
import * as lancedb from "@lancedb/lancedb";
import { readFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { queryVectors } from "./dataset.js";
import { BENCH_TABLE, datasetArgs } from "./generate.js";
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
    ops: { type: "string", default: "vector_filter,multi_vector,fts,count,describe,mix" },
    workers: { type: "string" },
    "batch-max": { type: "string" },
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

const vectors = queryVectors({ dim: spec.dim, rank: spec.rank, seed: spec.seed }, 1000).map((v) => Array.from(v));

/** Request bodies, serialised once so the client spends its time on the wire only. */
function bodies(extra: object): Buffer[] {
  return vectors.map((v) => Buffer.from(JSON.stringify({ vector: { single_vector: v }, k: K, nprobes: NPROBES, ...extra })));
}
type Op = { path: string; bodies: Buffer[] };
const ops: Record<string, Op> = {
  vector: { path: QUERY, bodies: bodies({}) },
  vector_filter: { path: QUERY, bodies: bodies({ filter: "category = 'beta'" }) },
  multi_vector: {
    path: QUERY,
    bodies: vectors.map((_, i) =>
      Buffer.from(JSON.stringify({ vector: { multi_vector: [0, 1, 2, 3].map((j) => vectors[(i + j * 250) % vectors.length]) }, k: K, nprobes: NPROBES })),
    ),
  },
  fts: {
    path: QUERY,
    bodies: ["apple river", "quick brown fox", "nebula", "summit willow", "piano"].map((s) =>
      Buffer.from(JSON.stringify({ full_text_query: { string_query: { query: s } }, k: K })),
    ),
  },
  count: { path: `/v1/table/${BENCH_TABLE}/count_rows`, bodies: [Buffer.from(JSON.stringify({ predicate: "category = 'beta'" }))] },
  describe: { path: `/v1/namespace/${NS}/describe`, bodies: [Buffer.from("{}")] },
};
const MIX = ["vector", "vector_filter", "fts", "count", "describe"];

const pickFor = (op: string) => (loop: number, i: number) => {
  const o = ops[op === "mix" ? MIX[(loop + i) % MIX.length] : op];
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

/**
 * One closed-loop phase over HTTP (after a warm-up of the same), `c` connections. With the
 * server's `pid`, also the server's CPU time per answered request (µs), which the client's own
 * speed does not cap.
 */
async function httpPhase(url: URL, name: string, op: string, c: number, pid?: number): Promise<Result & { cpuUs?: number }> {
  const pick = pickFor(op);
  const conns = Array.from({ length: c }, () => new Conn(url.hostname, Number(url.port)));
  const phase = (n: string, s: number) =>
    closedLoop(n, c, s, async (loop, i) => {
      const { path: p, body } = pick(loop, i);
      const r = await conns[loop].request("POST", p, HEADERS, body);
      return r.status === 200 ? null : `${r.status} ${r.body.toString().slice(0, 120)}`;
    });
  try {
    if (WARM > 0) await phase(name, WARM);
    const cpu0 = pid ? cpuSeconds(pid) : null;
    const r = await phase(name, D);
    const cpu1 = pid ? cpuSeconds(pid) : null;
    const cpuUs = cpu0 !== null && cpu1 !== null && r.ok ? ((cpu1 - cpu0) * 1e6) / r.ok : undefined;
    console.log(line(r) + (cpuUs !== undefined ? `  server CPU ${cpuUs.toFixed(1)} µs/request` : ""));
    return { ...r, cpuUs };
  } finally {
    conns.forEach((x) => x.close());
  }
}

/** The same vector workload in this process, straight into LanceDB, one search per call. */
async function enginePhase(table: lancedb.Table, c: number): Promise<Result> {
  const phase = (n: string, s: number) =>
    closedLoop(n, c, s, async (loop, i) => {
      await table.vectorSearch(vectors[(loop * 31 + i) % vectors.length]).limit(K).nprobes(NPROBES).toArrow();
      return null;
    });
  if (WARM > 0) await phase("engine", WARM);
  const r = await phase(`engine vector c=${c}`, D);
  console.log(line(r));
  return r;
}

/**
 * The engine's own limit for batched search: one multi-vector call of `c` vectors at a time (so `c`
 * vectors in flight, as with `c` clients), in this process. Its QPS is counted in vectors.
 */
async function limitPhase(table: lancedb.Table, c: number): Promise<Result> {
  const phase = (n: string, s: number) =>
    closedLoop(n, 1, s, async (_loop, i) => {
      const vs = Array.from({ length: c }, (_, j) => vectors[(i * c + j) % vectors.length]);
      await table.vectorSearch(c === 1 ? vs[0] : vs).limit(K).nprobes(NPROBES).toArrow();
      return null;
    });
  if (WARM > 0) await phase("engine multi-vector", WARM);
  const r = await phase(`engine ${c} vectors a call`, D);
  const counted = { ...r, ok: r.ok * c };
  console.log(`${line(r)}  (${f0(summary(counted).qps)} vectors/s)`);
  return counted;
}

/** recall@10 with all `n` indexed queries in flight at once (so a batching server batches them). */
async function recall(url: URL, extra: object, n = 50): Promise<number> {
  const conns = Array.from({ length: n }, () => new Conn(url.hostname, Number(url.port)));
  const { arrow } = await import("../src/engine/arrow.js");
  const ids = async (conn: Conn, body: object) => {
    const r = await conn.request("POST", QUERY, HEADERS, Buffer.from(JSON.stringify(body)));
    if (r.status !== 200) throw new Error(`recall query: ${r.status} ${r.body}`);
    return Array.from(arrow.tableFromIPC(r.body).getChild("id")!.toArray() as Int32Array);
  };
  const base = (v: number[]) => ({ vector: { single_vector: v }, k: 10, columns: { column_names: ["id"] } });
  const got = await Promise.all(vectors.slice(0, n).map((v, i) => ids(conns[i], { ...base(v), nprobes: NPROBES, ...extra })));
  let hits = 0;
  for (const [i, v] of vectors.slice(0, n).entries()) {
    const exact = new Set(await ids(conns[0], { ...base(v), bypass_vector_index: true }));
    hits += got[i].filter((id) => exact.has(id)).length;
  }
  conns.forEach((c) => c.close());
  return hits / (n * 10);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Median over rounds of each figure (QPS and each percentile taken separately). */
function medians(rs: Result[]) {
  const ss = rs.map(summary);
  return { qps: median(ss.map((s) => s.qps)), p50: median(ss.map((s) => s.p50)), p99: median(ss.map((s) => s.p99)) };
}

const f0 = (x: number) => x.toFixed(0);
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);

async function main() {
  console.log(`machine: ${cpus()[0]?.model ?? "?"} x ${availableParallelism()} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  console.log(`dataset: ${dataDir} (${spec.rows} x ${spec.dim}); k=${K}, nprobes=${NPROBES}; ${D} s phases (+${WARM} s warm-up), ${ROUNDS} alternating rounds`);
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  await db.createNamespace([NS], { mode: "exist_ok", properties: { owner: "bench" } } as never).catch(() => undefined);
  const table = await db.openTable(BENCH_TABLE);
  const common = values.workers ? ["--workers", String(values.workers)] : [];
  const procs: QuiverProcess[] = [];
  try {
    const batchedArgs = values["batch-max"] ? ["--batch-max", String(values["batch-max"])] : [];
    const batched = await startQuiver(dataDir, KEY, [...common, ...batchedArgs]);
    procs.push(batched);
    const unbatched = await startQuiver(dataDir, KEY, [...common, "--batch-max", "0"]);
    procs.push(unbatched);
    const echo = await startEcho();
    procs.push(echo);
    const servers = { batched: new URL(batched.url), unbatched: new URL(unbatched.url) };
    console.log(`Quiver batched ${batched.url} (${batchedArgs.join(" ") || "default --batch-max"}), unbatched ${unbatched.url} (--batch-max 0), echo ${echo.url}\n`);

    for (const refine of [0, 10]) {
      const extra = refine ? { refine_factor: refine } : {};
      const [b, u] = [await recall(servers.batched, extra), await recall(servers.unbatched, extra)];
      console.log(`recall@10 (nprobes ${NPROBES}, refine_factor ${refine}), 50 queries at once: batched ${b.toFixed(3)}, unbatched ${u.toFixed(3)}`);
    }

    console.log(`\nother operations, ${C} in flight`);
    console.log(header());
    for (const op of String(values.ops).split(",").filter(Boolean)) {
      await httpPhase(servers.batched, `${op} batched`, op, C);
      if (op === "vector_filter" || op === "multi_vector") await httpPhase(servers.unbatched, `${op} unbatched`, op, C);
    }

    console.log(`\nnamespace describe (API key) against a bare uWS echo, ${ECHO_C} connections, ${ROUNDS} alternating rounds`);
    console.log(header());
    const cheap: Record<"describe" | "echo", (Result & { cpuUs?: number })[]> = { describe: [], echo: [] };
    for (let i = 0; i < ROUNDS; i++) {
      cheap.describe.push(await httpPhase(servers.batched, "describe", "describe", ECHO_C, batched.proc.pid));
      cheap.echo.push(await httpPhase(new URL(echo.url), "bare uWS echo", "describe", ECHO_C, echo.proc.pid));
    }
    const [dm, em] = [medians(cheap.describe), medians(cheap.echo)];
    const cpu = (rs: { cpuUs?: number }[]) => median(rs.map((r) => r.cpuUs ?? NaN));
    const [dc, ec] = [cpu(cheap.describe), cpu(cheap.echo)];
    console.log(`describe ${f0(dm.qps)} req/s, echo ${f0(em.qps)} req/s: ratio ${(dm.qps / em.qps).toFixed(3)} (this client's ceiling shapes both)`);
    console.log(`server CPU per request: describe ${f1(dc)} µs, echo ${f1(ec)} µs: describe's throughput ceiling ${(ec / dc).toFixed(3)} of the echo's`);

    const table_: string[] = [];
    for (const c of LEVELS) {
      console.log(`\nvector search, ${c} in flight`);
      console.log(header());
      const rounds: Record<"batched" | "unbatched" | "engine" | "limit", Result[]> = { batched: [], unbatched: [], engine: [], limit: [] };
      for (let i = 0; i < ROUNDS; i++) {
        rounds.batched.push(await httpPhase(servers.batched, `quiver batched c=${c}`, "vector", c));
        rounds.unbatched.push(await httpPhase(servers.unbatched, `quiver unbatched c=${c}`, "vector", c));
        rounds.engine.push(await enginePhase(table, c));
        rounds.limit.push(await limitPhase(table, c));
      }
      const [b, u, e, l] = [medians(rounds.batched), medians(rounds.unbatched), medians(rounds.engine), medians(rounds.limit)];
      const row = (name: string, m: typeof b) =>
        `| ${c} | ${name} | ${f0(m.qps)} | ${f1(m.p50)} | ${f1(m.p99)} | ${f2(m.qps / e.qps)} | ${f2(m.qps / l.qps)} | ${f2(m.p50 / e.p50)} | ${f2(m.p99 / e.p99)} |`;
      table_.push(row("Quiver, batched", b), row("Quiver, --batch-max 0", u), row("LanceDB in-process, one search a call", e), row(`LanceDB in-process, ${c} vectors a call (the limit; QPS in vectors)`, l));
    }
    console.log(`\nvector search, medians of ${ROUNDS} alternating rounds (ratios to the in-process engine at the same number in flight: one search a call, and the multi-vector limit)`);
    console.log("| in flight | | QPS | p50 ms | p99 ms | QPS / per call | QPS / limit | p50 ratio | p99 ratio |");
    console.log("|---|---|---|---|---|---|---|---|---|");
    for (const r of table_) console.log(r);
  } finally {
    for (const p of procs) await p.stop();
  }
}

await main();
