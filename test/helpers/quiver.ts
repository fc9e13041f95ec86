// Starts a real Quiver process (the built dist/) on 127.0.0.1, port 0, with a temp data directory.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { V8_FLAGS } from "../../src/util/v8-flags.js";
import { paced } from "./pace.js";

export const ADMIN_KEY = "test-admin-key";
export const WRITE_KEY = "test-write-key";
export const READ_KEY = "test-read-key";
export const NS1_KEY = "test-ns1-key";
export const DEFAULT_KEYS = `${ADMIN_KEY}:admin,${WRITE_KEY}:write,${READ_KEY}:read,${NS1_KEY}:write:ns1`;

const MAIN = path.resolve(__dirname, "../../dist/src/main.js");

export interface Quiver {
  url: string;
  port: number;
  dataDir: string;
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** SIGTERM, wait for exit; returns the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL (a crash), wait for exit. */
  kill(): Promise<void>;
  /** JSON request with the admin key unless headers say otherwise. */
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
}

/** What a test calls: a server process (this file) or the in-process tier (in-process.ts). */
export interface Caller {
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  bytes: Uint8Array;
  json: any;
}

export interface StartOptions {
  args?: string[];
  env?: Record<string, string>;
  /** Reuse a data directory (e.g. across a restart); a fresh temp one otherwise. */
  dataDir?: string;
  /**
   * A `--data-dir` other than the local directory (an object store URI): the local directory is
   * then given as `--state-dir`.
   */
  dataUri?: string;
  /** Leave QUIVER_API_KEYS unset (first-start key generation). */
  noKeys?: boolean;
  /** Runs on the (fresh) data directory before the server starts, e.g. to make tables with LanceDB. */
  seed?: (dataDir: string) => Promise<void>;
}

/** What `fetch` is given for a test's request: a JSON body is serialised and typed; bytes and strings go as they are. */
export function requestInit(method: string, body?: unknown, headers: Record<string, string> = {}): RequestInit {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    if (body instanceof Uint8Array || typeof body === "string") init.body = body as BodyInit;
    else {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
  }
  return init;
}

/** A reply from its status, headers and body bytes; `json` is parsed for a JSON (or problem+json) body. */
export function replyOf(status: number, headers: Headers, bytes: Uint8Array): Reply {
  const text = Buffer.from(bytes).toString("utf8");
  let json: any = undefined;
  if (/^application\/(problem\+)?json\b/.test(headers.get("content-type") ?? "") && text) json = JSON.parse(text);
  return { status, headers, text, bytes, json };
}

export async function request(url: string, method: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(url, requestInit(method, body, headers));
  return replyOf(res.status, res.headers, new Uint8Array(await res.arrayBuffer()));
}

/**
 * The environment a test server starts with: warnings and up logged, no drain delay on SIGTERM
 * (no balancer waits for it; test/rolling-restart.test.ts runs with the default), no processes
 * started ahead (--spare-processes off: most test servers run a check or a job or two, and each
 * spare was a process start's CPU spent for nothing; test/job-launcher.test.ts runs with them),
 * the test keys unless `noKeys`.
 */
export function serverEnv(opts: Pick<StartOptions, "env" | "noKeys">): Record<string, string> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>), QUIVER_LOG_LEVEL: "warn", QUIVER_DRAIN_DELAY_MS: "0", QUIVER_SPARE_PROCESSES: "off", ...opts.env };
  if (!opts.noKeys) env.QUIVER_API_KEYS ??= DEFAULT_KEYS;
  return env;
}

/** A fresh temp data directory for a test server. */
export const tempDataDir = () => mkdtempSync(path.join(tmpdir(), "quiver-test-"));

export async function startQuiver(opts: StartOptions = {}): Promise<Quiver> {
  const dataDir = opts.dataDir ?? tempDataDir();
  if (opts.seed) await opts.seed(dataDir);
  const env = serverEnv(opts);
  const where = opts.dataUri ? ["--data-dir", opts.dataUri, "--state-dir", dataDir] : ["--data-dir", dataDir];
  const proc = spawn(process.execPath, [...V8_FLAGS, MAIN, "--port", "0", ...where, ...(opts.args ?? [])], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  proc.stderr!.on("data", (d) => (err += d));
  const port = await new Promise<number>((resolve, reject) => {
    // 30 s on an idle machine; a loaded one (other suites beside this one) gets its slowdown on top.
    const timer = setTimeout(() => reject(new Error(`quiver did not start:\n${out}\n${err}`)), paced(30_000));
    proc.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`quiver exited with ${code}:\n${out}\n${err}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return {
    url,
    port,
    dataDir,
    proc,
    stdout: () => out,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGTERM");
      return exited;
    },
    async kill() {
      if (proc.exitCode === null) proc.kill("SIGKILL");
      await exited;
    },
    call(method, p, body, headers) {
      return request(url + p, method, body, { "x-api-key": ADMIN_KEY, ...headers });
    },
  };
}

/** Remove a temp data directory after the server using it stopped. */
export function removeDir(dir: string): void {
  // A write the server started before it closed (a claim released, a compaction) may still add a
  // file while the tree is removed: rmSync retries on ENOTEMPTY.
  rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
}

/** A server that can be restarted on the same data directory (after stop() or kill()). */
export interface FileServer extends Quiver {
  restart(): Promise<void>;
}

/**
 * One server for a whole test file: `seed` fills a fresh data directory, then the server starts
 * before the file's tests; it is stopped (and the directory removed) after them. The returned
 * object is filled in when the server is up, and again by restart().
 */
export function serverForFile(opts: StartOptions = {}, setupTimeoutMs?: number): FileServer {
  const q = {} as FileServer;
  const restart = async () => {
    await q.stop();
    Object.assign(q, await startQuiver({ ...opts, seed: undefined, dataDir: q.dataDir }), { restart });
  };
  beforeAll(async () => {
    Object.assign(q, await startQuiver(opts), { restart });
  }, setupTimeoutMs);
  afterAll(async () => {
    await q.stop?.();
    if (q.dataDir) removeDir(q.dataDir);
  });
  return q;
}

/** Resolves with the first stderr line (a JSON log line) that `match` accepts; polls until `timeoutMs` (scaled to the machine's load). */
export async function logLine(q: Pick<Quiver, "stderr">, match: (line: string) => boolean, timeoutMs = 5_000): Promise<string> {
  const end = Date.now() + paced(timeoutMs);
  for (;;) {
    const hit = q.stderr().split("\n").find(match);
    if (hit !== undefined) return hit;
    if (Date.now() > end) throw new Error(`no log line matched within ${timeoutMs} ms:\n${q.stderr().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
