// Where should LanceDB work run? The same vector query on the main thread versus inside a Piscina
// pool of 1, 2 and 4 workers (each worker with its own table handle), at 1 and at C in flight.
//   node dist/bench/pool.js --data-dir ./bench-data [--duration 8] [--concurrency 32]
import * as lancedb from "@lancedb/lancedb";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Piscina } from "piscina";
import { queryVectors } from "./dataset.js";
import { BENCH_TABLE, datasetArgs } from "./generate.js";
import { closedLoop, header, line } from "./stats.js";

const { values } = parseArgs({ strict: false, options: { duration: { type: "string", default: "8" }, concurrency: { type: "string", default: "32" }, sweep: { type: "string", default: "1,2,4" } } });
const { dataDir, spec } = datasetArgs();
const D = Number(values.duration);
const vectors = queryVectors(spec, 1000).map((v) => Array.from(v));
const K = 10;
const NPROBES = 20;
const rssMb = () => (process.memoryUsage().rss / 2 ** 20).toFixed(0);

async function phase(name: string, c: number, run: (v: number[]) => Promise<unknown>) {
  await closedLoop(name, c, 2, async (l, i) => (await run(vectors[(l * 31 + i) % vectors.length]), null));
  const r = await closedLoop(name, c, D, async (l, i) => (await run(vectors[(l * 31 + i) % vectors.length]), null));
  console.log(`${line(r)}   rss ${rssMb()} MB`);
}

const db = await lancedb.connectNamespace("dir", { root: dataDir });
const table = await db.openTable(BENCH_TABLE);
const main = async (v: number[]) => {
  const it = await (table.vectorSearch(v).limit(K).nprobes(NPROBES) as unknown as { nativeExecute(): Promise<{ next(): Promise<Buffer | null> }> }).nativeExecute();
  while (await it.next());
};
console.log(header());
for (const c of [1, Number(values.concurrency)]) {
  await phase(`main thread c=${c}`, c, main);
}
const filename = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "./pool-worker.js");
for (const w of String(values.sweep).split(",").map(Number)) {
  // LanceDB calls are async: let each worker overlap as many tasks as are in flight.
  const pool = new Piscina({ filename, minThreads: w, maxThreads: w, concurrentTasksPerWorker: Number(values.concurrency) });
  const run = (v: number[]) => pool.run({ dataDir, table: BENCH_TABLE, vector: v, k: K, nprobes: NPROBES });
  for (const c of [1, Number(values.concurrency)]) await phase(`piscina ${w} worker(s) c=${c}`, c, run);
  await pool.destroy();
}
