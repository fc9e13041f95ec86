// What a balancer and a process manager see of a replica that is saturated, stopping or cannot
// write: checks and scrapes answer outside admission, readiness says why it is not ready, a
// shutdown ends within its deadlines answering what still runs, and a draining replica takes no job.
// A request is made to hang by test/helpers/hang.ts.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { V8_FLAGS } from "../src/util/v8-flags.js";
import { sample } from "./helpers/metrics.js";
import { ADMIN_KEY, removeDir, request, serverEnv, startQuiver, type Quiver } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";
import { paced, probeUntil } from "./helpers/pace.js";
import { hang } from "./helpers/hang.js";

/** The capabilities by which root writes, and searches, past a file's mode. */
const ROOT_OVERRIDES = "-dac_override,-dac_read_search,-fowner";

const ROWS = Array.from({ length: 20 }, (_, i) => ({ id: i, x: i }));

describe("a saturated replica", () => {
  it("answers /healthz and /metrics (with the oldest request's age) while every slot is taken, and /readyz is 503 saying so until a slot frees", { timeout: 120_000 }, async () => {
    const q = await startQuiver({ args: ["--max-in-flight", "2", "--udf-timeout-ms", "60000", "--workers", "2"] });
    try {
      expect((await q.call("POST", "/v1/table/t/create", ROWS)).status).toBe(200);
      expect((await request(`${q.url}/readyz`, "GET")).status).toBe(200);
      const hung = [hang(q, "a", 8000), hang(q, "b", 8001)];
      const busy = await probeUntil("readiness 503", async () => {
        const r = await request(`${q.url}/readyz`, "GET");
        return r.status === 503 ? r : null;
      });
      expect(busy.json).toEqual({ status: "busy", reason: "every one of --max-in-flight 2 execution slots is taken" });
      // A data request is refused; the checks and the scrape are not.
      expect((await q.call("POST", "/v1/table/t/count_rows", {})).status).toBe(503);
      expect((await request(`${q.url}/healthz`, "GET")).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1000));
      const metrics = await q.call("GET", "/metrics");
      expect(metrics.status, metrics.text).toBe(200);
      expect(sample(metrics.text, "quiver_oldest_request_seconds")).toBeGreaterThanOrEqual(1);
      expect(sample(metrics.text, "quiver_in_flight_max")).toBe(2);
      for (const r of await Promise.all(hung)) expect(r.status, r.text).toBe(200);
      expect((await request(`${q.url}/readyz`, "GET")).json).toEqual({ status: "ready" });
      expect(sample((await q.call("GET", "/metrics")).text, "quiver_oldest_request_seconds")).toBe(0);
    } finally {
      await q.stop();
      removeDir(q.dataDir);
    }
  });
});

describe("a shutdown with a request that hangs", () => {
  it("answers it 503 with Connection: close at --shutdown-deadline-ms and exits within drain + deadline + 5 s", { timeout: 120_000 }, async () => {
    const q = await startQuiver({ args: ["--shutdown-deadline-ms", "2000", "--udf-timeout-ms", "120000"] });
    try {
      expect((await q.call("POST", "/v1/table/t/create", ROWS)).status).toBe(200);
      const hung = hang(q, "a", 30_000);
      await probeUntil("the request in flight", async () => (sample((await q.call("GET", "/metrics")).text, "quiver_oldest_request_seconds") > 0.2 ? true : null));
      const signalled = Date.now();
      const exit = q.stop();
      const answer = await hung;
      expect(answer.status, answer.text).toBe(503);
      expect(answer.headers.get("connection")).toBe("close");
      expect(answer.json.detail).toMatch(/still running after --shutdown-deadline-ms \(2000 ms\)/);
      expect(await exit).toBe(0);
      // No drain delay in tests (QUIVER_DRAIN_DELAY_MS=0): deadline 2 s + 5 s.
      expect(Date.now() - signalled).toBeLessThan(paced(7000));
      expect(q.stderr()).toContain("shutdown deadline passed: answering 503 to requests still running");
    } finally {
      await q.stop();
      removeDir(q.dataDir);
    }
  });
});

describe("a draining replica", () => {
  it("claims no job submitted during its drain delay: it stays Queued, and the next replica runs it", { timeout: 120_000 }, async () => {
    const q = await startQuiver({ args: ["--drain-delay-ms", "5000"] });
    expect((await q.call("POST", "/v1/table/t/create", ROWS)).status).toBe(200);
    const exit = q.stop();
    await new Promise((r) => setTimeout(r, 200));
    expect((await request(`${q.url}/readyz`, "GET")).status).toBe(503);
    const r = await q.call("POST", "/v1/table/t/create_index", { column: "id", index_type: "BTREE" });
    expect(r.status, r.text).toBe(200);
    const job = r.json.transaction_id as string;
    // Jobs poll at most a second apart: three seconds of looks, each Queued.
    const seen = new Set<string>();
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      seen.add((await q.call("POST", `/v1/transaction/${job}/describe`, {})).json.status as string);
      await new Promise((res) => setTimeout(res, 100));
    }
    expect([...seen]).toEqual(["Queued"]);
    expect(await exit).toBe(0);
    const next = await startQuiver({ dataDir: q.dataDir });
    try {
      const done = await settle(next, job, 60_000);
      expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    } finally {
      await next.stop();
      removeDir(q.dataDir);
    }
  });
});

/** Every file and directory under `dir`, made unwritable (for a root test run, the server runs without the capabilities that override file modes). */
function readOnly(dir: string): void {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) readOnly(p);
    else chmodSync(p, 0o444);
  }
  chmodSync(dir, 0o555);
}

describe("a data directory this server cannot write", () => {
  it("is not ready, saying why, and a write is answered 503 naming the cause instead of a generic 500", { timeout: 120_000 }, async () => {
    const first = await startQuiver();
    expect((await first.call("POST", "/v1/table/t/create", ROWS)).status).toBe(200);
    await first.stop();
    readOnly(first.dataDir);
    const stateDir = mkdtempSync(path.join(tmpdir(), "quiver-state-"));
    const server = [process.execPath, ...V8_FLAGS, path.resolve(__dirname, "../dist/src/main.js"), "--port", "0", "--data-dir", first.dataDir, "--state-dir", stateDir];
    // Root stays root, so it reads the checkout wherever it lies (a 0700 temporary folder too), but
    // without the capabilities that let it write past a file's mode.
    const [command, ...args] = process.getuid?.() === 0 ? ["setpriv", `--bounding-set=${ROOT_OVERRIDES}`, "--", ...server] : server;
    const proc = spawn(command, args, { env: { ...serverEnv({}), HOME: stateDir }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    proc.stdout!.on("data", (d) => (out += d));
    proc.stderr!.on("data", (d) => (err += d));
    const exited = new Promise<unknown>((resolve) => (proc.once("exit", resolve), proc.once("error", resolve)));
    try {
      const port = await probeUntil(`a listening server:\n${err}`, async () => {
        if (proc.exitCode !== null) throw new Error(`the server exited with ${proc.exitCode}:\n${err}`);
        return Number(/listening on http:\/\/[^:]+:(\d+)/.exec(out)?.[1]) || null;
      }, 30_000);
      const url = `http://127.0.0.1:${port}`;
      const ready = await request(`${url}/readyz`, "GET");
      expect(ready.status).toBe(503);
      expect(ready.json.status).toBe("not_ready");
      expect(ready.json.reason).toContain(`cannot write to ${first.dataDir}`);
      expect(err).toContain("not ready: a directory is not writable");
      // Reads are served; a write is told what is wrong.
      expect((await request(`${url}/v1/table/t/count_rows`, "POST", {}, { "x-api-key": ADMIN_KEY })).json).toBe(ROWS.length);
      const write = await request(`${url}/v1/table/t/insert`, "POST", [{ id: 100, x: 100 }], { "x-api-key": ADMIN_KEY });
      expect(write.status, write.text).toBe(503);
      expect(write.json.detail).toMatch(/permission denied|read-only/);
    } finally {
      proc.kill("SIGTERM");
      await exited;
      removeDir(stateDir);
      removeDir(first.dataDir);
    }
  });
});
