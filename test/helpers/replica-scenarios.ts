// What several replicas on one data directory must do, written once for the multi-replica test
// files (each picks the scenarios it runs on its bed, test/helpers/replicas.ts). Replica i is
// bed.replicas[i]; "through the balancer" is bed.call. Every replica shares the job records,
// value versions, views and idempotency records (the system tables under <data-dir>/.system/).
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { indexRows, rowsIpc } from "./index-data.js";
import { paced, SLOW_TEST_MS } from "./pace.js";
import { type Caller } from "./quiver.js";
import { MAX_CLOCK_SKEW_MS, runningJobIn, type Replicas } from "./replicas.js";
import { idNameRows, tableCalls } from "./tables.js";
import { sample } from "./metrics.js";
import { expectCountsAsCommitted, settle, terminal } from "./transactions.js";
import { envelope, schemaOf } from "./views.js";

const DIM = 16;
const wantJson = { accept: "application/json" };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** Ids of a table's rows (at `version` if given), sorted, read through `c`. */
async function idsOf(c: Caller, table: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<number[]> {
  const r = await c.call("POST", `/v1/table/${table}/query`, { k: 1_000_000, columns: ["id"], ...body }, { ...wantJson, ...headers });
  expect(r.status, r.text).toBe(200);
  return (r.json as { id: number }[]).map((x) => Number(x.id)).sort((a, b) => a - b);
}

/** A js UDF column `name` = f * 2 + 1 over batches that take `ms` each: 500-row tasks at 150 ms make a 10,000-row backfill last ~3 s. */
const slowColumn = (name: string, ms = 150) => ({
  name,
  virtual_column: {
    udf_backend: "js",
    udf: `(xs) => { const t = Date.now(); while (Date.now() - t < ${ms}) {} return xs.map((x) => x * 2 + 1); }`,
    input_columns: ["f"],
    field_metadata: { batch: "true" },
    outputs: [{ column: name, data_type: { type: "float64" }, nullable: true }],
  },
});
const SLOW_PARAMS = { task_size: 500, checkpoint_size: 1000, concurrency: 1 };

type Job = { status: string; properties: Record<string, string> };
const describeJob = async (c: Caller, id: string): Promise<Job> => {
  const r = await c.call("POST", `/v1/transaction/${id}/describe`, {});
  expect(r.status, `describe ${id}: ${r.text}`).toBe(200);
  return r.json;
};
/** Poll `id` through `c` until it has done `rows` rows (or ended); `timeoutMs` is paced to the machine's load. */
async function untilRows(c: Caller, id: string, rows: number, timeoutMs = 60_000): Promise<Job> {
  const end = Date.now() + paced(timeoutMs);
  for (;;) {
    const j = await describeJob(c, id);
    if (Number(j.properties.rows_done ?? 0) >= rows || terminal(j.status)) return j;
    if (Date.now() > end) throw new Error(`job ${id} did not reach ${rows} rows: ${JSON.stringify(j)}`);
    await sleep(25);
  }
}

/** Every replica restarted with `args` added, all at once (nothing runs meanwhile), back in rotation. */
const restartAll = (bed: Replicas, args: string[]) => Promise.all(bed.replicas.map((_, i) => bed.restart(i, args)));

/** Table create, insert, query (vector, full-text, filter), an index build, a js backfill and a view, all through the balancer. */
export function mainPaths(bed: Replicas): void {
  describe("through the balancer: the table, query, index and compute main paths", () => {
    const { post, count } = tableCalls(bed);
    const rows = [...indexRows(2000, DIM, 0), ...indexRows(500, DIM, 2000)];
    const T = "mp$t";

    it("namespace and table create, insert, count", async () => {
      expect((await bed.call("POST", "/v1/namespace/mp/create", {})).status).toBe(200);
      const c = await post(T, "create", rowsIpc(2000, DIM, 0));
      expect(c.status, c.text).toBe(200);
      const ins = await post(T, "insert", rowsIpc(500, DIM, 2000));
      expect(ins.status, ins.text).toBe(200);
      expect(await count(T)).toBe(2500);
      expect((await bed.call("GET", "/v1/namespace/mp/table/list")).json.tables).toEqual(["t"]);
    });

    it("a vector query and a filter", async () => {
      const v = rows[2007].vec as number[];
      const near = await bed.call("POST", `/v1/table/${T}/query`, { vector: { single_vector: v }, vector_column: "vec", k: 5, columns: ["id"] }, wantJson);
      expect(near.status, near.text).toBe(200);
      expect(Number(near.json[0].id)).toBe(2007);
      expect(await idsOf(bed, T, { filter: "cat = 'c1' AND id >= 2400" })).toEqual(range(2400, 100).filter((i) => i % 5 === 1));
    });

    it("an FTS index built by its job, then a full-text query", async () => {
      const r = await post(T, "create_index", { column: "text", index_type: "FTS" });
      expect(r.status, r.text).toBe(200);
      const done = await settle(bed, r.json.transaction_id, 120_000);
      expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
      const q = await bed.call("POST", `/v1/table/${T}/query`, { full_text_query: { string_query: { query: "fox", columns: ["text"] } }, k: 10_000, columns: ["id"] }, wantJson);
      expect(q.status, q.text).toBe(200);
      expect(q.json.length).toBe(rows.filter((x) => / fox /.test(`${x.text} `)).length);
    }, SLOW_TEST_MS);

    it("a js virtual column, backfilled by its job", async () => {
      const add = await post(T, "add_columns", {
        new_columns: [{ name: "y", virtual_column: { udf_backend: "js", udf: "(f) => f * 2 + 1", input_columns: ["f"], outputs: [{ column: "y", data_type: { type: "float64" }, nullable: true }] } }],
      });
      expect(add.status, add.text).toBe(200);
      const b = await post(T, "backfill_column", { column: "y" });
      expect(b.status, b.text).toBe(202);
      const done = await settle(bed, b.json.job_id, 120_000);
      expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
      expect(await count(T, { predicate: "y = f * 2 + 1" })).toBe(2500);
    }, SLOW_TEST_MS);

    it("a materialized view, filled by its refresh job, read as a table", async () => {
      const c = await bed.call("POST", "/v1/materialized_view/mp$v/create", {
        kind: "query",
        source_query: JSON.stringify({ table: T, columns: { id: "id", g: "f * 2" }, filter: "cat = 'c2'" }),
        output_schema: schemaOf([["id", "int64"], ["g", "float64"]]),
        with_no_data: false,
      });
      expect(c.status, c.text).toBe(201);
      const done = await settle(bed, c.json.job_id, 120_000);
      expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
      expect(await idsOf(bed, "mp$v")).toEqual(range(0, 2500).filter((i) => i % 5 === 2));
      expect(await count("mp$v", { predicate: "abs(g - CAST(id AS DOUBLE) / 3.5) < 1e-9" })).toBe(500);
      const d = await post("mp$v", "describe");
      expect(d.json.materialized_view).toMatchObject({ kind: "query" });
    }, SLOW_TEST_MS);
  });
}

/** 20 concurrent creates of one table through the balancer: one is created, 19 are told it exists. */
export function createRace(bed: Replicas): void {
  it("20 concurrent creates of one table split over the replicas: one 200, 19 × 409, the winner's row in it", async () => {
    const replies = await Promise.all(range(0, 20).map((k) => bed.call("POST", "/v1/table/race1/create", idNameRows([k]))));
    const statuses = replies.map((r) => r.status);
    const said = JSON.stringify(replies.filter((r) => r.status !== 409).map((r) => [r.status, r.text]));
    expect(statuses.filter((s) => s === 200), said).toHaveLength(1);
    expect(statuses.filter((s) => s === 409), said).toHaveLength(19);
    const winner = statuses.indexOf(200);
    for (let i = 0; i < bed.replicas.length; i++) expect(await idsOf(bed.replicas[i], "race1"), `replica ${i}`).toEqual([winner]);
  });
}

/** 8 clients insert at once, spread over the replicas; every acknowledged row is there, once. */
export function concurrentWrites(bed: Replicas): void {
  // Each client calls its replica directly: the balancer keeps a table's row writes on one replica.
  it("writes from 8 clients spread over the replicas: every acknowledged row is present, none twice", async () => {
    expect((await bed.call("POST", "/v1/table/w8/create", idNameRows([-1]))).status).toBe(200);
    const acked: number[] = [];
    const failed: string[] = [];
    await Promise.all(
      range(0, 8).map(async (client) => {
        for (let k = 0; k < 10; k++) {
          const ids = range(client * 1000 + k * 5, 5);
          const r = await bed.replicas[client % bed.replicas.length].call("POST", "/v1/table/w8/insert", idNameRows(ids));
          if (r.status === 200) acked.push(...ids);
          else failed.push(`${r.status} ${r.text}`);
        }
      }),
    );
    expect(failed).toEqual([]);
    for (let i = 0; i < bed.replicas.length; i++) expect(await idsOf(bed.replicas[i], "w8")).toEqual([-1, ...acked].sort((a, b) => a - b));
  });
}

/** Reads through the balancer while one replica is killed and started again: none fails. */
export function readsThroughAKill(bed: Replicas): void {
  it("queries through the balancer while a replica is SIGKILLed and restarted: every one answers 200", async () => {
    expect((await bed.call("POST", "/v1/table/ha1/create", idNameRows(range(0, 100)))).status).toBe(200);
    let going = true;
    const bad: string[] = [];
    let n = 0;
    const loops = range(0, 6).map(async () => {
      while (going) {
        const r = await bed.call("POST", "/v1/table/ha1/query", { filter: "id < 10", k: 100, columns: ["id"] }, wantJson);
        n++;
        if (r.status !== 200 || r.json.length !== 10) bad.push(`${r.status} ${r.text.slice(0, 200)}`);
        // A steady stream, not a flood that slows the restart and every test file beside this one.
        await sleep(20);
      }
    });
    await sleep(300);
    const victim = bed.replicas.length - 1;
    await bed.kill(victim);
    await sleep(500);
    await bed.restart(victim);
    await sleep(300);
    going = false;
    await Promise.all(loops);
    expect(bad).toEqual([]);
    expect(n).toBeGreaterThan(20);
  });
}

/** Index builds and backfills started through one replica, followed and cancelled through the others. */
export function jobsAcrossReplicas(bed: Replicas): void {
  const T = "jobs1";
  const other = (k: number) => bed.replicas[k % bed.replicas.length];
  describe("jobs across replicas", () => {
    it("setup: a 10,000-row table", async () => {
      const r = await bed.call("POST", `/v1/table/${T}/create`, rowsIpc(10_000, DIM, 0));
      expect(r.status, r.text).toBe(200);
    });

    it("an index build started through replica 0 is followed through the others (describe, jobs/list) to Succeeded", async () => {
      const r = await bed.replicas[0].call("POST", `/v1/table/${T}/create_index`, { column: "cat", index_type: "BITMAP" });
      expect(r.status, r.text).toBe(200);
      const tx = r.json.transaction_id as string;
      for (let k = 1; k < bed.replicas.length; k++) {
        expect((await describeJob(other(k), tx)).properties).toMatchObject({ operation: "create_index", table: T });
        const listed = await other(k).call("POST", "/v1/jobs/list", { table: T });
        expect(listed.status, listed.text).toBe(200);
        expect(listed.json.jobs.map((j: { job_id: string }) => j.job_id)).toContain(tx);
      }
      const done = await settle(other(1), tx, 120_000);
      expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
      for (let k = 0; k < bed.replicas.length; k++) expect((await describeJob(other(k), tx)).status).toBe("Succeeded");
      const ix = await other(2).call("POST", `/v1/table/${T}/index/list`, {});
      expect(ix.json.indexes.map((i: { index_name: string }) => i.index_name)).toContain("cat_idx");
    }, SLOW_TEST_MS);

    it("an index build started through replica 0 and cancelled through another is Canceled everywhere and never committed", async () => {
      const r = await bed.replicas[0].call("POST", `/v1/table/${T}/create_index`, { column: "vec", index_type: "IVF_HNSW_SQ", name: "hnsw_cx", num_partitions: 1, m: 16, ef_construction: 150 });
      expect(r.status, r.text).toBe(200);
      const tx = r.json.transaction_id as string;
      const c = await other(1).call("POST", `/v1/transaction/${tx}/alter`, { actions: [{ setStatusAction: { status: "Canceled" } }] });
      expect(c.status, c.text).toBe(200);
      expect(c.json.status).toBe("Canceled");
      const version = (await bed.replicas[0].call("POST", `/v1/table/${T}/describe`, {})).json.version;
      // Long enough for the build to have finished had it gone on.
      await sleep(3000);
      for (let k = 0; k < bed.replicas.length; k++) {
        expect((await describeJob(other(k), tx)).status).toBe("Canceled");
        expect((await other(k).call("POST", `/v1/table/${T}/index/list`, {})).json.indexes.map((i: { index_name: string }) => i.index_name)).not.toContain("hnsw_cx");
      }
      expect((await other(2).call("POST", `/v1/table/${T}/describe`, {})).json.version).toBe(version);
    }, SLOW_TEST_MS);

    it("a backfill started through replica 0 is followed through another and cancelled through a third: it stops committing", async () => {
      const add = await bed.replicas[0].call("POST", `/v1/table/${T}/add_columns`, { new_columns: [slowColumn("y")] });
      expect(add.status, add.text).toBe(200);
      const b = await bed.replicas[0].call("POST", `/v1/table/${T}/backfill_column`, { column: "y", ...SLOW_PARAMS });
      expect(b.status, b.text).toBe(202);
      const job = b.json.job_id as string;
      const seen = await untilRows(other(1), job, 1000);
      expect(seen.status, JSON.stringify(seen.properties)).toBe("Running");
      const listed = await other(2).call("POST", "/v1/jobs/list", { table: T });
      expect(listed.json.jobs.find((j: { job_id: string }) => j.job_id === job)).toMatchObject({ job_type: "backfill", status: "Running" });
      const c = await other(2).call("POST", "/v1/jobs/cancel", { job_id: job });
      expect(c.status, c.text).toBe(200);
      expect(c.json).toMatchObject({ cancelled: true, status: "Canceled" });
      // The runner stops after the step in progress: give it that step, then no more commits.
      await sleep(1000);
      const v = (await other(1).call("POST", `/v1/table/${T}/describe`, {})).json.version;
      await sleep(1500);
      expect((await other(1).call("POST", `/v1/table/${T}/describe`, {})).json.version).toBe(v);
      for (let k = 0; k < bed.replicas.length; k++) expect((await describeJob(other(k), job)).status).toBe("Canceled");
      expect(Number((await describeJob(bed.replicas[0], job)).properties.rows_computed)).toBeLessThan(10_000);
      expect(runningJobIn(bed, "backfill.js")).toEqual([]);
    }, SLOW_TEST_MS);

    it("one backfill per column: a second one through any other replica is 409 while the first runs", async () => {
      const add = await bed.replicas[0].call("POST", `/v1/table/${T}/add_columns`, { new_columns: [slowColumn("y2")] });
      expect(add.status, add.text).toBe(200);
      const b = await bed.replicas[0].call("POST", `/v1/table/${T}/backfill_column`, { column: "y2", ...SLOW_PARAMS });
      expect(b.status, b.text).toBe(202);
      for (let k = 1; k < bed.replicas.length; k++) {
        const again = await other(k).call("POST", `/v1/table/${T}/backfill_column`, { column: "y2", ...SLOW_PARAMS });
        expect(again.status, again.text).toBe(409);
        expect(again.json.detail).toMatch(/is already being backfilled/);
      }
      const c = await other(1).call("POST", "/v1/jobs/cancel", { job_id: b.json.job_id });
      expect(c.json.status).toBe("Canceled");
    }, SLOW_TEST_MS);

    it("one refresh per view: a second one through any other replica is 409 while the first runs", async () => {
      expect((await bed.replicas[0].call("POST", "/v1/table/vsrc/create", idNameRows(range(0, 300)))).status).toBe(200);
      const slow = envelope({ backend: "js", source: "(rows) => { const t = Date.now(); while (Date.now() - t < 2000) {} return [{ n: rows.length }]; }" });
      const v = await bed.replicas[0].call("POST", "/v1/materialized_view/vslow/create", {
        kind: "udtf", source_query: JSON.stringify({ table: "vsrc" }), output_schema: schemaOf([["n", "int64"]]), udtf_spec: { kind: "udtf", udtf: slow, udtf_name: "n", udtf_version: "1" }, with_no_data: true,
      });
      expect(v.status, v.text).toBe(201);
      const r = await bed.replicas[0].call("POST", "/v1/materialized_view/vslow/refresh", {});
      expect(r.status, r.text).toBe(202);
      for (let k = 1; k < bed.replicas.length; k++) {
        const again = await other(k).call("POST", "/v1/materialized_view/vslow/refresh", {});
        expect(again.status, again.text).toBe(409);
        expect(again.json.detail).toMatch(/is already being refreshed/);
      }
      expect((await settle(other(1), r.json.job_id, 60_000)).status).toBe("Succeeded");
      const n = await other(2).call("POST", "/v1/table/vslow/query", { k: 10, columns: ["n"] }, wantJson);
      expect(n.json.map((x: { n: number }) => Number(x.n))).toEqual([300]);
    }, SLOW_TEST_MS);
  });
}

/** A replica dies while it runs a backfill: another one takes the job over once the lease expires. */
export function backfillTakeover(bed: Replicas): void {
  it("SIGKILL of the replica that runs a backfill: another one finishes it after the lease expires, each row computed once", async () => {
    const T = "takeover1";
    expect((await bed.call("POST", `/v1/table/${T}/create`, rowsIpc(10_000, DIM, 0))).status).toBe(200);
    expect((await bed.call("POST", `/v1/table/${T}/add_columns`, { new_columns: [slowColumn("z")] })).status).toBe(200);
    const b = await bed.call("POST", `/v1/table/${T}/backfill_column`, { column: "z", ...SLOW_PARAMS });
    expect(b.status, b.text).toBe(202);
    const job = b.json.job_id as string;
    expect((await untilRows(bed, job, 2000)).status).toBe("Running");
    const owners = runningJobIn(bed, "backfill.js");
    expect(owners).toHaveLength(1);
    const [owner] = owners;
    await bed.kill(owner);
    const killedAt = Date.now();
    // Another replica starts running it once the dead one's lease has expired, a third of a lease and twice the skew bound after;
    // the 5 s for its look at the records and its job process's start scale with the machine's load (10.1 s seen at load 42).
    const within = (bed.leaseMs * 4) / 3 + 2 * MAX_CLOCK_SKEW_MS + paced(5000);
    for (;;) {
      const runners = runningJobIn(bed, "backfill.js");
      if (runners.length) {
        expect(runners).toHaveLength(1);
        expect(runners[0]).not.toBe(owner);
        break;
      }
      expect(Date.now() - killedAt, "no replica took the job over").toBeLessThan(within);
      await sleep(50);
    }
    const done = await settle(bed, job, 60_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties).toMatchObject({ rows_done: "10000", rows_computed: "10000" });
    const { count } = tableCalls(bed);
    expect(await count(T, { predicate: "z IS NULL OR z <> f * 2 + 1" })).toBe(0);
    await bed.restart(owner);
  }, SLOW_TEST_MS);
}

/** One replica's /metrics. */
async function scrape(c: Caller): Promise<string> {
  const r = await c.call("GET", "/metrics");
  expect(r.status, r.text).toBe(200);
  return r.text;
}

/** The tasks of split backfill `job`, described through `c`. */
async function tasksOf(c: Caller, job: string): Promise<Job[]> {
  const tasks = (await describeJob(c, job)).properties.tasks;
  return tasks ? Promise.all(tasks.split(",").map((t) => describeJob(c, t))) : [];
}

/**
 * A backfill split into as many tasks as there are replicas (each restarted with
 * `--backfill-tasks`, two backfill slots each): a replica that runs a task of the backfill takes
 * another only after waiting (four polls or more) for an idle replica to take it first, each
 * replica's running gauge counts what it runs, and every row is computed once. On a quiet machine
 * every replica runs one; on a loaded one an idle replica's look at the records can take longer
 * than the wait (seen in CI at load 12-22: it took nine seconds), and then a busy one takes it.
 */
const TASK_LEASE_MS = 15_000;
/** How often a replica looks at the job records under that lease (src/jobs/jobs.ts: a quarter lease, at most a second). */
const TASK_POLL_MS = 1000;
export function backfillTasksAcrossReplicas(bed: Replicas): void {
  it("a backfill split into tasks: a replica that runs one of them waits for an idle replica before it takes another (two slots each), each row computed once", async () => {
    const n = bed.replicas.length;
    // This is about where tasks run: under a lease long enough that a loaded machine's slow renewal
    // does not hand a task to another replica (takeovers: backfillTakeover, and the counts they keep:
    // test/unit/computed-writes.test.ts).
    await restartAll(bed, ["--backfill-tasks", String(n), "--backfill-jobs", "2", "--job-lease-ms", String(TASK_LEASE_MS)]);
    const T = "tasks1";
    expect((await bed.call("POST", `/v1/table/${T}/create`, rowsIpc(10_000, DIM, 0))).status).toBe(200);
    expect((await bed.call("POST", `/v1/table/${T}/add_columns`, { new_columns: [slowColumn("t")] })).status).toBe(200);
    const b = await bed.call("POST", `/v1/table/${T}/backfill_column`, { column: "t", ...SLOW_PARAMS });
    expect(b.status, b.text).toBe(202);
    // While all of them run: one on each replica, by each replica's own gauge.
    const end = Date.now() + paced(60_000);
    let running = await tasksOf(bed, b.json.job_id);
    while (!(running.length === n && running.every((t) => t.status === "Running")) && Date.now() < end) {
      await sleep(100);
      running = await tasksOf(bed, b.json.job_id);
    }
    const gauges = await Promise.all(bed.replicas.map(async (q) => sample(await scrape(q), "quiver_replica_jobs_running", { kind: "backfill_task" })));
    const slots = await Promise.all(bed.replicas.map(async (q) => sample(await scrape(q), "quiver_replica_job_slots", { kind: "backfill_task" })));
    const done = await settle(bed, b.json.job_id, 120_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    const tasks = await Promise.all(done.properties.tasks.split(",").map((t) => describeJob(bed, t)));
    expect(done.properties, JSON.stringify(tasks.map((t) => t.properties))).toMatchObject({ rows_done: "10000", rows_computed: "10000" });
    expect(tasks).toHaveLength(n);
    expect(tasks.map((t) => t.status)).toEqual(tasks.map(() => "Succeeded"));
    const shown = JSON.stringify(tasks.map((t) => t.properties));
    const at = (t: Job, field: "created_at" | "started_at" | "finished_at") => Date.parse(t.properties[field]);
    for (const t of tasks) {
      const beside = tasks.filter((o) => o !== t && o.properties.replica === t.properties.replica && at(o, "started_at") <= at(t, "started_at") && at(o, "finished_at") > at(t, "started_at"));
      if (beside.length > 0) expect(at(t, "started_at") - at(t, "created_at"), shown).toBeGreaterThanOrEqual(4 * TASK_POLL_MS);
    }
    expect(gauges.reduce((a, b) => a + b, 0)).toBe(n);
    expect(slots).toEqual(bed.replicas.map(() => 2));
    const { count } = tableCalls(bed);
    expect(await count(T, { predicate: "t IS NULL OR t <> f * 2 + 1" })).toBe(0);
  }, SLOW_TEST_MS);
}

/** A replica restarting while another one runs a job leaves that job alone. */
export function restartLeavesLiveJobs(bed: Replicas): void {
  it("a restart never resumes a job whose lease is live: the running replica finishes it alone", async () => {
    const T = "lease1";
    expect((await bed.call("POST", `/v1/table/${T}/create`, rowsIpc(10_000, DIM, 0))).status).toBe(200);
    expect((await bed.call("POST", `/v1/table/${T}/add_columns`, { new_columns: [slowColumn("w")] })).status).toBe(200);
    const b = await bed.call("POST", `/v1/table/${T}/backfill_column`, { column: "w", ...SLOW_PARAMS });
    expect(b.status, b.text).toBe(202);
    const job = b.json.job_id as string;
    expect((await untilRows(bed, job, 1000)).status).toBe("Running");
    const [owner] = runningJobIn(bed, "backfill.js");
    expect(owner).toBeDefined();
    const restarted = (owner + 1) % bed.replicas.length;
    expect(await bed.stop(restarted)).toBe(0);
    await bed.restart(restarted);
    // Until the job ends: only its owner runs it, and its record never goes back to Queued.
    const statuses: string[] = [];
    for (;;) {
      const j = await describeJob(bed.replicas[owner], job);
      if (statuses.at(-1) !== j.status) statuses.push(j.status);
      expect(runningJobIn(bed, "backfill.js").filter((i) => i !== owner)).toEqual([]);
      if (terminal(j.status)) break;
      await sleep(50);
    }
    expect(statuses).toEqual(["Running", "Succeeded"]);
    const done = await describeJob(bed.replicas[restarted], job);
    expect(done.properties).toMatchObject({ rows_done: "10000", rows_computed: "10000" });
  }, SLOW_TEST_MS);
}

/** A retried write under one Idempotency-Key applies once, whichever replicas the tries reach. */
export function idempotencyAcrossReplicas(bed: Replicas): void {
  describe("Idempotency-Key across replicas", () => {
    const T = "idem1";
    const insert = (c: Caller, ids: number[], key: string) => c.call("POST", `/v1/table/${T}/insert`, idNameRows(ids), { "idempotency-key": key });

    it("a retry through each other replica replays the first answer; the rows are in once", async () => {
      expect((await bed.call("POST", `/v1/table/${T}/create`, idNameRows([0]))).status).toBe(200);
      const first = await insert(bed.replicas[0], [1, 2], "k-1");
      expect(first.status, first.text).toBe(200);
      for (let k = 1; k < bed.replicas.length; k++) {
        const retry = await insert(bed.replicas[k], [1, 2], "k-1");
        expect(retry.status, retry.text).toBe(200);
        expect(retry.json).toEqual(first.json);
        expect(retry.headers.get("idempotent-replayed")).toBe("true");
      }
      expect(await idsOf(bed, T)).toEqual([0, 1, 2]);
      const other = await insert(bed.replicas[bed.replicas.length - 1], [7], "k-1");
      expect(other.status).toBe(409);
    });

    it("concurrent tries under one key through the balancer apply once", async () => {
      const replies = await Promise.all(range(0, 6).map(() => insert(bed, [3], "k-2")));
      for (const r of replies) expect(r.status, r.text).toBe(200);
      expect(new Set(replies.map((r) => JSON.stringify(r.json))).size).toBe(1);
      expect(await idsOf(bed, T)).toEqual([0, 1, 2, 3]);
    });
  });
}

/**
 * Read-your-writes and answered versions across replicas. Replica 1 is restarted with a minute's
 * consistency interval, so only the version a read asks for makes it look at storage; run last.
 */
export function versionsAcrossReplicas(bed: Replicas): void {
  describe("versions across replicas", () => {
    it("a write through replica 0, read through replica 1 with x-quiver-min-version: the answered version, sees it", async () => {
      await bed.restart(1, ["--consistency-interval-ms", "60000"]);
      const [writer, reader] = [bed.replicas[0], bed.replicas[1]];
      expect((await writer.call("POST", "/v1/table/ryw1/create", idNameRows([0]))).status).toBe(200);
      expect(await idsOf(reader, "ryw1")).toEqual([0]);
      for (let round = 1; round <= 5; round++) {
        const w = await writer.call("POST", "/v1/table/ryw1/insert", idNameRows([round]));
        expect(w.status, w.text).toBe(200);
        const min = { "x-quiver-min-version": String(w.json.version) };
        expect(await idsOf(reader, "ryw1", {}, min)).toEqual(range(0, round + 1));
        const n = await reader.call("POST", "/v1/table/ryw1/count_rows", {}, min);
        expect(n.json).toBe(round + 1);
      }
    }, SLOW_TEST_MS);

    it("concurrent inserts through different replicas answer distinct versions; each version holds exactly the writes answered at or before it", async () => {
      const T = "av1";
      expect((await bed.replicas[0].call("POST", `/v1/table/${T}/create`, idNameRows([0]))).status).toBe(200);
      const answered = new Map<number, number>(); // id → version
      let last = 1;
      for (let round = 0; round < 4; round++) {
        const ids = range(1 + round * 8, 8);
        const replies = await Promise.all(ids.map((id, i) => bed.replicas[i % bed.replicas.length].call("POST", `/v1/table/${T}/insert`, idNameRows([id]))));
        replies.forEach((r, i) => {
          expect(r.status, r.text).toBe(200);
          answered.set(ids[i], r.json.version);
        });
        // Writes answered by different replicas were different commits.
        const byReplica = new Map<number, Set<number>>();
        replies.forEach((r, i) => byReplica.set(i % bed.replicas.length, new Set([...(byReplica.get(i % bed.replicas.length) ?? []), r.json.version])));
        const all = [...byReplica.values()].flatMap((s) => [...s]);
        expect(new Set(all).size, `versions by replica ${JSON.stringify([...byReplica].map(([k, s]) => [k, [...s]]))}`).toBe(all.length);
        for (const v of all) expect(v).toBeGreaterThan(last);
        last = Math.max(...all);
      }
      for (const v of new Set(answered.values())) {
        const want = [0, ...[...answered].filter(([, at]) => at <= v).map(([id]) => id)].sort((a, b) => a - b);
        expect(await idsOf(bed.replicas[0], T, { version: v }), `at version ${v}`).toEqual(want);
      }
    }, SLOW_TEST_MS);
  });
}

/**
 * A backfill split into two tasks over the replicas (restarted with `--backfill-tasks 2
 * --backfill-jobs 2`): a cancel through the balancer stops the tasks on every replica, nothing
 * commits after their records ended and the counts are the rows committed; a SIGKILL of a task's
 * replica has another replica take it over, and the backfill's totals equal the table's rows.
 */
export function splitBackfillsAcrossReplicas(bed: Replicas): void {
  describe("a backfill split into tasks across replicas", () => {
    const { count } = tableCalls(bed);
    const split = async (T: string) => {
      expect((await bed.call("POST", `/v1/table/${T}/create`, rowsIpc(10_000, DIM, 0))).status).toBe(200);
      expect((await bed.call("POST", `/v1/table/${T}/add_columns`, { new_columns: [slowColumn("u", 300)] })).status).toBe(200);
      const from = (await bed.call("POST", `/v1/table/${T}/describe`, {})).json.version as number;
      const b = await bed.call("POST", `/v1/table/${T}/backfill_column`, { column: "u", ...SLOW_PARAMS });
      expect(b.status, b.text).toBe(202);
      return { job: b.json.job_id as string, from };
    };
    /** Until a task of `job` has committed `rows` rows while still running. */
    async function untilTaskRows(job: string, rows: number): Promise<Job[]> {
      const end = Date.now() + paced(60_000);
      for (;;) {
        const tasks = await tasksOf(bed, job);
        if (tasks.some((t) => t.status === "Running" && Number(t.properties.rows_done ?? 0) >= rows)) return tasks;
        if (Date.now() > end) throw new Error(`no task of ${job} reached ${rows} rows: ${JSON.stringify(tasks)}`);
        await sleep(50);
      }
    }

    it("setup: every replica splits backfills in two, two slots each", async () => {
      await restartAll(bed, ["--backfill-tasks", "2", "--backfill-jobs", "2"]);
    }, SLOW_TEST_MS);

    it("a cancel stops the tasks on every replica: no commit after their finished_at, counts equal to the rows committed", async () => {
      const { job, from } = await split("cancel2");
      await untilTaskRows(job, 1000);
      const c = await bed.call("POST", "/v1/jobs/cancel", { job_id: job });
      expect(c.status, c.text).toBe(200);
      expect(c.json).toMatchObject({ cancelled: true, status: "Canceled" });
      // Answered once everything stopped: nothing more commits. A task's process ends with it, or,
      // on a replica whose lease renewal the machine's load held past the lease (the cancel counts a
      // lapsed lease as stopped: seen in CI at load 17), within the time a lapse takes; it commits
      // nothing meanwhile (each commit asks its record first).
      const v = (await bed.replicas[0].call("POST", "/v1/table/cancel2/describe", {})).json.version;
      for (const end = Date.now() + paced(bed.leaseMs * 4); runningJobIn(bed, "backfill.js").length > 0 && Date.now() < end; ) await sleep(100);
      expect(runningJobIn(bed, "backfill.js")).toEqual([]);
      await sleep(2000);
      expect((await bed.replicas[1].call("POST", "/v1/table/cancel2/describe", {})).json.version).toBe(v);
      await expectCountsAsCommitted(bed, "cancel2", job, "u", from);
      expect(await count("cancel2", { predicate: "u IS NOT NULL" })).toBeLessThan(10_000);
    }, SLOW_TEST_MS);

    it("SIGKILL of a task's replica: another takes the task over; the backfill's totals equal the table's rows", async () => {
      const { job } = await split("kill2");
      // The replica of a task that has checkpointed rows (a replica's id is in its state directory).
      const checkpointed = (await untilTaskRows(job, 1000)).find((t) => t.status === "Running" && Number(t.properties.rows_done) >= 1000)!;
      // Recorded as `<replica name>-<the first 8 hex digits of the id file's UUID>`.
      const victim = bed.replicas.findIndex((q) => checkpointed.properties.replica.endsWith(`-${readFileSync(path.join(q.dataDir, "replica-id"), "utf8").replace(/-/g, "").slice(0, 8)}`));
      expect(victim).toBeGreaterThanOrEqual(0);
      await bed.kill(victim);
      const done = await settle(bed, job, 120_000);
      expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
      expect(done.properties).toMatchObject({ rows_total: "10000", rows_done: "10000", rows_computed: "10000", rows_skipped: "0" });
      const tasks = await tasksOf(bed, job);
      expect(tasks.reduce((n, t) => n + Number(t.properties.rows_total), 0), JSON.stringify(tasks)).toBe(10_000);
      expect(await count("kill2", { predicate: "u IS NULL OR u <> f * 2 + 1" })).toBe(0);
      const alive = bed.replicas.filter((_, i) => i !== victim);
      const takeovers = await Promise.all(alive.map(async (q) => sample(await scrape(q), "quiver_job_lease_takeovers_total", { kind: "backfill_task" }) ?? 0));
      expect(takeovers.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
      await bed.restart(victim);
    }, SLOW_TEST_MS);
  });
}

/**
 * docs/haproxy.cfg sends a table's row writes to one replica while reads go round robin; once that
 * replica is out of rotation, another one takes its place and keeps it after the first is back.
 */
export function rowWritesToOneReplica(bed: Replicas): void {
  it("row writes to one table are answered by one replica, reads by every one; a stopped writer's place goes to another", async () => {
    const T = "sticky1";
    const { post } = tableCalls(bed);
    const by = (r: { headers: Headers }) => r.headers.get("x-quiver-replica")!;
    expect((await post(T, "create", idNameRows([0]))).status).toBe(200);
    const writes = async (from: number) => {
      const replies = [];
      for (let id = from; id < from + 4; id++) replies.push(await post(T, "insert", idNameRows([id])));
      replies.push(await post(T, "merge_insert", idNameRows([from]), "?on=id&when_matched_update_all=true&when_not_matched_insert_all=true"));
      replies.push(await post(T, "update", { updates: [["name", "'u'"]], predicate: `id = ${from}` }));
      replies.push(await post(T, "delete", { predicate: `id = ${from + 1}` }));
      for (const r of replies) expect(r.status, r.text).toBe(200);
      return new Set(replies.map(by));
    };
    const first = await writes(1);
    expect([...first]).toHaveLength(1);
    const reads = await Promise.all(range(0, 4 * bed.replicas.length).map(() => post(T, "count_rows")));
    expect(new Set(reads.map(by)).size).toBe(bed.replicas.length);

    const writer = Number([...first][0].slice(1));
    await bed.stop(writer);
    const moved = await writes(11);
    expect([...moved]).toHaveLength(1);
    expect([...moved][0]).not.toBe(`r${writer}`);
    await bed.restart(writer);
    expect([...(await writes(21))]).toEqual([...moved]);
    expect(await idsOf(bed, T)).toEqual([0, 1, 3, 4, 11, 13, 14, 21, 23, 24]);
  }, SLOW_TEST_MS);
}
