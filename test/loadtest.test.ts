// The load-testing harness (loadtest/) against a real Quiver with a small table, and against a
// deliberately slow node:http server: each mode briefly, its figures checked against what the
// server counted, the open loop's rate, the queueing delay a closed loop hides, recall, and the
// options it reads. Reports it writes are checked in Chromium by test/loadtest-report.test.ts.
import http from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Field, FixedSizeList, Float32, Table, tableFromArrays, tableToIPC, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FLAG_NAMES, HELP, parseCommand, type Options } from "../loadtest/options.js";
import { runLoadtest } from "../loadtest/run.js";
import { readVectors } from "../loadtest/sources.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";
import { seedLoadTable } from "./helpers/loadtest.js";

const q = serverForFile();
const dir = mkdtempSync(path.join(tmpdir(), "quiver-loadtest-"));

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

  it("recall mode: 1.0 when both sides search exactly (bypass_vector_index)", async () => {
    const o = options(q.url, "--table", "ns$docs", "--mode", "recall", "--recall-queries", "20", "--k", "5", "--extra", '{"bypass_vector_index":true}');
    const r = await runLoadtest(o);
    expect(r.recall!.queries).toBe(20);
    expect(r.recall!.mean).toBe(1);
    expect(r.recall!.min).toBe(1);
    expect(r.run).toBeNull();
  });
});


describe("quiver-loadtest against a slow server (20 ms an answer, one at a time: 50/s)", () => {
  let slow: Awaited<ReturnType<typeof slowServer>>;
  beforeAll(async () => void (slow = await slowServer(20)));
  afterAll(() => slow.close());
  const raw = (...args: string[]) => options(slow.url, "--workload", "raw", "--method", "GET", "--path", "/slow", "--no-metrics", ...args);

  it("shows the queueing delay that a closed loop hides", async () => {
    const closed = (await runLoadtest(raw("--connections", "1", "--duration", "1.5", "--warmup", "0.2"))).run!;
    const open = (await runLoadtest(raw("--mode", "open", "--rate", "100", "--connections", "1", "--duration", "1.5", "--warmup", "0"))).run!;
    // Closed: each request waits only for its own service time (the bounds leave room for a busy machine).
    expect(closed.latency_ms.p50).toBeGreaterThanOrEqual(19);
    // The median, not a tail: a stall of a shared CI machine lands in the tail of 75 answers.
    expect(closed.latency_ms.p50).toBeLessThan(60);
    expect(closed.throughput).toBeLessThan(55);
    // Open at twice the capacity for 1.5 s: the requests due meanwhile waited (up to ~0.75 s), and that wait is counted.
    expect(open.latency_ms.p50).toBeGreaterThan(5 * closed.latency_ms.p50);
    expect(open.latency_ms.p99).toBeGreaterThan(500);
    expect(open.latency_ms.p99).toBeGreaterThan(2 * closed.latency_ms.p99);
    expect(open.late).toBeGreaterThan(0);
    expect(open.unsent).toBeGreaterThan(0);
    expect(open.max_backlog).toBeGreaterThan(10);
  });

  it("an open loop stopped early (the CLI's Ctrl-C) ends at once, counting only what was due", async () => {
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 500);
    const t0 = Date.now();
    const r = await runLoadtest(raw("--mode", "open", "--rate", "20", "--connections", "2", "--duration", "30", "--warmup", "0"), process.stderr, stop.signal);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(r.interrupted).toBe(true);
    expect(r.run!.sent).toBeGreaterThanOrEqual(5);
    expect(r.run!.sent + r.run!.unsent).toBeLessThan(40);
    expect(r.run!.errors).toBe(0);
  });

  it("a request past --timeout is an error named timeout, not a hang", async () => {
    const run = (await runLoadtest(raw("--connections", "2", "--duration", "0.5", "--warmup", "0", "--timeout", "0.005"))).run!;
    expect(run.requests).toBeGreaterThan(0);
    expect(run.by_status).toEqual({ timeout: run.requests });
    expect(run.latency_ms.count).toBe(0);
  });

  it("ramp: steps up while the SLO holds, then bisects; the best rate is below capacity", async () => {
    const r = await runLoadtest(raw("--mode", "ramp", "--connections", "8", "--slo-ms", "100", "--slo-percentile", "90", "--ramp-start", "10", "--ramp-factor", "2", "--step-duration", "1", "--bisect", "2", "--warmup", "0"));
    const { steps, best_rate } = r.ramp!;
    const climb = steps.slice(0, steps.findIndex((s) => !s.pass) + 1);
    expect(climb.length).toBeGreaterThanOrEqual(2);
    climb.slice(1).forEach((s, i) => expect(s.rate).toBe(climb[i].rate * 2));
    expect(steps.length).toBe(climb.length + 2);
    expect(best_rate).toBeGreaterThanOrEqual(20);
    expect(best_rate).toBeLessThan(60);
    expect(steps.filter((s) => s.pass).every((s) => s.slo_ms <= 100)).toBe(true);
    expect(steps.find((s) => s.rate >= 80)?.pass ?? false).toBe(false);
    expect(r.run!.timeline.length).toBeGreaterThanOrEqual(steps.length - 1);
  });
});

describe("options and sources", () => {
  it("reads query vectors from JSON lines, a JSON array, .npy and Arrow IPC", () => {
    const vs = [[1, 2, 3], [4, 5, 6.5]];
    const f = (name: string, data: string | Buffer) => (writeFileSync(path.join(dir, name), data), path.join(dir, name));
    expect(readVectors(f("q.jsonl", vs.map((v) => JSON.stringify({ id: 1, emb: v })).join("\n")))).toEqual(vs);
    expect(readVectors(f("q.json", JSON.stringify(vs)))).toEqual(vs);
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
    expect(() => parseCommand(["--table", "t"])).toThrow(/--url is required/);
  });

  it("documents every flag in --help and docs/loadtest.md", () => {
    const docs = readFileSync(path.resolve(__dirname, "../docs/loadtest.md"), "utf8");
    for (const f of FLAG_NAMES.filter((f) => f !== "help")) {
      expect(HELP, f).toContain(`--${f}`);
      expect(docs, f).toContain(`--${f}`);
    }
  });
});
