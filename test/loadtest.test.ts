// The load-testing harness (loadtest/) against a real Quiver with a small table, and against a
// deliberately slow node:http server: each mode briefly, its figures checked against what the
// server counted, the open loop's rate, the queueing delay a closed loop hides (service time beside
// corrected latency, and the client-limit warning), recall, thresholds and their exit codes, and
// the options and files it reads. Reports it writes are checked in Chromium by
// test/loadtest-report.test.ts; datasets, merging and noise by test/loadtest-data.test.ts.
import { spawn } from "node:child_process";
import http from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Field, FixedSizeList, Float32, Table, tableFromArrays, tableToIPC, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportPage } from "../loadtest/html.js";
import { FLAG_NAMES, HELP, parseCommand, type Options } from "../loadtest/options.js";
import { runLoadtest } from "../loadtest/run.js";
import { readVectors } from "../loadtest/sources.js";
import { groundTruth } from "../loadtest/ground-truth.js";
import { datasetTruth, measureRecall } from "../loadtest/recall.js";
import { baseHeaders, client } from "../loadtest/http.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";
import { seedLoadTable } from "./helpers/loadtest.js";
import { settle } from "./helpers/transactions.js";
import { paced } from "./helpers/pace.js";

const q = serverForFile();
const dir = mkdtempSync(path.join(tmpdir(), "quiver-loadtest-"));
const CLI = path.resolve(__dirname, "../dist/loadtest/cli.js");

/** Runs the built bin to its end. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawn(process.execPath, [CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  p.stdout!.on("data", (d) => (stdout += d));
  p.stderr!.on("data", (d) => (stderr += d));
  return new Promise((resolve) => p.on("exit", (code) => resolve({ code, stdout, stderr })));
}

const options = (url: string, ...args: string[]): Options => {
  const c = parseCommand(["--url", url, "--api-key", ADMIN_KEY, "--quiet", "--out", path.join(dir, "r"), ...args]);
  if (!("run" in c)) throw new Error("expected a run");
  return c.run;
};

beforeAll(() => seedLoadTable(q), 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A server answering every request after `ms`, one at a time (a fixed capacity of 1000 / ms a second). */
function slowServer(ms: number): Promise<{ url: string; close(): Promise<void> }> {
  let queue = Promise.resolve();
  const server = http.createServer((req, res) => {
    req.resume();
    // A request whose client went away (a timeout) leaves the queue without taking its time.
    let gone = false;
    res.on("close", () => (gone = !res.writableFinished));
    queue = queue.then(() => (gone ? undefined : new Promise<void>((done) => setTimeout(() => (res.end("{}"), done()), ms))));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
        close: () => new Promise((r) => (server.closeAllConnections(), server.close(() => r()))),
      }),
    ),
  );
}

describe("quiver-loadtest against Quiver", () => {
  it("closed loop over every workload kind: the server's /metrics count equals the harness's", async () => {
    const o = options(q.url, "--table", "ns$docs", "--connections", "4", "--duration", "1.5", "--warmup", "0",
      "--mix", "vector:3,filtered_vector:1,fts:1,hybrid:1,count:1,describe:1,insert:1,raw:1",
      "--filter", "price < 200", "--insert-batch", "10", "--path", "/v1/table/{table}/version/list", "--body", '{"page_token":null}');
    const r = await runLoadtest(o);
    const run = r.run!;
    expect(run.errors, JSON.stringify(run.by_status)).toBe(0);
    expect(run.requests).toBeGreaterThan(20);
    expect(r.server!.requests_counted).toBe(run.requests);
    expect(Object.keys(run.workloads).sort()).toEqual(["count", "describe", "filtered_vector", "fts", "hybrid", "insert", "raw", "vector"]);
    expect(run.timeline.length).toBeGreaterThanOrEqual(1);
    expect(run.timeline.reduce((a, p) => a + p.requests, 0)).toBe(run.requests);
    expect(r.server!.points.length).toBeGreaterThanOrEqual(1);
    expect(r.server!.points.some((p) => p.cpu_cores > 0 && p.requests_per_s > 0)).toBe(true);
    // The server's most in flight a second sees the loop's concurrency, which a scrape's moment does not.
    expect(Math.max(...r.server!.points.map((p) => p.in_flight_max ?? 0))).toBeGreaterThanOrEqual(2);
    expect(Math.max(...run.timeline.map((p) => p.outstanding))).toBe(4);
    // The table's state as the server read it (its stats were read before the run).
    expect(r.server!.points.every((p) => p.table.fragments !== null && p.table.fragments >= 1 && p.table.versions! >= 1)).toBe(true);
    // In a closed loop a request is due when it is sent: both times are the same.
    expect(run.service_ms).toEqual(run.latency_ms);
    expect(run.latency_ms.p50).toBeGreaterThan(0);
    expect(run.latency_ms.p99).toBeGreaterThanOrEqual(run.latency_ms.p50);
    expect(r.machine.cpus).toBeGreaterThan(0);
    expect(r.client!.cpu_seconds).toBeGreaterThan(0);
    expect(r.client!.event_loop_max_ms).toBeGreaterThanOrEqual(r.client!.event_loop_p99_ms);
    expect(r.versions.server).toMatch(/^\d+\.\d+\.\d+/);
    expect(JSON.stringify(r)).not.toContain(ADMIN_KEY);
    // The inserts landed: Arrow batches of 10 of the 100 rows sampled.
    const count = await q.call("POST", "/v1/table/ns$docs/count_rows", {});
    expect(Number(count.text)).toBe(300 + 10 * run.workloads.insert.requests);
  });

  it("open loop keeps its rate within 5% while the server has capacity (JSON answers)", async () => {
    const o = options(q.url, "--table", "ns$docs", "--mode", "open", "--rate", "200", "--duration", "3", "--warmup", "0", "--connections", "32", "--workload", "count", "--accept", "json");
    const r = await runLoadtest(o);
    const run = r.run!;
    expect(run.errors).toBe(0);
    expect(run.unsent).toBe(0);
    expect(run.sent).toBe(600);
    expect(Math.abs(run.throughput - 200) / 200).toBeLessThan(0.05);
    expect(r.server!.requests_counted).toBe(run.requests);
  });

  it("inserts rows as JSON lines, sampled from the table as JSON", async () => {
    const before = Number((await q.call("POST", "/v1/table/ns$docs/count_rows", {})).text);
    const o = options(q.url, "--table", "ns$docs", "--workload", "insert", "--insert-format", "json", "--insert-batch", "5", "--sample", "20", "--connections", "1", "--duration", "0.5", "--warmup", "0");
    const r = await runLoadtest(o);
    expect(r.run!.errors, JSON.stringify(r.run!.by_status)).toBe(0);
    expect(Number((await q.call("POST", "/v1/table/ns$docs/count_rows", {})).text)).toBe(before + 5 * r.run!.requests);
  });

  it("recall mode: 1.0 when both sides search exactly (bypass_vector_index); sampled queries come with a note", async () => {
    const o = options(q.url, "--table", "ns$docs", "--mode", "recall", "--recall-queries", "20", "--k", "5", "--extra", '{"bypass_vector_index":true}', "--sampled-queries");
    const r = await runLoadtest(o);
    expect(r.recall!.queries).toBe(20);
    expect(r.recall!.mean).toBe(1);
    expect(r.recall!.min).toBe(1);
    expect(r.recall!.ci95).toEqual([1, 1]);
    expect(r.recall!.truth).toBe("exact search");
    expect(r.run).toBeNull();
    expect(r.warnings.join(" ")).toMatch(/sampled from the table's own rows \(--sampled-queries\): each finds itself/);
  });

  it("filtered recall is held to the filtered exact answer, with a dataset's truth and with a filtered_vector workload", async () => {
    const rows = (await q.call("POST", "/v1/table/ns$docs/query", { k: 300, columns: ["id", "vector"] }, { accept: "application/json" })).json as { id: number; vector: number[] }[];
    rows.sort((a, b) => a.id - b.id);
    const base = { dim: 8, count: rows.length, data: Float32Array.from(rows.flatMap((r) => r.vector)) };
    const queries = rows.slice(0, 10).map((r) => r.vector);
    // The table's ids are its row numbers, as a dataset's are: this is its unfiltered ground truth.
    const truth = await groundTruth(base, { dim: 8, count: 10, data: Float32Array.from(queries.flat()) }, 5, "l2");
    const filter = "id >= 150";
    const c = client(q.url, 1);
    const h = baseHeaders(ADMIN_KEY, {});
    const withExtra = await measureRecall(options(q.url, "--table", "ns$docs", "--mode", "recall", "--sampled-queries", "--k", "5", "--extra", JSON.stringify({ filter, bypass_vector_index: true })), c, h, queries, datasetTruth(truth));
    // Each query is a row below 150, its own nearest neighbour: the unfiltered truth would score it below 1.
    expect([withExtra.mean, withExtra.truth, withExtra.filter]).toEqual([1, "exact search", filter]);
    const workload = await measureRecall(options(q.url, "--table", "ns$docs", "--mode", "recall", "--sampled-queries", "--k", "5", "--workload", "filtered_vector", "--filter", filter, "--extra", '{"bypass_vector_index":true}'), c, h, queries, datasetTruth(truth));
    expect([workload.mean, workload.filter]).toEqual([1, filter]);
    c.close();
  });

  it("a filtered recall run's report names its filter and the truth it was held to, as stdout and the JSON do", async () => {
    const filter = "id >= 150";
    for (const how of [["--extra", JSON.stringify({ filter })], ["--workload", "filtered_vector", "--filter", filter]]) {
      const r = await runLoadtest(options(q.url, "--table", "ns$docs", "--mode", "recall", "--sampled-queries", "--recall-queries", "5", "--k", "5", ...how));
      expect(r.recall!.filter).toBe(filter);
      const html = reportPage(r);
      expect(html).toContain("<h1>Load test: recall, filter id &gt;= 150</h1>");
      expect(html).toMatch(/<td>filter \(every search, exact ones included\)<\/td><td><code>id &gt;= 150<\/code><\/td>/);
      expect(html).toContain("<td>exact search with the same filter (bypass_vector_index)</td>");
    }
    const plain = reportPage(await runLoadtest(options(q.url, "--table", "ns$docs", "--mode", "recall", "--sampled-queries", "--recall-queries", "5", "--k", "5")));
    expect(plain).toMatch(/<td>filter \(every search, exact ones included\)<\/td><td>none<\/td>/);
    expect(plain).toContain("<td>exact search (bypass_vector_index)</td>");
  });

  it("a sweep over nprobes on a table with held-out queries (a file): a point each, recall against exact search", async () => {
    let seed = 11;
    const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const rows = Array.from({ length: 400 }, (_, id) => ({ id, vector: Array.from({ length: 8 }, rnd) }));
    expect((await q.call("POST", "/v1/table/ns$sweep/create", rows)).status).toBe(200);
    const ix = await q.call("POST", "/v1/table/ns$sweep/create_index", { column: "vector", index_type: "IVF_FLAT", num_partitions: 4 });
    expect((await settle(q, ix.json.transaction_id)).status).toBe("Succeeded");
    const file = path.join(dir, "held-out.jsonl");
    writeFileSync(file, Array.from({ length: 12 }, () => JSON.stringify(Array.from({ length: 8 }, rnd))).join("\n"));
    const o = options(q.url, "--table", "ns$sweep", "--queries", file, "--sweep", "nprobes=1,4", "--duration", "0.4", "--warmup", "0.3", "--connections", "2", "--recall-queries", "12");
    const r = await runLoadtest(o);
    const points = r.sweep!.points;
    expect(points.map((p) => p.label)).toEqual(["nprobes=1", "nprobes=4"]);
    for (const p of points) {
      expect(p.runs).toHaveLength(1);
      expect(p.errors).toBe(0);
      expect(p.qps.median).toBeGreaterThan(0);
      expect(p.recall!.queries).toBe(12);
    }
    // The throughput counts the measured loops' time, not the warm-ups and recall passes between them.
    const measured = points.reduce((a, p) => a + p.runs.reduce((b, x) => b + x.seconds, 0), 0);
    expect(r.run!.seconds).toBeCloseTo(measured, 6);
    expect(r.run!.throughput).toBeCloseTo(r.run!.ok / measured, 6);
    expect(points.every((p) => /^[0-9a-f]{64}$/.test(p.recall!.answers))).toBe(true);
    // All 4 partitions probed is an exact search of IVF_FLAT.
    expect(points[1].recall!.mean).toBe(1);
    expect(points[0].recall!.mean).toBeLessThanOrEqual(1);
    // Held-out queries from a file: no note about sampled ones.
    expect(r.warnings.filter((w) => w.startsWith("recall"))).toEqual([]);
  });
});


describe("quiver-loadtest against a slow server (20 ms an answer, one at a time: 50/s)", () => {
  let slow: Awaited<ReturnType<typeof slowServer>>;
  beforeAll(async () => void (slow = await slowServer(20)));
  afterAll(() => slow.close());
  const raw = (...args: string[]) => options(slow.url, "--workload", "raw", "--method", "GET", "--path", "/slow", "--no-metrics", ...args);

  it("shows the queueing delay that a closed loop hides, service time beside it, and warns that the client's queue was the limit", async () => {
    const closed = (await runLoadtest(raw("--connections", "1", "--duration", "1.5", "--warmup", "0.2"))).run!;
    const report = await runLoadtest(raw("--mode", "open", "--rate", "100", "--connections", "1", "--duration", "1.5", "--warmup", "0"));
    const open = report.run!;
    // Closed: each request waits only for its own service time (the bounds leave room for a busy machine).
    expect(closed.latency_ms.p50).toBeGreaterThanOrEqual(19);
    // The median, not a tail: a stall of a shared CI machine lands in the tail of 75 answers.
    expect(closed.latency_ms.p50).toBeLessThan(paced(60));
    expect(closed.throughput).toBeLessThan(55);
    // Open at twice the capacity for 1.5 s: the requests due meanwhile waited (up to ~0.75 s), and that wait is counted.
    expect(open.latency_ms.p50).toBeGreaterThan(5 * closed.latency_ms.p50);
    expect(open.latency_ms.p99).toBeGreaterThan(500);
    expect(open.latency_ms.p99).toBeGreaterThan(2 * closed.latency_ms.p99);
    expect(open.late).toBeGreaterThan(0);
    expect(open.unsent).toBeGreaterThan(0);
    expect(open.max_backlog).toBeGreaterThan(10);
    // Service time (send to answer) is the server's 20 ms; the rest of the latency was the wait in the harness.
    expect(open.service_ms.p50).toBeGreaterThanOrEqual(19);
    expect(open.service_ms.p50).toBeLessThan(paced(60));
    expect(open.latency_ms.p50).toBeGreaterThan(5 * open.service_ms.p50);
    expect(open.timeline.some((p) => (p.backlog ?? 0) > 10)).toBe(true);
    expect(report.warnings.join("\n")).toMatch(/^client limit: due requests waited in the harness .* raise --connections/m);
  });

  it("the bin prints service time beside corrected latency, and the client-limit warning on stderr", async () => {
    const r = await cli(["--url", slow.url, "--workload", "raw", "--method", "GET", "--path", "/slow", "--no-metrics", "--quiet", "--mode", "open", "--rate", "100", "--connections", "1", "--duration", "1", "--warmup", "0", "--out", path.join(dir, "overload")]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/latency ms \(from due\): p50 \d+/);
    expect(r.stdout).toMatch(/service time ms \(from send\): p50 (19|[2-5]\d)\./);
    expect(r.stderr).toMatch(/quiver-loadtest: client limit: .*--connections/);
  });

  it("--threshold: exit 0 when every bound holds, 3 when one fails (listed), 2 when it cannot be read", async () => {
    const args = ["--url", slow.url, "--workload", "raw", "--method", "GET", "--path", "/slow", "--no-metrics", "--quiet", "--connections", "1", "--duration", "0.5", "--warmup", "0"];
    const pass = await cli([...args, "--threshold", "p50<2s,errors<1%,throughput>5/s", "--out", path.join(dir, "t-pass")]);
    expect(pass.code, pass.stderr).toBe(0);
    expect(pass.stdout).toMatch(/thresholds: p50<2s holds .*errors<1% holds .*throughput>5\/s holds/);
    const fail = await cli([...args, "--threshold", "p50<1ms,errors<1%", "--out", path.join(dir, "t-fail")]);
    expect(fail.code).toBe(3);
    expect(fail.stdout).toMatch(/p50<1ms FAILS \((19|[2-9]\d)/);
    const report = JSON.parse(readFileSync(path.join(dir, "t-fail.json"), "utf8"));
    expect(report.thresholds.pass).toBe(false);
    expect(report.thresholds.checks.map((c: { pass: boolean }) => c.pass)).toEqual([false, true]);
    expect(readFileSync(path.join(dir, "t-fail.html"), "utf8")).toContain("A threshold failed (exit 3)");
    const bad = await cli([...args, "--threshold", "p99<fast"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--threshold: cannot read "p99<fast"');
  });

  it("an open loop stopped early (the CLI's Ctrl-C) ends at once, counting only what was due", async () => {
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 500);
    const t0 = Date.now();
    const r = await runLoadtest(raw("--mode", "open", "--rate", "20", "--connections", "2", "--duration", "30", "--warmup", "0"), process.stderr, stop.signal);
    expect(Date.now() - t0).toBeLessThan(paced(5_000));
    expect(r.interrupted).toBe(true);
    expect(r.run!.sent).toBeGreaterThanOrEqual(5);
    expect(r.run!.sent + r.run!.unsent).toBeLessThan(40);
    expect(r.run!.errors).toBe(0);
  });

  it("requests never sent count: an unsent bound, and the error share counts them as failed", async () => {
    const r = await cli(["--url", slow.url, "--workload", "raw", "--method", "GET", "--path", "/slow", "--no-metrics", "--quiet", "--mode", "open", "--rate", "400", "--connections", "1", "--duration", "1", "--warmup", "0", "--threshold", "errors<0.1%,unsent<1%,errors<1000", "--out", path.join(dir, "unsent")]);
    expect(r.code, r.stderr).toBe(3);
    const report = JSON.parse(readFileSync(path.join(dir, "unsent.json"), "utf8"));
    const { run, thresholds } = report;
    // 400/s for 1 s against 50/s: most of what was due could not be sent in the time allowed.
    expect(run.unsent).toBeGreaterThan(50);
    expect(run.errors).toBe(0);
    expect(thresholds.checks.map((c: { pass: boolean }) => c.pass)).toEqual([false, false, true]);
    expect(thresholds.checks[1].value).toBeCloseTo((100 * run.unsent) / (run.requests + run.unsent), 6);
  });

  it("a request past --timeout is an error named timeout, not a hang", async () => {
    const run = (await runLoadtest(raw("--connections", "2", "--duration", "0.5", "--warmup", "0", "--timeout", "0.005"))).run!;
    expect(run.requests).toBeGreaterThan(0);
    expect(run.by_status).toEqual({ timeout: run.requests });
    expect(run.latency_ms.count).toBe(0);
  });

  it("ramp: steps up while the SLO holds, retries a miss once, then bisects; the best held step's own figures", async () => {
    const r = await runLoadtest(raw("--mode", "ramp", "--connections", "8", "--slo-ms", "100", "--slo-percentile", "90", "--ramp-start", "10", "--ramp-factor", "2", "--step-duration", "1", "--bisect", "2", "--warmup", "0"));
    const { steps, best_rate, best } = r.ramp!;
    // Each rate once, or twice when its first attempt missed (the retry right after it).
    const decided = steps.filter((s, i) => s.pass || s.attempt === 2 || steps[i + 1]?.attempt !== 2);
    for (const [i, s] of steps.entries()) if (s.attempt === 2) expect([steps[i - 1].rate, steps[i - 1].pass, steps[i - 1].attempt]).toEqual([s.rate, false, 1]);
    const climb = decided.slice(0, decided.findIndex((s) => !s.pass) + 1);
    expect(climb.length).toBeGreaterThanOrEqual(2);
    climb.slice(1).forEach((s, i) => expect(s.rate).toBe(climb[i].rate * 2));
    expect(decided.length).toBe(climb.length + 2);
    // The miss that ended the climb was a retry: its first attempt missed too.
    expect(climb[climb.length - 1].attempt).toBe(2);
    // Past capacity (80/s against 50/s) nothing holds.
    expect(steps.filter((s) => s.rate >= 80).every((s) => !s.pass)).toBe(true);
    expect(best_rate).toBeGreaterThanOrEqual(20);
    expect(best_rate).toBeLessThan(60);
    expect(best!.rate).toBe(best_rate);
    expect(best!.latency_ms.p90).toBe(best!.slo_ms);
    expect(steps.filter((s) => s.pass).every((s) => s.slo_ms <= 100)).toBe(true);
    expect(r.run!.timeline.length).toBeGreaterThanOrEqual(decided.length - 1);
  });
});

describe("quiver-loadtest against a server that refuses every request (400, a JSON error)", () => {
  let server: http.Server;
  let url = "";
  beforeAll(async () => {
    server = http.createServer((req, res) => (req.resume(), res.writeHead(400, { "content-type": "application/json" }).end('{"error":{"code":400,"message":"k: too large"}}')));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));

  it("a latency bound has no figure and fails; the run warns that most requests failed and shows one answer", async () => {
    const r = await cli(["--url", url, "--workload", "raw", "--method", "GET", "--path", "/x", "--no-metrics", "--quiet", "--connections", "2", "--duration", "0.5", "--warmup", "0", "--threshold", "p99<50ms,service_p50<50ms", "--out", path.join(dir, "all-fail")]);
    expect(r.code, r.stderr).toBe(3);
    expect(r.stdout).toMatch(/p99<50ms FAILS \(no figure\), service_p50<50ms FAILS \(no figure\)/);
    expect(r.stderr).toMatch(/quiver-loadtest: most requests failed \(\d+ of \d+: \d+ × 400\).*first failure: 400 \{"error":\{"code":400,"message":"k: too large"\}\}/);
    expect(JSON.parse(readFileSync(path.join(dir, "all-fail.json"), "utf8")).run.error_sample).toContain("k: too large");
  });
});

describe("options and sources", () => {
  it("reads query vectors from JSON lines (of arrays or objects), a JSON array, .npy and Arrow IPC", () => {
    const vs = [[1, 2, 3], [4, 5, 6.5]];
    const f = (name: string, data: string | Buffer) => (writeFileSync(path.join(dir, name), data), path.join(dir, name));
    expect(readVectors(f("q.jsonl", vs.map((v) => JSON.stringify({ id: 1, emb: v })).join("\n")))).toEqual(vs);
    // The documented form, JSON lines of arrays: its first line starts with "[" as a JSON array does.
    expect(readVectors(f("arrays.jsonl", vs.map((v) => JSON.stringify(v)).join("\n") + "\n"))).toEqual(vs);
    expect(readVectors(f("one.jsonl", "[1,2,3]\n"))).toEqual([[1, 2, 3]]);
    expect(readVectors(f("q.json", JSON.stringify(vs)))).toEqual(vs);
    expect(() => readVectors(f("broken.jsonl", "[1,2,3]\n[4,5\n"))).toThrow(/broken\.jsonl: line 2 is not JSON/);
    expect(() => readVectors(f("ragged.jsonl", "[1,2,3]\n[4,5]\n"))).toThrow(/ragged\.jsonl: vector 1 has 2 values, vector 0 has 3/);
    expect(() => readVectors(path.join(dir, "absent.jsonl"))).toThrow(/absent\.jsonl: no such file/);
    const header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    const pad = header.padEnd(118 - 10, " ") + "\n";
    const npy = Buffer.concat([Buffer.from("\x93NUMPY\x01\x00", "latin1"), Buffer.from([pad.length & 255, pad.length >> 8]), Buffer.from(pad, "latin1"), Buffer.from(new Float32Array(vs.flat()).buffer)]);
    expect(readVectors(f("q.npy", npy))).toEqual(vs);
    const vecType = new FixedSizeList(3, new Field("item", new Float32(), true));
    const withVectors = new Table({ id: vectorFromArray([1, 2]), emb: vectorFromArray(vs.map((v) => Float32Array.from(v)), vecType) });
    expect(readVectors(f("q.arrow", Buffer.from(tableToIPC(withVectors, "file"))))).toEqual(vs);
    const list = tableFromArrays({ id: Int32Array.from([1, 2]) });
    expect(() => readVectors(f("bad.arrow", Buffer.from(tableToIPC(list, "file"))))).toThrow(/no vector column/);
  });

  it("takes options from a YAML or JSON file, flags winning, and names a bad option", () => {
    const yaml = path.join(dir, "w.yaml");
    writeFileSync(yaml, "url: http://127.0.0.1:1\ntable: ns$docs\nmode: open\nrate: 50\nworkloads:\n  - kind: vector\n    weight: 3\n  - kind: fts\n    text: [apple, river]\n");
    const c = parseCommand(["--config", yaml, "--rate", "75"]);
    expect("run" in c && c.run.rate).toBe(75);
    expect("run" in c && c.run.workloads).toEqual([{ kind: "vector", weight: 3 }, { kind: "fts", weight: 1, text: ["apple", "river"] }]);
    const json = path.join(dir, "w.json");
    writeFileSync(json, JSON.stringify({ url: "http://127.0.0.1:1", table: "t", "slo-ms": 5, sloPercentile: 99.9 }));
    const j = parseCommand(["--config", json]);
    expect("run" in j && [j.run.sloMs, j.run.sloPercentile]).toEqual([5, 99.9]);
    expect(() => parseCommand(["--url", "http://x:1", "--table", "t", "--mode", "fast"])).toThrow(/--mode: expected one of closed, open, ramp, recall/);
    expect(() => parseCommand(["--url", "http://x:1", "--table", "t", "--mode", "open"])).toThrow(/--rate is required/);
    expect(() => parseCommand(["--url", "http://x:1", "--mix", "vector:2,bogus"])).toThrow(/unknown workload "bogus"/);
    expect(() => parseCommand(["--url", "http://x:1", "--table", "t", "--connections", "0"])).toThrow(/--connections/);
    expect(() => parseCommand(["--url", "x:1", "--table", "t"])).toThrow(/--url: expected http/);
  });

  it("reads a sweep from the words after --sweep or from a file, a dataset's defaults, and refuses what cannot run", () => {
    const run = (...args: string[]) => {
      const c = parseCommand(args, {});
      if (!("run" in c)) throw new Error("expected a run");
      return c.run;
    };
    const o = run("--dataset", "lowrank-100k", "--sweep", "nprobes=5,10,20,40", "refine_factor=0,10", "--repeat", "3");
    expect(o.sweep).toEqual([{ name: "nprobes", values: [5, 10, 20, 40] }, { name: "refine_factor", values: [0, 10] }]);
    expect([o.url, o.table, o.repeat, o.columns, o.index, o.queryCount]).toEqual(["http://127.0.0.1:8080", "lowrank_100k", 3, ["id"], "IVF_PQ", 1000]);
    expect(run("--dataset", "g.fvecs", "--sweep", "ef=16,64 bypass_vector_index=false").sweep).toEqual([{ name: "ef", values: [16, 64] }, { name: "bypass_vector_index", values: [false] }]);
    const yaml = path.join(dir, "sweep.yaml");
    writeFileSync(yaml, "table: t\nqueries: q.jsonl\nsweep: { nprobes: [5, 10], refine_factor: 10 }\nthreshold: p99<50ms,recall>0.9\n");
    const y = run("--config", yaml);
    expect(y.sweep).toEqual([{ name: "nprobes", values: [5, 10] }, { name: "refine_factor", values: [10] }]);
    expect(y.thresholds.map((t) => [t.metric, t.op, t.value])).toEqual([["p99", "<", 50], ["recall", ">", 0.9]]);
    expect(run("--table", "t", "--threshold", "p99.9<1.5s,service_p99<=800us,errors<0.1%,errors<3,qps>=100").thresholds.map((t) => [t.metric, t.op, t.value])).toEqual([
      ["p999", "<", 1500], ["service_p99", "<=", 0.8], ["error_rate", "<", 0.1], ["errors", "<", 3], ["throughput", ">=", 100],
    ]);
    expect(() => run("--table", "t", "--sweep", "nprobes=5")).toThrow(/a sweep measures recall on query vectors the table does not hold: give --dataset or --queries/);
    expect(() => run("--table", "t", "--mode", "recall")).toThrow(/recall mode measures recall/);
    expect(() => run("--table", "t", "--queries", "q", "--sweep", "nprobes=5", "--mode", "open", "--rate", "5")).toThrow(/--sweep runs closed loops/);
    expect(() => run("--table", "t", "--sweep", "nprobes", "--queries", "q")).toThrow(/--sweep: expected FIELD=V1,V2/);
    expect(() => run("--table", "t", "stray")).toThrow(/unexpected argument: stray/);
    expect(() => run("--table", "t", "--threshold", "latency<5ms")).toThrow(/unknown figure latency/);
    expect(() => run("--table", "t", "--mode", "ramp", "--generators", "2")).toThrow(/--generators runs closed and open loops/);
  });

  it("--queries in a file that is not vectors: one line naming the file, exit 2 before any request", async () => {
    const bad = path.join(dir, "bad-queries.jsonl");
    writeFileSync(bad, "[0.1, 0.2]\n{not json}\n");
    const r = await cli(["--url", q.url, "--api-key", ADMIN_KEY, "--table", "ns$docs", "--queries", bad, "--duration", "0.2", "--warmup", "0", "--quiet", "--no-metrics", "--out", path.join(dir, "never")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`quiver-loadtest: ${bad}: line 2 is not JSON: ${(() => { try { JSON.parse("{not json}"); } catch (e) { return (e as Error).message; } })()}\n`);
  });

  it("--queries of another dimension than the table's vectors: exit 2 before any request, naming both", async () => {
    const wrong = path.join(dir, "wrong-dim.jsonl");
    writeFileSync(wrong, "[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]\n[0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]\n");
    const r = await cli(["--url", q.url, "--api-key", ADMIN_KEY, "--table", "ns$docs", "--queries", wrong, "--duration", "0.2", "--warmup", "0", "--quiet", "--no-metrics", "--out", path.join(dir, "never")]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`--queries ${wrong.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}: its vectors have 7 dimensions, but column \\w+ of ns\\$docs holds \\d+`));
  });

  it("--version prints the harness's version", async () => {
    const r = await cli(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`quiver-loadtest ${JSON.parse(readFileSync(path.resolve(__dirname, "../package.json"), "utf8")).version}\n`);
  });

  it("documents every flag in --help and docs/loadtest.md", () => {
    const docs = readFileSync(path.resolve(__dirname, "../docs/loadtest.md"), "utf8");
    for (const f of FLAG_NAMES.filter((f) => f !== "help")) {
      expect(HELP, f).toContain(`--${f}`);
      expect(docs, f).toContain(`--${f}`);
    }
  });
});
