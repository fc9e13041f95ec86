// The front end: uWS routing, authentication, validation and authorisation, then one operation
// call, then encoding. It knows nothing about tables; operations know nothing about sockets.
import { randomBytes } from "node:crypto";
import uWS from "uWebSockets.js";
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from "uWebSockets.js";
import type { Authenticate, Credentials } from "./auth/authenticate.js";
import { canBrowse, covers, roleRank, type Principal } from "./auth/principal.js";
import { ApiError, Code, errorBody, internal, isApiError } from "./errors.js";
import { openExchange, readBody, sendBody, sendEmpty, sendStream, type Exchange } from "./http/exchange.js";
import { DEFAULT_DELIMITER, decodeSegment, parseId } from "./http/path-id.js";
import { compileRoutes } from "./http/router.js";
import { log } from "./log.js";
import type { OpContext, OpResult } from "./operations/types.js";
import { routes, type RouteSpec } from "./routes.js";
import type { Services } from "./services.js";

const JSON_TYPE = "application/json";
const match = compileRoutes(routes);
const requestPrefix = randomBytes(3).toString("hex");
let requestCounter = 0;

interface Incoming {
  method: string;
  url: string;
  query: string;
  creds: Credentials;
  contentLength: number | null;
  context: Record<string, string>;
  lancedbClient: boolean;
}

/** Everything needed from the uWS request, read synchronously: it is invalid after the first await. */
function readIncoming(req: HttpRequest): Incoming {
  const creds: Credentials = {};
  const context: Record<string, string> = {};
  let contentLength: number | null = null;
  let lancedbClient = false;
  req.forEach((k, v) => {
    if (k === "x-api-key") creds.apiKey = v;
    else if (k === "authorization") {
      const m = /^bearer\s+(.+)$/i.exec(v);
      if (m) creds.bearer = m[1].trim();
    } else if (k === "content-length") contentLength = Number(v);
    else if (k.startsWith("x-svc-ctx-")) context[k.slice(10)] = v;
    else if (k.startsWith("x-lance-ctx-")) context[k.slice(12)] ??= v;
    else if (k === "x-lancedb-database") lancedbClient = true;
  });
  return { method: req.getMethod().toUpperCase(), url: req.getUrl(), query: req.getQuery() ?? "", creds, contentLength, context, lancedbClient };
}

function sendError(x: Exchange, err: ApiError, instance: string, requestId: string): void {
  const headers: Record<string, string> = { "x-request-id": requestId };
  if (err.status === 503) headers["retry-after"] = "1";
  // After a 413 the rest of the body is never read, so the connection cannot be reused.
  sendBody(x, err.status, JSON_TYPE, JSON.stringify(errorBody(err, instance)), headers, err.status === 413);
}

async function sendResult(x: Exchange, result: OpResult, requestId: string): Promise<void> {
  const headers = { "x-request-id": requestId };
  switch (result.kind) {
    case "json":
      return sendBody(x, result.status ?? 200, JSON_TYPE, JSON.stringify(result.body), headers);
    case "empty":
      return sendEmpty(x, result.status, headers);
    case "bytes":
      return sendStream(x, result.status ?? 200, result.contentType, result.chunks, headers);
  }
}

function parseJsonBody(bytes: Uint8Array): Record<string, unknown> {
  if (bytes.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"));
  } catch (e) {
    throw new ApiError(Code.InvalidInput, `body: malformed JSON (${(e as Error).message})`);
  }
  // LanceDB's client sends the literal `null` where a body has no fields.
  if (v === null) return {};
  if (typeof v !== "object" || Array.isArray(v)) throw new ApiError(Code.InvalidInput, "body: must be a JSON object");
  return v as Record<string, unknown>;
}

const sameId = (a: unknown, b: string[]) =>
  Array.isArray(a) && a.length === b.length && a.every((s, i) => s === b[i]);

function authorise(p: Principal, spec: RouteSpec, id: string[] | null): void {
  if (roleRank[p.role] < roleRank[spec.role]) {
    throw new ApiError(Code.PermissionDenied, `${spec.name} needs the ${spec.role} role; this credential has ${p.role}`);
  }
  if (id === null || spec.scope === "none") return;
  const ok = spec.scope === "browse" ? canBrowse(p, id) : covers(p, id);
  if (!ok) throw new ApiError(Code.PermissionDenied, `this credential may not access ${JSON.stringify(id.join("$"))}`);
}

export interface ServerState {
  inFlight: number;
  draining: boolean;
}

export interface Server {
  port: number;
  state: ServerState;
  /** Stop accepting, wait (up to a deadline) for in-flight requests, then resolve. */
  drain(deadlineMs?: number): Promise<void>;
}

export function startServer(svc: Services, authenticate: Authenticate): Promise<Server> {
  const cfg = svc.config;
  const state: ServerState = { inFlight: 0, draining: false };
  const app: TemplatedApp = uWS.App();

  async function execute(
    x: Exchange,
    inc: Incoming,
    spec: RouteSpec,
    rawParams: Record<string, string>,
    requestId: string,
    body$: Promise<Uint8Array>,
  ) {
    const query = new URLSearchParams(inc.query);
    const delimiter = query.get("delimiter") || DEFAULT_DELIMITER;
    const params: Record<string, string> = {};
    let id: string[] | null = null;
    for (const k in rawParams) {
      const v = decodeSegment(rawParams[k], k);
      if (k === "id" && spec.scope !== "none") id = parseId(v, delimiter);
      else params[k] = v;
    }

    let principal: Principal | null = null;
    const haveHeaderCreds = inc.creds.apiKey !== undefined || inc.creds.bearer !== undefined;
    if (haveHeaderCreds) principal = await authenticate(inc.creds);

    const op = spec.op;
    const bytes = await body$;
    if (x.aborted) return;

    let body: Record<string, unknown> = {};
    if (op.body === "json") body = parseJsonBody(bytes);
    if (!principal) {
      const identity = body.identity as { api_key?: string; auth_token?: string } | undefined;
      principal = await authenticate({ apiKey: identity?.api_key ?? undefined, bearer: identity?.auth_token ?? undefined });
    }
    authorise(principal, spec, id);
    if (id !== null && body.id !== undefined && body.id !== null && !sameId(body.id, id)) {
      throw new ApiError(Code.InvalidInput, `id: body id ${JSON.stringify(body.id)} differs from the path's ${JSON.stringify(id)}`);
    }
    const validated = op.validate ? op.validate(body) : undefined;
    const context = { ...((body.context as Record<string, string> | undefined) ?? {}), ...inc.context };
    inc.context = context;

    const ctx: OpContext = {
      id: id ?? [],
      params,
      query,
      body: validated,
      raw: op.body === "arrow" ? bytes : undefined,
      delimiter,
      principal,
      context,
      requestId,
      lancedbClient: inc.lancedbClient,
      signal: x.signal,
      svc,
    };
    const result = await op.handler(ctx);
    await sendResult(x, result, requestId);
  }

  function handle(res: HttpResponse, req: HttpRequest): void {
    const x = openExchange(res);
    const inc = readIncoming(req);
    const requestId = `${requestPrefix}-${(++requestCounter).toString(36)}`;
    const path = inc.url.replace(/\/+$/, "") || "/";
    if (inc.method === "GET" || inc.contentLength === 0) x.bodyRead = true;

    if (path === "/healthz") return sendBody(x, 200, JSON_TYPE, '{"status":"ok"}');
    if (path === "/readyz") {
      return state.draining
        ? sendBody(x, 503, JSON_TYPE, '{"status":"draining"}')
        : sendBody(x, 200, JSON_TYPE, '{"status":"ready"}');
    }

    const m = match(inc.method, path);
    if (m.kind !== "found") {
      const err =
        m.kind === "wrong-method"
          ? new ApiError(Code.InvalidInput, `${inc.method} is not allowed on ${path}; use ${m.allowed.join(", ")}`, 405)
          : new ApiError(Code.InvalidInput, `no such endpoint: ${inc.method} ${path}`, 404);
      if (m.kind === "wrong-method") {
        return sendBody(x, 405, JSON_TYPE, JSON.stringify(errorBody(err, path)), { allow: m.allowed.join(", ") });
      }
      return sendError(x, err, path, requestId);
    }
    if (state.draining || state.inFlight >= cfg.maxInFlight) {
      return sendError(x, new ApiError(Code.ServiceUnavailable, state.draining ? "server is shutting down" : `more than ${cfg.maxInFlight} requests in flight; retry later`), path, requestId);
    }

    const op = m.value.op;
    const body$ =
      inc.method === "GET"
        ? Promise.resolve(new Uint8Array(0))
        : op.body === "arrow"
          ? readBody(x, cfg.maxArrowBody, inc.contentLength, "Arrow IPC")
          : readBody(x, cfg.maxJsonBody, inc.contentLength, "JSON");

    state.inFlight++;
    const started = performance.now();
    execute(x, inc, m.value, m.params, requestId, body$)
      .catch((err: unknown) => {
        if (isApiError(err)) return sendError(x, err, path, requestId);
        log.error("request failed", { requestId, op: m.value.name, path, context: inc.context, error: String((err as Error)?.stack ?? err) });
        sendError(x, internal(requestId), path, requestId);
      })
      .finally(() => {
        state.inFlight--;
        // A handler that never answered (it should not happen) must still end the exchange.
        if (!x.done && !x.aborted) sendError(x, internal(requestId), path, requestId);
        log.debug("request", {
          requestId,
          op: m.value.name,
          path,
          status: x.aborted ? "aborted" : x.status,
          ms: Math.round((performance.now() - started) * 10) / 10,
          context: inc.context,
        });
      });
  }

  app.any("/*", handle);

  return new Promise((resolve, reject) => {
    app.listen(cfg.host, cfg.port, (socket: us_listen_socket | false) => {
      if (!socket) {
        reject(new Error(`cannot listen on ${cfg.host}:${cfg.port}`));
        return;
      }
      const port = uWS.us_socket_local_port(socket as unknown as uWS.us_socket);
      resolve({
        port,
        state,
        async drain(deadlineMs = 30_000) {
          state.draining = true;
          uWS.us_listen_socket_close(socket);
          const until = Date.now() + deadlineMs;
          while (state.inFlight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
        },
      });
    });
  });
}
