// Query latency while an IVF_PQ index builds: closed-loop vector queries (concurrency C) against
// a Quiver it starts on a fresh data directory, first with no build running, then for the whole
// duration of a create_index (IVF_PQ) transaction, plus inserts during the build.
//
//   node dist/bench/index-build.js [--rows 100000] [--dim 64] [--concurrency 8] [--baseline 5]
import * as lancedb from "@lancedb/lancedb";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Conn } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line, type Result } from "./stats.js";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "100000" },
    dim: { type: "string", default: "64" },
    concurrency: { type: "string", default: "8" },
    baseline: { type: "string", default: "5" },
  },
});
const ROWS = Number(values.rows);
const DIM = Number(values.dim);
const C = Number(values.concurrency);
const KEY = "bench-admin-key";
const A = createRequire(import.meta.url)("apache-arrow") as typeof import("apache-arrow");
const schema = new A.Schema([new A.Field("id", new A.Int64()), new A.Field("vec", new A.FixedSizeList(DIM, new A.Field("item", new A.Float32(), true)))]);

function rows(n: number, from: number) {
  let s = from + 1;
  const r = () => ((s = (s * 16807) % 2147483647) / 2147483647) - 0.5;
  return lancedb.makeArrowTable(Array.from({ length: n }, (_, i) => ({ id: BigInt(from + i), vec: Array.from({ length: DIM }, r) })), { schema });
}

const headers = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;

async function main() {
  const dataDir = mkdtempSync(path.join(tmpdir(), "quiver-bench-ix-"));
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  const t = await db.createTable("bench_ix", rows(Math.min(ROWS, 20_000), 0), []);
  for (let done = 20_000; done < ROWS; done += 20_000) await t.add(rows(Math.min(20_000, ROWS - done), done));
  const q = await startQuiver(dataDir, KEY);
  try {
    await measure(Number(new URL(q.url).port));
  } finally {
    await q.stop();
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function measure(port: number) {
  const conns = Array.from({ length: C }, () => new Conn("127.0.0.1", port));
  const admin = new Conn("127.0.0.1", port);
  const qv = Buffer.from(JSON.stringify({ vector: { single_vector: Array.from({ length: DIM }, (_, i) => Math.sin(i)) }, k: 10, columns: { column_names: ["id"] } }));
  const query = async (loop: number) => {
    const r = await conns[loop].request("POST", "/v1/table/bench_ix/query", headers, qv);
    return r.status === 200 ? null : `HTTP ${r.status}: ${r.body.toString().slice(0, 200)}`;
  };
  const base = await closedLoop("query, no build", C, Number(values.baseline), query);

  const created = await admin.request("POST", "/v1/table/bench_ix/create_index", headers, Buffer.from(JSON.stringify({ column: "vec", index_type: "IVF_PQ" })));
  if (created.status !== 200) throw new Error(`create_index: ${created.status} ${created.body}`);
  const tx = JSON.parse(created.body.toString()).transaction_id as string;
  const t0 = performance.now();
  let status = "Queued";
  const poll = (async () => {
    const c = new Conn("127.0.0.1", port);
    while (status === "Queued" || status === "Running") {
      await new Promise((r) => setTimeout(r, 100));
      status = JSON.parse((await c.request("POST", `/v1/transaction/${tx}/describe`, headers, Buffer.from("{}"))).body.toString()).status;
    }
    c.close();
  })();
  const during: Result = { name: "query, during IVF_PQ build", ok: 0, errors: 0, seconds: 0, lat: [] };
  const inserts: Result = { name: "insert 100 rows, during", ok: 0, errors: 0, seconds: 0, lat: [] };
  const loop = async (res: Result, op: () => Promise<string | null>, pauseMs = 0) => {
    while (status === "Queued" || status === "Running") {
      if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
      const s = performance.now();
      const err = await op();
      if (err === null) { res.ok++; res.lat.push(performance.now() - s); } else { res.errors++; res.firstError ??= err; }
    }
  };
  const ins = new Conn("127.0.0.1", port);
  let next = ROWS;
  // Paced (4 a second) so the table does not grow into many small fragments during the run.
  const insert = async () => {
    const body = Buffer.from(A.tableToIPC(rows(100, (next += 100) - 100), "stream"));
    const r = await ins.request("POST", "/v1/table/bench_ix/insert", `x-api-key: ${KEY}\r\ncontent-type: application/vnd.apache.arrow.stream\r\n`, body);
    return r.status === 200 ? null : `HTTP ${r.status}: ${r.body.toString().slice(0, 200)}`;
  };
  await Promise.all([poll, ...conns.map((_, i) => loop(during, () => query(i))), loop(inserts, insert, 250)]);
  const buildS = (performance.now() - t0) / 1000;
  during.seconds = inserts.seconds = buildS;

  console.log(`IVF_PQ build of ${ROWS} x ${DIM}: ${status} in ${buildS.toFixed(1)} s (create_index → transaction ${status})`);
  console.log(`concurrency ${C}`);
  console.log(header());
  for (const r of [base, during, inserts]) console.log(line(r));
  for (const c of [...conns, admin, ins]) c.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
