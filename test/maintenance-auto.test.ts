// Automatic maintenance: thresholds, cooldown and sweep; a table another process wrote; after a
// backfill, and its metrics; commit spacing while it lags.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";
import { rowsIpc } from "./helpers/index-data.js";
import { calls, rows, until } from "./helpers/maintenance.js";
import { sample } from "./helpers/metrics.js";
import { openDirect, seedTable } from "./helpers/seed.js";
import { settle } from "./helpers/transactions.js";

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
