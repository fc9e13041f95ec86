// GET /metrics (Prometheus text) and the access log: who may scrape, every metric docs/operations.md lists
// moving with the work that feeds it, and access lines carrying the request id and the context
// headers at the configured sampling rates.
import { mkdtempSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { Float64, Int64, Table, vectorFromArray } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { paced } from "./helpers/pace.js";
import { toStream } from "./helpers/arrow.js";
import { sample } from "./helpers/metrics.js";
import { logLine, READ_KEY, request, serverForFile, startQuiver } from "./helpers/quiver.js";
import { settle, until } from "./helpers/transactions.js";

// Every access line logged; every Arrow upload decoded in the pool; the catalog checked on every request.
const q = serverForFile({ args: ["--ingest-inline-max-bytes", "0", "--consistency-interval-ms", "0", "--access-log-sample", "1", "--workers", "1", "--replica-name", "metrics-r1"], env: { QUIVER_LOG_LEVEL: "info" } });
// Scraped without a credential; successes never logged, failures always.
const open = serverForFile({ args: ["--metrics-public", "--access-log-sample", "0"], env: { QUIVER_LOG_LEVEL: "info" } });

const scrape = async () => {
  const r = await q.call("GET", "/metrics", undefined, { "x-api-key": READ_KEY });
  expect(r.status, r.text).toBe(200);
  return r.text;
};

const rows = (n: number) =>
  toStream(new Table({ id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(i)), new Int64()), x: vectorFromArray(Array.from({ length: n }, (_, i) => i / 2), new Float64()) }));

describe("GET /metrics", () => {
  it("needs the read role unless --metrics-public", async () => {
    const none = await request(`${q.url}/metrics`, "GET");
    expect(none.status).toBe(401);
    expect(none.json.detail).toMatch(/missing credentials/);
    const read = await request(`${q.url}/metrics`, "GET", undefined, { "x-api-key": READ_KEY });
    expect(read.status).toBe(200);
    expect(read.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const pub = await request(`${open.url}/metrics`, "GET");
    expect(pub.status).toBe(200);
    expect(pub.text).toContain("# TYPE quiver_requests_total counter");
  });

  it("counts requests by operation and status class, with latency buckets from 1 ms to 10 s", async () => {
    const before = sample(await scrape(), "quiver_requests_total", { operation: "DescribeNamespace", status_class: "4xx" }) ?? 0;
    expect((await q.call("POST", "/v1/namespace/nope/describe", {})).status).toBe(404);
    expect((await q.call("POST", "/v1/namespace/%24/describe", {})).status).toBe(200);
    const text = await scrape();
    expect(sample(text, "quiver_requests_total", { operation: "DescribeNamespace", status_class: "4xx" })).toBe(before + 1);
    expect(sample(text, "quiver_requests_total", { operation: "DescribeNamespace", status_class: "2xx" })).toBeGreaterThanOrEqual(1);
    const count = sample(text, "quiver_request_duration_seconds_count", { operation: "DescribeNamespace" })!;
    expect(count).toBeGreaterThanOrEqual(2);
    expect(sample(text, "quiver_request_duration_seconds_bucket", { operation: "DescribeNamespace", le: "0.001" })).toBeDefined();
    expect(sample(text, "quiver_request_duration_seconds_bucket", { operation: "DescribeNamespace", le: "10" })).toBe(count);
    // The scrape itself holds no admission slot (a saturated replica still answers it).
    expect(sample(text, "quiver_requests_in_flight")).toBe(0);
    expect(sample(text, "quiver_in_flight_max")).toBeDefined();
    for (const reason of ["in_flight", "draining", "pool_queue", "rate_limit"]) expect(sample(text, "quiver_unavailable_total", { reason })).toBe(0);
    // Unmatched paths are counted under one name, not one series per path.
    await q.call("GET", "/no/such/path");
    expect(sample(await scrape(), "quiver_requests_total", { operation: "unmatched", status_class: "4xx" })).toBeGreaterThanOrEqual(1);
  });

  it("the most requests in flight over the last second, where the in-flight gauge sees only the scrape", async () => {
    await Promise.all(Array.from({ length: 16 }, () => q.call("POST", "/v1/namespace/%24/describe", {})));
    const text = await scrape();
    expect(sample(text, "quiver_requests_in_flight")).toBe(0);
    expect(sample(text, "quiver_in_flight_max")).toBeGreaterThanOrEqual(2);
  });

  it("pool task time by task kind, open tables, catalog refreshes, jobs by state and rows processed by jobs", async () => {
    const refreshes = sample(await scrape(), "quiver_catalog_refreshes_total")!;
    expect((await q.call("POST", "/v1/table/m/create", rows(1000))).status).toBe(200);
    expect((await q.call("POST", "/v1/table/m/count_rows", {})).json).toBe(1000);
    const vc = { udf_backend: "js", udf: "(x) => x * 2", input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "float64" }, nullable: true }] };
    expect((await q.call("POST", "/v1/table/m/add_columns", { new_columns: [{ name: "y", virtual_column: vc }] })).status).toBe(200);
    const job = await q.call("POST", "/v1/table/m/backfill_column", { column: "y" });
    expect(job.status, job.text).toBe(202);
    expect((await settle(q, job.json.job_id, 60_000)).status).toBe("Succeeded");
    expect((await q.call("POST", "/v1/table/m/count_rows", { predicate: "y = x * 2" })).json).toBe(1000);

    const text = await scrape();
    expect(sample(text, "quiver_pool_task_seconds_count", { task: "ingest" })).toBe(1);
    expect(sample(text, "quiver_pool_threads")).toBeGreaterThanOrEqual(0);
    expect(sample(text, "quiver_pool_threads_busy")).toBe(0);
    expect(sample(text, "quiver_pool_queue_length")).toBe(0);
    expect(sample(text, "quiver_open_table_handles")).toBeGreaterThanOrEqual(1);
    expect(sample(text, "quiver_catalog_refreshes_total")).toBeGreaterThan(refreshes);
    expect(sample(text, "quiver_jobs", { kind: "backfill", state: "Succeeded" })).toBe(1);
    expect(sample(text, "quiver_jobs", { kind: "create_index", state: "Running" })).toBe(0);
    expect(sample(text, "quiver_job_rows_processed_total", { kind: "backfill" })).toBe(1000);
  });

  it("job failures by kind and reason, every reason from the start; this replica's running jobs and slots beside the store's", async () => {
    const start = await scrape();
    for (const reason of ["error", "restart", "shutdown", "replica_lost", "unknown_kind"]) expect(sample(start, "quiver_job_failures_total", { kind: "create_index", reason })).toBe(0);
    expect(sample(start, "quiver_job_lease_takeovers_total", { kind: "backfill_task" })).toBe(0);
    expect(sample(start, "quiver_replica_job_slots", { kind: "backfill" })).toBe(2);
    const failedBefore = sample(start, "quiver_job_failures_total", { kind: "backfill", reason: "error" })!;
    expect((await q.call("POST", "/v1/table/mf/create", rows(100))).status).toBe(200);
    const add = (name: string, udf: string) => ({ new_columns: [{ name, virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "float64" }, nullable: true }] } }] });
    expect((await q.call("POST", "/v1/table/mf/add_columns", add("bad", "(x) => { throw new Error('no'); }"))).status).toBe(200);
    const bad = await q.call("POST", "/v1/table/mf/backfill_column", { column: "bad" });
    expect(bad.status, bad.text).toBe(202);
    expect((await settle(q, bad.json.job_id, 60_000)).status).toBe("Failed");
    // The record is stored Failed a moment before the counter counts it (the store's commit is
    // visible before its call returns; under load a scrape fell in between, CI on Node 22).
    const failures = async () => sample(await scrape(), "quiver_job_failures_total", { kind: "backfill", reason: "error" })!;
    const counted = Date.now() + paced(10_000);
    while ((await failures()) < failedBefore + 1 && Date.now() < counted) await new Promise((r) => setTimeout(r, 20));
    expect(await failures()).toBe(failedBefore + 1);
    // A backfill that runs until canceled: this replica runs one while it lasts.
    expect((await q.call("POST", "/v1/table/mf/add_columns", add("slow", "(x) => { const t = Date.now(); while (Date.now() - t < 50) {} return x; }"))).status).toBe(200);
    const slow = await q.call("POST", "/v1/table/mf/backfill_column", { column: "slow", task_size: 1, concurrency: 1, checkpoint_size: 1 });
    expect((await until(q, slow.json.job_id, (s) => s === "Running", 60_000)).status).toBe("Running");
    // Computing rows: its record says Running as soon as this replica claims it, a moment before
    // the run it counts exists (under load a scrape fell in between).
    const end = Date.now() + paced(60_000);
    while (Number((await q.call("POST", `/v1/transaction/${slow.json.job_id}/describe`, {})).json.properties.rows_done ?? 0) < 1) {
      expect(Date.now(), "the slow backfill computed no row").toBeLessThan(end);
      await new Promise((r) => setTimeout(r, 20));
    }
    const during = await scrape();
    expect(sample(during, "quiver_replica_jobs_running", { kind: "backfill" })).toBe(1);
    expect(sample(during, "quiver_jobs", { kind: "backfill", state: "Running" })).toBe(1);
    expect((await q.call("POST", "/v1/jobs/cancel", { job_id: slow.json.job_id })).json.status).toBe("Canceled");
    expect(sample(await scrape(), "quiver_replica_jobs_running", { kind: "backfill" })).toBe(0);
  });

  it("every series carries the replica's name: --replica-name, by default the host name", async () => {
    const named = (await scrape()).split("\n").filter((l) => l && !l.startsWith("#"));
    expect(named.length).toBeGreaterThan(50);
    expect(named.filter((l) => !l.includes('replica="metrics-r1"'))).toEqual([]);
    await request(`${open.url}/metrics`, "GET");
    const host = (await request(`${open.url}/metrics`, "GET")).text;
    expect(sample(host, "quiver_requests_total", { replica: hostname(), operation: "GetMetrics" })).toBeGreaterThanOrEqual(1);
  });

  it("top-k searches answered as JSON are batched too (quiver_batch_size counts their engine calls)", async () => {
    const vectors = Array.from({ length: 200 }, (_, i) => ({ id: i, v: [Math.sin(i), Math.cos(i), i / 200] }));
    expect((await q.call("POST", "/v1/table/bq/create", vectors)).status).toBe(200);
    const before = sample(await scrape(), "quiver_batch_size_count") ?? 0;
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => q.call("POST", "/v1/table/bq/query", { vector: vectors[i].v, k: 3, columns: ["id"] }, { accept: i % 2 ? "application/json" : "application/x-ndjson" })),
    );
    for (const [i, a] of answers.entries()) {
      expect(a.status, a.text).toBe(200);
      const rows = i % 2 ? a.json : a.text.trim().split("\n").map((l) => JSON.parse(l));
      expect(rows[0]).toMatchObject({ id: i, _distance: 0 });
      expect(rows).toHaveLength(3);
    }
    const text = await scrape();
    expect(sample(text, "quiver_batch_size_count")! - before).toBeGreaterThanOrEqual(1);
    expect(sample(text, "quiver_batch_size_sum")).toBeGreaterThanOrEqual(12);
  });

  it("commit retries after lost races: two servers on one table merging the same keys at once (LanceDB's own merge-insert retries)", async () => {
    const other = await startQuiver({ dataDir: q.dataDir, args: ["--state-dir", mkdtempSync(path.join(tmpdir(), "quiver-metrics-")), "--consistency-interval-ms", "0"] });
    try {
      const keyed = (n: number) => Array.from({ length: 20 }, (_, id) => ({ id, n }));
      expect((await q.call("POST", "/v1/table/race/create", keyed(0))).status).toBe(200);
      // Every kind is a series from the start; earlier tests' jobs on this server may have retried
      // system-table commits already, so the count is compared with where it stood.
      const zero = await scrape();
      for (const kind of ["table", "system", "catalog", "group_commit"]) expect(sample(zero, "quiver_commit_retries_total", { kind })).toBeGreaterThanOrEqual(0);
      expect(sample((await other.call("GET", "/metrics")).text, "quiver_commit_retries_total", { kind: "table" })).toBe(0);
      const merge = "/v1/table/race/merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true";
      const before = sample(zero, "quiver_commit_retries_total", { kind: "table" })!;
      const retries = async () => sample(await scrape(), "quiver_commit_retries_total", { kind: "table" })! - before + sample((await other.call("GET", "/metrics")).text, "quiver_commit_retries_total", { kind: "table" })!;
      for (let round = 1; round <= 20 && (await retries()) === 0; round++) {
        const rs = await Promise.all([q, other, q, other].map((s, i) => s.call("POST", merge, keyed(round * 10 + i))));
        for (const r of rs) expect(r.status, r.text).toBe(200);
      }
      expect(await retries()).toBeGreaterThan(0);
    } finally {
      await other.stop();
    }
  });

  it("process memory and event-loop delay", async () => {
    const text = await scrape();
    expect(sample(text, "process_resident_memory_bytes")).toBeGreaterThan(1 << 20);
    expect(sample(text, "nodejs_eventloop_lag_p99_seconds")).toBeGreaterThanOrEqual(0);
    expect(sample(text, "nodejs_heap_size_used_bytes")).toBeGreaterThan(0);
  });
});

describe("access log", () => {
  it("one line per request with the request id, operation, status, milliseconds and context headers", async () => {
    const r = await q.call("POST", "/v1/namespace/%24/describe", {}, { "x-svc-ctx-trace": "t-42", "x-lance-ctx-user": "ana" });
    const id = r.headers.get("x-request-id")!;
    const line = JSON.parse(await logLine(q, (l) => l.includes(`"requestId":"${id}"`)));
    expect(line).toMatchObject({ level: "info", msg: "access", requestId: id, op: "DescribeNamespace", method: "POST", status: 200, context: { trace: "t-42", user: "ana" } });
    expect(typeof line.ms).toBe("number");
  });

  it("samples successes and failures at their own rates (here: no successes, every failure)", async () => {
    const ok = await request(`${open.url}/metrics`, "GET", undefined, { "x-svc-ctx-trace": "ok-1" });
    const bad = await request(`${open.url}/v1/namespace/nope/describe`, "POST", {}, { "x-api-key": READ_KEY, "x-svc-ctx-trace": "bad-1" });
    expect(bad.status).toBe(404);
    const line = JSON.parse(await logLine(open, (l) => l.includes("bad-1")));
    expect(line).toMatchObject({ msg: "access", requestId: bad.headers.get("x-request-id"), op: "DescribeNamespace", status: 404, context: { trace: "bad-1" } });
    expect(open.stderr()).not.toContain(ok.headers.get("x-request-id")!);
  });
});
