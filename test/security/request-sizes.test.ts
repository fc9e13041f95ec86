// Every size a read key names is bounded before LanceDB sees it (docs/limits.md, "Sizes a request
// names"). Unbounded, `k` = 2^32 − 1 on an IVF_PQ or IVF_HNSW_SQ index made LanceDB ask for 32 GiB
// at once and the process aborted; so did `ef` = 2^32 − 1; 55,000 query vectors held the event loop
// about two minutes (LanceDB copies its vector list as each is added). With the serving index off,
// LanceDB answers every search, as it does any k past 10,000 with the index on.
import * as lancedb from "@lancedb/lancedb";
import { describe, expect, it } from "vitest";
import { batches, queryVectors } from "../../bench/dataset.js";
import { READ_KEY, serverForFile } from "../helpers/quiver.js";
import { paced } from "../helpers/pace.js";

const SPEC = { rows: 3000, dim: 8, rank: 3, seed: 5 };
const v = Array.from(queryVectors(SPEC, 1)[0]);
const q = serverForFile({
  args: ["--serving", "off"],
  seed: async (dir) => {
    const db = await lancedb.connectNamespace("dir", { root: dir });
    const rows = [...batches(SPEC, SPEC.rows)][0];
    const pq = await db.createTable("pq", rows, []);
    await pq.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }) });
    const hnsw = await db.createTable("hnsw", rows, []);
    await hnsw.createIndex("vector", { config: lancedb.Index.hnswSq({ numPartitions: 1 }) });
  },
});
const read = (table: string, body: object) => q.call("POST", `/v1/table/${table}/query`, { vector: v, ...body }, { "x-api-key": READ_KEY, accept: "application/json" });

describe("sizes a request names", () => {
  for (const table of ["pq", "hnsw"]) {
    it(`refuses k and ef of 2^32 - 1 on an ${table === "pq" ? "IVF_PQ" : "IVF_HNSW_SQ"} index with a 400 naming the field; the server answers on`, async () => {
      for (const [body, field] of [
        [{ k: 4294967295 }, "k"],
        [{ k: 10, ef: 4294967295 }, "ef"],
        [{ k: 10, refine_factor: 4294967295 }, "refine_factor"],
        [{ k: 10, nprobes: 4294967295 }, "nprobes"],
        [{ k: 9_000, offset: 1_001 }, "offset"],
        [{ k: 10_000, refine_factor: 1_000 }, "refine_factor"],
        ...(table === "hnsw" ? ([[{ k: 100, ef: 50 }, "ef"]] as const) : []),
      ] as const) {
        const r = await read(table, body);
        expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(400);
        expect(r.json.detail).toMatch(new RegExp(`^${field}: `));
      }
      const ok = await read(table, { k: 3 });
      expect(ok.status, ok.text).toBe(200);
      expect(ok.json).toHaveLength(3);
      // The largest sizes allowed are answered.
      for (const body of [{ k: 5_000, offset: 5_000, ef: 100_000 }, { k: 1_000, refine_factor: 1_000, nprobes: 65_536 }]) {
        const most = await read(table, body);
        expect(most.status, `${JSON.stringify(body)}: ${most.text}`).toBe(200);
      }
    });
  }

  it("refuses 55,000 query vectors at once with a 400 naming the field, /healthz answering meanwhile", async () => {
    const vectors = Array.from({ length: 55_000 }, (_, i) => [i % 7, 1, 2, 3, 4, 5, 6, 7]);
    for (const vector of [vectors, { multi_vector: vectors }]) {
      const started = performance.now();
      const big = read("pq", { vector, k: 1 });
      const health: number[] = [];
      let done = false;
      void big.finally(() => (done = true));
      while (!done) {
        const t = performance.now();
        expect((await q.call("GET", "/healthz")).status).toBe(200);
        health.push(performance.now() - t);
      }
      const r = await big;
      expect(r.status, r.text).toBe(400);
      expect(r.json.detail).toMatch(/^vector(\.multi_vector)?: must NOT have more than 512 items/);
      // Margins for a loaded 2-core machine; unbounded, this took about two minutes.
      expect(performance.now() - started).toBeLessThan(paced(10_000));
      expect(Math.max(...health)).toBeLessThan(2_000);
    }
    // The most query vectors allowed are answered, one row each.
    const r = await read("pq", { vector: vectors.slice(0, 512), k: 1 });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toHaveLength(512);
  }, 60_000);
});
