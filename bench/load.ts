// Load harness: closed-loop concurrency C for D seconds per operation against a Quiver, then the
// same vector workload in-process against LanceDB on the same data, as a ratio; recall@10 of
// indexed search against exact search. Dataset: node dist/bench/generate.js (same flags).
//
//   node dist/bench/load.js --data-dir ./bench-data [--url http://127.0.0.1:8080 --key KEY]
//        [--concurrency 32] [--duration 10] [--ops vector,vector_filter,fts,count,describe,mix]
//        [--sweep 1,2] [--workers N]
// Without --url it starts Quiver itself (dist/src/main.js) on the data directory, with --workers N
// (or once per count in --sweep) and a generated API key; with --url it uses the running one.
import * as lancedb from "@lancedb/lancedb";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { queryVectors } from "./dataset.js";
import { BENCH_TABLE, datasetArgs } from "./generate.js";
import { Conn } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line, summary, type Result } from "./stats.js";

const { values } = parseArgs({
  strict: false,
  options: {
    url: { type: "string" },
    key: { type: "string" },
    concurrency: { type: "string", default: "32" },
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    ops: { type: "string", default: "vector,vector_filter,fts,count,describe,mix" },
    sweep: { type: "string" },
    workers: { type: "string" },
    k: { type: "string", default: "10" },
    rounds: { type: "string", default: "3" },
    nprobes: { type: "string", default: "20" },
  },
});
const { dataDir, spec } = datasetArgs();
const C = Number(values.concurrency);
const D = Number(values.duration);
const WARM = Number(values.warmup);
const K = Number(values.k);
const NPROBES = Number(values.nprobes);
const KEY = String(values.key ?? "bench-admin-key");
const NS = "benchns";
const ROUNDS = Number(values.rounds);

const vectors = queryVectors({ dim: spec.dim, rank: spec.rank, seed: spec.seed }, 1000).map((v) => Array.from(v));

/** Request bodies, serialised once so the client spends its time on the wire only. */
function bodies(extra: object): Buffer[] {
  return vectors.map((v) => Buffer.from(JSON.stringify({ vector: { single_vector: v }, k: K, nprobes: NPROBES, ...extra })));
}
const ops: Record<string, { path: string; bodies: Buffer[] }> = {
  vector: { path: `/v1/table/${BENCH_TABLE}/query`, bodies: bodies({}) },
  vector_filter: { path: `/v1/table/${BENCH_TABLE}/query`, bodies: bodies({ filter: "category = 'beta'" }) },
  fts: {
    path: `/v1/table/${BENCH_TABLE}/query`,
    bodies: ["apple river", "quick brown fox", "nebula", "summit willow", "piano"].map((s) =>
      Buffer.from(JSON.stringify({ full_text_query: { string_query: { query: s } }, k: K })),
    ),
  },
  count: { path: `/v1/table/${BENCH_TABLE}/count_rows`, bodies: [Buffer.from(JSON.stringify({ predicate: "category = 'beta'" }))] },
  describe: { path: `/v1/namespace/${NS}/describe`, bodies: [Buffer.from("{}")] },
};

async function httpPhase(url: URL, name: string, pick: (loop: number, i: number) => { path: string; body: Buffer }, seconds: number): Promise<Result> {
  const conns = Array.from({ length: C }, () => new Conn(url.hostname, Number(url.port)));
  const headers = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
  try {
    return await closedLoop(name, C, seconds, async (loop, i) => {
      const { path: p, body } = pick(loop, i);
      const r = await conns[loop].request("POST", p, headers, body);
      return r.status === 200 ? null : `${r.status} ${r.body.toString().slice(0, 120)}`;
    });
  } finally {
    conns.forEach((c) => c.close());
  }
}

function pickFor(op: string) {
  if (op === "mix") {
    const names = ["vector", "vector_filter", "fts", "count", "describe"];
    return (loop: number, i: number) => {
      const o = ops[names[(loop + i) % names.length]];
      return { path: o.path, body: o.bodies[(loop * 31 + i) % o.bodies.length] };
    };
  }
  const o = ops[op];
  return (loop: number, i: number) => ({ path: o.path, body: o.bodies[(loop * 31 + i) % o.bodies.length] });
}

async function quiverPhases(url: URL, label: string, names: string[]): Promise<Result[]> {
  const out: Result[] = [];
  for (const op of names) {
    if (WARM > 0) await httpPhase(url, op, pickFor(op), WARM);
    const r = await httpPhase(url, `quiver ${op}${label}`, pickFor(op), D);
    console.log(line(r));
    out.push(r);
  }
  return out;
}

/** The same vector workload, in this process, straight into LanceDB. */
async function enginePhase(table: lancedb.Table, name: string, run: (v: number[]) => Promise<unknown>): Promise<Result> {
  const phase = (n: string, s: number) => closedLoop(n, C, s, async (loop, i) => {
    await run(vectors[(loop * 31 + i) % vectors.length]);
    return null;
  });
  if (WARM > 0) await phase(name, WARM);
  const r = await phase(name, D);
  console.log(line(r));
  return r;
}

async function recall(url: URL, extra: object): Promise<number> {
  const conn = new Conn(url.hostname, Number(url.port));
  const headers = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
  const { arrow } = await import("../src/engine/arrow.js");
  const ids = async (body: object) => {
    const r = await conn.request("POST", `/v1/table/${BENCH_TABLE}/query`, headers, Buffer.from(JSON.stringify(body)));
    if (r.status !== 200) throw new Error(`recall query: ${r.status} ${r.body}`);
    return Array.from(arrow.tableFromIPC(r.body).getChild("id")!.toArray() as Int32Array);
  };
  let hits = 0;
  const n = 50;
  for (const v of vectors.slice(0, n)) {
    const base = { vector: { single_vector: v }, k: 10, columns: { column_names: ["id"] } };
    const got = await ids({ ...base, nprobes: NPROBES, ...extra });
    const exact = new Set(await ids({ ...base, bypass_vector_index: true }));
    hits += got.filter((id) => exact.has(id)).length;
  }
  conn.close();
  return hits / (n * 10);
}

/** Median over rounds of each figure (QPS and each percentile taken separately). */
function medians(rs: Result[]) {
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const ss = rs.map(summary);
  return { name: rs[0].name, qps: med(ss.map((s) => s.qps)), p50: med(ss.map((s) => s.p50)), p95: med(ss.map((s) => s.p95)), p99: med(ss.map((s) => s.p99)) };
}

async function main() {
  console.log(`machine: ${cpus()[0]?.model ?? "?"} x ${availableParallelism()} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  console.log(`dataset: ${dataDir} (${spec.rows} x ${spec.dim}); concurrency ${C}, ${D} s per phase (+${WARM} s warm-up), k=${K}, nprobes=${NPROBES}, ${ROUNDS} alternating rounds of Quiver vs engine`);
  const sweep = values.sweep ? String(values.sweep).split(",").map(Number) : [values.workers ? Number(values.workers) : undefined];
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  await db.createNamespace([NS], { mode: "exist_ok", properties: { owner: "bench" } } as never).catch(() => undefined);
  const table = await db.openTable(BENCH_TABLE);
  const engineToArrow = (v: number[]) => table.vectorSearch(v).limit(K).nprobes(NPROBES).toArrow();
  const engineRaw = async (v: number[]) => {
    const q = table.vectorSearch(v).limit(K).nprobes(NPROBES) as unknown as { nativeExecute(): Promise<{ next(): Promise<Buffer | null> }> };
    const it = await q.nativeExecute();
    while (await it.next());
  };
  for (const w of sweep) {
    const started = values.url ? null : await startQuiver(dataDir, KEY, w !== undefined ? ["--workers", String(w)] : []);
    const url = new URL(values.url ? String(values.url) : started!.url);
    const label = w !== undefined && sweep.length > 1 ? ` w=${w}` : "";
    try {
      for (const refine of [0, 10]) {
        const r = await recall(url, refine ? { refine_factor: refine } : {});
        console.log(`recall@10 of indexed search (nprobes ${NPROBES}, refine_factor ${refine}) against exact search, 50 queries: ${r.toFixed(3)}`);
      }
      console.log(`\nQuiver ${url.origin}${w !== undefined ? ` --workers ${w}` : ""}`);
      console.log(header());
      await quiverPhases(url, label, String(values.ops).split(",").filter((o) => o !== "vector"));
      // The vector workload alternates with the in-process engine so drift hits both alike.
      const rounds: Record<string, Result[]> = { quiver: [], toArrow: [], raw: [] };
      for (let i = 0; i < ROUNDS; i++) {
        rounds.quiver.push(...(await quiverPhases(url, label, ["vector"])));
        rounds.toArrow.push(await enginePhase(table, "engine vector toArrow", engineToArrow));
        rounds.raw.push(await enginePhase(table, "engine vector raw IPC", engineRaw));
      }
      const [qm, tm, rm] = [medians(rounds.quiver), medians(rounds.toArrow), medians(rounds.raw)];
      console.log(`\nmedians of ${ROUNDS} rounds`);
      console.log(`${"operation".padEnd(28)}${"QPS".padStart(10)}${"p50 ms".padStart(10)}${"p95 ms".padStart(10)}${"p99 ms".padStart(10)}`);
      for (const m of [qm, tm, rm]) {
        console.log(`${m.name.padEnd(28)}${m.qps.toFixed(0).padStart(10)}${[m.p50, m.p95, m.p99].map((x) => x.toFixed(2).padStart(10)).join("")}`);
      }
      for (const e of [tm, rm]) {
        console.log(`${qm.name} vs ${e.name}: QPS ratio ${(qm.qps / e.qps).toFixed(3)}, p99 ratio ${(qm.p99 / e.p99).toFixed(3)}`);
      }
    } finally {
      await started?.stop();
    }
  }
}

await main();
