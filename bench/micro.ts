// tinybench micro-benchmarks of the hot pieces:
//  - one query request's front-end work: route match, id parse, API-key auth, JSON parse, ajv
//    validation and normalisation to a QuerySpec (what happens before LanceDB is called);
//  - IPC pass-through: re-framing engine result buffers into one IPC file, against decoding and
//    re-encoding them (the route Quiver does not take).
//   node dist/bench/micro.js
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Bench } from "tinybench";
import { setupAuth } from "../src/auth/authenticate.js";
import { loadConfig } from "../src/config.js";
import { arrow } from "../src/engine/arrow.js";
import { ipcFile } from "../src/engine/ipc-out.js";
import { compileRoutes } from "../src/http/router.js";
import { decodeSegment, parseId } from "../src/http/path-id.js";
import { querySpec } from "../src/operations/query-spec.js";
import { routes } from "../src/routes.js";
import { batch, queryVectors, rng, vectorSource } from "./dataset.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-micro-"));
const KEY = "micro-bench-key";
const auth = setupAuth(loadConfig(["--data-dir", dir, "--api-keys", `${KEY}:read`], {}));
const match = compileRoutes(routes);
const body = Buffer.from(JSON.stringify({ vector: { single_vector: Array.from(queryVectors({ dim: 128, rank: 16, seed: 42 }, 1)[0]) }, k: 10, nprobes: 20, filter: "category = 'beta'" }));

async function frontEnd() {
  const m = match("POST", "/v1/table/ns1%24bench/query");
  if (m.kind !== "found") throw new Error("no route");
  const id = parseId(decodeSegment(m.params.id, "id"), "$");
  await auth.authenticate({ apiKey: KEY });
  const parsed = JSON.parse(body.toString("utf8"));
  const op = m.value.op;
  return querySpec(op.validate!(parsed) as never) && id;
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

const bench = new Bench({ time: 1000 });
bench
  .add("front end: route + auth + parse + validate (query)", frontEnd)
  .add("IPC pass-through, top-10 result (1 batch)", () => reframe(small))
  .add("IPC decode + re-encode, top-10 result", () => reencode(small))
  .add(`IPC pass-through, 20k x 128-d rows (${large.length} batches)`, () => reframe(large))
  .add("IPC decode + re-encode, 20k x 128-d rows", () => reencode(large));
await bench.run();
console.table(bench.table());
rmSync(dir, { recursive: true, force: true });
