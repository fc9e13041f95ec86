// Automatic maintenance under load, four cases (--case, comma-separated; default stream):
//
// - stream: a table of ROWS x DIM vectors with an IVF_PQ index (written and indexed with LanceDB in
//   process), served by a Quiver it starts; vector query latency before, right after INSERTS
//   single-row Arrow inserts from CLIENTS clients, and after at most WAIT_S seconds of automatic
//   maintenance (fragments, unindexed rows and row count reported); then half the rows deleted and
//   one cleanup, bytes on disk against a freshly written copy of the remaining rows.
// - backfill: the same table; vector query latency before a client's backfill of a js column, right
//   after it, and once automatic maintenance made the index cover every row again (and how long
//   after the backfill's end that was).
// - mix: a 20,000 x 64 IVF_PQ table; an open loop of RATE requests a second (vector queries) for 15 s
//   on the quiet table, then MIX_S seconds with INSERT_PCT % of them inserts of INSERT_ROWS rows:
//   queries answered per second against the quiet table's, and fragments second by second. RATE
//   "auto" is 15 % of the quiet table's closed-loop throughput (8 clients, 5 s), the share 200/s was
//   of the 1,400 queries/s of the setup this case comes from, so a busy machine is not overrun.
// - azurite: the same table on Azurite (object storage); 8 clients insert single rows for AZ_S
//   seconds: insert latency, fragments and versions kept.
//
// mix and azurite run each server setting in alternating rounds (--rounds): Quiver's defaults, and
// with --compare also the pacing Quiver had before (a 60 s cooldown, no bound on versions kept).
//
//   node dist/bench/maintenance.js [--case stream,backfill,mix,azurite] [--rows 100000] [--dim 128]
//     [--inserts 2000] [--clients 8] [--wait 120] [--rate auto|200] [--mix 60] [--insert-pct 10]
//     [--insert-rows 20] [--azurite-s 60] [--rounds 1] [--compare] [--server-args "--flag value ..."]
import * as lancedb from "@lancedb/lancedb";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startAzurite } from "./azurite.js";
import { Conn, post, untilSucceeded } from "./http-client.js";
import { openLoop, type OpenLoopRequest } from "./open-loop.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line, summary } from "./stats.js";

const { values } = parseArgs({
  options: {
    case: { type: "string", default: "stream" },
    rows: { type: "string", default: "100000" },
    dim: { type: "string", default: "128" },
    inserts: { type: "string", default: "2000" },
    clients: { type: "string", default: "8" },
    wait: { type: "string", default: "120" },
    rate: { type: "string", default: "auto" },
    mix: { type: "string", default: "60" },
    "insert-pct": { type: "string", default: "10" },
    "insert-rows": { type: "string", default: "20" },
    "azurite-s": { type: "string", default: "60" },
    rounds: { type: "string", default: "1" },
    compare: { type: "boolean", default: false },
    "server-args": { type: "string", default: "" },
  },
});
/** Flags every server of the run gets besides the case's own (e.g. "--maintenance-max-index-segments 0"). */
const SERVER_ARGS = values["server-args"]!.split(" ").filter(Boolean);
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

/** A data directory seeded with the stream table (ROWS x DIM, IVF_PQ), written by LanceDB in process. */
async function seededDir(): Promise<string> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "quiver-bench-maint-"));
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  const t = await db.createTable("stream", rows(range(0, Math.min(ROWS, 20_000))), []);
  for (let done = 20_000; done < ROWS; done += 20_000) await t.add(rows(range(done, Math.min(20_000, ROWS - done))));
  await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: Math.max(1, Math.round(Math.sqrt(ROWS) / 4)), numSubVectors: DIM / 8 }) });
  return dataDir;
}

/** Run `work` against a Quiver on `dataDir` started with `args`; stopped and the directory removed after. */
async function withQuiver(dataDir: string, args: string[], work: (port: number) => Promise<void>): Promise<void> {
  const q = await startQuiver(dataDir, KEY, [...SERVER_ARGS, ...args]);
  try {
    await work(Number(new URL(q.url).port));
  } finally {
    await q.stop();
    await new Promise((r) => setTimeout(r, 500));
    if (!dataDir.startsWith("az://")) rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  const cases = new Set(values.case!.split(","));
  // Defaults, except: any unindexed row is worth folding in, and no window, for the storage figure.
  if (cases.has("stream")) await withQuiver(await seededDir(), ["--maintenance-unindexed-rows", "1", "--retain-versions-ms", "0"], measure);
  if (cases.has("backfill")) await withQuiver(await seededDir(), [], afterBackfill);
  const settings: [string, string[]][] = [["defaults", []]];
  if (values.compare) settings.push(["earlier pacing (--maintenance-cooldown-ms 60000 --maintenance-max-versions 0)", ["--maintenance-cooldown-ms", "60000", "--maintenance-max-versions", "0"]]);
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const [name, args] of settings) {
      if (cases.has("mix")) {
        console.log(`\n== mix, round ${round}: ${name}`);
        await withQuiver(mkdtempSync(path.join(tmpdir(), "quiver-bench-mix-")), args, mix);
      }
      if (cases.has("azurite")) {
        console.log(`\n== azurite, round ${round}: ${name}`);
        const az = await startAzurite();
        try {
          await az.createContainer("bench");
          const storage = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
          await withQuiver("az://bench/quiver", [...storage, ...args], azuriteInserts);
        } finally {
          await az.stop();
        }
      }
    }
  }
}

/** One vector query of the stream table on `c`: null, or what went wrong. */
function streamQuery(c: Conn): () => Promise<string | null> {
  const qv = Buffer.from(JSON.stringify({ vector: { single_vector: Array.from({ length: DIM }, (_, i) => Math.sin(i)) }, k: 10, columns: { column_names: ["id"] } }));
  return async () => {
    const r = await c.request("POST", "/v1/table/stream/query", json, qv);
    return r.status === 200 ? null : `HTTP ${r.status}: ${r.body.toString().slice(0, 200)}`;
  };
}

async function measure(port: number) {
  const c = new Conn("127.0.0.1", port);
  const query = streamQuery(c);
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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const unindexedOf = (s: any) => Object.values(s.maintenance.unindexed_rows as Record<string, number>).reduce((a, b) => a + b, 0);

async function afterBackfill(port: number) {
  const c = new Conn("127.0.0.1", port);
  const query = streamQuery(c);
  const before = await closedLoop("query, before the backfill", 1, 5, query);
  const vc = { udf_backend: "js", udf: "(id) => Number(id) % 7", input_columns: ["id"], outputs: [{ column: "m", data_type: { type: "float64" }, nullable: true }] };
  await post(c, json, "/v1/table/stream/add_columns", { new_columns: [{ name: "m", virtual_column: vc }] });
  const t0 = performance.now();
  const job = await post(c, json, "/v1/table/stream/backfill_column", { column: "m" });
  const done = await untilSucceeded(c, json, job.job_id, t0);
  const ended = performance.now();
  const stats = async () => post(c, json, "/v1/table/stream/stats", {});
  console.log(`backfill of ${done.properties.rows_done} rows: ${done.seconds.toFixed(1)} s; then ${JSON.stringify((await stats()).maintenance.unindexed_rows)} unindexed`);
  const right = await closedLoop("query, right after the backfill", 1, 5, query);
  let s = await stats();
  while (unindexedOf(s) > 0 && performance.now() - ended < WAIT_S * 1000) {
    await sleep(250);
    s = await stats();
  }
  const coveredS = (performance.now() - ended) / 1000;
  console.log(`index covering every row again ${coveredS.toFixed(1)} s after the backfill ended (${unindexedOf(s)} unindexed, ${s.fragment_stats.num_fragments} fragments, ${s.maintenance.deleted_rows} deleted rows)`);
  const after = await closedLoop("query, index covering again", 1, 5, query);
  console.log(header());
  for (const r of [before, right, after]) console.log(line(r));
  console.log(`p50 after / before: ${(summary(after).p50 / summary(before).p50).toFixed(2)}`);
  c.close();
}

const MIX_ROWS = 20_000;
const MIX_DIM = 64;
const mixSchema = new A.Schema([new A.Field("id", new A.Int64()), new A.Field("vec", new A.FixedSizeList(MIX_DIM, new A.Field("item", new A.Float32(), true)))]);
const mixRows = (from: number, n: number) => {
  let s = from + 1;
  const r = () => ((s = (s * 16807) % 2147483647) / 2147483647) - 0.5;
  return Buffer.from(A.tableToIPC(lancedb.makeArrowTable(range(from, n).map((id) => ({ id: BigInt(id), vec: Array.from({ length: MIX_DIM }, r) })), { schema: mixSchema }), "stream"));
};

/** The mix table through Quiver: 20,000 x 64 rows, an IVF_PQ index, one maintenance pass. */
async function seedMix(c: Conn) {
  await post(c, arrow, "/v1/table/mix/create", mixRows(0, 5000));
  for (let from = 5000; from < MIX_ROWS; from += 5000) await post(c, arrow, "/v1/table/mix/insert", mixRows(from, 5000));
  const ix = await post(c, json, "/v1/table/mix/create_index", { column: "vec", index_type: "IVF_PQ", num_partitions: 35, num_sub_vectors: 8 });
  await untilSucceeded(c, json, ix.transaction_id, performance.now());
  const m = await post(c, json, "/v1/table/mix/optimize", {});
  await untilSucceeded(c, json, m.job_id, performance.now());
}

/** How many maintenance jobs of the mix table there were, and how many rebuilt an index (on a connection of its own: an idle one may have been closed). */
async function maintenanceJobs(port: number): Promise<{ count: number; rebuilds: number; durations: string }> {
  const c = new Conn("127.0.0.1", port);
  const jobs = (await post(c, json, "/v1/jobs/list", { table: ["mix"] })).jobs.filter((j: { job_type: string }) => j.job_type === "maintenance");
  let rebuilds = 0;
  const ms: number[] = [];
  for (const j of jobs) {
    const p = (await post(c, json, `/v1/transaction/${j.job_id}/describe`, {})).properties ?? {};
    if (p.indexes_rebuilt) rebuilds++;
    if (p.duration_ms !== undefined) ms.push(Number(p.duration_ms));
  }
  c.close();
  ms.sort((a, b) => a - b);
  const durations = ms.length ? `job duration p50 ${ms[Math.floor(ms.length / 2)]} ms, max ${ms.at(-1)} ms, total ${ms.reduce((a, b) => a + b, 0)} ms` : "no job durations";
  return { count: jobs.length, rebuilds, durations };
}

/** Fragments and versions of the mix table, read every second while `running()` (one read at a time). */
function watchFigures(port: number, running: () => boolean): Promise<{ fragments: number[]; versions: number[]; segments: number[] }> {
  let c = new Conn("127.0.0.1", port);
  const out = { fragments: [] as number[], versions: [] as number[], segments: [] as number[] };
  return (async () => {
    while (running()) {
      // A second the server refused (past --max-in-flight, or closing the connection) has no sample.
      if (c.closed) c = new Conn("127.0.0.1", port);
      const r = await c.request("POST", "/v1/table/mix/stats", json, Buffer.from("{}")).catch(() => ({ status: 0, body: Buffer.alloc(0) }));
      if (r.status === 200) {
        const s = JSON.parse(r.body.toString());
        out.fragments.push(s.fragment_stats.num_fragments);
        out.versions.push(s.maintenance.versions_kept);
        // The most segments of a vector index (servers before index_segments was shown: none).
        out.segments.push(Math.max(0, ...Object.values((s.maintenance.index_segments ?? {}) as Record<string, number>)));
      }
      await sleep(1000);
    }
    c.close();
    return out;
  })();
}

async function mix(port: number) {
  const c = new Conn("127.0.0.1", port);
  await seedMix(c);
  c.close();
  const MIX_S = Number(values.mix);
  const PCT = Number(values["insert-pct"]);
  const IROWS = Number(values["insert-rows"]);
  let s = 1;
  const rnd = () => ((s = (s * 48271) % 2147483647) / 2147483647) - 0.5;
  const query = (): OpenLoopRequest => ({ kind: "query", method: "POST", path: "/v1/table/mix/query", headers: json, body: Buffer.from(JSON.stringify({ vector: { single_vector: Array.from({ length: MIX_DIM }, rnd) }, k: 10, columns: { column_names: ["id"] } })) });
  let RATE = Number(values.rate);
  if (values.rate === "auto") {
    const qs = Array.from({ length: 8 }, () => new Conn("127.0.0.1", port));
    const capacity = await closedLoop("query, quiet, 8 clients", 8, 5, async (loop) => {
      const r = query();
      const a = await qs[loop].request(r.method, r.path, r.headers, r.body);
      return a.status === 200 ? null : `HTTP ${a.status}`;
    });
    for (const q of qs) q.close();
    RATE = Math.max(10, Math.round(0.15 * summary(capacity).qps));
    console.log(`quiet closed loop: ${summary(capacity).qps.toFixed(0)} queries/s; open-loop rate ${RATE}/s`);
  }
  let nextId = MIX_ROWS;
  const insert = (): OpenLoopRequest => {
    const body = mixRows(nextId, IROWS);
    nextId += IROWS;
    return { kind: "insert", method: "POST", path: "/v1/table/mix/insert", headers: arrow, body };
  };
  const quiet = await openLoop(port, RATE, 15, query);
  const quietPerS = quiet.perSecond.get("query")!.slice(1, -1);
  let running = true;
  const figures = watchFigures(port, () => running);
  // Every (100 / PCT)th request an insert, spread evenly.
  const every = PCT > 0 ? Math.round(100 / PCT) : Infinity;
  const loaded = await openLoop(port, RATE, MIX_S, (i) => (i % every === every - 1 ? insert() : query()));
  running = false;
  const f = await figures;
  const perS = loaded.perSecond.get("query")!.slice(1, MIX_S - 1);
  const base = median(quietPerS);
  const ins = [...(loaded.latencies.get("insert") ?? [])].sort((a, b) => a - b);
  const jobs = await maintenanceJobs(port);
  console.log(`quiet: ${base} queries/s (median of ${quietPerS.length} s; min ${Math.min(...quietPerS)})`);
  console.log(`mix: queries/s per second ${perS.join(" ")}`);
  console.log(`mix: min ${Math.min(...perS)} = ${(Math.min(...perS) / base).toFixed(2)}x quiet, median ${median(perS)}; seconds under 0.5x: ${perS.filter((n) => n < base / 2).length}; errors ${JSON.stringify(Object.fromEntries(loaded.errors))}`);
  console.log(`fragments per second ${f.fragments.join(" ")}`);
  console.log(`fragments peak ${Math.max(...f.fragments)}, index segments peak ${Math.max(...f.segments)}, versions kept peak ${Math.max(...f.versions)} / last ${f.versions.at(-1)}; inserts ${ins.length}, p50 ${ins[Math.floor(ins.length / 2)]?.toFixed(1)} ms, p99 ${ins[Math.floor(ins.length * 0.99)]?.toFixed(1)} ms; maintenance jobs ${jobs.count}, index rebuilds ${jobs.rebuilds}; ${jobs.durations}`);
}

async function azuriteInserts(port: number) {
  const c = new Conn("127.0.0.1", port);
  await seedMix(c);
  c.close();
  const seconds = Number(values["azurite-s"]);
  let running = true;
  const figures = watchFigures(port, () => running);
  const lat: number[] = [];
  const errors: string[] = [];
  let nextId = MIX_ROWS;
  const end = performance.now() + seconds * 1000;
  const conns = Array.from({ length: 8 }, () => new Conn("127.0.0.1", port));
  await Promise.all(
    conns.map(async (w) => {
      while (performance.now() < end) {
        const t = performance.now();
        const r = await w.request("POST", "/v1/table/mix/insert", arrow, mixRows(nextId++, 1));
        if (r.status === 200) lat.push(performance.now() - t);
        else errors.push(`${r.status}`);
      }
    }),
  );
  running = false;
  const f = await figures;
  lat.sort((a, b) => a - b);
  const jobs = await maintenanceJobs(port);
  console.log(`${lat.length} single-row inserts from 8 clients in ${seconds} s: p50 ${lat[Math.floor(lat.length / 2)]?.toFixed(0)} ms, p99 ${lat[Math.floor(lat.length * 0.99)]?.toFixed(0)} ms, max ${lat.at(-1)?.toFixed(0)} ms; errors ${errors.length}`);
  console.log(`fragments per second ${f.fragments.join(" ")}`);
  console.log(`fragments peak ${Math.max(...f.fragments)}, index segments peak ${Math.max(...f.segments)}, versions kept peak ${Math.max(...f.versions)} / last ${f.versions.at(-1)}; maintenance jobs ${jobs.count}, index rebuilds ${jobs.rebuilds}; ${jobs.durations}`);
  for (const x of conns) x.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
