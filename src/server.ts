// The uWS adapter: reads the request line and headers, reads the body (paced, without holding an
// execution slot), bounds the requests in flight and the results streaming, and writes what the
// pipeline (src/http/pipeline.ts) answers, corked and with backpressure. It knows nothing about
// routes' meaning, credentials or tables.
import net from "node:net";
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket, us_socket } from "uws-pack";
import { bucketOf } from "./auth/principal.js";
import type { Config } from "./config.js";
import { randomUUID } from "node:crypto";
import { ApiError, Code, errorBody, internal, isApiError } from "./errors.js";
import { createBodyReaders, type BodyReaders } from "./http/body-readers.js";
import { holdBody, openExchange, sendBody, sendEmpty, signalOf, sendStream, type BodyGate, type BodyPace, type Exchange, type StreamFlow } from "./http/exchange.js";
import type { Caller, Incoming, Outgoing, Pipeline, Route } from "./http/pipeline.js";
import { refusalError, type Refusal } from "./http/refusals.js";
import { takesSlot } from "./http/route-spec.js";
import { createResponseBudget } from "./http/response-budget.js";
import { log } from "./log.js";
import { recordInFlight } from "./metrics.js";
import type { Lifecycle, Services } from "./services.js";
import { releaseAbandoned } from "./util/native-memory.js";
import { loadUws } from "./util/runtime.js";

const NO_BODY = Promise.resolve(new Uint8Array(0));

/** The credential a body reader is counted against; null for a body that carries its own identity. */
const subjectOf = (c: Caller): string | null => (c.kind === "principal" ? bucketOf(c.principal) : null);

export interface Server {
  port: number;
  /** Requests holding an admission slot right now. */
  inFlight(): number;
  /** How long the oldest request holding a slot has run, in seconds (0 when none does). */
  oldestSeconds(): number;
  /**
   * Shut down in steps: readiness answers 503 and answers close their connections, while requests
   * are still served, for `delayMs` (or until `skip` resolves), so balancers stop sending new
   * ones; then stop listening, wait (up to `deadlineMs`) for the requests accepted, and close the
   * connections left. A request still running at the deadline is answered 503 with
   * `Connection: close` (its work is not waited for). Resolves with the milliseconds of the
   * deadline left.
   */
  drain(delayMs: number, deadlineMs: number, skip: Promise<void>): Promise<number>;
}

/** `close`: the connection ends after this answer (said in a `Connection: close` header). */
async function write(x: Exchange, out: Outgoing, flow: StreamFlow, close: boolean): Promise<void> {
  switch (out.kind) {
    case "body":
      return sendBody(x, out.status, out.contentType, out.body, out.headers, out.close || close);
    case "empty":
      return sendEmpty(x, out.status, out.headers, close);
    case "stream":
      // uWS writes the header itself only where it also ends the connection (a whole body); a
      // stream's client closes the connection once the answer ends, as the header tells it.
      return sendStream(x, out.status, out.contentType, out.chunks, close ? { ...out.headers, connection: "close" } : out.headers, flow);
  }
}

/** The bounds a request passes before it runs, as plain counters and decisions. */
function createAdmission(cfg: Config, lifecycle: Lifecycle, readers: BodyReaders) {
  const counts = { inFlight: 0 };
  return {
    counts,
    /** Why a new request needing an execution slot cannot have one. */
    refuse(): Refusal | null {
      // Only once the server stopped listening: during the drain delay it still serves, since a
      // balancer may send requests until it has seen readiness fail.
      if (lifecycle.closed) return { reason: "draining", message: "server is shutting down", retryAfterS: 1 };
      return this.slotless();
    },
    /** Why a request whose body has arrived cannot run now (one accepted before a drain still runs). */
    slotless(): Refusal | null {
      if (counts.inFlight < cfg.maxInFlight) return null;
      return { reason: "in_flight", message: `more than ${cfg.maxInFlight} requests in flight; retry later`, retryAfterS: 1 };
    },
    /** Requests accepted and not yet finished: running, or still receiving their body. */
    busy: () => counts.inFlight + readers.count(),
  };
}

/** What listens while the data directory does not answer yet at start (`listenStarting`); the server proper takes its app and socket over. */
export interface Starting {
  app: TemplatedApp;
  socket: us_listen_socket;
  /** Why the store is not reached, as `/readyz` says. */
  setCause(cause: string): void;
  /** Every request from now on goes to `handler`. */
  use(handler: (res: HttpResponse, req: HttpRequest) => void): void;
}

/**
 * Listen before the services exist, while the data directory does not answer at start: `/healthz`
 * answers 200 (the process is alive), `/readyz` 503 `storage` with the cause, and everything else
 * 503 with Retry-After, so a balancer and a process manager wait instead of restarting it.
 */
export async function listenStarting(cfg: Config, cause: string): Promise<Starting> {
  const uWS = await loadUws();
  const app: TemplatedApp = uWS.App();
  const state = { cause };
  let handler = (res: HttpResponse, req: HttpRequest) => {
    const url = req.getUrl();
    // A body left unread would be taken for the next request: such a connection ends with its answer.
    const close = req.getMethod() !== "get";
    const [status, type, body] =
      url === "/healthz"
        ? ["200 OK", "application/json", { status: "ok" }]
        : url === "/readyz"
          ? ["503 Service Unavailable", "application/json", { status: "not_ready", reason: "storage", cause: state.cause }]
          : ["503 Service Unavailable", "application/problem+json", errorBody(new ApiError(Code.ServiceUnavailable, `starting: the data directory does not answer yet (${state.cause}); retry later`, 503), url)];
    res.cork(() => {
      res.writeStatus(status).writeHeader("content-type", type).writeHeader("x-request-id", randomUUID());
      if (status !== "200 OK") res.writeHeader("retry-after", "5");
      res.end(JSON.stringify(body), close);
    });
  };
  app.any("/*", (res, req) => handler(res, req));
  const socket = await listen(app, cfg.host, cfg.port);
  return { app, socket, setCause: (c) => void (state.cause = c), use: (h) => void (handler = h) };
}

/** The port a listen socket is bound to. */
export const portOf = async (socket: us_listen_socket) => (await loadUws()).us_socket_local_port(socket as unknown as us_socket);

export async function startServer(svc: Services, pipeline: Pipeline, early: Starting | null = null): Promise<Server> {
  const uWS = await loadUws();
  const cfg = svc.config;
  const readers = createBodyReaders(cfg);
  const admission = createAdmission(cfg, svc.lifecycle, readers);
  const { counts } = admission;
  /** Requests holding a slot, oldest first (a Set keeps insertion order). */
  const running = new Set<{ x: Exchange; path: string; op: string; started: number }>();
  /** Readiness fails while every slot is taken, so a balancer sends elsewhere before clients get 503s. */
  const slotsChanged = () => (svc.lifecycle.full = counts.inFlight >= cfg.maxInFlight);
  const flow: StreamFlow = { idleMs: cfg.responseIdleMs, budget: createResponseBudget(cfg) };
  const pace: BodyPace = { timeoutMs: cfg.bodyTimeoutMs, minRate: cfg.bodyMinRate };
  const app: TemplatedApp = early?.app ?? uWS.App();
  /** Every answer while the server drains closes its connection, so none is left to a stopping server. */
  const send = (x: Exchange, out: Outgoing) => write(x, out, flow, svc.lifecycle.draining);

  function handle(res: HttpResponse, req: HttpRequest): void {
    const x = openExchange(res);
    // Everything is read from `req` now: it is invalid after the handler returns.
    const method = req.getMethod().toUpperCase();
    const path = req.getUrl();
    const query = req.getQuery() ?? "";
    const headers: Record<string, string> = {};
    req.forEach((k, v) => (headers[k] = v));
    const contentLength = headers["content-length"] !== undefined ? Number(headers["content-length"]) : null;
    if (method === "GET" || contentLength === 0) x.bodyRead = true;
    const started = performance.now();
    /** An answer written at once, before any operation ran. */
    const answer = (op: string, out: Outgoing) => {
      void send(x, out);
      pipeline.finished({ op, method, path }, out, x.status, performance.now() - started);
    };

    const routed = pipeline.route(method, path);
    if (routed.kind === "answer") return answer("unmatched", routed.out);
    const r = routed.route;
    const refused = takesSlot(r.spec) ? admission.refuse() : null;
    if (refused) return answer(r.spec.name, pipeline.error(r.path, refusalError(refused)));
    // uWS drops body data that arrives before a reader is attached: hold it now (paused) until
    // the request's credentials are checked.
    const gate = r.body !== null && !x.bodyRead ? holdBody(x, contentLength, pace) : null;
    const address = gate ? Buffer.from(res.getRemoteAddressAsText()).toString() : "";
    void serve(x, r, { method, path, query, headers, signal: () => signalOf(x), gone: () => x.aborted }, gate, address);
  }

  /**
   * Check the request's header credentials before any body is admitted; then wait for the body
   * (holding only a reader place), take an execution slot and run.
   */
  async function serve(x: Exchange, r: Route, inc: Incoming, gate: BodyGate | null, address: string): Promise<void> {
    const admitted = takesSlot(r.spec);
    const started = performance.now();
    const entry = { x, path: r.path, op: r.spec.name, started };
    let out: Outgoing | undefined;
    let slot = false;
    let turn = false;
    let body: Promise<Uint8Array> = NO_BODY;
    try {
      const checked = await pipeline.admit(r, inc);
      if (checked.kind === "answer") {
        // 401, 403 or 415: the body is never read (the connection is closed after the answer).
        out = checked.out;
        await send(x, out);
        return;
      }
      const a = checked.admitted;
      if (gate) {
        const place = readers.take(address, subjectOf(a.caller));
        if ("refusal" in place) throw refusalError(place.refusal);
        body = gate.admit(a.body!);
        await body.catch(() => undefined);
        place.release();
        if (x.aborted) return;
      }
      if (admitted) {
        const refused = admission.slotless();
        if (refused) throw refusalError(refused);
        recordInFlight(++counts.inFlight);
        slot = true;
        running.add(entry);
        slotsChanged();
      }
      inc.largeResult = async () => {
        const refused = await flow.budget.take(signalOf(x));
        if (refused) throw refusalError(refused);
        turn = true;
      };
      out = await pipeline.run(a, inc, body);
      if (out.status === 408) log.warn("request body too slow", { requestId: out.headers["x-request-id"], op: r.spec.name, path: r.path });
      await send(x, out);
    } catch (err) {
      // A refusal, or a stream that failed before its first byte, can still be answered with an error body.
      const requestId = out?.headers["x-request-id"] ?? "";
      if (!isApiError(err)) log.error("response failed", { requestId, op: r.spec.name, path: r.path, error: String((err as Error)?.stack ?? err), context: out?.context });
      const failed = pipeline.error(r.path, isApiError(err) ? err : internal(requestId), requestId);
      out = out ? { ...failed, context: out.context } : failed;
      void send(x, failed);
    } finally {
      if (slot) {
        counts.inFlight--;
        running.delete(entry);
        slotsChanged();
      }
      if (turn) flow.budget.give();
      out?.release?.();
      if (turn && (x.aborted || x.cut)) releaseAbandoned();
      if (x.cut) log.warn("client took no response bytes; connection closed", { requestId: out?.headers["x-request-id"], op: r.spec.name, path: r.path, idleMs: cfg.responseIdleMs });
      // A handler that never answered (it should not happen) must still end the exchange.
      if (!x.done && !x.aborted) void send(x, pipeline.error(r.path, internal(out?.headers["x-request-id"] ?? "")));
      pipeline.finished({ op: r.spec.name, method: inc.method, path: r.path }, out, x.aborted ? 0 : x.status, performance.now() - started);
    }
  }

  if (early) early.use(handle);
  else app.any("/*", handle);

  return (early ? Promise.resolve(early.socket) : listen(app, cfg.host, cfg.port)).then((socket) => ({
    port: uWS.us_socket_local_port(socket as unknown as us_socket),
    inFlight: () => counts.inFlight,
    oldestSeconds() {
      const first = running.values().next();
      return first.done ? 0 : (performance.now() - first.value.started) / 1000;
    },
    async drain(delayMs, deadlineMs, skip) {
      svc.lifecycle.draining = true;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([new Promise((res) => (timer = setTimeout(res, delayMs))), skip]);
      clearTimeout(timer);
      svc.lifecycle.closed = true;
      uWS.us_listen_socket_close(socket);
      const until = Date.now() + deadlineMs;
      while (admission.busy() > 0 && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
      // Past the deadline, a request still running is answered (its client may retry elsewhere)
      // rather than cut when the process exits; a stream already begun can only be cut.
      const late = [...running].filter((e) => !e.x.done && !e.x.aborted);
      if (late.length > 0) log.warn("shutdown deadline passed: answering 503 to requests still running", { count: late.length, ops: late.map((e) => e.op), deadlineMs });
      for (const e of late) void write(e.x, pipeline.error(e.path, refusalError({ reason: "shutdown_deadline", message: `server is shutting down: the request was still running after --shutdown-deadline-ms (${deadlineMs} ms); it may or may not have taken effect`, retryAfterS: 1 })), flow, true);
      // Every answer since the drain began closed its connection; what is left is idle (or past
      // the deadline), and is closed now rather than reset when the process exits.
      app.close();
      return Math.max(0, until - Date.now());
    },
  }));
}

// uWS listens with SO_REUSEPORT unless told otherwise, and then two servers on one port split the
// connections between them. Both uWS builds accept (host, port, options, cb); their typings omit it.
const EXCLUSIVE_PORT = 1; // ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT
type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => TemplatedApp;

function listen(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    (app.listen as unknown as ListenWithOptions).call(app, host, port, EXCLUSIVE_PORT, (socket) => {
      if (socket) resolve(socket);
      else void whyNotListening(host, port).then((why) => reject(new Error(why)));
    });
  });
}

/** uWS gives no reason for a failed listen; binding the same address with Node's net does. */
async function whyNotListening(host: string, port: number): Promise<string> {
  const code = await new Promise<string | null>((resolve) => {
    const probe = net.createServer();
    probe.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? null));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(null)));
  });
  if (code === "EADDRINUSE") return `port ${port} is in use by ${await holderOf(host, port)}`;
  if (code === "EACCES") return `cannot listen on ${host}:${port}: permission denied`;
  if (code === "EADDRNOTAVAIL") return `cannot listen on ${host}:${port}: not an address of this machine`;
  return `cannot listen on ${host}:${port}${code ? `: ${code}` : ""}`;
}

/** Another Quiver answers /healthz with its JSON and a request id; anything else is another program. */
function holderOf(host: string, port: number): Promise<string> {
  const target = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return new Promise((resolve) => {
    let reply = "";
    const socket = net.connect({ host: target, port });
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const quiver = /^HTTP\/1\.1 200/.test(reply) && /\r\nx-request-id:/i.test(reply) && reply.includes('{"status":"ok"}');
      resolve(quiver ? "another Quiver server" : "another program");
    };
    const timer = setTimeout(done, 2000);
    socket.on("data", (d) => (reply += d.toString("latin1")));
    socket.on("error", done);
    socket.on("close", done);
    socket.on("connect", () => socket.write(`GET /healthz HTTP/1.1\r\nhost: ${target}\r\nconnection: close\r\n\r\n`));
  });
}
