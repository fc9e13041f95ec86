// Searches under a write stream on object storage: 3 Quiver replicas (--replicas) on one Azurite container
// (bench/azurite.ts) behind HAProxy (bench/haproxy.ts), automatic maintenance on, a table with an
// IVF_PQ index whose serving index every replica has built. Then alternating phases of the
// project's load tester (quiver-loadtest, open loop): "quiet", searches alone at --query-rate; and
// "stream", the same searches while a second load tester inserts single rows at --insert-rate
// (issue 52: 50 requests a second, 10% inserts). Each phase's per-second search p99 comes from the
// search generator's own timeline, so inserts' latency never mixes into it; inserts' p99 from the
// insert generator's. Printed: each phase's figures, the worst stream second's p99 against the
// median quiet second's, and the inserts' p99.
// --replicas 1 shows what the replicas' commits to one table add.
//   node dist/bench/replicas-stream.js [--rows 20000] [--dim 32] [--query-rate 45] [--insert-rate 5] [--seconds 20] [--rounds 2] [--replicas 3]
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startAzurite } from "./azurite.js";
import { startHaproxy } from "./haproxy.js";
import { startQuiver, type QuiverProcess } from "./quiver-process.js";
import { pct } from "./stats.js";
import { fill, KEY, machine, vec } from "./stores.js";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "20000" },
    dim: { type: "string", default: "32" },
    "query-rate": { type: "string", default: "45" },
    "insert-rate": { type: "string", default: "5" },
    seconds: { type: "string", default: "20" },
    rounds: { type: "string", default: "2" },
    replicas: { type: "string", default: "3" },
  },
});
const ROWS = Number(values.rows);
const DIM = Number(values.dim);
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const REPLICAS = Number(values.replicas);
const LOADTEST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../loadtest/cli.js");

async function post(url: string, p: string, body: unknown): Promise<{ status: number; json: any; path: string | null }> {
  const r = await fetch(url + p, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json", accept: "application/json" }, body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null, path: r.headers.get("x-quiver-search-path") };
}

/** Until every replica answers a search from its serving index. */
async function untilServing(replicas: QuiverProcess[]): Promise<void> {
  const end = Date.now() + 300_000;
  for (const q of replicas) {
    for (;;) {
      const r = await post(q.url, "/v1/table/t/query", { vector: { single_vector: vec(DIM, 1) }, k: 10, columns: ["id"] });
      if (r.path?.startsWith("serving")) break;
      if (Date.now() > end) throw new Error(`${q.url} still answers searches by ${r.path}`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }
}

interface Figures {
  perSecondP99: number[];
  p99: number;
  requests: number;
  errors: number;
}

/** One load tester's open loop against the balancer; its report's figures. */
function loadtest(url: string, name: string, args: string[]): Promise<Figures> {
  const out = path.join(mkdtempSync(path.join(tmpdir(), "quiver-bench-stream-")), name);
  const argv = [LOADTEST, "--url", url, "--table", "t", "--mode", "open", "--duration", String(SECONDS), "--warmup", "2", "--accept", "json", "--columns", "id", "--no-metrics", "--quiet", "--out", out, ...args];
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, argv, { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, QUIVER_API_KEY: KEY } });
    proc.on("exit", (code) => {
      try {
        const run = JSON.parse(readFileSync(`${out}.json`, "utf8")).run;
        rmSync(path.dirname(out), { recursive: true, force: true });
        resolve({ perSecondP99: run.timeline.map((s: { p99: number }) => s.p99), p99: run.latency_ms.p99, requests: run.requests, errors: run.errors });
      } catch (err) {
        reject(new Error(`loadtest ${name} exited with ${code}: ${String(err)}`));
      }
    });
  });
}

const az = await startAzurite();
await az.createContainer("bench");
const storage = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
const replicas: QuiverProcess[] = [];
try {
  for (let i = 0; i < REPLICAS; i++) replicas.push(await startQuiver("az://bench/quiver", KEY, ["--auto-maintenance", "on", ...storage]));
  const lb = await startHaproxy(replicas.map((q) => Number(new URL(q.url).port)));
  try {
    await fill(replicas[0], ROWS, DIM);
    const built = await post(lb.url, "/v1/table/t/create_index", { column: "vector", index_type: "IVF_PQ" });
    if (built.status !== 200) throw new Error(`create_index: ${built.status} ${JSON.stringify(built.json)}`);
    for (;;) {
      const d = (await post(lb.url, `/v1/transaction/${built.json.transaction_id}/describe`, {})).json;
      if (d.status === "Succeeded") break;
      if (d.status !== "Queued" && d.status !== "Running") throw new Error(`index build ${d.status}: ${JSON.stringify(d.properties)}`);
      await new Promise((res) => setTimeout(res, 250));
    }
    await untilServing(replicas);

    const search = ["--workload", "vector", "--rate", values["query-rate"]!];
    const insert = ["--workload", "insert", "--rate", values["insert-rate"]!, "--insert-batch", "1", "--insert-format", "json"];
    const quiet: Figures[] = [];
    const stream: { search: Figures; insert: Figures }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      quiet.push(await loadtest(lb.url, `quiet-${round}`, search));
      const [s, i] = await Promise.all([loadtest(lb.url, `stream-search-${round}`, search), loadtest(lb.url, `stream-insert-${round}`, insert)]);
      stream.push({ search: s, insert: i });
    }
    const median = (xs: number[]) => pct([...xs].sort((a, b) => a - b), 50);
    const quietSecond = median(quiet.flatMap((f) => f.perSecondP99));
    console.log(`${machine()}; ${REPLICAS} replicas on Azurite (in memory, loopback) behind HAProxy, auto-maintenance on`);
    console.log(`table: ${ROWS} x ${DIM}, IVF_PQ, serving index built on every replica; open loops of ${SECONDS} s after 2 s of warm-up; searches at ${values["query-rate"]}/s (k 10, ids), inserts of 1 row at ${values["insert-rate"]}/s`);
    for (let round = 0; round < ROUNDS; round++) {
      const q = quiet[round];
      const s = stream[round];
      console.log(`round ${round + 1}: quiet  searches ${q.requests} (${q.errors} errors), p99 ${q.p99} ms, per-second p99 median ${median(q.perSecondP99)} max ${Math.max(...q.perSecondP99)} ms`);
      console.log(`round ${round + 1}: stream searches ${s.search.requests} (${s.search.errors} errors), p99 ${s.search.p99} ms, per-second p99 median ${median(s.search.perSecondP99)} max ${Math.max(...s.search.perSecondP99)} ms; inserts ${s.insert.requests} (${s.insert.errors} errors), p99 ${s.insert.p99} ms`);
    }
    const worst = Math.max(...stream.flatMap((s) => s.search.perSecondP99));
    console.log(`median quiet second's search p99 ${quietSecond} ms; worst stream second's ${worst} ms: ${(worst / quietSecond).toFixed(2)}x (bound 2x); median stream second's ${(median(stream.flatMap((s) => s.search.perSecondP99)) / quietSecond).toFixed(2)}x`);
    console.log(`single-row insert p99 by round: ${stream.map((s) => s.insert.p99).join(", ")} ms (bound 1,000 ms)`);
  } finally {
    await lb.stop();
  }
} finally {
  await Promise.all(replicas.map((q) => q.stop()));
  await az.stop();
}
