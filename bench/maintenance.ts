// A production write stream and automatic maintenance: a table of ROWS x DIM vectors with an
// IVF_PQ index (written and indexed with LanceDB in process), served by a Quiver it starts; vector
// query latency before, right after INSERTS single-row Arrow inserts from CLIENTS clients, and
// after at most WAIT_S seconds of automatic maintenance (fragments, unindexed rows and row count
// reported); then half the rows deleted and one cleanup, bytes on disk against a freshly written
// copy of the remaining rows.
//
//   node dist/bench/maintenance.js [--rows 100000] [--dim 128] [--inserts 2000] [--clients 8] [--wait 120]
import * as lancedb from "@lancedb/lancedb";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Conn, post, untilSucceeded } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line } from "./stats.js";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "100000" },
    dim: { type: "string", default: "128" },
    inserts: { type: "string", default: "2000" },
    clients: { type: "string", default: "8" },
    wait: { type: "string", default: "120" },
  },
});
const ROWS = Number(values.rows);
const DIM = Number(values.dim);
const INSERTS = Number(values.inserts);
const CLIENTS = Number(values.clients);
const WAIT_S = Number(values.wait);
const KEY = "bench-admin-key";
const A = createRequire(import.meta.url)("apache-arrow") as typeof import("apache-arrow");
const schema = new A.Schema([new A.Field("id", new A.Int64()), new A.Field("vec", new A.FixedSizeList(DIM, new A.Field("item", new A.Float32(), true)))]);

function rows(ids: number[]) {
  let s = (ids[0] ?? 0) + 1;
  const r = () => ((s = (s * 16807) % 2147483647) / 2147483647) - 0.5;
  return lancedb.makeArrowTable(ids.map((id) => ({ id: BigInt(id), vec: Array.from({ length: DIM }, r) })), { schema });
}
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

const json = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
const arrow = `x-api-key: ${KEY}\r\ncontent-type: application/vnd.apache.arrow.stream\r\n`;

async function main() {
  const dataDir = mkdtempSync(path.join(tmpdir(), "quiver-bench-maint-"));
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  const t = await db.createTable("stream", rows(range(0, Math.min(ROWS, 20_000))), []);
  for (let done = 20_000; done < ROWS; done += 20_000) await t.add(rows(range(done, Math.min(20_000, ROWS - done))));
  await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: Math.max(1, Math.round(Math.sqrt(ROWS) / 4)), numSubVectors: DIM / 8 }) });
  // Defaults, except: any unindexed row is worth folding in, and no window, for the storage figure.
  const q = await startQuiver(dataDir, KEY, ["--maintenance-unindexed-rows", "1", "--retain-versions-ms", "0"]);
  try {
    await measure(Number(new URL(q.url).port));
  } finally {
    await q.stop();
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function measure(port: number) {
  const c = new Conn("127.0.0.1", port);
  const qv = Buffer.from(JSON.stringify({ vector: { single_vector: Array.from({ length: DIM }, (_, i) => Math.sin(i)) }, k: 10, columns: { column_names: ["id"] } }));
  const query = async () => {
    const r = await c.request("POST", "/v1/table/stream/query", json, qv);
    return r.status === 200 ? null : `HTTP ${r.status}: ${r.body.toString().slice(0, 200)}`;
  };
  const stats = () => post(c, json, "/v1/table/stream/stats", {});
  const active = async () => (await post(c, json, "/v1/jobs/list", { table: ["stream"] })).jobs.some((j: { status: string }) => j.status === "Queued" || j.status === "Running");
  const figures = (s: any) => `fragments ${s.fragment_stats.num_fragments}, unindexed rows ${JSON.stringify(s.maintenance.unindexed_rows)}, rows ${s.num_rows}, bytes on disk ${s.maintenance.bytes_on_disk}`;

  const before = await closedLoop("query, before", 1, 5, query);
  const conns = Array.from({ length: CLIENTS }, () => new Conn("127.0.0.1", port));
  let next = ROWS;
  const t0 = performance.now();
  await Promise.all(
    conns.map(async (w) => {
      while (next < ROWS + INSERTS) {
        const r = await w.request("POST", "/v1/table/stream/insert", arrow, Buffer.from(A.tableToIPC(rows([next++]), "stream")));
        if (r.status !== 200) throw new Error(`insert: ${r.status} ${r.body}`);
      }
    }),
  );
  const insertS = (performance.now() - t0) / 1000;
  console.log(`${INSERTS} single-row inserts from ${CLIENTS} clients: ${insertS.toFixed(1)} s; then ${figures(await stats())}`);
  const right = await closedLoop("query, right after stream", 1, 5, query);
  const m0 = performance.now();
  let s = await stats();
  while ((performance.now() - m0) / 1000 < WAIT_S) {
    s = await stats();
    const total = Object.values(s.maintenance.unindexed_rows as Record<string, number>).reduce((a, b) => a + b, 0);
    if (s.fragment_stats.num_fragments <= 20 && total === 0 && !(await active())) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  console.log(`after ${((performance.now() - m0) / 1000).toFixed(1)} s of automatic maintenance: ${figures(s)} (expected rows ${ROWS + INSERTS})`);
  const after = await closedLoop("query, after maintenance", 1, 5, query);
  console.log(header());
  for (const r of [before, right, after]) console.log(line(r));

  await post(c, json, "/v1/table/stream/delete", { predicate: "id % 2 = 0" });
  while (await active()) await new Promise((r) => setTimeout(r, 500));
  await new Promise((r) => setTimeout(r, 2000));
  while (await active()) await new Promise((r) => setTimeout(r, 500));
  const job = await post(c, json, "/v1/table/stream/optimize", {});
  await untilSucceeded(c, json, job.job_id, performance.now());
  const kept = (await stats()).maintenance.bytes_on_disk as number;
  const odd = [...range(0, ROWS + INSERTS)].filter((i) => i % 2 === 1);
  await c.request("POST", "/v1/table/copy/create", arrow, Buffer.from(A.tableToIPC(rows(odd), "stream")));
  const fresh = (await post(c, json, "/v1/table/copy/stats", {})).maintenance.bytes_on_disk as number;
  console.log(`half deleted + cleanup: ${kept} bytes on disk; a fresh copy of the remaining rows (no index): ${fresh} bytes; ratio ${(kept / fresh).toFixed(2)}`);
  for (const x of [c, ...conns]) x.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
