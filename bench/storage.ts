// Per-operation latency, local data directory against object storage (Azurite, Azure Blob
// Storage's emulator, started here in memory on loopback): two Quiver servers in one run, the same
// table in each (N rows, DIM-dimensional vectors), then alternating rounds of sequential requests:
// a vector search (k=10), an append of a small batch, count_rows. Reports the median of each.
// `--consistency-interval-ms 0` measures what re-checking storage on every request costs (compare
// a run at the default 1000).
//   node dist/bench/storage.js [--rows 5000] [--dim 32] [--requests 60] [--rounds 3] [--batch 10] [--consistency-interval-ms 1000]
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startAzurite } from "./azurite.js";
import { startQuiver, type QuiverProcess } from "./quiver-process.js";
import { pct } from "./stats.js";

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
const KEY = "bench-storage-key";

const vec = (i: number) => Array.from({ length: DIM }, (_, d) => Math.sin(i * 0.37 + d));
const rows = (from: number, n: number) => Array.from({ length: n }, (_, k) => ({ id: from + k, cat: `c${(from + k) % 5}`, vector: vec(from + k) }));

async function call(q: QuiverProcess, op: string, body: unknown, json = false): Promise<void> {
  const r = await fetch(`${q.url}/v1/table/t/${op}`, {
    method: "POST",
    headers: { "x-api-key": KEY, "content-type": "application/json", ...(json ? { accept: "application/json" } : {}) },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${op}: ${r.status} ${text.slice(0, 300)}`);
}

type Op = "search k=10" | `append ${number} rows` | "count_rows";
const OPS: Op[] = ["search k=10", `append ${BATCH} rows`, "count_rows"];

function runner(q: QuiverProcess) {
  let next = N;
  return async (op: Op): Promise<number> => {
    const t0 = performance.now();
    if (op === "search k=10") await call(q, "query", { vector: { single_vector: vec(Math.floor(Math.random() * N)) }, k: 10, columns: ["id"] }, true);
    else if (op === "count_rows") await call(q, "count_rows", {});
    else {
      await call(q, "insert", JSON.stringify(rows(next, BATCH)));
      next += BATCH;
    }
    return performance.now() - t0;
  };
}

async function main(): Promise<void> {
  const az = await startAzurite();
  await az.createContainer("bench");
  const localDir = mkdtempSync(path.join(tmpdir(), "quiver-bench-local-"));
  const stateDir = mkdtempSync(path.join(tmpdir(), "quiver-bench-state-"));
  const opts = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
  const common = ["--auto-maintenance", "off", "--consistency-interval-ms", values["consistency-interval-ms"]];
  const local = await startQuiver(localDir, KEY, common);
  const remote = await startQuiver(stateDir, KEY, [...common, "--data-dir", "az://bench/quiver", "--state-dir", stateDir, ...opts]);
  const servers = { local, azurite: remote } as const;
  try {
    for (const q of Object.values(servers)) {
      for (let i = 0; i < N; i += 1000) await call(q, i === 0 ? "create" : "insert", JSON.stringify(rows(i, Math.min(1000, N - i))));
    }
    const run = { local: runner(local), azurite: runner(remote) };
    const samples: Record<string, Record<string, number[]>> = { local: {}, azurite: {} };
    // Warm-up: open handles, caches.
    for (const k of ["local", "azurite"] as const) for (const op of OPS) for (let i = 0; i < 5; i++) await run[k](op);
    for (let round = 0; round < ROUNDS; round++) {
      for (const op of OPS) {
        for (const k of round % 2 ? (["azurite", "local"] as const) : (["local", "azurite"] as const)) {
          const s = (samples[k][op] ??= []);
          for (let i = 0; i < REQUESTS; i++) s.push(await run[k](op));
        }
      }
    }
    const med = (xs: number[]) => pct([...xs].sort((a, b) => a - b), 50);
    const p95 = (xs: number[]) => pct([...xs].sort((a, b) => a - b), 95);
    console.log(`machine: ${cpus().length} cores, ${cpus()[0]?.model ?? "?"}; node ${process.version}`);
    console.log(`table: ${N} rows, ${DIM}-dim vectors (no index); --consistency-interval-ms ${values["consistency-interval-ms"]}; ${ROUNDS} rounds x ${REQUESTS} sequential requests per operation and store; Azurite in memory on loopback`);
    console.log(`${"operation".padEnd(18)}${"local p50".padStart(11)}${"azurite p50".padStart(13)}${"ratio".padStart(8)}${"local p95".padStart(11)}${"azurite p95".padStart(13)}`);
    for (const op of OPS) {
      const l = samples.local[op];
      const a = samples.azurite[op];
      const f = (x: number) => `${x.toFixed(2)} ms`;
      console.log(`${op.padEnd(18)}${f(med(l)).padStart(11)}${f(med(a)).padStart(13)}${(med(a) / med(l)).toFixed(1).padStart(7)}x${f(p95(l)).padStart(11)}${f(p95(a)).padStart(13)}`);
    }
  } finally {
    await Promise.all([local.stop(), remote.stop()]);
    await az.stop();
    rmSync(localDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
