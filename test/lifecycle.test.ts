import { spawn } from "node:child_process";
import net from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { sample } from "./helpers/metrics.js";
import { probeUntil } from "./helpers/pace.js";
import { ADMIN_KEY, removeDir, request, startQuiver } from "./helpers/quiver.js";
import { settle, until } from "./helpers/transactions.js";

describe("configuration", () => {
  it("flags win over environment, environment over the config file, the file over defaults", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "quiver-cfg-"));
    const file = path.join(dir, "quiver.json");
    writeFileSync(file, JSON.stringify({ port: 1111, workers: 3, "max-json-body": 2048, host: "127.0.0.2" }));
    const cfg = loadConfig(["--config", file, "--port", "3333"], { QUIVER_PORT: "2222", QUIVER_WORKERS: "5" });
    expect(cfg.port).toBe(3333);
    expect(cfg.workers).toBe(5);
    expect(cfg.maxJsonBody).toBe(2048);
    expect(cfg.host).toBe("127.0.0.2");
    expect(cfg.maxArrowBody).toBe(256 << 20);
    removeDir(dir);
  });

  it("rejects bad values naming the option and its source", () => {
    expect(() => loadConfig(["--workers", "0"], {})).toThrow(/workers \(from --workers\) must be >= 1/);
    expect(() => loadConfig([], { QUIVER_PORT: "http" })).toThrow(/port \(from QUIVER_PORT\) must be an integer/);
    expect(() => loadConfig(["--nope", "1"], {})).toThrow();
  });

  it("a bool option is a bare flag (true/false from the environment or file); a share is a number from 0 to 1", () => {
    expect(loadConfig([], {}).metricsPublic).toBe(false);
    expect(loadConfig(["--metrics-public"], {}).metricsPublic).toBe(true);
    expect(loadConfig([], { QUIVER_METRICS_PUBLIC: "true" }).metricsPublic).toBe(true);
    expect(() => loadConfig([], { QUIVER_METRICS_PUBLIC: "maybe" })).toThrow(/metrics-public \(from QUIVER_METRICS_PUBLIC\) must be true or false/);
    expect(loadConfig([], {})).toMatchObject({ accessLogSample: 0.01, accessLogErrorSample: 1 });
    expect(loadConfig(["--access-log-sample", "0.25"], {}).accessLogSample).toBe(0.25);
    expect(() => loadConfig(["--access-log-sample", "2"], {})).toThrow(/access-log-sample \(from --access-log-sample\) must be <= 1, got 2/);
    expect(() => loadConfig([], { QUIVER_ACCESS_LOG_ERROR_SAMPLE: "all" })).toThrow(/access-log-error-sample \(from QUIVER_ACCESS_LOG_ERROR_SAMPLE\) must be a number/);
  });

  it("a bad configuration stops startup with a message, not a stack", async () => {
    await expect(startQuiver({ args: ["--workers", "0"] })).rejects.toThrow(/quiver: workers/);
  });
});

describe("shutdown", () => {
  it("SIGTERM stops accepting, finishes the request in flight, and exits 0", async () => {
    const q = await startQuiver();
    const body = JSON.stringify({ properties: { k: "v" } });
    const sock = net.connect(q.port, "127.0.0.1");
    let reply = "";
    sock.on("data", (d) => (reply += d));
    // A reset when the server exits is expected; unhandled, it would fail the run, not this test.
    sock.on("error", () => undefined);
    const closed = new Promise((r) => sock.on("close", r));
    // Send the head and half the body, so the request is in flight when SIGTERM arrives.
    sock.write(`POST /v1/namespace/late/create HTTP/1.1\r\nHost: x\r\nx-api-key: ${ADMIN_KEY}\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    await new Promise((r) => setTimeout(r, 200));
    const exit = q.stop();
    await new Promise((r) => setTimeout(r, 200));
    // New connections are refused while draining.
    await expect(fetch(`${q.url}/healthz`)).rejects.toThrow();
    sock.write(body.slice(5));
    expect(await exit).toBe(0);
    await Promise.race([closed, new Promise((r) => setTimeout(r, 1000))]);
    expect(reply).toMatch(/^HTTP\/1.1 200/);
    sock.destroy();

    // The request that was in flight was committed.
    const again = await startQuiver({ dataDir: q.dataDir });
    expect((await again.call("POST", "/v1/namespace/late/describe", {})).json).toEqual({ properties: { k: "v" } });
    await again.stop();
    removeDir(q.dataDir);
  });
});

describe("the drain on SIGTERM", () => {
  it("readiness is 503 at once while requests are still served, each with Connection: close, for --drain-delay-ms; then new connections are refused, an idle connection is closed (not reset) and the process exits 0", async () => {
    const q = await startQuiver({ args: ["--drain-delay-ms", "5000"] });
    // Opened before the signal: one used after it, one left idle throughout.
    const used = raw(q.port);
    const idle = raw(q.port);
    await Promise.all([used.ready, idle.ready]);
    const signalled = Date.now();
    const exit = q.stop();
    await new Promise((r) => setTimeout(r, 100));
    const ready = await request(`${q.url}/readyz`, "GET");
    expect([ready.status, ready.json]).toEqual([503, { status: "draining" }]);
    // Served on a connection opened before the signal, and on a new one; both are told to close.
    const answer = await used.get("/v1/namespace/%24/list");
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/\r\nConnection: close\r\n/i);
    await used.closed;
    const metrics = await q.call("GET", "/metrics");
    expect(metrics.status).toBe(200);
    expect(sample(metrics.text, "quiver_draining")).toBe(1);
    expect(sample(metrics.text, "quiver_unavailable_total", { reason: "not_ready" })).toBe(1);
    expect(sample(metrics.text, "quiver_unavailable_total", { reason: "draining" })).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(5000);
    expect(await exit).toBe(0);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(5000);
    await expect(fetch(`${q.url}/healthz`)).rejects.toThrow();
    await idle.closed;
    expect(idle.error()).toBeNull();
    removeDir(q.dataDir);
  });

  it("a request refused after the listener closed is counted by the next start (QuiverRefusedWhileStopping could not fire: the process exited before any scrape saw it)", async () => {
    const q = await startQuiver();
    // One request in flight keeps the process up after the listener closes; an idle connection
    // opened before the signal then asks for something.
    const body = JSON.stringify({ properties: {} });
    const slow = net.connect(q.port, "127.0.0.1");
    slow.on("error", () => undefined);
    slow.write(`POST /v1/namespace/late/create HTTP/1.1\r\nHost: x\r\nx-api-key: ${ADMIN_KEY}\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    const idle = raw(q.port);
    await idle.ready;
    await new Promise((r) => setTimeout(r, 200));
    const exit = q.stop();
    await probeUntil("the listener closed", () => fetch(`${q.url}/healthz`).then(() => null, () => true), 10_000);
    expect(await idle.get("/v1/namespace/%24/list")).toMatch(/^HTTP\/1\.1 503 [^]*server is shutting down/);
    slow.end(body.slice(5));
    expect(await exit).toBe(0);
    const again = await startQuiver({ dataDir: q.dataDir });
    try {
      expect(sample((await again.call("GET", "/metrics")).text, "quiver_unavailable_total", { reason: "draining" })).toBe(1);
    } finally {
      await again.stop();
      removeDir(q.dataDir);
    }
  });

  it("SIGINT (Ctrl-C) skips the delay", async () => {
    const q = await startQuiver({ args: ["--drain-delay-ms", "60000"] });
    const exited = new Promise<number | null>((resolve) => q.proc.once("exit", resolve));
    const started = Date.now();
    q.proc.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(30_000);
    removeDir(q.dataDir);
  });
});

/** A kept-alive connection: GET requests on it one at a time, and whether the server closed or reset it. */
function raw(port: number) {
  const sock = net.connect(port, "127.0.0.1");
  let got = "";
  let failure: Error | null = null;
  let waiting: (() => void) | null = null;
  sock.on("data", (d) => {
    got += d;
    waiting?.();
  });
  sock.on("error", (e) => (failure = e));
  const closed = new Promise<void>((resolve) => sock.on("close", () => resolve()));
  return {
    ready: new Promise((resolve) => sock.once("connect", resolve)),
    closed,
    error: () => failure,
    get(p: string): Promise<string> {
      got = "";
      sock.write(`GET ${p} HTTP/1.1\r\nhost: x\r\nx-api-key: ${ADMIN_KEY}\r\n\r\n`);
      return new Promise((resolve) => {
        waiting = () => {
          const end = got.indexOf("\r\n\r\n");
          const length = /content-length: (\d+)/i.exec(got);
          if (end >= 0 && length && got.length >= end + 4 + Number(length[1])) resolve(got);
        };
      });
    },
  };
}

describe("a second start", () => {
  it("on a taken port exits without touching the live server's jobs (it used to queue and start them again)", { timeout: 180_000 }, async () => {
    const a = await startQuiver({ args: ["--udf-timeout-ms", "60000", "--workers", "1"] });
    try {
      const rows = Array.from({ length: 40 }, (_, i) => ({ id: i, x: i }));
      expect((await a.call("POST", "/v1/table/slow/create", rows)).status).toBe(200);
      // 0.2 s a row, five rows a task, one task at a time: the backfill runs for about 8 s.
      const vc = { udf_backend: "js", udf: "(x) => { const end = Date.now() + 200; while (Date.now() < end); return x; }", input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "int64" }, nullable: true }] };
      expect((await a.call("POST", "/v1/table/slow/add_columns", { new_columns: [{ name: "y", virtual_column: vc }] })).status).toBe(200);
      const r = await a.call("POST", "/v1/table/slow/backfill_column", { column: "y", task_size: 5, concurrency: 1, checkpoint_size: 5 });
      expect(r.status, r.text).toBe(202);
      const job = r.json.job_id as string;
      await until(a, job, (s) => s === "Running");
      // A state directory of its own, so only the port stops it.
      const b = spawn(process.execPath, [path.resolve(__dirname, "../dist/src/main.js"), "--port", String(a.port), "--data-dir", a.dataDir, "--state-dir", mkdtempSync(path.join(tmpdir(), "quiver-second-"))], { env: { ...process.env, QUIVER_API_KEYS: `${ADMIN_KEY}:admin`, QUIVER_LOG_LEVEL: "warn" }, stdio: "ignore" });
      const exited = new Promise<number | null>((resolve) => b.once("exit", resolve));
      // Watched while the second process lives: the job never leaves Running (it is neither queued
      // again nor failed as interrupted).
      const seen = new Set<string>();
      let code: number | null | undefined;
      void exited.then((c) => (code = c));
      while (code === undefined) seen.add((await a.call("POST", `/v1/transaction/${job}/describe`)).json.status as string);
      expect(code).not.toBe(0);
      expect([...seen].filter((s) => s !== "Running" && s !== "Succeeded")).toEqual([]);
      const done = await settle(a, job, 120_000);
      expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
      expect(done.properties.rows_computed).toBe("40");
    } finally {
      await a.stop();
    }
  });

  it("on the state directory of a live server is refused, naming it (a replica needs its own)", async () => {
    const a = await startQuiver();
    try {
      const b = spawn(process.execPath, [path.resolve(__dirname, "../dist/src/main.js"), "--port", "0", "--data-dir", a.dataDir], { env: { ...process.env, QUIVER_API_KEYS: `${ADMIN_KEY}:admin` }, stdio: ["ignore", "ignore", "pipe"] });
      let err = "";
      b.stderr!.on("data", (d: Buffer) => (err += d));
      expect(await new Promise<number | null>((resolve) => b.once("exit", resolve))).not.toBe(0);
      expect(err).toContain(`is in use by process ${a.proc.pid}: give each replica its own --state-dir`);
      expect((await a.call("GET", "/v1/namespace/%24/list")).status).toBe(200);
    } finally {
      await a.stop();
    }
  });
});
