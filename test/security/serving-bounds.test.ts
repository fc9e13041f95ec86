// A search the serving index answers is bounded by what Quiver allows, not by what a request asks:
// ef, refine_factor and nprobes as large as the schema takes raise the walk's width only to 10,000
// candidates (its heaps are sized by it), k + offset past 10,000 is a 400 (test/security/request-sizes.test.ts),
// a vector of another length is LanceDB's 400; distinct filters keep the bitmaps of the last 64; with a read
// key, the server stays up and its memory bounded.
import * as lancedb from "@lancedb/lancedb";
import { describe, expect, it } from "vitest";
import { batches, queryVectors } from "../../bench/dataset.js";
import { READ_KEY, serverForFile } from "../helpers/quiver.js";
import { sample } from "../helpers/metrics.js";

const SPEC = { rows: 3000, dim: 8, rank: 3, seed: 9 };
const v = Array.from(queryVectors(SPEC, 1)[0]);
const q = serverForFile({
  seed: async (dir) => {
    const db = await lancedb.connectNamespace("dir", { root: dir });
    const t = await db.createTable("s", [...batches(SPEC, SPEC.rows)][0], []);
    await t.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }) });
  },
});
const read = (body: object) => q.call("POST", "/v1/table/s/query", { vector: { single_vector: v }, ...body }, { "x-api-key": READ_KEY });
const servingReady = async () => {
  for (let i = 0; i < 300 && (await read({ k: 3 })).headers.get("x-quiver-search-path") !== "serving"; i++) await new Promise((r) => setTimeout(r, 100));
};
const rss = async () => sample((await q.call("GET", "/metrics")).text, "process_resident_memory_bytes")!;

describe("serving index bounds", () => {
  it("answers huge ef, refine_factor and nprobes with a walk of at most 10,000 candidates, memory unmoved", async () => {
    await servingReady();
    const before = await rss();
    for (const knobs of [{ ef: 100_000 }, { refine_factor: 1_000 }, { nprobes: 65_536 }, { k: 10_000 }]) {
      const r = await read({ k: 5, ...knobs });
      expect(r.status, r.text).toBe(200);
      expect(r.headers.get("x-quiver-search-path")).toBe("serving");
    }
    expect((await rss()) - before).toBeLessThan(256 * 2 ** 20);
    const plan = await q.call("POST", "/v1/table/s/explain_plan", { query: { vector: { single_vector: v }, k: 5, ef: 100_000 } }, { "x-api-key": READ_KEY });
    expect(plan.json).toMatch(/ef=10000,/);
  });

  it("holds the bitmaps of the 64 filters last used, however many distinct filters a read key sends", async () => {
    const filtersHeld = async () => {
      const scrape = (await q.call("GET", "/metrics")).text;
      return [sample(scrape, "quiver_serving_index_part_bytes", { table: "s", part: "filters" })!, sample(scrape, "quiver_serving_index_bytes", { table: "s" })!];
    };
    const send = async (from: number, to: number) => {
      for (let id = from; id < to; id++) {
        const r = await read({ k: 3, filter: `id = ${id}` });
        expect(r.status, r.text).toBe(200);
        expect(r.headers.get("x-quiver-search-path")).toBe("serving");
      }
    };
    await servingReady();
    await send(0, 64);
    const [filters, bytes] = await filtersHeld();
    expect(filters).toBeGreaterThan(0);
    await send(64, 300);
    expect(await filtersHeld()).toEqual([filters, bytes]);
  });

  it("refuses k + offset past 10,000, and a vector of another length is LanceDB's 400", async () => {
    expect((await read({ k: 9_000, offset: 1_001 })).status).toBe(400);
    const bad = await q.call("POST", "/v1/table/s/query", { vector: { single_vector: [1, 2, 3] }, k: 3 }, { "x-api-key": READ_KEY });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("x-quiver-search-path")).toBeNull();
    expect(bad.json.detail).toMatch(/dimension/i);
    expect((await read({ k: 3 })).status).toBe(200);
  });
});
