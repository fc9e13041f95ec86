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
  }))() as Promise<Modules>);

/** What fetch sends on its own (undici), so the pipeline sees the headers it sees over HTTP. */
const FETCH_HEADERS: Record<string, string> = {
  accept: "*/*",
  "accept-language": "*",
  "sec-fetch-mode": "cors",
  "user-agent": "node",
  "accept-encoding": "gzip, deflate",
};

export type InProcessOptions = Pick<StartOptions, "args" | "env" | "noKeys" | "seed">;

export interface InProcess {
  dataDir: string;
  config: Config;
  services: Services;
  pipeline: Pipeline;
  /** Quiver's log lines (JSON, on stderr) written since the file's server started. */
  stderr: () => string;
  /** JSON request with the admin key unless headers say otherwise (as the HTTP tier's `call`). */
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
  /** Close the services and open them again on the same data directory. */
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
  return { inc: { method: req.method.toUpperCase(), path: url.pathname, query: url.search.slice(1), headers: h, signal: () => abort.signal }, bytes };
}

/** The body of an answer, as a client reads it; a stream that fails before its first byte is answered with an error body, as the server does. */
async function read(m: Modules, pipeline: Pipeline, path: string, out: Outgoing): Promise<{ out: Outgoing; bytes: Uint8Array }> {
  if (out.kind === "empty") return { out, bytes: new Uint8Array(0) };
  if (out.kind === "body") return { out, bytes: typeof out.body === "string" ? Buffer.from(out.body) : out.body };
  const chunks: Uint8Array[] = [];
  try {
    for await (const c of out.chunks) chunks.push(c);
  } catch (err) {
    // Over HTTP the connection is cut once bytes were written: fetch fails reading the body.
    if (chunks.length > 0) throw new TypeError("terminated", { cause: err });
    const requestId = out.headers["x-request-id"] ?? "";
    if (!m.errors.isApiError(err)) m.log.log.error("response failed", { requestId, path, error: String((err as Error)?.stack ?? err), context: out.context });
    const failed = pipeline.error(path, m.errors.isApiError(err) ? err : m.errors.internal(requestId), requestId);
    return read(m, pipeline, path, failed);
  }
  return { out, bytes: Buffer.concat(chunks) };
}

function headersOf(out: Outgoing, bytes: Uint8Array): Headers {
  const h = new Headers();
  if (out.kind !== "empty") h.set("content-type", out.contentType);
  for (const k in out.headers) h.set(k, out.headers[k]);
  if (out.status !== 204) h.set("content-length", String(bytes.byteLength));
  return h;
}

/**
 * One in-process server for a whole test file: `seed` fills a fresh data directory, then the
 * services open before the file's tests and close (the directory removed) after them.
 */
export function inProcessForFile(opts: InProcessOptions = {}, setupTimeoutMs?: number): InProcess {
  const q = {} as InProcess;
  let logged = "";
  const write = process.stderr.write;
  let m: Modules;

  const open = async (dataDir: string) => {
    const config = m.config.loadConfig(["--port", "0", "--data-dir", dataDir, ...(opts.args ?? [])], serverEnv(opts));
    m.log.setLogLevel(config.logLevel);
    const auth = m.auth.setupAuth(config);
    const services = await m.services.createServices(config, auth.credential);
    const pipeline = m.pipeline.createPipeline(services, auth.authenticate, m.routes.routes);
    await m.admin.reclaim(services, "start");
    Object.assign(q, { dataDir, config, services, pipeline });
  };

  Object.assign(q, {
    stderr: () => logged,
    async call(method: string, p: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> {
      const { inc, bytes } = await incoming(method, p, body, { "x-api-key": ADMIN_KEY, ...headers });
      const started = performance.now();
      const path = inc.path.replace(/\/+$/, "") || "/";
      const { out, bytes: answer } = await read(m, q.pipeline, path, await q.pipeline.dispatch(inc, bytes));
      const routed = q.pipeline.route(inc.method, inc.path);
      q.pipeline.finished({ op: routed.kind === "route" ? routed.route.spec.name : "unmatched", method: inc.method, path }, out, out.status, performance.now() - started);
      return replyOf(out.status, headersOf(out, answer), answer);
    },
    async restart() {
      await q.services.close();
      await open(q.dataDir);
    },
  });

  beforeAll(async () => {
    // Quiver's JSON log lines are kept for the file (as a server process's stderr), not printed.
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: any[]) => {
      const s = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
      if (s.startsWith('{"t":')) {
        logged += s;
        const cb = rest.find((r) => typeof r === "function");
        if (cb) cb();
        return true;
      }
      return (write as any).call(process.stderr, chunk, ...rest);
    }) as typeof process.stderr.write;
    m = await modules();
    const dataDir = tempDataDir();
    if (opts.seed) await opts.seed(dataDir);
    await open(dataDir);
  }, setupTimeoutMs);
  afterAll(async () => {
    await q.services?.close();
    if (q.dataDir) removeDir(q.dataDir);
    process.stderr.write = write;
  });
  return q;
}
