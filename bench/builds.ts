// Two builds side by side: this checkout's server and another built checkout's (--baseline, a
// directory with dist/src/main.js, e.g. a `git worktree` of an older commit after `npm run build`),
// on the same bench dataset, each with its serving index. Closed loops of vector searches at each
// level of --levels, the two servers alternating within each round and the order swapped every
// round, so both see the same machine; per phase the QPS, p50/p99, and the server's CPU and its
// main (uWS) thread's CPU per search. Medians, and this build's ratio to the baseline per round.
//
//   node dist/bench/builds.js --baseline /tmp/base --data-dir /tmp/qbench [--levels 1,32]
//        [--rounds 3] [--duration 5] [--warmup 1] [dataset flags of generate.js]
import { existsSync } from "node:fs";
import path from "node:path";
import { availableParallelism, cpus, loadavg } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { queryVectors } from "./dataset.js";
import { BENCH_TABLE, datasetArgs, datasetName, generate } from "./generate.js";
import { Conn } from "./http-client.js";
import { cpuSeconds, startQuiver, type QuiverProcess } from "./quiver-process.js";
import { closedLoop, summary } from "./stats.js";

const { values } = parseArgs({
  strict: false,
  options: {
    baseline: { type: "string" },
    levels: { type: "string", default: "1,32" },
    rounds: { type: "string", default: "3" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "1" },
  },
});
if (!values.baseline || !existsSync(path.join(String(values.baseline), "dist/src/main.js"))) {
  console.error("--baseline: a built checkout (with dist/src/main.js) to compare with");
  process.exit(2);
}
const { dataDir, spec, rowIds } = datasetArgs();
const KEY = "bench-admin-key";
const HEADERS = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
const QUERY = `/v1/table/${BENCH_TABLE}/query`;
const SERVED = "x-quiver-search-path: serving";
const bodies = queryVectors(spec, 1000).map((v) => Buffer.from(JSON.stringify({ vector: { single_vector: Array.from(v) }, k: 10 })));

interface Phase {
  qps: number;
  p50: number;
  p99: number;
  cpuUs: number;
  mainUs: number;
}

/** Search until the server answers from its serving index (the first search starts its build). */
async function warm(server: QuiverProcess): Promise<void> {
  const url = new URL(server.url);
  const conn = new Conn(url.hostname, Number(url.port));
  try {
    for (;;) {
      const r = await conn.request("POST", QUERY, HEADERS, bodies[0]);
      if (r.status !== 200) throw new Error(`${server.url}: ${r.status} ${r.body.toString().slice(0, 200)}`);
      if (r.head.includes(SERVED)) return;
      await sleep(200);
    }
  } finally {
    conn.close();
  }
}

/** One closed-loop phase of `c` connections; an answer not from the serving index counts as an error. */
async function phase(server: QuiverProcess, c: number, seconds: number): Promise<Phase> {
  const url = new URL(server.url);
  const pid = server.proc.pid!;
  const conns = Array.from({ length: c }, () => new Conn(url.hostname, Number(url.port)));
  const run = (s: number) =>
    closedLoop("search", c, s, async (loop, i) => {
      const r = await conns[loop].request("POST", QUERY, HEADERS, bodies[(loop * 31 + i) % bodies.length]);
      if (r.status !== 200) return `${r.status} ${r.body.toString().slice(0, 120)}`;
      return r.head.includes(SERVED) ? null : "not served by the index";
    });
  try {
    await run(Number(values.warmup));
    const [cpu0, main0] = [cpuSeconds(pid), cpuSeconds(pid, pid)];
    const r = await run(Number(values.duration));
    const [cpu1, main1] = [cpuSeconds(pid), cpuSeconds(pid, pid)];
    if (r.errors) throw new Error(`${server.url}: ${r.errors} errors, first: ${r.firstError}`);
    const s = summary(r);
    return { qps: s.qps, p50: s.p50, p99: s.p99, cpuUs: ((cpu1! - cpu0!) * 1e6) / r.ok, mainUs: ((main1! - main0!) * 1e6) / r.ok };
  } finally {
    conns.forEach((x) => x.close());
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;

async function main(): Promise<void> {
  console.log(`machine: ${cpus()[0]?.model ?? "?"} x ${availableParallelism()} cores, node ${process.version}, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}, ${new Date().toISOString()}`);
  if (!existsSync(path.join(dataDir, `${BENCH_TABLE}.lance`))) await generate(dataDir, spec, rowIds);
  console.log(`dataset: ${datasetName(spec)}, ${spec.rows} x ${spec.dim}, ${dataDir}; baseline ${values.baseline}`);
  const servers = { this: await startQuiver(dataDir, KEY), baseline: await startQuiver(dataDir, KEY, [], String(values.baseline)) };
  try {
    await Promise.all([warm(servers.this), warm(servers.baseline)]);
    const levels = String(values.levels).split(",").map(Number);
    const results = new Map<string, { this: Phase[]; baseline: Phase[] }>(levels.map((c) => [String(c), { this: [], baseline: [] }]));
    for (let round = 0; round < Number(values.rounds); round++) {
      const order = round % 2 === 0 ? (["this", "baseline"] as const) : (["baseline", "this"] as const);
      for (const c of levels) for (const which of order) results.get(String(c))![which].push(await phase(servers[which], c, Number(values.duration)));
    }
    console.log(`\n${"in flight".padEnd(10)}${"build".padEnd(10)}${"QPS".padStart(8)}${"p50 ms".padStart(9)}${"p99 ms".padStart(9)}${"CPU µs".padStart(9)}${"main µs".padStart(9)}`);
    for (const [c, r] of results) {
      for (const which of ["this", "baseline"] as const) {
        const ps = r[which];
        const m = (f: (p: Phase) => number) => median(ps.map(f));
        console.log(`${c.padEnd(10)}${which.padEnd(10)}${m((p) => p.qps).toFixed(0).padStart(8)}${m((p) => p.p50).toFixed(2).padStart(9)}${m((p) => p.p99).toFixed(2).padStart(9)}${m((p) => p.cpuUs).toFixed(0).padStart(9)}${m((p) => p.mainUs).toFixed(0).padStart(9)}`);
      }
      const ratio = (f: (p: Phase) => number) => r.this.map((p, i) => f(p) / f(r.baseline[i]));
      console.log(`${"".padEnd(10)}this / baseline per round: QPS ${median(ratio((p) => p.qps)).toFixed(2)} (${range(ratio((p) => p.qps))}), main-thread µs a search ${median(ratio((p) => p.mainUs)).toFixed(2)} (${range(ratio((p) => p.mainUs))}), CPU µs a search ${median(ratio((p) => p.cpuUs)).toFixed(2)} (${range(ratio((p) => p.cpuUs))})`);
    }
    console.log(`load average at the end ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  } finally {
    await Promise.all([servers.this.stop(), servers.baseline.stop()]);
  }
}

await main();
