// Per-operation latency, local data directory against object storage (Azurite, Azure Blob
// Storage's emulator, started here in memory on loopback): two Quiver servers in one run, the same
// table in each (N rows, DIM-dimensional vectors), then alternating rounds of sequential requests:
// a vector search (k=10), an append of a small batch, count_rows. Reports the median of each.
// `--consistency-interval-ms 0` measures what re-checking storage on every request costs (compare
// a run at the default 1000; bench/consistency.ts sets both against LanceDB in process).
//   node dist/bench/storage.js [--rows 5000] [--dim 32] [--requests 60] [--rounds 3] [--batch 10] [--consistency-interval-ms 1000]
import { parseArgs } from "node:util";
import type { QuiverProcess } from "./quiver-process.js";
import { call, fill, machine, openStores, quantile, rows, search, startOn, STORES } from "./stores.js";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "5000" },
    dim: { type: "string", default: "32" },
    requests: { type: "string", default: "60" },
    rounds: { type: "string", default: "3" },
    batch: { type: "string", default: "10" },
    "consistency-interval-ms": { type: "string", default: "1000" },
  },
});
const N = Number(values.rows);
const DIM = Number(values.dim);
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);
const BATCH = Number(values.batch);

type Op = "search k=10" | `append ${number} rows` | "count_rows";
const OPS: Op[] = ["search k=10", `append ${BATCH} rows`, "count_rows"];

function runner(q: QuiverProcess) {
  let next = N;
  return async (op: Op): Promise<number> => {
    const t0 = performance.now();
    if (op === "search k=10") await search(q, DIM, Math.floor(Math.random() * N));
    else if (op === "count_rows") await call(q, "count_rows", {});
    else {
      await call(q, "insert", JSON.stringify(rows(DIM, next, BATCH)));
      next += BATCH;
    }
    return performance.now() - t0;
  };
}

async function main(): Promise<void> {
  const stores = await openStores();
  const args = ["--consistency-interval-ms", values["consistency-interval-ms"]!];
  const servers = { local: await startOn(stores.local, args), azurite: await startOn(stores.azurite, args) };
  try {
    for (const q of Object.values(servers)) await fill(q, N, DIM);
    const run = { local: runner(servers.local), azurite: runner(servers.azurite) };
    const samples: Record<string, Record<string, number[]>> = { local: {}, azurite: {} };
    // Warm-up: open handles, caches.
    for (const k of STORES) for (const op of OPS) for (let i = 0; i < 5; i++) await run[k](op);
    for (let round = 0; round < ROUNDS; round++) {
      for (const op of OPS) {
        for (const k of round % 2 ? [...STORES].reverse() : STORES) {
          const s = (samples[k][op] ??= []);
          for (let i = 0; i < REQUESTS; i++) s.push(await run[k](op));
        }
      }
    }
    console.log(machine());
    console.log(`table: ${N} rows, ${DIM}-dim vectors (no index); --consistency-interval-ms ${values["consistency-interval-ms"]}; ${ROUNDS} rounds x ${REQUESTS} sequential requests per operation and store; Azurite in memory on loopback`);
    console.log(`${"operation".padEnd(18)}${"local p50".padStart(11)}${"azurite p50".padStart(13)}${"ratio".padStart(8)}${"local p95".padStart(11)}${"azurite p95".padStart(13)}`);
    for (const op of OPS) {
      const l = samples.local[op];
      const a = samples.azurite[op];
      const f = (x: number) => `${x.toFixed(2)} ms`;
      console.log(`${op.padEnd(18)}${f(quantile(l, 50)).padStart(11)}${f(quantile(a, 50)).padStart(13)}${(quantile(a, 50) / quantile(l, 50)).toFixed(1).padStart(7)}x${f(quantile(l, 95)).padStart(11)}${f(quantile(a, 95)).padStart(13)}`);
    }
  } finally {
    await Promise.all(Object.values(servers).map((q) => q.stop()));
    await stores.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
