// Maintenance of vector indexes: a stream of single-row inserts into an indexed table, and an
// index split into segments by folds, rebuilt past the bound.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { paced } from "./helpers/pace.js";
import * as lancedb from "@lancedb/lancedb";
import { removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";
import { A, indexRows, indexSchema, rowsIpc, seedIndexTable } from "./helpers/index-data.js";
import { calls } from "./helpers/maintenance.js";
import { settle } from "./helpers/transactions.js";

// The production stream, small: single-row inserts from 8 clients into an indexed vector table,
// then automatic maintenance only (bench/maintenance.ts runs it at 100k x 128 with query latency).
describe("a stream of single-row inserts into a 10,000-row IVF_PQ table", () => {
  let s: Quiver;
  const N = 10_000;
  const INSERTS = 300;
  beforeAll(async () => {
    const args = ["--workers", "1", "--maintenance-unindexed-rows", "1", "--maintenance-cooldown-ms", "2000", "--retain-versions-ms", "0"];
    s = await startQuiver({
      args,
      seed: async (dir) => {
        const t = await seedIndexTable(dir, "stream", N, 32);
        await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 8, numSubVectors: 4 }) });
      },
    });
  }, 120_000);
  afterAll(async () => {
    await s.stop();
    removeDir(s.dataDir);
  });
  const c = calls(() => s);

  it("ends with at most 20 fragments, no unindexed rows and every row; deleting half and a cleanup leaves bytes within 1.3x of a fresh copy", async () => {
    let next = N;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < N + INSERTS) {
          const r = await c.post("stream", "insert", rowsIpc(1, 32, next++));
          expect(r.status, r.text).toBe(200);
        }
      }),
    );
    const end = Date.now() + paced(120_000);
    // Stats keep answering while maintenance compacts and cleans up under them.
    const statsNow = async () => {
      const r = await c.post("stream", "stats", {});
      expect(r.status, r.text).toBe(200);
      return r.json;
    };
    let stats = await statsNow();
    const settled = (st: typeof stats) => st.fragment_stats.num_fragments <= 20 && st.maintenance.unindexed_rows.vec_idx === 0;
    while (!settled(stats) && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 500));
      stats = await statsNow();
    }
    expect(stats.fragment_stats.num_fragments).toBeLessThanOrEqual(20);
    expect(stats.maintenance.unindexed_rows).toEqual({ vec_idx: 0 });
    expect((await c.post("stream", "count_rows", {})).json).toBe(N + INSERTS);
    expect((await c.post("stream", "count_rows", { predicate: `id >= ${N}` })).json).toBe(INSERTS);

    const idle = async () => {
      while ((await s.call("POST", "/v1/jobs/list", { table: ["stream"] })).json.jobs.some((j: { status: string }) => j.status === "Queued" || j.status === "Running")) {
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    // No job runs when the delete commits: a compaction it overtakes loses its commit, and the
    // files that attempt wrote are in no version, which Lance's cleanup keeps for 7 days
    // (docs/maintenance.md; seen under CI load: 3.14x a fresh copy).
    await idle();
    expect((await c.post("stream", "delete", { predicate: "id % 2 = 0" })).status).toBe(200);
    // Wait for the automatic jobs the delete may start, then clean up now.
    await idle();
    const job = await c.maintain("stream");
    const odd = indexRows(N + INSERTS, 32).filter((r) => (r.id as bigint) % 2n === 1n);
    const fresh = await c.post("copy", "create", A.tableToIPC(lancedb.makeArrowTable(odd, { schema: indexSchema(32) }), "stream"));
    expect(fresh.status, fresh.text).toBe(200);
    const after = (await c.post("stream", "stats", {})).json.maintenance.bytes_on_disk;
    const copy = (await c.post("copy", "stats", {})).json.maintenance.bytes_on_disk;
    expect((await c.post("stream", "count_rows", {})).json).toBe((N + INSERTS) / 2);
    // The job's properties say what its cleanup removed.
    expect(after / copy, JSON.stringify(job)).toBeLessThanOrEqual(1.3);
  }, 240_000);
});

describe("vector index segments", () => {
  // Each fold of new rows adds a segment to a vector index, and Lance never compacts fragments of
  // different segments together: past the bound, a job rebuilds the index first.
  let v: Quiver;
  beforeAll(async () => {
    v = await startQuiver({
      args: ["--workers", "1", "--auto-maintenance", "off", "--maintenance-max-index-segments", "3"],
      seed: async (dir) => {
        const t = await seedIndexTable(dir, "elsewhere", 2000, 16);
        await t.createIndex("vec", { config: lancedb.Index.ivfFlat({ numPartitions: 4, distanceType: "cosine" }) });
      },
    });
  }, 120_000);
  afterAll(async () => {
    await v.stop();
    removeDir(v.dataDir);
  });
  const c = calls(() => v);
  const segments = async (id: string) => (await c.post(id, "index/vec_idx/stats", {})).json;
  const figures = async (id: string) => (await c.post(id, "stats", {})).json;
  /** Folds (an insert of 5 rows and a maintenance job each) until the index has 4 segments, none rebuilding it; the rows inserted. */
  async function folds(id: string): Promise<number> {
    let rows = 2000;
    for (let i = 0; i < 8 && (await segments(id)).num_indices < 4; i++) {
      expect((await c.post(id, "insert", rowsIpc(5, 16, rows))).status).toBe(200);
      rows += 5;
      expect((await c.maintain(id)).indexes_rebuilt).toBeUndefined();
    }
    expect((await segments(id)).num_indices).toBe(4);
    return rows;
  }

  it("an index Quiver built is rebuilt with its recorded parameters once folds split it past the bound; its fragments then compact", async () => {
    expect((await c.post("seg", "create", rowsIpc(2000, 16, 0))).status).toBe(200);
    const ix = await c.post("seg", "create_index", { column: "vec", index_type: "IVF_PQ", num_partitions: 4, num_sub_vectors: 4, distance_type: "dot" });
    expect(ix.status, ix.text).toBe(200);
    expect((await settle(v, ix.json.transaction_id, 120_000)).status).toBe("Succeeded");
    const rows = await folds("seg");
    const split = await figures("seg");
    expect(split.maintenance.index_segments).toEqual({ vec_idx: 4 });
    expect(split.fragment_stats.num_fragments).toBeGreaterThanOrEqual(3);

    const done = await c.maintain("seg");
    expect(done.indexes_rebuilt).toMatch(/^vec_idx \(4 segments; its recorded parameters; \d+ ms\)$/);
    const after = await segments("seg");
    expect(after).toMatchObject({ num_indices: 1, num_unindexed_rows: 0, num_indexed_rows: rows, distance_type: "dot" });
    const f = await figures("seg");
    expect(f.fragment_stats.num_fragments).toBe(1);
    expect(f.maintenance.index_segments).toEqual({ vec_idx: 1 });
    expect((await c.post("seg", "count_rows", {})).json).toBe(rows);
    const hits = await c.post("seg", "query", { vector: { single_vector: Array.from({ length: 16 }, (_, i) => Math.sin(i)) }, k: 5, vector_column: "vec", columns: { column_names: ["id"] } });
    expect(hits.status, hits.text).toBe(200);
  }, 240_000);

  it("one built elsewhere is rebuilt with LanceDB's defaults and keeps its distance type", async () => {
    await folds("elsewhere");
    const done = await c.maintain("elsewhere");
    expect(done.indexes_rebuilt).toMatch(/^vec_idx \(4 segments; LanceDB's defaults; \d+ ms\)$/);
    expect(await segments("elsewhere")).toMatchObject({ index_type: "IVF_FLAT", distance_type: "cosine", num_indices: 1, num_unindexed_rows: 0 });
    expect((await figures("elsewhere")).fragment_stats.num_fragments).toBe(1);
  }, 240_000);
});
