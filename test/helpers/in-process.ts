// The in-process tier: the same services, credentials and pipeline as a server process, called
// through `dispatch()` without a socket. One per test file, on a temp data directory, with the
// shape of serverForFile (test/helpers/quiver.ts): `call` answers the same Reply.
//
// The built code (dist/) is loaded, as the server process runs it: worker threads and the compute
// sandbox are started from files next to it. Run `npm run build` first, as for the HTTP tier.
import { afterAll, beforeAll } from "vitest";
import type { Config } from "../../src/config.js";
import type { Incoming, Outgoing, Pipeline } from "../../src/http/pipeline.js";
import type { Services } from "../../src/services.js";
import { ADMIN_KEY, removeDir, replyOf, requestInit, serverEnv, tempDataDir, type Reply, type StartOptions } from "./quiver.js";

type Modules = {
  config: typeof import("../../src/config.js");
  auth: typeof import("../../src/auth/authenticate.js");
  services: typeof import("../../src/services.js");
  pipeline: typeof import("../../src/http/pipeline.js");
  routes: typeof import("../../src/routes.js");
  log: typeof import("../../src/log.js");
  errors: typeof import("../../src/errors.js");
  admin: typeof import("../../src/operations/admin.js");
  exchange: typeof import("../../src/http/exchange.js");
};

let loaded: Promise<Modules> | undefined;
const modules = (): Promise<Modules> =>
  (loaded ??= (async () => ({
    config: await import("../../dist/src/config.js"),
    auth: await import("../../dist/src/auth/authenticate.js"),
    services: await import("../../dist/src/services.js"),
    pipeline: await import("../../dist/src/http/pipeline.js"),
    routes: await import("../../dist/src/routes.js"),
    log: await import("../../dist/src/log.js"),
    errors: await import("../../dist/src/errors.js"),
    admin: await import("../../dist/src/operations/admin.js"),
    exchange: await import("../../dist/src/http/exchange.js"),
  }))() as Promise<Modules>);

/** What fetch sends on its own (undici), so the pipeline sees the headers it sees over HTTP. */
const FETCH_HEADERS: Record<string, string> = {
  accept: "*/*",
  "accept-language": "*",
  "sec-fetch-mode": "cors",
  "user-agent": "node",
  "accept-encoding": "gzip, deflate",
};

export type InProcessOptions = Pick<StartOptions, "args" | "env" | "noKeys" | "seed" | "dataDir">;

export interface InProcess {
  dataDir: string;
  config: Config;
  services: Services;
  pipeline: Pipeline;
  /** Quiver's log lines (JSON, on stderr) written while this server was open. */
  stderr: () => string;
  /** JSON request with the admin key unless headers say otherwise (as the HTTP tier's `call`). */
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
  /** A request with only the headers given (as the HTTP tier's `request(url, …)`). */
  request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
  /** Close the services (as a server's stop, without a process). */
  stop(): Promise<void>;
}

/** An in-process server that can be opened again on the same data directory. */
export interface FileInProcess extends InProcess {
  restart(): Promise<void>;
}

/** The request as fetch would send it, then as uWS hands it to the pipeline. */
async function incoming(method: string, p: string, body: unknown, headers: Record<string, string>): Promise<{ inc: Incoming; bytes?: Uint8Array }> {
  const req = new Request(new URL(p, "http://127.0.0.1"), requestInit(method, body, headers));
  const h: Record<string, string> = { host: "127.0.0.1", connection: "keep-alive", ...FETCH_HEADERS };
  req.headers.forEach((v, k) => (h[k] = v));
  const bytes = body === undefined ? undefined : new Uint8Array(await req.arrayBuffer());
  if (bytes) h["content-length"] = String(bytes.byteLength);
  const url = new URL(req.url);
  const abort = new AbortController();
  return { inc: { method: req.method.toUpperCase(), path: url.pathname, query: url.search.slice(1), headers: h, signal: () => abort.signal, gone: () => abort.signal.aborted }, bytes };
}

/**
 * The body of an answer as a client reads it, as src/http/exchange.ts writes it: a stream is
 * written once FLUSH_BYTES gathered (then chunked, without a Content-Length); one that fails
 * before that is answered with an error body, after it the connection is cut.
 */
async function read(m: Modules, pipeline: Pipeline, path: string, out: Outgoing): Promise<{ out: Outgoing; bytes: Uint8Array; chunked: boolean }> {
  if (out.kind === "empty") return { out, bytes: new Uint8Array(0), chunked: false };
  if (out.kind === "body") return { out, bytes: typeof out.body === "string" ? Buffer.from(out.body) : out.body, chunked: false };
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const c of out.chunks) {
      chunks.push(c);
      size += c.byteLength;
    }
  } catch (err) {
    // fetch fails reading a body whose connection was cut.
    if (size >= m.exchange.FLUSH_BYTES) throw new TypeError("terminated", { cause: err });
    const requestId = out.headers["x-request-id"] ?? "";
    if (!m.errors.isApiError(err)) m.log.log.error("response failed", { requestId, path, error: String((err as Error)?.stack ?? err), context: out.context });
    return read(m, pipeline, path, pipeline.error(path, m.errors.isApiError(err) ? err : m.errors.internal(requestId), requestId));
  }
  return { out, bytes: Buffer.concat(chunks, size), chunked: size >= m.exchange.FLUSH_BYTES };
}

function headersOf(out: Outgoing, bytes: Uint8Array, chunked: boolean): Headers {
  const h = new Headers();
  if (out.kind !== "empty") h.set("content-type", out.contentType);
  for (const k in out.headers) h.set(k, out.headers[k]);
  if (chunked) h.set("transfer-encoding", "chunked");
  else if (out.status !== 204) h.set("content-length", String(bytes.byteLength));
  return h;
}

// Quiver logs JSON lines on stderr: while an in-process server is open they are kept for it (as a
// server process's stderr is), not printed.
const open = new Set<{ logged: string }>();
let write: typeof process.stderr.write | undefined;
function captureLog(sink: { logged: string }): () => void {
  open.add(sink);
  if (!write) {
    const original = (write = process.stderr.write);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: any[]) => {
      const s = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
      if (!s.startsWith('{"t":')) return (original as any).call(process.stderr, chunk, ...rest);
      for (const o of open) o.logged += s;
      rest.find((r) => typeof r === "function")?.();
      return true;
    }) as typeof process.stderr.write;
  }
  return () => {
    open.delete(sink);
    if (open.size === 0 && write) {
      process.stderr.write = write;
      write = undefined;
    }
  };
}

/** Open Quiver's services and pipeline in this process on a (fresh, unless given) data directory. */
export async function startInProcess(opts: InProcessOptions = {}): Promise<InProcess> {
  const m = await modules();
  const dataDir = opts.dataDir ?? tempDataDir();
  if (opts.seed) await opts.seed(dataDir);
  const sink = { logged: "" };
  const release = captureLog(sink);
  const config = m.config.loadConfig(["--port", "0", "--data-dir", dataDir, ...(opts.args ?? [])], serverEnv(opts));
  m.log.setLogLevel(config.logLevel);
  let auth: Awaited<ReturnType<typeof m.auth.setupAuth>> | undefined;
  // As main.ts: refreshes ask for credentials only once jobs run, after auth is set.
  const services = await m.services.createServices(config, (key) => auth!.credential(key));
  auth = await m.auth.setupAuth(config, services.system);
  const pipeline = m.pipeline.createPipeline(services, auth.authenticate, m.routes.routes);
  // As main.ts does once the server listens.
  await services.jobs.start();
  await m.admin.reclaim(services, "start");
  let stopped = false;
  const request = async (method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> => {
    const { inc, bytes } = await incoming(method, p, body, headers);
    const started = performance.now();
    const routed = pipeline.route(inc.method, inc.path);
    const path = routed.kind === "route" ? routed.route.path : inc.path.replace(/\/+$/, "") || "/";
    const { out, bytes: answer, chunked } = await read(m, pipeline, path, await pipeline.dispatch(inc, bytes));
    pipeline.finished({ op: routed.kind === "route" ? routed.route.spec.name : "unmatched", method: inc.method, path }, out, out.status, performance.now() - started);
    return replyOf(out.status, headersOf(out, answer, chunked), answer);
  };
  return {
    dataDir,
    config,
    services,
    pipeline,
    stderr: () => sink.logged,
    request,
    call: (method, p, body, headers) => request(method, p, body, { "x-api-key": ADMIN_KEY, ...headers }),
    async stop() {
      if (stopped) return;
      stopped = true;
      await services.close();
      release();
    },
  };
}

/**
 * One in-process server for a whole test file: `seed` fills a fresh data directory, then the
 * services open before the file's tests and close (the directory removed) after them. The
 * returned object is filled in when they are open, and again by restart().
 */
export function inProcessForFile(opts: InProcessOptions = {}, setupTimeoutMs?: number): FileInProcess {
  const q = {} as FileInProcess;
  const restart = async () => {
    await q.stop();
    Object.assign(q, await startInProcess({ ...opts, seed: undefined, dataDir: q.dataDir }), { restart });
  };
  beforeAll(async () => {
    Object.assign(q, await startInProcess(opts), { restart });
  }, setupTimeoutMs);
  afterAll(async () => {
    await q.stop?.();
    if (q.dataDir) removeDir(q.dataDir);
  });
  return q;
}
