// Table maintenance end to end: POST /v1/table/{id}/optimize queues a maintenance job that
// compacts small fragments, folds new rows into indexes and cleans up old versions; what the
// cleanup keeps (tags, the versions branches start from, the retention window, a view's last
// refreshed source version, versions read explicitly, everything while other jobs run); backfill
// staleness after compaction; writes made while maintenance runs; versions a client commits through
// version/create; bad requests; automatic maintenance (thresholds, pacing, after a backfill) and its
// metrics; the bound on versions kept.
import { Field, Float64, Int64, Schema, Table, Utf8, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { sample } from "./helpers/metrics.js";
import * as lancedb from "@lancedb/lancedb";
import { ADMIN_KEY, removeDir, serverForFile, startQuiver, READ_KEY, type Quiver } from "./helpers/quiver.js";
import { A, indexRows, indexSchema, rowsIpc, seedIndexTable } from "./helpers/index-data.js";
import { openDirect, seedTable } from "./helpers/seed.js";
import { sample } from "./helpers/metrics.js";
import { settle } from "./helpers/transactions.js";

// Retention window 0: every version not kept for another reason is removed. Maintenance runs only
// when asked here (the triggers have their own server below).
const q = serverForFile({ args: ["--retain-versions-ms", "0", "--workers", "1", "--auto-maintenance", "off"] });

const rows = (from: number, n: number) =>
  toStream(new Table({
    id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(from + i)), new Int64()),
    x: vectorFromArray(Array.from({ length: n }, (_, i) => (from + i) / 4), new Float64()),
    s: vectorFromArray(Array.from({ length: n }, (_, i) => `w${(from + i) % 7}`), new Utf8()),
  }));

function calls(s: () => Quiver) {
  const post = (id: string, op: string, body?: unknown, qs = "") => s().call("POST", `/v1/table/${id}/${op}${qs}`, body);
  const insert = async (id: string, from: number, n: number) => {
    const r = await post(id, "insert", rows(from, n));
    expect(r.status, r.text).toBe(200);
  };
  const versions = async (id: string, body: Record<string, unknown> = {}) =>
    ((await post(id, "version/list", body)).json.versions as { version: number }[]).map((v) => v.version).sort((a, b) => a - b);
  const maintain = async (id: string, body: Record<string, unknown> = {}) => {
    const r = await post(id, "optimize", body);
    expect(r.status, r.text).toBe(202);
    const done = await settle(s(), r.json.job_id, 120_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    return done.properties;
  };
  return { post, insert, versions, maintain };
}
const { post, insert, versions, maintain } = calls(() => q);
const count = async (id: string, body: Record<string, unknown> = {}) => (await post(id, "count_rows", body)).json as number;

/** `what()` once `ok` holds of it, or after `ms` whatever it is then. */
async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, ms = 90_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await what();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Whether an automatic maintenance job of `table` succeeds within a minute. */
async function maintainedByItself(table: string): Promise<boolean> {
  for (const end = Date.now() + 60_000; Date.now() < end; ) {
    const jobs = (await q.call("POST", "/v1/jobs/list", { table: [table] })).json.jobs as { job_type: string; status: string }[];
    if (jobs.some((j) => j.job_type === "maintenance" && j.status === "Succeeded")) return true;
    await new Promise((res) => setTimeout(res, 100));
  }
  return false;
}

let n = 0;
/** A table made of `commits` small inserts of 10 rows each. */
async function smallCommits(commits: number): Promise<string> {
  const id = `m${++n}`;
  expect((await post(id, "create", rows(0, 10))).status).toBe(200);
  for (let i = 1; i < commits; i++) await insert(id, i * 10, 10);
  return id;
}

describe("maintenance", () => {
  it("compacts small fragments and folds new rows into a scalar and an FTS index; every row stays", async () => {
    const t = await smallCommits(6);
    for (const [op, body] of [["create_scalar_index", { column: "id", index_type: "BTREE" }], ["create_index", { column: "s", index_type: "FTS" }]] as const) {
      const r = await post(t, op, body);
      expect(r.status, r.text).toBe(200);
      expect((await settle(q, r.json.transaction_id, 60_000)).status).toBe("Succeeded");
    }
    for (let i = 6; i < 12; i++) await insert(t, i * 10, 10);
    const before = (await post(t, "stats", {})).json;
    expect(before.fragment_stats.num_fragments).toBe(12);
    const ixs = (await post(t, "index/list", {})).json.indexes as { index_name: string }[];
    expect(ixs).toHaveLength(2);
    for (const ix of ixs) expect((await post(t, `index/${ix.index_name}/stats`, {})).json.num_unindexed_rows).toBeGreaterThan(0);

    const done = await maintain(t, { cleanup: false });
    // Lance compacts the fragments an index covers apart from the ones it does not: two at most.
    expect(done).toMatchObject({ operation: "maintenance", phase: "done", fragments_before: "12", unindexed_rows_after: "0" });
    expect(Number(done.fragments_after)).toBeLessThanOrEqual(2);
    expect(Number(done.unindexed_rows_before)).toBeGreaterThan(0);
    const after = (await post(t, "stats", {})).json;
    expect(after.fragment_stats.num_fragments).toBe(Number(done.fragments_after));
    expect(before.maintenance).toMatchObject({ small_fragments: 12, last_maintenance: null });
    expect(after.maintenance).toMatchObject({ small_fragments: Number(done.fragments_after), unindexed_rows: { id_idx: 0, s_idx: 0 } });
    expect(Date.parse(after.maintenance.last_maintenance)).toBeGreaterThan(Date.parse(done.created_at));
    expect(after.maintenance.versions_kept).toBeGreaterThan(12);
    expect(after.maintenance.bytes_on_disk).toBeGreaterThan(after.total_bytes);
    for (const ix of ixs) expect((await post(t, `index/${ix.index_name}/stats`, {})).json.num_unindexed_rows).toBe(0);
    expect(await count(t)).toBe(120);
    expect(await count(t, { predicate: "id = 115" })).toBe(1);
    const listed = (await q.call("POST", "/v1/jobs/list", {})).json;
    expect(JSON.stringify(listed)).toContain(done.operation);
  });

  it("cleanup: false keeps every version; a cleanup then removes the ones nothing keeps", async () => {
    const t = await smallCommits(5);
    await maintain(t, { cleanup: false });
    const all = await versions(t);
    expect(all.slice(0, 5)).toEqual([1, 2, 3, 4, 5]);
    const done = await maintain(t);
    const left = await versions(t);
    expect(left).toHaveLength(1);
    expect((await post(t, "stats", {})).json.maintenance.versions_kept).toBe(1);
    expect(Number(done.versions_removed)).toBe(all.length - 1);
    expect(await count(t)).toBe(50);
  });

  it("a table's properties turn automatic maintenance on under --auto-maintenance off, with their own threshold", async () => {
    const props = { "quiver.maintenance": "on", "quiver.maintenance.small_fragments": "3" };
    const r = await post("own", "create", rows(0, 1), `?properties=${encodeURIComponent(JSON.stringify(props))}`);
    expect(r.status, r.text).toBe(200);
    for (let i = 1; i < 4; i++) await insert("own", i, 1);
    expect(await maintainedByItself("own")).toBe(true);
    const metrics = (await q.call("GET", "/metrics")).text;
    expect(sample(metrics, "quiver_jobs", { kind: "maintenance", state: "Succeeded" })).toBeGreaterThanOrEqual(1);
  });

  it("deleted rows: stats and /metrics count them; past a table's deleted_percent they set off maintenance, which compacts them away", async () => {
    // Automatic maintenance is off on this server: the rows stay deleted in place.
    expect((await post("holes", "create", rows(0, 100))).status).toBe(200);
    expect((await post("holes", "delete", { predicate: "id < 50" })).status).toBe(200);
    expect((await post("holes", "stats", {})).json.maintenance.deleted_rows).toBe(50);
    expect(sample((await q.call("GET", "/metrics")).text, "quiver_table_deleted_rows", { table: "holes", branch: "main" })).toBe(50);

    const props = { "quiver.maintenance": "on", "quiver.maintenance.deleted_percent": "20" };
    expect((await post("sparse", "create", rows(0, 100), `?properties=${encodeURIComponent(JSON.stringify(props))}`)).status).toBe(200);
    expect((await post("sparse", "delete", { predicate: "id < 10" })).status).toBe(200);
    expect((await post("sparse", "delete", { predicate: "id < 50" })).status).toBe(200);
    expect(await maintainedByItself("sparse")).toBe(true);
    expect((await post("sparse", "stats", {})).json.maintenance.deleted_rows).toBe(0);
    expect(await count("sparse")).toBe(50);
    expect(sample((await q.call("GET", "/metrics")).text, "quiver_table_deleted_rows", { table: "sparse", branch: "main" })).toBe(0);
  });

  it("keeps tagged versions and the versions branches start from, and both stay readable", async () => {
    const t = await smallCommits(6);
    expect((await post(t, "tags/create", { tag: "two", version: 2 })).status).toBe(200);
    expect((await post(t, "branches/create", { name: "b4", from_version: 4 })).status).toBeLessThan(300);
    await maintain(t);
    const kept = await versions(t);
    expect(kept).toContain(2);
    expect(kept).toContain(4);
    expect(kept).not.toContain(1);
    expect(await count(t, { version: 2 })).toBe(20);
    expect(await count(t, { branch: "b4" })).toBe(40);
    expect(await count(t)).toBe(60);
  });

  it("maintains a branch on its own: its old versions go, main's stay", async () => {
    const t = await smallCommits(3);
    expect((await post(t, "branches/create", { name: "side" })).status).toBeLessThan(300);
    for (let i = 0; i < 3; i++) {
      const r = await post(t, "insert", rows(100 + i, 1), "?branch=side");
      expect(r.status, r.text).toBe(200);
    }
    const mainBefore = await versions(t);
    await maintain(t, { branch: "side" });
    expect(await versions(t)).toEqual(mainBefore);
    expect(await count(t, { branch: "side" })).toBe(33);
  });

  it("keeps a chunker view's last refreshed source version, and its next refresh stays incremental", async () => {
    const src = await smallCommits(3);
    const view = `${src}v`;
    const c = await q.call("POST", `/v1/materialized_view/${view}/create`, {
      kind: "chunker",
      source_query: JSON.stringify({ table: src, columns: ["id"] }),
      output_schema: Buffer.from(toStream(new Table(new Schema([new Field("id", new Int64(), true), new Field("part", new Utf8(), true)])))).toString("base64"),
      udtf_spec: { kind: "chunker", udtf: Buffer.from(JSON.stringify({ backend: "js", source: "(row) => [{ part: row.s }, { part: row.s + '!' }]" })).toString("base64"), udtf_name: "twice", udtf_version: "1", input_columns: ["s"] },
      with_no_data: true,
    });
    expect(c.status, c.text).toBeLessThan(300);
    const refresh = async () => {
      const r = await q.call("POST", `/v1/materialized_view/${view}/refresh`, {});
      expect(r.status, r.text).toBe(202);
      expect((await settle(q, r.json.job_id, 60_000)).status).toBe("Succeeded");
      return (await post(view, "describe", {})).json.materialized_view.last_refresh;
    };
    const first = await refresh();
    for (let i = 3; i < 6; i++) await insert(src, i * 10, 10);
    await maintain(src);
    expect(await versions(src)).toContain(first.source_version);
    const next = await refresh();
    expect(next.mode).toBe("incremental");
    expect(next.rows_written).toBe(60);
    expect(await count(view)).toBe(120);
  });

  it("keeps a version read explicitly within the read lease", async () => {
    const t = await smallCommits(4);
    expect(await count(t, { version: 2 })).toBe(20);
    await maintain(t);
    const kept = await versions(t);
    expect(kept).toContain(2);
    expect(kept).not.toContain(1);
    expect(await count(t, { version: 2 })).toBe(20);
  });

  it("removes nothing while another job is active on the table", async () => {
    const t = await smallCommits(4);
    const add = await post(t, "add_columns", { new_columns: [{ name: "slow", virtual_column: { udf_backend: "js", udf: "(x) => { const end = Date.now() + 50; while (Date.now() < end); return x; }", input_columns: ["x"], outputs: [{ column: "slow", data_type: { type: "float64" }, nullable: true }] } }] });
    expect(add.status, add.text).toBe(200);
    const bf = await post(t, "backfill_column", { column: "slow", task_size: 1, concurrency: 1, checkpoint_size: 1 });
    expect(bf.status, bf.text).toBe(202);
    const before = await versions(t);
    const done = await maintain(t);
    expect(done.cleanup).toMatch(new RegExp(`^deferred: job ${bf.json.job_id} \\(backfill\\)`));
    expect(await versions(t)).toEqual(expect.arrayContaining(before));
    await q.call("POST", "/v1/jobs/cancel", { job_id: bf.json.job_id });
  });

  it("after compaction a default backfill computes the same rows as without it, for each of several virtual columns", async () => {
    // Two tables written alike; only the first is maintained. A backfill's commit updates its rows,
    // which makes them stale for the table's other virtual columns (rows_computed shows it), so the
    // control table says what each backfill must compute; the last column backfilled computes only
    // the rows missing or changed since.
    const vc = (name: string, udf: string) => ({ name, virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "float64" }, nullable: true }] } });
    const backfill = async (t: string, column: string) => {
      const r = await post(t, "backfill_column", { column });
      expect(r.status, r.text).toBe(202);
      const s = await settle(q, r.json.job_id, 60_000);
      expect(s.status).toBe("Succeeded");
      return Number(s.properties.rows_computed);
    };
    const [maintained, control] = [await smallCommits(10), await smallCommits(10)];
    for (const t of [maintained, control]) {
      expect((await post(t, "add_columns", { new_columns: [vc("y", "(x) => x * 2"), vc("z", "(x) => x + 1")] })).status).toBe(200);
      expect(await backfill(t, "y")).toBe(100);
      expect(await backfill(t, "z")).toBe(100);
      await insert(t, 100, 5);
      expect((await post(t, "update", { predicate: "id < 3", updates: [["x", "x + 100"]] })).status).toBe(200);
    }
    await maintain(maintained);
    expect((await post(maintained, "stats", {})).json.fragment_stats.num_fragments).toBe(1);
    expect(await backfill(maintained, "z")).toBe(8);
    expect(await backfill(control, "z")).toBe(8);
    expect(await backfill(maintained, "y")).toBe(await backfill(control, "y"));
    for (const t of [maintained, control]) expect(await count(t, { predicate: "y = x * 2 AND z = x + 1" })).toBe(105);
  }, 240_000);

  it("loses no write made while maintenance runs", async () => {
    const t = await smallCommits(20);
    let writing = true;
    let written = 200;
    const writer = (async () => {
      // Paced: an unpaced stream on a loaded machine made each compaction retry against it for minutes.
      while (writing) {
        await insert(t, written, 1);
        written++;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await maintain(t);
    await maintain(t, { cleanup: false });
    writing = false;
    await writer;
    expect(written).toBeGreaterThan(200);
    expect(await count(t)).toBe(written);
    expect(await count(t, { predicate: `id = ${written - 1}` })).toBe(1);
  }, 240_000);

  it.each([
    ["cleanup of the wrong type", "m1", { cleanup: "yes" }, 400, /cleanup/],
    ["an unknown branch", "m1", { branch: "nope" }, 404, /nope/],
    ["an unknown table", "nope", {}, 404, /nope/],
  ])("answers %s with the spec's error", async (_name, id, body, status, message) => {
    const r = await post(id, "optimize", body);
    expect(r.status, r.text).toBe(status);
    expect(r.json.error ?? r.text).toMatch(message);
  });

  it("needs the write role", async () => {
    const r = await q.call("POST", "/v1/table/m1/optimize", {}, { "x-api-key": READ_KEY });
    expect(r.status).toBe(403);
  });
});

describe("the retention window", () => {
  let w: Quiver;
  beforeAll(async () => {
    w = await startQuiver({ args: ["--workers", "1", "--auto-maintenance", "off"] });
  });
  afterAll(async () => {
    await w.stop();
    removeDir(w.dataDir);
  });

  it("by default (7 days) keeps every recent version, so time travel still works after maintenance", async () => {
    const c = calls(() => w);
    expect((await c.post("w", "create", rows(0, 10))).status).toBe(200);
    for (let i = 1; i < 5; i++) await c.insert("w", i * 10, 10);
    const done = await c.maintain("w");
    expect(done.versions_removed).toBe("0");
    expect(await c.versions("w")).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect((await c.post("w", "count_rows", { version: 1 })).json).toBe(10);
  });
});

describe("externally managed versions", () => {
  let m: Quiver;
  beforeAll(async () => {
    m = await startQuiver({ args: ["--managed-versioning", "--retain-versions-ms", "0", "--workers", "1", "--auto-maintenance", "off"] });
  });
  afterAll(async () => {
    await m.stop();
    removeDir(m.dataDir);
  });

  it("follow the same rules: a tagged one is kept, the others go, and the writer commits on after maintenance", async () => {
    const db = await lancedb.connectNamespace("rest", { uri: m.url, headers: { "x-api-key": ADMIN_KEY } });
    const t = await db.createTable("ext", [{ id: 1 }]);
    for (let i = 2; i <= 5; i++) await t.add([{ id: i }]);
    expect(await t.version()).toBe(5);
    const c = calls(() => m);
    expect((await c.post("ext", "tags/create", { tag: "three", version: 3 })).status).toBe(200);
    await c.maintain("ext");
    const kept = await c.versions("ext");
    expect(kept).toContain(3);
    expect(kept).not.toContain(2);
    expect((await c.post("ext", "count_rows", { version: 3 })).json).toBe(3);
    await t.add([{ id: 6 }]);
    expect(await (await db.openTable("ext")).countRows()).toBe(6);
    expect((await c.post("ext", "count_rows", {})).json).toBe(6);
  });
});

describe("automatic maintenance", () => {
  let a: Quiver;
  beforeAll(async () => {
    const args = ["--workers", "1", "--maintenance-small-fragments", "5", "--maintenance-cooldown-ms", "3000", "--maintenance-sweep-ms", "500"];
    a = await startQuiver({ args, seed: (dir) => seedTable(dir, ["elsewhere"], [{ id: 0 }]) });
  });
  afterAll(async () => {
    await a.stop();
    removeDir(a.dataDir);
  });
  const c = calls(() => a);
  const jobsOf = async (id: string) =>
    ((await a.call("POST", "/v1/jobs/list", { table: [id] })).json.jobs as { job_id: string; job_type: string; status: string }[]).filter((j) => j.job_type === "maintenance");

  it("maintains a table once its small fragments reach the threshold, once per cooldown under a stream of writes", async () => {
    expect((await c.post("auto", "create", rows(0, 1))).status).toBe(200);
    for (let i = 1; i < 3; i++) await c.insert("auto", i, 1);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await jobsOf("auto")).toHaveLength(0);
    const start = Date.now();
    for (let i = 3; i < 40; i++) await c.insert("auto", i, 1);
    const jobs = await until(() => jobsOf("auto"), (j) => j.length > 0 && j.every((x) => x.status === "Succeeded"));
    expect(jobs.length).toBeGreaterThan(0);
    // At most one start per cooldown (3 s) since the stream began, plus the first.
    expect(jobs.length).toBeLessThanOrEqual(1 + Math.ceil((Date.now() - start) / 3000));
    const d = await a.call("POST", `/v1/transaction/${jobs[0].job_id}/describe`, {});
    expect(d.json.properties).toMatchObject({ auto: "true", phase: "done" });
    const stats = await until(async () => (await c.post("auto", "stats", {})).json, (s) => s.fragment_stats.num_small_fragments < 5);
    expect(stats.fragment_stats.num_small_fragments).toBeLessThan(5);
    expect((await c.post("auto", "count_rows", {})).json).toBe(40);
  });

  it("leaves a table whose quiver.maintenance property is off alone", async () => {
    const r = await c.post("quiet", "create", rows(0, 1), `?properties=${encodeURIComponent(JSON.stringify({ "quiver.maintenance": "off" }))}`);
    expect(r.status, r.text).toBe(200);
    for (let i = 1; i < 10; i++) await c.insert("quiet", i, 1);
    await new Promise((r) => setTimeout(r, 2500));
    expect(await jobsOf("quiet")).toHaveLength(0);
    expect((await c.post("quiet", "stats", {})).json.fragment_stats.num_fragments).toBe(10);
  });

  it("the sweep finds a table another process wrote", async () => {
    const t = await openDirect(a.dataDir, "elsewhere");
    for (let i = 1; i < 8; i++) await t.add([{ id: i }]);
    const jobs = await until(() => jobsOf("elsewhere"), (j) => j.some((x) => x.status === "Succeeded"));
    expect(jobs.some((x) => x.status === "Succeeded")).toBe(true);
  });
});

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
    const end = Date.now() + 120_000;
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

// Indexes stay covering: a backfill rewrites the rows it computes (its commits are merges), which
// the table's indexes then do not cover; once it ended, automatic maintenance folds them in (no
// sweep here, and no threshold would: 2,000 rows, a few fragments, deleted-rows threshold off).
// The second table shows the pacing and its series: one job, then the next held back by the
// cooldown while a threshold is passed (the lag gauge grows), and the job duration histogram.
describe("automatic maintenance after a backfill, and its metrics", () => {
  let b: Quiver;
  beforeAll(async () => {
    b = await startQuiver({ args: ["--workers", "1", "--maintenance-sweep-ms", "0", "--maintenance-cooldown-ms", "600000"] });
  });
  afterAll(async () => {
    await b.stop();
    removeDir(b.dataDir);
  });
  const c = calls(() => b);
  const props = (p: Record<string, string>) => `?properties=${encodeURIComponent(JSON.stringify(p))}`;
  const scrape = async () => (await b.call("GET", "/metrics")).text;

  it("after a backfill ends, the vector index covers every row again, by an automatic job that names its replica", async () => {
    const r = await c.post("bf", "create", rowsIpc(2000, 16, 0), props({ "quiver.maintenance.deleted_percent": "0" }));
    expect(r.status, r.text).toBe(200);
    const ix = await c.post("bf", "create_index", { column: "vec", index_type: "IVF_PQ", num_partitions: 2, num_sub_vectors: 2 });
    expect(ix.status, ix.text).toBe(200);
    expect((await settle(b, ix.json.transaction_id, 120_000)).status).toBe("Succeeded");
    const vc = { udf_backend: "js", udf: "(f) => f * 2", input_columns: ["f"], outputs: [{ column: "g", data_type: { type: "float64" }, nullable: true }] };
    expect((await c.post("bf", "add_columns", { new_columns: [{ name: "g", virtual_column: vc }] })).status).toBe(200);
    const bf = await c.post("bf", "backfill_column", { column: "g", checkpoint_size: 500 });
    expect(bf.status, bf.text).toBe(202);
    expect((await settle(b, bf.json.job_id, 120_000)).status).toBe("Succeeded");
    const vecIndex = async () => ((await c.post("bf", "index/list", {})).json.indexes as { index_name: string; num_indexed_rows: number; num_unindexed_rows: number }[]).find((i) => i.index_name === "vec_idx")!;
    const covered = await until(vecIndex, (i) => i.num_unindexed_rows === 0);
    expect(covered).toMatchObject({ num_indexed_rows: 2000, num_unindexed_rows: 0 });
    const maintenanceJobs = async () =>
      ((await b.call("POST", "/v1/jobs/list", { table: ["bf"] })).json.jobs as { job_id: string; job_type: string; status: string }[]).filter((j) => j.job_type === "maintenance");
    // Its cleanup may still run after the index update committed.
    const maintained = await until(maintenanceJobs, (js) => js.length > 0 && js.every((j) => j.status === "Succeeded"));
    expect(maintained).toHaveLength(1);
    const d = (await b.call("POST", `/v1/transaction/${maintained[0].job_id}/describe`, {})).json.properties;
    expect(d).toMatchObject({ auto: "true", phase: "done", unindexed_rows_after: "0" });
    expect(d.replica).toMatch(/\S/);
    expect(await c.post("bf", "count_rows", { predicate: "g = f * 2" }).then((x) => x.json)).toBe(2000);
  }, 240_000);

  it("quiver_maintenance_duration_seconds counts a job; quiver_maintenance_lag_seconds grows while a threshold stays passed", async () => {
    const started = sample(await scrape(), "quiver_maintenance_duration_seconds_count", { result: "succeeded" }) ?? 0;
    expect((await c.post("lag", "create", rows(0, 1), props({ "quiver.maintenance.small_fragments": "3" }))).status).toBe(200);
    for (let i = 1; i < 4; i++) await c.insert("lag", i, 1);
    const first = await until(scrape, (t) => (sample(t, "quiver_maintenance_duration_seconds_count", { result: "succeeded" }) ?? 0) > started);
    expect(sample(first, "quiver_maintenance_duration_seconds_count", { result: "succeeded" })).toBe(started + 1);
    // Under the threshold again: no lag series.
    await until(scrape, (t) => sample(t, "quiver_maintenance_lag_seconds", { table: "lag" }) === undefined);
    for (let i = 4; i < 8; i++) await c.insert("lag", i, 1);
    const lagging = await until(scrape, (t) => sample(t, "quiver_maintenance_lag_seconds", { table: "lag", branch: "main" }) !== undefined, 30_000);
    const before = sample(lagging, "quiver_maintenance_lag_seconds", { table: "lag", branch: "main" })!;
    await new Promise((r) => setTimeout(r, 1500));
    expect(sample(await scrape(), "quiver_maintenance_lag_seconds", { table: "lag", branch: "main" })).toBeGreaterThanOrEqual(before + 1);
  }, 240_000);
});

describe("commit spacing while maintenance lags", () => {
  // A first job starts at once and a second not for ten minutes (the cooldown): the small fragments
  // written after the first stay past the threshold, and writers' commits are spaced.
  let sp: Quiver;
  beforeAll(async () => {
    sp = await startQuiver({ args: ["--workers", "1", "--maintenance-small-fragments", "3", "--maintenance-cooldown-ms", "600000", "--commit-spacing-ms", "400"] });
  });
  afterAll(async () => {
    await sp.stop();
    removeDir(sp.dataDir);
  });

  it("inserts sent 40 ms apart share commits once the table's small fragments pass the threshold; every row is stored and answered with its version", async () => {
    const c = calls(() => sp);
    expect((await c.post("spaced", "create", rows(0, 1))).status).toBe(200);
    for (let i = 1; i < 4; i++) await c.insert("spaced", i, 1);
    const jobs = async () => ((await sp.call("POST", "/v1/jobs/list", { table: ["spaced"] })).json.jobs as { job_type: string; status: string }[]).filter((j) => j.job_type === "maintenance");
    expect((await until(jobs, (j) => j.length === 1 && j[0].status === "Succeeded"))[0].status).toBe("Succeeded");
    for (let i = 4; i < 8; i++) await c.insert("spaced", i, 1);
    // The look after those commits (a second later) finds 5 small fragments and no job may start.
    expect(await until(async () => (await c.post("spaced", "stats", {})).json.fragment_stats.num_small_fragments as number, (n) => n >= 3)).toBeGreaterThanOrEqual(3);
    await new Promise((r) => setTimeout(r, 1500));
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) => new Promise((r) => setTimeout(r, 40 * i)).then(() => c.post("spaced", "insert", rows(100 + i, 1)))),
    );
    for (const r of replies) expect(r.status, r.text).toBe(200);
    const versions = new Set(replies.map((r) => r.json.version as number));
    // Unspaced, each insert is a commit of its own (8 versions): 40 ms is longer than a commit here.
    expect(versions.size).toBeLessThanOrEqual(3);
    for (const [i, r] of replies.entries()) expect((await c.post("spaced", "count_rows", { version: r.json.version, predicate: `id = ${100 + i}` })).json).toBe(1);
    expect((await c.post("spaced", "count_rows", {})).json).toBe(16);
    expect(await jobs()).toHaveLength(1);
  }, 120_000);
});

describe("the versions bound", () => {
  let v: Quiver;
  beforeAll(async () => {
    v = await startQuiver({ args: ["--workers", "1", "--auto-maintenance", "off", "--maintenance-max-versions", "5"] });
  });
  afterAll(async () => {
    await v.stop();
    removeDir(v.dataDir);
  });

  it("keeps the newest --maintenance-max-versions versions inside the retention window, and a tagged one", async () => {
    const c = calls(() => v);
    expect((await c.post("vb", "create", rows(0, 10))).status).toBe(200);
    for (let i = 1; i < 12; i++) await c.insert("vb", i * 10, 10);
    expect((await c.post("vb", "tags/create", { tag: "three", version: 3 })).status).toBe(200);
    const done = await c.maintain("vb");
    expect(done.cleanup).toMatch(/beyond the newest 5/);
    const kept = await c.versions("vb");
    // The tag pins version 3 and, as the cutoff cannot pass it, every later one: the bound then
    // holds once the tag is gone.
    expect(kept).toContain(3);
    expect((await c.post("vb", "tags/delete", { tag: "three" })).status).toBe(200);
    await c.maintain("vb");
    const left = await c.versions("vb");
    expect(left.length).toBeLessThanOrEqual(5);
    expect(left).not.toContain(3);
    expect((await c.post("vb", "count_rows", {})).json).toBe(120);
    expect((await c.post("vb", "count_rows", { version: left[0] })).status).toBe(200);
  }, 120_000);
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
