// The --batch-max curve: vector search throughput and latency per batch cap (and per
// --batch-slots), one Quiver per setting on the same data, alternating rounds at each concurrency.
//
//   node dist/bench/batching.js --data-dir ./bench-data [--batch-max 0,2,4,8,16,32,64,128]
//        [--batch-slots 1,2] [--levels 32,128] [--rounds 3] [--duration 5] [--warmup 1]
//        [--vectors 1]   (query vectors per request; more than 1 sends multi_vector requests)
import { parseArgs } from "node:util";
import { queryVectors } from "./dataset.js";
import { BENCH_TABLE, datasetArgs } from "./generate.js";
import { Conn } from "./http-client.js";
import { startQuiver, type QuiverProcess } from "./quiver-process.js";
import { closedLoop, summary, type Result } from "./stats.js";

const { values } = parseArgs({
  strict: false,
  options: {
    "batch-max": { type: "string", default: "0,2,4,8,16,32,64,128" },
    "batch-slots": { type: "string", default: "1,2" },
    levels: { type: "string", default: "32,128" },
    rounds: { type: "string", default: "3" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "1" },
    nprobes: { type: "string", default: "20" },
    vectors: { type: "string", default: "1" },
  },
});
const { dataDir, spec } = datasetArgs();
const list = (s: unknown) => String(s).split(",").map(Number);
const KEY = "bench-admin-key";
const HEADERS = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
const PER = Number(values.vectors);
const pool = queryVectors(spec, 1000).map((v) => Array.from(v));
const bodies = pool.map((v, i) => {
  const vector = PER > 1 ? { multi_vector: Array.from({ length: PER }, (_, j) => pool[(i + j * 250) % pool.length]) } : { single_vector: v };
  return Buffer.from(JSON.stringify({ vector, k: 10, nprobes: Number(values.nprobes) }));
});

async function phase(url: URL, c: number, seconds: number): Promise<Result> {
  const conns = Array.from({ length: c }, () => new Conn(url.hostname, Number(url.port)));
  try {
    return await closedLoop("", c, seconds, async (loop, i) => {
      const r = await conns[loop].request("POST", `/v1/table/${BENCH_TABLE}/query`, HEADERS, bodies[(loop * 31 + i) % bodies.length]);
      return r.status === 200 ? null : `${r.status}`;
    });
  } finally {
    conns.forEach((x) => x.close());
  }
}

const settings = list(values["batch-max"]).flatMap((max) => (max < 2 ? [{ max, slots: 1 }] : list(values["batch-slots"]).map((slots) => ({ max, slots }))));
const procs: QuiverProcess[] = [];
try {
  const urls = [];
  for (const s of settings) {
    const p = await startQuiver(dataDir, KEY, ["--batch-max", String(s.max), "--batch-slots", String(s.slots)]);
    procs.push(p);
    urls.push(new URL(p.url));
  }
  console.log(`vector search k=10, nprobes ${values.nprobes}, ${PER} vector(s) per request, ${values.duration} s phases, medians of ${values.rounds} alternating rounds`);
  console.log("| in flight | --batch-max | --batch-slots | QPS | p50 ms | p99 ms |");
  console.log("|---|---|---|---|---|---|");
  for (const c of list(values.levels)) {
    const runs: Result[][] = settings.map(() => []);
    for (let r = 0; r < Number(values.rounds); r++) {
      for (const [i, url] of urls.entries()) {
        if (Number(values.warmup) > 0) await phase(url, c, Number(values.warmup));
        runs[i].push(await phase(url, c, Number(values.duration)));
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    settings.forEach((s, i) => {
      const ss = runs[i].map(summary);
      console.log(`| ${c} | ${s.max} | ${s.max < 2 ? "–" : s.slots} | ${med(ss.map((x) => x.qps)).toFixed(0)} | ${med(ss.map((x) => x.p50)).toFixed(1)} | ${med(ss.map((x) => x.p99)).toFixed(1)} |`);
    });
  }
} finally {
  for (const p of procs) await p.stop();
}
