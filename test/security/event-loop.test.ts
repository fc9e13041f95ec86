// Nothing proportional to rows, values or body bytes runs on the event loop: while one request of
// such work runs, `/healthz` stays quick. Sampled open loop (a request every 10 ms, not waiting for
// the last), so a stall of the event loop shows as every request sent during it waiting, in p99.
// The bound is 600 ms over the p99 of the same sampling with no work running: a loaded 2-core
// machine delays any process by hundreds of ms now and then (358 ms seen at load average 20), and
// the stalls before were 1.5-1.9 s at p99. A latency target needs a quiet machine: no test's bound.
import * as lancedb from "@lancedb/lancedb";
import { describe, expect, it } from "vitest";
import { batches, queryVectors } from "../../bench/dataset.js";
import { READ_KEY, serverForFile, WRITE_KEY } from "../helpers/quiver.js";

const P99_MS = 600;
const SPEC = { rows: 30_000, dim: 8, rank: 3, seed: 11 };
const v = Array.from(queryVectors(SPEC, 1)[0]);

const q = serverForFile(
  {
    // Room for bodies of JSON rows of several MB (the default is 1 MiB).
    args: ["--max-json-body", String(16 << 20)],
    seed: async (dir) => {
      const db = await lancedb.connectNamespace("dir", { root: dir });
      const t = await db.createTable("s", [...batches(SPEC, SPEC.rows)][0], []);
      await t.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 4, numSubVectors: 2 }) });
    },
  },
  120_000,
);

/** The p99 of `/healthz` sampled for 2 s with no work running (measured once). */
let idle99: number | null = null;

/** `sampled` while `work` runs, and the bound its p99 is held to. */
async function sampledDuring<T>(work: () => Promise<T>): Promise<{ result: T; p99: number; max: number; n: number; bound: number }> {
  idle99 ??= (await sampled(() => new Promise((r) => setTimeout(r, 2000)))).p99;
  return { ...(await sampled(work)), bound: P99_MS + idle99 };
}

/** `/healthz` latencies, in ms, of requests sent every 10 ms while `work` runs, and its result. */
async function sampled<T>(work: () => Promise<T>): Promise<{ result: T; p99: number; max: number; n: number }> {
  const latencies: Promise<number>[] = [];
  let done = false;
  const sampler = (async () => {
    while (!done) {
      const t0 = performance.now();
      latencies.push(q.call("GET", "/healthz").then((r) => (expect(r.status).toBe(200), performance.now() - t0)));
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const result = await work();
  done = true;
  await sampler;
  const ms = (await Promise.all(latencies)).sort((a, b) => a - b);
  return { result, p99: ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))], max: ms[ms.length - 1], n: ms.length };
}

const read = (body: object) => q.call("POST", "/v1/table/s/query", { vector: { single_vector: v }, ...body }, { "x-api-key": READ_KEY, accept: "application/json" });

describe("the event loop under one request's work", () => {
  // Row 3 of the attack was 8,000 values over 50,000 rows; scaled down, it held the event loop
  // ~1 s a filter before. The list is 2,000 values so that validating the filter's text (linear
  // in its length, on the event loop, bounded by --max-expression-length) stays small beside it.
  it("a read key's filter `id > -1 AND id IN (2,000 values)` on a table with a serving index: evaluated off the event loop, with LanceDB's answer", async () => {
    for (let i = 0; i < 600 && (await read({ k: 3 })).headers.get("x-quiver-search-path") !== "serving"; i++) await new Promise((r) => setTimeout(r, 100));
    const values = Array.from({ length: 2000 }, (_, i) => i * 7 + 1);
    // Distinct filters: each is evaluated afresh (a filter's bitmap is kept per index version).
    const filters = [1, 2, 3].map((n) => `id > -${n} AND id IN (${values.join(", ")})`);
    const { result, p99, max, n, bound } = await sampledDuring(async () => {
      const answers = [];
      for (const filter of filters) answers.push(await read({ filter, k: 10, bypass_vector_index: true }));
      return answers;
    });
    const t = await (await lancedb.connectNamespace("dir", { root: q.dataDir })).openTable("s", []);
    const engine = (await t.vectorSearch(v).where(filters[0]).bypassVectorIndex().limit(10).toArray()).map((r) => r.id);
    expect(engine.length).toBe(10);
    for (const r of result) {
      expect(r.status, r.text).toBe(200);
      expect(r.headers.get("x-quiver-search-path")).toBe("serving");
      expect(r.json.map((row: { id: number }) => row.id)).toEqual(engine);
    }
    expect(p99, `/healthz p99 ${p99.toFixed(0)} ms, max ${max.toFixed(0)} ms over ${n} requests; idle p99 ${idle99!.toFixed(0)} ms`).toBeLessThanOrEqual(bound);
  }, 120_000);

  it("inserts of 4 MB of NDJSON rows: parsed and built off the event loop, every row stored", async () => {
    const row = (i: number) => JSON.stringify({ id: i, text: `row ${i} `.padEnd(120, "x"), vector: Array.from({ length: 8 }, (_, d) => (i * 7 + d) / 1000) });
    const create = await q.call("POST", "/v1/table/w/create", `${row(0)}\n`, { "content-type": "application/x-ndjson", "x-api-key": WRITE_KEY });
    expect(create.status, create.text).toBe(200);
    const body = Array.from({ length: 20_000 }, (_, i) => row(i + 1)).join("\n");
    expect(body.length).toBeGreaterThan(4_000_000);
    const { result, p99, max, n, bound } = await sampledDuring(async () => {
      const answers = [];
      for (let k = 0; k < 3; k++) answers.push(await q.call("POST", "/v1/table/w/insert", body, { "content-type": "application/x-ndjson", "x-api-key": WRITE_KEY }));
      return answers;
    });
    for (const r of result) expect(r.status, r.text).toBe(200);
    expect((await q.call("POST", "/v1/table/w/count_rows", {})).json).toBe(60_001);
    expect(p99, `/healthz p99 ${p99.toFixed(0)} ms, max ${max.toFixed(0)} ms over ${n} requests; idle p99 ${idle99!.toFixed(0)} ms`).toBeLessThanOrEqual(bound);
  }, 120_000);
});
