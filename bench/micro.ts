// tinybench micro-benchmarks of the hot pieces:
//  - one request through the real pipeline (src/http/pipeline.ts) without a socket: route match,
//    id parse, API-key auth, JSON parse, ajv validation, the operation (namespace describe, served
//    from the catalog cache) and the JSON encoding; and a query request up to the table look-up;
//  - a describe's fixed costs one by one: route match, admission (ids, API-key auth,
//    authorisation), JSON body parse, validation, the rest of the run (operation, encoding), and
//    the accounting when it ends (metrics, access-log sampling); a read takes no idempotency check;
//  - IPC pass-through: re-framing engine result buffers into one IPC file, against decoding and
//    re-encoding them (the route Quiver does not take);
//  - splitting one batched (multi-vector) result of 32 top-10 searches into 32 answers;
//  - the accounting of a finished request (metrics and access-log sampling), next to it;
//  - one state change of a job record when the store holds 10,000 records;
//  - JSON rows (an id, two strings and a 128-d vector each) read as the table's Arrow schema, for
//    an insert of one row and of 100.
//   node dist/bench/micro.js
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Bench } from "tinybench";
import { setupAuth } from "../src/auth/authenticate.js";
import { loadConfig } from "../src/config.js";
import { arrow } from "../src/engine/arrow.js";
import { ipcFile } from "../src/engine/ipc-out.js";
import { rowsToTable } from "../src/engine/rows-in.js";
import { splitByQuery } from "../src/engine/ipc-split.js";
import { QUERY_INDEX } from "../src/engine/search-batcher.js";
import { parseJsonBody } from "../src/http/bodies.js";
import { createPipeline, type Admitted, type Incoming, type Route } from "../src/http/pipeline.js";
import { openStore, type JobRecord } from "../src/jobs/store.js";
import { openSystemTables } from "../src/engine/system-tables.js";
import { routes } from "../src/routes.js";
import { createServices } from "../src/services.js";
import { batch, queryVectors, rng, vectorSource } from "./dataset.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-micro-"));
const KEY = "micro-bench-key";
const config = loadConfig(["--data-dir", dir, "--api-keys", `${KEY}:admin`], {});
const svc = await createServices(config, () => null);
const auth = await setupAuth(config, svc.system);
const pipeline = createPipeline(svc, auth.authenticate, routes);
const signal = () => new AbortController().signal;
const request = (p: string): Incoming => ({ method: "POST", path: p, query: "", headers: { "x-api-key": KEY }, signal, gone: () => false });
const describeBody = Buffer.from("{}");
const queryBody = Buffer.from(JSON.stringify({ vector: { single_vector: Array.from(queryVectors({ dim: 128, rank: 16, seed: 42 }, 1)[0]) }, k: 10, nprobes: 20, filter: "category = 'beta'" }));

// A finished describe, as the front end reports it (the access line is sampled at the default 1%).
const finishedReq = { op: "DescribeNamespace", method: "POST", path: "/v1/namespace/%24/describe" };
const finishedOut = await pipeline.dispatch(request("/v1/namespace/%24/describe"), describeBody);

// The describe's steps, each on its own (the route and admission of one request, reused).
const describePath = "/v1/namespace/%24/describe";
const describeRoute = (pipeline.route("POST", describePath) as { route: Route }).route;
const describeAdmitted = ((await pipeline.admit(describeRoute, request(describePath))) as { admitted: Admitted }).admitted;
const describeJson = Buffer.from(JSON.stringify({ id: ["$"] }));

async function dispatch(p: string, body: Buffer, want: number) {
  const out = await pipeline.dispatch(request(p), body);
  if (out.status !== want) throw new Error(`${p}: ${out.status}`);
}

/** Engine-like result buffers: one IPC file per batch of 1,024 rows (100 x 128-d rows → ~20 files for 20k rows). */
function engineBuffers(rows: number): Buffer[] {
  const spec = { rows, dim: 128, rank: 16, seed: 1 };
  const vec = vectorSource(spec);
  const r = rng(2);
  const out: Buffer[] = [];
  for (let s = 0; s < rows; s += 1024) {
    out.push(Buffer.from(arrow.tableToIPC(batch(spec, s, Math.min(1024, rows - s), vec, r), "file")));
  }
  return out;
}

async function drain(it: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of it) n += c.byteLength;
  return n;
}

const small = engineBuffers(10);
const large = engineBuffers(20_000);
const reframe = (bufs: Buffer[]) => {
  let i = 1;
  return drain(ipcFile(bufs[0], async () => bufs[i++] ?? null));
};
const reencode = (bufs: Buffer[]) => {
  const w = new arrow.RecordBatchFileWriter();
  for (const b of bufs) for (const rb of arrow.tableFromIPC(b).batches) w.write(rb);
  w.finish();
  return w.toUint8Array(true).byteLength;
};

/** A batched search's result: 32 searches x 10 rows, with the engine's query_index column first. */
function batchedResult(searches: number): Uint8Array {
  const rows = batch({ rows: searches * 10, dim: 128, rank: 16, seed: 3 }, 0, searches * 10, vectorSource({ dim: 128, rank: 16, seed: 3 }), rng(4));
  const queryIndex = arrow.makeVector(Int32Array.from({ length: searches * 10 }, (_, i) => Math.floor(i / 10)));
  const columns = Object.fromEntries(rows.schema.fields.map((f, i) => [f.name, rows.getChildAt(i)!]));
  return arrow.tableToIPC(new arrow.Table({ query_index: queryIndex, ...columns }), "file");
}
const batched32 = batchedResult(32);
const ones32 = Array.from({ length: 32 }, () => 1);

/** A shared job store of 1,000 finished records, and one record whose progress changes. */
const storeDir = mkdtempSync(path.join(tmpdir(), "quiver-micro-store-"));
const store = await openStore(openSystemTables(storeDir, {}), storeDir);
const record = (i: number): JobRecord => ({
  id: `job-${i}`, status: "Succeeded", operation: "create_index", table: ["ns", `t${i}`],
  spec: { column: "vec", kind: "IVF_PQ", name: `vec_idx_${i}`, params: {}, branch: null }, properties: {}, createdAt: i, finishedAt: i,
});
for (let i = 0; i < 1_000; i++) await store.insert(record(i));
const moving = record(-1);
await store.insert(moving);
let tick = 0;

const rowsSchema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), true),
  new arrow.Field("text", new arrow.Utf8(), true),
  new arrow.Field("category", new arrow.Utf8(), true),
  new arrow.Field("vector", new arrow.FixedSizeList(128, new arrow.Field("item", new arrow.Float32(), true)), true),
]);
const jsonRows = (n: number) =>
  Array.from(queryVectors({ dim: 128, rank: 16, seed: 7 }, n), (v, i) => ({ id: i, text: "stream", category: "beta", vector: Array.from(v) }));
const [oneRow, hundredRows] = [jsonRows(1), jsonRows(100)];
const rowLimits = { maxDecodedBody: 1 << 30, maxValueBytes: 16 << 20 };

const bench = new Bench({ time: 1000 });
bench
  .add("pipeline: namespace describe (route, auth, parse, validate, op, encode)", () => dispatch("/v1/namespace/%24/describe", describeBody, 200))
  .add("describe step: route match (pipeline.route, matched routes kept)", () => pipeline.route("POST", describePath))
  .add("describe step: admission (ids, API-key auth, authorisation; pipeline.admit)", () => pipeline.admit(describeRoute, request(describePath)))
  .add("describe step: JSON body parse (a body with an id)", () => parseJsonBody(describeJson, 64))
  .add("describe step: validation (ajv)", () => describeRoute.spec.op.validate!(parseJsonBody(describeJson, 64), config))
  .add("describe step: run (parse, validate, operation, encode; pipeline.run)", () => pipeline.run(describeAdmitted, request(describePath), Promise.resolve(describeJson)))
  .add("request accounting when it ends: metrics and access-log sampling (pipeline.finished)", () => {
    pipeline.finished(finishedReq, finishedOut, 200, 0.8);
  })
  .add("pipeline: query request up to the table look-up (404)", () => dispatch("/v1/table/ns1%24bench/query", queryBody, 404))
  .add("IPC pass-through, top-10 result (1 batch)", () => reframe(small))
  .add("IPC decode + re-encode, top-10 result", () => reencode(small))
  .add("batch split: one result of 32 top-10 searches into 32 answers", () => splitByQuery(batched32, ones32, QUERY_INDEX))
  .add(`IPC pass-through, 20k x 128-d rows (${large.length} batches)`, () => reframe(large))
  .add("IPC decode + re-encode, 20k x 128-d rows", () => reencode(large))
  .add("JSON rows as Arrow: 1 row (id, 2 strings, 128-d vector)", () => rowsToTable(oneRow, rowsSchema, "t", rowLimits))
  .add("JSON rows as Arrow: 100 rows", () => rowsToTable(hundredRows, rowsSchema, "t", rowLimits))
  .add("job store: one progress change among 1,000 records (read, compare-and-swap commit)", () =>
    store.update(moving.id, (r) => ({ ...r, progress: { rows_done: ++tick } })),
  );
await bench.run();
console.table(bench.table());
await svc.close();
rmSync(dir, { recursive: true, force: true });
rmSync(storeDir, { recursive: true, force: true });
