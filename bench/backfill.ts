// Backfill throughput per UDF backend (sql, js, python, wasm) with 1, 2 and 4 worker threads, and query
// latency while a js backfill runs against idle, on the same table in the same run. The time limit
// is raised: python heavy takes seconds per task.
//   node dist/bench/backfill.js [--rows 100000] [--workers 1,2,4] [--duration 6] [--in-flight 4]
import { readFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import wabtInit from "wabt";
import { arrow } from "../src/engine/arrow.js";
import { batches, queryVectors } from "./dataset.js";
import { Conn, post, untilSucceeded } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, summary } from "./stats.js";

const { values } = parseArgs({ options: { rows: { type: "string", default: "100000" }, workers: { type: "string", default: "1,2,4" }, duration: { type: "string", default: "6" }, "in-flight": { type: "string", default: "4" } } });
const ROWS = Number(values.rows);
const D = Number(values.duration);
const C = Number(values["in-flight"]);
const KEY = "bench-backfill-key";
const SPEC = { rows: ROWS, dim: 32, rank: 8, seed: 5 };
const H = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;

const here = path.dirname(fileURLToPath(import.meta.url));
const wabt = await wabtInit();
const wasm = Buffer.from(wabt.parseWat("double_plus_one.wat", readFileSync(path.resolve(here, "../../native/udf/double_plus_one.wat"), "utf8")).toBinary({}).buffer).toString("base64");
const body = Buffer.from(arrow.tableToIPC(new arrow.Table([...batches(SPEC)].flatMap((t) => t.batches)), "stream"));
const queries = queryVectors(SPEC, 200).map((v) => Buffer.from(JSON.stringify({ vector: { single_vector: Array.from(v) }, k: 10, columns: { column_names: ["id"] } })));

const out = (name: string, type: string) => [{ column: name, data_type: { type }, nullable: true }];
const BACKENDS: Record<string, (name: string, k: number) => object> = {
  sql: (_name, k) => ({ udf_backend: "sql", udf: `id * 2 + ${k}`, input_columns: ["id"] }),
  js: (name, k) => ({ udf_backend: "js", udf: `(id) => id * 2 + ${k}`, input_columns: ["id"], outputs: out(name, "float64") }),
  // CPU-bound: 300 rounds of a string hash per row, where more workers should help.
  "js heavy": (name) => ({ udf_backend: "js", udf: "(t) => { let h = 0; for (let k = 0; k < 300; k++) for (let i = 0; i < t.length; i++) h = (h * 31 + t.charCodeAt(i)) | 0; return h; }", input_columns: ["text"], outputs: out(name, "int32") }),
  wasm: (name) => ({ udf_backend: "wasm", udf: wasm, input_columns: ["big"], outputs: out(name, "int64") }),
  // The js UDFs' Python twins, the same work per row.
  python: (name, k) => ({ udf_backend: "python", udf: `def f(id):\n    return id * 2 + ${k}`, input_columns: ["id"], outputs: out(name, "float64") }),
  "python heavy": (name) => ({
    udf_backend: "python",
    udf: "def f(t):\n    h = 0\n    for k in range(300):\n        for c in t:\n            h = (h * 31 + ord(c)) & 0xFFFFFFFF\n    return h - (1 << 32) if h >= (1 << 31) else h",
    input_columns: ["text"],
    outputs: out(name, "int32"),
  }),
};

const call = (conn: Conn, p: string, b: object | Buffer, headers = H) => post(conn, headers, p, b);

/** Backfill `column` and wait for it; answers rows/s over the job's wall time. */
async function backfill(conn: Conn, column: string): Promise<number> {
  const t0 = performance.now();
  const { job_id } = await call(conn, "/v1/table/t/backfill_column", { column });
  const done = await untilSucceeded(conn, H, job_id, t0);
  return Number(done.properties.rows_done) / done.seconds;
}

async function queryPhase(url: URL): Promise<ReturnType<typeof summary>> {
  const conns = Array.from({ length: C }, () => new Conn(url.hostname, Number(url.port)));
  const r = await closedLoop("query", C, D, async (loop, i) => {
    const reply = await conns[loop].request("POST", "/v1/table/t/query", H, queries[(loop * 31 + i) % queries.length]);
    return reply.status === 200 ? null : String(reply.status);
  });
  conns.forEach((c) => c.close());
  return summary(r);
}

console.log(`${ROWS} rows (id int32, a 32-d vector, text), backfill throughput by backend and worker count; queries: flat vector search k=10, ${C} in flight, ${D} s`);
console.log(`${"workers".padEnd(8)}${"sql rows/s".padStart(12)}${"js rows/s".padStart(12)}${"python rows/s".padStart(15)}${"wasm rows/s".padStart(13)}${"js heavy rows/s".padStart(17)}${"python heavy rows/s".padStart(21)}${"idle p99".padStart(10)}${"busy p99".padStart(10)}${"ratio".padStart(8)}`);
for (const workers of values.workers!.split(",").map(Number)) {
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-bench-backfill-"));
  const q = await startQuiver(dir, KEY, ["--workers", String(workers), "--udf-timeout-ms", "300000"]);
  const url = new URL(q.url);
  const conn = new Conn(url.hostname, Number(url.port));
  await call(conn, "/v1/table/t/create", body, `x-api-key: ${KEY}\r\n`);
  await call(conn, "/v1/table/t/add_columns", { new_columns: [{ name: "big", expression: "CAST(id AS BIGINT)" }] });
  const rates: Record<string, number> = {};
  for (const [backend, vc] of Object.entries(BACKENDS)) {
    const name = `c_${backend.replace(" ", "_")}`;
    await call(conn, "/v1/table/t/add_columns", { new_columns: [{ name, virtual_column: vc(name, 1) }] });
    rates[backend] = await backfill(conn, name);
  }
  const idle = await queryPhase(url);
  // Keep the pool busy: redefine the js column and backfill it again, until the phase ends.
  let busy = true;
  const loop = (async () => {
    for (let k = 2; busy; k++) {
      await call(conn, "/v1/table/t/alter_columns", { alterations: [{ path: "c_js", virtual_column: { udf: `(id) => id * 2 + ${k}` } }] });
      await backfill(conn, "c_js");
    }
  })();
  const during = await queryPhase(url);
  busy = false;
  await loop;
  conn.close();
  await q.stop();
  rmSync(dir, { recursive: true, force: true });
  const f = (x: number) => x.toFixed(1).padStart(10);
  const r = (b: string, w: number) => Math.round(rates[b]).toString().padStart(w);
  console.log(`${String(workers).padEnd(8)}${r("sql", 12)}${r("js", 12)}${r("python", 15)}${r("wasm", 13)}${r("js heavy", 17)}${r("python heavy", 21)}${f(idle.p99)}${f(during.p99)}${(during.p99 / idle.p99).toFixed(2).padStart(8)}`);
}
