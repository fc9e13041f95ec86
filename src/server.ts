// The uWS adapter: reads the request line and headers, starts reading the body, bounds the
// requests in flight, and writes what the pipeline (src/http/pipeline.ts) answers, corked and with
// backpressure. It knows nothing about routes' meaning, credentials or tables.
import uWS from "uWebSockets.js";
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from "uWebSockets.js";
import { ApiError, Code, internal, isApiError } from "./errors.js";
import { openExchange, readBody, sendBody, sendEmpty, sendStream, type Exchange } from "./http/exchange.js";
import type { Incoming, Outgoing, Pipeline } from "./http/pipeline.js";
import { log } from "./log.js";
import type { Services } from "./services.js";

const NO_BODY = Promise.resolve(new Uint8Array(0));

export interface Server {
  port: number;
  /** Requests holding an admission slot right now. */
  inFlight(): number;
  /** Stop accepting, wait (up to a deadline) for in-flight requests, then resolve. */
  drain(deadlineMs?: number): Promise<void>;
}

async function write(x: Exchange, out: Outgoing): Promise<void> {
  switch (out.kind) {
    case "body":
      return sendBody(x, out.status, out.contentType, out.body, out.headers, out.close);
    case "empty":
      return sendEmpty(x, out.status, out.headers);
    case "stream":
      return sendStream(x, out.status, out.contentType, out.chunks, out.headers);
  }
}

export function startServer(svc: Services, pipeline: Pipeline): Promise<Server> {
  const cfg = svc.config;
  let inFlight = 0;
  const app: TemplatedApp = uWS.App();

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
      void write(x, out);
      pipeline.finished({ op, method, path }, out, x.status, performance.now() - started);
    };

    const routed = pipeline.route(method, path);
    if (routed.kind === "answer") return answer("unmatched", routed.out);
    const r = routed.route;
    const admitted = r.spec.role !== "public";
    if (admitted && (svc.lifecycle.draining || inFlight >= cfg.maxInFlight)) {
      const [why, reason] = svc.lifecycle.draining
        ? ["server is shutting down", "draining"]
        : [`more than ${cfg.maxInFlight} requests in flight; retry later`, "in_flight"];
      return answer(r.spec.name, pipeline.error(r.path, new ApiError(Code.ServiceUnavailable, why, undefined, reason)));
    }
    // uWS drops body data that arrives before a reader is attached: start reading now.
    const body = r.body ? readBody(x, r.body.limit, contentLength, r.body.what) : NO_BODY;
    if (admitted) inFlight++;
    const inc: Incoming = { method, path, query, headers, signal: x.signal };
    let out: Outgoing | undefined;
    pipeline
      .run(r, inc, body)
      .then(async (o) => {
        out = o;
        await write(x, o);
      })
      .catch((err: unknown) => {
        // A stream that failed before its first byte can still be answered with an error body.
        const requestId = out?.headers["x-request-id"] ?? "";
        if (!isApiError(err)) log.error("response failed", { requestId, op: r.spec.name, path: r.path, error: String((err as Error)?.stack ?? err), context: out?.context });
        const failed = pipeline.error(r.path, isApiError(err) ? err : internal(requestId), requestId);
        out = out ? { ...failed, context: out.context } : failed;
        void write(x, failed);
      })
      .finally(() => {
        if (admitted) inFlight--;
        // A handler that never answered (it should not happen) must still end the exchange.
        if (!x.done && !x.aborted) void write(x, pipeline.error(r.path, internal(out?.headers["x-request-id"] ?? "")));
        pipeline.finished({ op: r.spec.name, method, path: r.path }, out, x.aborted ? 0 : x.status, performance.now() - started);
      });
  }

  app.any("/*", handle);

  return new Promise((resolve, reject) => {
    app.listen(cfg.host, cfg.port, (socket: us_listen_socket | false) => {
      if (!socket) {
        reject(new Error(`cannot listen on ${cfg.host}:${cfg.port}`));
        return;
      }
      resolve({
        port: uWS.us_socket_local_port(socket as unknown as uWS.us_socket),
        inFlight: () => inFlight,
        async drain(deadlineMs = 30_000) {
          svc.lifecycle.draining = true;
          uWS.us_listen_socket_close(socket);
          const until = Date.now() + deadlineMs;
          while (inFlight > 0 && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
        },
      });
    });
  });
}
