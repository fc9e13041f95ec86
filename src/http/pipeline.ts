// The request pipeline, without a socket, as named steps in the order they run:
//   route → ids → credentials (headers) + authorise → params → [body arrives] → body (+ its identity,
//   authorised) → limits → validate → idempotency → call.
// The steps before the body (`admit`) decide whether a body is read at all: a request without
// valid header credentials, or whose credential may not perform the route, is answered without
// it. src/server.ts adapts this to uWS (body bytes, admission, writes); tests and the bench call
// `dispatch` in process.
import { randomBytes } from "node:crypto";
import type { Authenticate, Credentials } from "../auth/authenticate.js";
import { authoriseObject, bucketOf, canBrowse, roleRank, type Principal } from "../auth/principal.js";
import { objectIdOf, sameId } from "../catalog/names.js";
import { ApiError, Code, errorBody, internal, invalid, isApiError, transport } from "../errors.js";
import { recordObjectStoreThrottled, type UnavailableReason } from "../metrics.js";
import { log } from "../log.js";
import type { Config } from "../config.js";
import type { OpContext, OpResult } from "../operations/types.js";
import { answerBy, settlesBy, within, type Deadline, type Work } from "../engine/deadline.js";
import type { Services } from "../services.js";
import { awaitVersion, MIN_VERSION_HEADER } from "../operations/table-ref.js";
import { isStoreThrottled, isWriterContention, storageFault } from "../engine/messages.js";
import { openIdempotency, type Idempotency, type KeptAnswer } from "./idempotency.js";
import { createRateLimiter, type RateLimiter } from "./rate-limit.js";
import { refusalError } from "./refusals.js";
import { requestFinished } from "./access.js";
import { DEFAULT_DELIMITER, decodeSegment, parseId } from "./path-id.js";
import { jsonRowsBody, parseJsonBody, rowsBodyKind, type RowsKind } from "./bodies.js";
import { takesSlot, type RouteSpec } from "./route-spec.js";
import type { BodyLimit } from "./exchange.js";
import { rowFormat } from "./negotiate.js";
import { compileRoutes, type Pattern } from "./router.js";
import { CHECKED_AHEAD, longTexts, type ExpressionLimits } from "../schemas/expression.js";
import { QUERY_BODIES, queryIn, READ_AHEAD, type QueryBodyRead } from "../schemas/query-body.js";
import { ownBuffer } from "../util/own-buffer.js";

const noTurn = async () => undefined;

/**
 * Failures that are neither the request's fault nor a bug, by what the engine or the OS said:
 * answered 503 with their cause and reason (the metric's and the access log's), never a 500.
 */
const KNOWN_FAULTS: { cause: (err: unknown) => string | null; reason: UnavailableReason; retryAfterS: number; level: "error" | "warn"; throttled?: true }[] = [
  { cause: storageFault, reason: "storage", retryAfterS: 30, level: "error" },
  {
    cause: (err) => (isStoreThrottled(err) ? "the object store refuses requests for load (throttled after retries: its request rate limits are reached); retry later" : null),
    reason: "storage",
    retryAfterS: 5,
    level: "warn",
    throttled: true,
  },
  {
    cause: (err) => (isWriterContention(err) ? "too many concurrent writers to the same table (other replicas' or maintenance commits; the catalog's, for creates, drops and renames); retry" : null),
    reason: "write_contention",
    retryAfterS: 1,
    level: "warn",
  },
];
const JSON_TYPE = "application/json";

/** One request as the pipeline sees it: no socket, no body bytes yet. */
export interface Incoming {
  /** Upper case. */
  method: string;
  /** The URL path, without the query string. */
  path: string;
  query: string;
  /** Header names in lower case. */
  headers: Record<string, string>;
  /** Aborted when the client goes away; made on first call (most requests never ask). */
  signal: () => AbortSignal;
  /** Whether the client has gone: a poll that makes no signal (asked of every waiting search). */
  gone: () => boolean;
  /** Wait for a turn of the front end's budget of large results (none in process: no socket holds them). */
  largeResult?: () => Promise<void>;
}

interface Head {
  status: number;
  headers: Record<string, string>;
  /** Operation name and request context, for the access log. */
  op?: string;
  context?: Record<string, string>;
  /** Why a 503 was answered (the metrics' reason label). */
  reason?: UnavailableReason;
}

/** What to send back: a whole body, a stream of chunks (written with backpressure), or nothing. */
export type Outgoing = Head & {
  /** Ends the request's hold on its credential's concurrency limit; call once it is written. */
  release?: () => void;
} &
  (
    | { kind: "body"; contentType: string; body: string | Uint8Array; close?: boolean }
    | { kind: "stream"; contentType: string; chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array> }
    | { kind: "empty" }
  );

/** A matched route, with what the front end needs before the body arrives. */
export interface Route {
  spec: RouteSpec;
  params: Record<string, string>;
  path: string;
  /** Largest body accepted, and what kind of body it is (for the 413); null when none is read. */
  body: BodyLimit | null;
}

export type Routed = { kind: "route"; route: Route } | { kind: "answer"; out: Outgoing };

/** Who is asking, as far as the headers tell. */
export type Caller =
  /** A public route: no credential is asked for, and none is checked. */
  | { kind: "public" }
  /** Header credentials, checked, and allowed to perform the route on its path id. */
  | { kind: "principal"; principal: Principal }
  /** No header credentials on a JSON route: the body's `identity` is read (at most --max-json-body). */
  | { kind: "body-identity" };

/** The path's object id and other parameters, decoded. */
interface Target {
  id: string[] | null;
  params: Record<string, string>;
  delimiter: string;
}

/** A request past the steps that need no body. */
export interface Admitted {
  route: Route;
  caller: Caller;
  requestId: string;
  query: URLSearchParams;
  /** Step `params`: the query parameters, from the operation's schema. */
  args: unknown;
  target: Target;
  /** How rows in the body are encoded, for operations that take rows. */
  rowsAs: RowsKind | null;
  /** The route's body limit, or the smaller one of a body that must name its own credential. */
  body: BodyLimit | null;
}

export type Admission = { kind: "admitted"; admitted: Admitted } | { kind: "answer"; out: Outgoing };

export interface Pipeline {
  /** Match a request line (sync, cheap): a route to run, or the 404/405 answer. */
  route(method: string, path: string): Routed;
  /** The steps before any body byte is read: ids, header credentials, authorisation. */
  admit(route: Route, inc: Incoming): Promise<Admission>;
  /** Run an admitted request; `body` resolves to the request body (read by the caller). */
  run(a: Admitted, inc: Incoming, body: Promise<Uint8Array>): Promise<Outgoing>;
  /** An error answer outside an operation (the front end's 503, a stream that failed early). */
  error(path: string, err: ApiError, requestId?: string): Outgoing;
  /** A whole request in one call, for tests and the bench: route, then run with `body`. */
  dispatch(inc: Incoming, body?: Uint8Array): Promise<Outgoing>;
  /** The front end wrote (or gave up on) an answer: metrics and the sampled access line. */
  finished(req: { op: string; method: string; path: string }, out: Outgoing | undefined, status: number, ms: number): void;
}

const requestPrefix = randomBytes(3).toString("hex");
let requestCounter = 0;
const nextRequestId = () => `${requestPrefix}-${(++requestCounter).toString(36)}`;

// A client's own request id (LanceDB's clients send one) is kept, so its logs and Quiver's agree;
// only a short token is taken, since it is echoed in headers and logs.
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const requestIdOf = (h: Record<string, string>) => {
  const id = h["x-request-id"];
  return id !== undefined && CLIENT_REQUEST_ID.test(id) ? id : nextRequestId();
};

function credentialsOf(h: Record<string, string>): Credentials | null {
  const creds: Credentials = {};
  if (h["x-api-key"] !== undefined) creds.apiKey = h["x-api-key"];
  const m = h.authorization !== undefined ? /^bearer\s+(.+)$/i.exec(h.authorization) : null;
  if (m) creds.bearer = m[1].trim();
  return creds.apiKey !== undefined || creds.bearer !== undefined ? creds : null;
}

/** Context headers: `x-svc-ctx-<key>`, or upstream's `x-lance-ctx-<key>` where the former is absent. */
function headerContext(h: Record<string, string>): Record<string, string> {
  const ctx: Record<string, string> = {};
  for (const k in h) if (k.startsWith("x-lance-ctx-")) ctx[k.slice(12)] = h[k];
  for (const k in h) if (k.startsWith("x-svc-ctx-")) ctx[k.slice(10)] = h[k];
  return ctx;
}

/** A client may ask for a shorter time limit than the server's, never a longer one. */
export const TIMEOUT_HEADER = "x-request-timeout-ms";

/** The request's deadline: --query-timeout-ms from now, or the header's limit where smaller. */
function deadlineOf(h: Record<string, string>, most: number): Deadline {
  const asked = h[TIMEOUT_HEADER];
  if (asked !== undefined && !/^\s*[1-9]\d{0,15}\s*$/.test(asked)) throw invalid(`${TIMEOUT_HEADER}: must be a whole number of milliseconds, at least 1`);
  const ms = asked === undefined ? most : Math.min(most, Number(asked));
  return { at: performance.now() + ms, ms };
}

/** Step `ids`: the path's object id (split by the request's delimiter) and other parameters. */
function targetOf(r: Route, query: URLSearchParams): Target {
  const delimiter = query.get("delimiter") || DEFAULT_DELIMITER;
  const params: Record<string, string> = {};
  let id: string[] | null = null;
  for (const k in r.params) {
    const v = decodeSegment(r.params[k], k);
    if (k === "id" && r.spec.scope !== "none") id = parseId(v, delimiter);
    else params[k] = v;
  }
  return { id, params, delimiter };
}

/** Step `authorise`: the credential's role and namespace prefixes against the route and its id. */
function authorise(p: Principal, spec: RouteSpec, id: string[] | null): void {
  if (spec.role === "public") return;
  if (roleRank[p.role] < roleRank[spec.role]) {
    throw new ApiError(Code.PermissionDenied, `${spec.name} needs the ${spec.role} role; this credential has ${p.role}`);
  }
  if (id === null || spec.scope === "none") return;
  if (spec.scope === "object") return authoriseObject(p, id, spec.role);
  if (!canBrowse(p, id)) throw new ApiError(Code.PermissionDenied, `this credential may not access ${JSON.stringify(objectIdOf(id))}`);
}

/** A body's `id`, when given, must name the path's object. */
function checkBodyId(id: string[] | null, body: Record<string, unknown>): void {
  if (id !== null && body.id !== undefined && body.id !== null && !(Array.isArray(body.id) && sameId(body.id, id))) {
    throw new ApiError(Code.InvalidInput, `id: body id ${JSON.stringify(body.id)} differs from the path's ${JSON.stringify(id)}`);
  }
}

function encode(result: OpResult, head: Head): Outgoing {
  const { headers, op, context } = head;
  switch (result.kind) {
    case "json":
      return { status: result.status ?? 200, headers, op, context, reason: result.reason, kind: "body", contentType: JSON_TYPE, body: JSON.stringify(result.body) };
    case "empty":
      return { status: result.status, headers, op, context, kind: "empty" };
    case "bytes":
      return {
        status: result.status ?? 200,
        headers: result.headers ? { ...headers, ...result.headers } : headers,
        op,
        context,
        kind: "stream",
        contentType: result.contentType,
        chunks: result.chunks,
      };
  }
}

function errorOut(err: ApiError, instance: string, requestId: string, extra: Record<string, string> = {}): Outgoing {
  const headers: Record<string, string> = { "x-request-id": requestId, ...extra };
  if (err.status === 503) headers["retry-after"] = String(err.retryAfterS ?? 1);
  // After a 408 the rest of the body is never read, so the connection cannot be reused (a 413's
  // exchange decides: see DRAIN_BYTES in src/http/exchange.ts).
  return { status: err.status, headers, reason: err.reason, kind: "body", contentType: JSON_TYPE, body: JSON.stringify(errorBody(err, instance)), close: err.status === 408 };
}

/** The route table as this configuration serves it: `--metrics-public` opens GET /metrics. */
const served = (cfg: Config, routes: Pattern<RouteSpec>[]) =>
  routes.map((r) => (r.value.publicWith && cfg[r.value.publicWith] ? { ...r, value: { ...r.value, role: "public" as const } } : r));

const NO_BODY = Promise.resolve(new Uint8Array(0));
const KNOWN_ROUTES = 4096;
/** Shared by every request without a query string; operations only read their query. */
const NO_QUERY = new URLSearchParams();

/**
 * The operation, given the caller it is typed for: a public route's (or one a flag may make
 * public) takes a null principal; any other is only reached with a principal.
 */
function handle(spec: RouteSpec, ctx: OpContext<any, Principal | null>): Promise<OpResult> {
  if (spec.role === "public" || spec.publicWith !== undefined) return spec.op.handler(ctx);
  if (ctx.principal === null) throw new Error(`${spec.name}: reached without a principal`);
  // Checked just above; the same object is passed on (no copy on the hot path).
  return spec.op.handler(ctx as OpContext);
}

/** A successful JSON or empty answer, as kept under an Idempotency-Key; anything else is not kept. */
function keepable(out: Outgoing): KeptAnswer | null {
  if (out.status >= 300) return null;
  if (out.kind === "body" && typeof out.body === "string") return { status: out.status, contentType: out.contentType, body: out.body };
  if (out.kind === "empty") return { status: out.status, contentType: null, body: "" };
  return null;
}

/** The kept answer, sent again; the header says it is a replay. */
function replayed(a: KeptAnswer, head: Head): Outgoing {
  const headers = { ...head.headers, "idempotent-replayed": "true" };
  if (a.contentType === null) return { ...head, headers, status: a.status, kind: "empty" };
  return { ...head, headers, status: a.status, kind: "body", contentType: a.contentType, body: a.body };
}

export function createPipeline(svc: Services, authenticate: Authenticate, routes: Pattern<RouteSpec>[]): Pipeline {
  const cfg = svc.config;
  const match = compileRoutes(served(cfg, routes));
  // Clients call the same few paths over and over: a matched route is kept (it is read-only),
  // sparing the path split and match. Bounded, since paths come from the network.
  const known = new Map<string, Routed>();
  function route(method: string, rawPath: string): Routed {
    const key = `${method} ${rawPath}`;
    const hit = known.get(key);
    if (hit) return hit;
    const routed = matchRoute(method, rawPath);
    if (routed.kind === "route") {
      if (known.size >= KNOWN_ROUTES) known.clear();
      known.set(key, routed);
    }
    return routed;
  }

  function matchRoute(method: string, rawPath: string): Routed {
    const path = rawPath.replace(/\/+$/, "") || "/";
    const m = match(method, path);
    if (m.kind === "found") {
      const op = m.value.op;
      const body = method === "GET" ? null : op.body === "arrow" ? { limit: cfg.maxArrowBody, what: "Arrow IPC", rule: "--max-arrow-body" } : { limit: cfg.maxJsonBody, what: "JSON", rule: "--max-json-body" };
      return { kind: "route", route: { spec: m.value, params: m.params, path, body } };
    }
    const requestId = nextRequestId();
    if (m.kind === "wrong-method") {
      const err = transport.methodNotAllowed(`${method} is not allowed on ${path}; use ${m.allowed.join(", ")}`);
      return { kind: "answer", out: errorOut(err, path, requestId, { allow: m.allowed.join(", ") }) };
    }
    return { kind: "answer", out: errorOut(transport.noRoute(`no such endpoint: ${method} ${path}`), path, requestId) };
  }

  const limiter: RateLimiter | null = cfg.rateLimitRps > 0 || cfg.rateLimitConcurrent > 0 ? createRateLimiter(cfg) : null;
  const idempotency: Idempotency = openIdempotency(svc.system, cfg.idempotencyWindowMs);

  /** Admit the request under its credential's limits; the release is kept in `held`. */
  function limit(p: Principal, held: { release?: () => void }): void {
    if (!limiter) return;
    const entry = limiter.enter(bucketOf(p));
    if ("refusal" in entry) throw refusalError(entry.refusal);
    held.release = entry.release;
  }

  /** Step `credentials`: who the headers say is asking; 401 for bad credentials, 403 past the credential's rights. */
  async function headerCaller(spec: RouteSpec, headers: Record<string, string>, id: string[] | null): Promise<Caller> {
    if (spec.role === "public") return { kind: "public" };
    const creds = credentialsOf(headers);
    if (creds === null) {
      // Only a JSON body can carry an identity; elsewhere no credential is the 401 at once.
      if (spec.op.body === "json") return { kind: "body-identity" };
      await authenticate({});
    }
    const principal = await authenticate(creds!);
    authorise(principal, spec, id);
    return { kind: "principal", principal };
  }

  /**
   * A client without a credential header is read and parsed before anyone knows who it is, so its
   * body is held to --max-identity-body: a larger one is 413 before it is read.
   */
  const identityBody = (b: BodyLimit): BodyLimit => ({
    limit: Math.min(b.limit, cfg.maxIdentityBody),
    what: b.what,
    rule: "--max-identity-body, for a body without a credential header, whose `identity` names its credential; send x-api-key or Authorization instead",
    closeAtOnce: true,
  });

  /** The principal of a client that sent no credential header: the body's `identity`, authorised. */
  async function bodyPrincipal(a: Admitted, body: Record<string, unknown>): Promise<Principal> {
    const identity = body.identity as { api_key?: string; auth_token?: string } | undefined;
    const principal = await authenticate({ apiKey: identity?.api_key ?? undefined, bearer: identity?.auth_token ?? undefined });
    authorise(principal, a.route.spec, a.target.id);
    return principal;
  }

  async function admit(r: Route, inc: Incoming): Promise<Admission> {
    const requestId = requestIdOf(inc.headers);
    try {
      const query = inc.query ? new URLSearchParams(inc.query) : NO_QUERY;
      const target = targetOf(r, query);
      const caller = await headerCaller(r.spec, inc.headers, target.id);
      const args = r.spec.op.args ? r.spec.op.args(query, cfg) : {};
      const rowsAs = r.spec.op.body === "arrow" ? rowsBodyKind(inc.headers["content-type"]) : null;
      const body = caller.kind === "body-identity" && r.body !== null ? identityBody(r.body) : r.body;
      return { kind: "admitted", admitted: { route: r, caller, requestId, query, args, target, rowsAs, body } };
    } catch (err) {
      return { kind: "answer", out: failed(err, r, requestId, headerContext(inc.headers)) };
    }
  }

  /** Step `call`, under an Idempotency-Key when the request names one (writes only). */
  async function call(a: Admitted, inc: Incoming, ctx: OpContext<any, Principal | null>, bytes: Uint8Array): Promise<Outgoing> {
    const { spec } = a.route;
    const head: Head = { status: 200, headers: { "x-request-id": a.requestId }, op: spec.name, context: ctx.context };
    const key = inc.headers["idempotency-key"];
    if (!takesSlot(spec)) return encode(await handle(spec, ctx), head);
    // A read begins no commit, so it is raced against its deadline alone (answerBy adds nothing to
    // it but an async frame and a Work, both garbage of every search).
    const w = ctx.work;
    if (w === null) return encode(await within(handle(spec, ctx), { deadline: ctx.deadline, signal: null }), head);
    if (key === undefined || ctx.principal === null) return encode(await answerBy(w, handle(spec, ctx)), head);
    const claiming = idempotency.claim(bucketOf(ctx.principal), key, { method: inc.method, path: a.route.path, query: inc.query, body: bytes });
    const claim = await answerBy(w, claiming).catch((err: unknown) => {
      // A claim that comes after the answer is let go at once: it would hold its key from retries.
      // Letting go can fail too (a store with too many writers): its row then lapses by itself, and
      // the failure must not end the process as an unhandled rejection (seen on Azurite under load).
      void claiming
        .then((c) => (c.kind === "new" ? c.keep(null) : undefined), () => undefined)
        .catch((e: unknown) => log.warn("idempotency claim not let go; it lapses by itself", { requestId: a.requestId, error: String(e) }));
      throw err;
    });
    if (claim.kind === "replay") return replayed(claim.answer, head);
    const running = handle(spec, ctx);
    let answer: KeptAnswer | null = null;
    try {
      const out = encode(await answerBy(w, running), head);
      answer = keepable(out);
      return out;
    } finally {
      // Answered at the deadline with its commit begun: the key is held until the write ends, and
      // keeps its answer then, so a retry gets that rather than applying it again.
      if (w.answered && w.commits > 0) void running.then((out) => keepable(encode(out, head)), () => null).then((late) => claim.keep(late)).catch((err: unknown) => log.warn("idempotency answer not kept", { requestId: a.requestId, error: String(err) }));
      else await keptBy(claim.keep(answer), w, a.requestId);
    }
  }

  /**
   * A claim's keep, waited for until the request's deadline. A store that fails it, or holds it
   * past then, does not turn the request's own answer into an error (a committed write's client
   * would retry it): a retry under the key waits for the keep, or runs again once the claim lapses.
   */
  async function keptBy(keeping: Promise<void>, w: Work, requestId: string): Promise<void> {
    const settled = keeping.catch((err: unknown) => log.warn("idempotency answer not kept; a retry under its key runs again once its claim lapses", { requestId, error: String(err) }));
    if (!(await settlesBy(settled, w.bound.deadline.at))) log.warn("idempotency answer not kept by the request's deadline; answered, and a retry under its key waits for it", { requestId });
  }

  /** Step `identify`: the caller the headers named (admit), else the body's identity; null on a public route. */
  function callerOf(a: Admitted, body: Record<string, unknown>): Principal | null | Promise<Principal> {
    if (a.caller.kind === "principal") return a.caller.principal;
    if (a.caller.kind === "public") return null;
    return bodyPrincipal(a, body);
  }

  /** Step `context`: what the operation is given (header context wins over the body's). */
  function contextOf(a: Admitted, inc: Incoming, body: Record<string, unknown>, bytes: Uint8Array, principal: Principal | null, context: Record<string, string>, minVersion: number | null, checked: ExpressionLimits["checked"], read: QueryBodyRead | null): OpContext<any, Principal | null> {
    const { op } = a.route.spec;
    // A body read in the pool was validated whole there: its refusal is raised here, where the event loop raises its own.
    if (read?.fault) throw new ApiError(read.fault.code, read.fault.error, read.fault.status);
    const validated = op.validate ? op.validate(body, checked ? { ...cfg, checked } : cfg) : undefined;
    if (read?.vector !== undefined) queryIn(validated as Record<string, unknown>, QUERY_BODIES[a.route.spec.name]).vector = read.vector;
    if (body.context) Object.assign(context, { ...(body.context as Record<string, string>), ...context });
    const writes = a.route.spec.role !== "read";
    const deadline = deadlineOf(inc.headers, writes ? cfg.writeTimeoutMs : cfg.queryTimeoutMs);
    return {
      id: a.target.id ?? [],
      params: a.target.params,
      query: a.query,
      args: a.args,
      body: validated,
      raw: a.rowsAs === "arrow" ? bytes : undefined,
      rows: a.rowsAs === "json" || a.rowsAs === "ndjson" ? jsonRowsBody(bytes, a.rowsAs === "ndjson", cfg) : undefined,
      delimiter: a.target.delimiter,
      principal,
      context,
      requestId: a.requestId,
      lancedbClient: inc.headers["x-lancedb-database"] !== undefined,
      rowFormat: rowFormat(inc.headers.accept),
      minVersion,
      deadline,
      // A write's commits are refused once it is answered; its client's leaving answers it too.
      work: writes ? { bound: { deadline, signal: inc.signal() }, flag: "--write-timeout-ms", answered: false, commits: 0 } : null,
      signal: inc.signal,
      gone: inc.gone,
      largeResult: inc.largeResult ?? noTurn,
      svc,
    };
  }

  /** An error answer for the request; an unexpected error is logged and answered 500. */
  function failed(err: unknown, r: Route, requestId: string, context: Record<string, string>): Outgoing {
    const out = isApiError(err) ? errorOut(err, r.path, requestId) : null;
    if (out) return { ...out, op: r.spec.name, context };
    for (const f of KNOWN_FAULTS) {
      const cause = f.cause(err);
      if (cause === null) continue;
      if (f.throttled) recordObjectStoreThrottled(/^(\w+):\/\//.exec(svc.tables.root)?.[1].toLowerCase() ?? "file");
      log[f.level](`request failed: ${f.reason}`, { requestId, op: r.spec.name, path: r.path, cause, error: String((err as Error)?.message ?? err) });
      const refused = new ApiError(Code.ServiceUnavailable, cause, undefined, { reason: f.reason, retryAfterS: f.retryAfterS });
      return { ...errorOut(refused, r.path, requestId), op: r.spec.name, context };
    }
    log.error("request failed", { requestId, op: r.spec.name, path: r.path, error: String((err as Error)?.stack ?? err), context });
    return { ...errorOut(internal(requestId), r.path, requestId), op: r.spec.name, context };
  }

  /**
   * Step `token`: a table request's version token, met before the operation opens the table. A
   * write re-checks storage before it commits, but checks its rows (columns, merge keys) against
   * the cached handle before that: with the token, an insert naming a column another replica just
   * added is checked at that version. A write to a table not there (a create) answers for itself.
   */
  async function versionToken(a: Admitted, header: string): Promise<number | null> {
    if (a.target.id === null || a.route.spec.role === "admin" || !a.route.path.startsWith("/v1/table/")) return null;
    if (!/^\d{1,15}$/.test(header.trim())) throw invalid(`${MIN_VERSION_HEADER}: must be a table version, an integer >= 0`);
    const min = Number(header.trim());
    try {
      await awaitVersion(svc, a.target.id, min);
    } catch (err) {
      if (a.route.spec.role === "write" && isApiError(err) && err.code === Code.TableNotFound) return null;
      throw err;
    }
    return min;
  }

  // The two steps below are a pool task for a large body only: the rest (every search's small
  // body) get null at once, not a promise to await, which cost each request two turns and their garbage.

  /** Long expressions of a large JSON body, checked in the worker pool (their check is as long as they are); null for the rest. */
  function checkedAhead(a: Admitted, body: Record<string, unknown>, bytes: Uint8Array): Promise<ExpressionLimits["checked"]> | null {
    if (bytes.length < CHECKED_AHEAD || !a.route.spec.op.validate) return null;
    const texts = longTexts(body);
    return texts.length > 0 ? svc.pool.expressionFaults(texts, cfg) : null;
  }

  /** A large query-shaped body (a query's, an explain's, an analyze's), parsed and validated in the worker pool with its vectors read into float32s; null for the rest. */
  function readAhead(a: Admitted, bytes: Uint8Array): Promise<QueryBodyRead> | null {
    const at = QUERY_BODIES[a.route.spec.name];
    if (bytes.length < READ_AHEAD || at === undefined) return null;
    return svc.pool.queryBody(ownBuffer(bytes), at, cfg);
  }

  /** The steps after the body arrived, in order: parse (a large query-shaped body's in the pool), identify, limit, check the id, token, long expressions (in the pool), context (validates), call. */
  async function run(a: Admitted, inc: Incoming, body$: Promise<Uint8Array>): Promise<Outgoing> {
    const context = headerContext(inc.headers);
    const held: { release?: () => void } = {};
    try {
      const bytes = await body$;
      const reading = readAhead(a, bytes);
      const read = reading && (await reading);
      const body = read?.body ?? (a.route.spec.op.body === "json" ? parseJsonBody(bytes, cfg.maxJsonDepth) : {});
      // A header credential's principal, and no version token, are known without a turn (each
      // await of an async step that has nothing to wait for cost a search its promises).
      const caller = callerOf(a, body);
      const principal = caller instanceof Promise ? await caller : caller;
      if (principal !== null) limit(principal, held);
      checkBodyId(a.target.id, body);
      const token = inc.headers[MIN_VERSION_HEADER];
      const minVersion = token === undefined ? null : await versionToken(a, token);
      const checking = checkedAhead(a, body, bytes);
      const checked = checking ? await checking : undefined;
      const out = await call(a, inc, contextOf(a, inc, body, bytes, principal, context, minVersion, checked, read), bytes);
      if (held.release) out.release = held.release;
      return out;
    } catch (err) {
      held.release?.();
      return failed(err, a.route, a.requestId, context);
    }
  }

  return {
    route,
    admit,
    run,
    error: (path, err, requestId) => errorOut(err, path, requestId || nextRequestId()),
    async dispatch(inc, body) {
      const routed = route(inc.method, inc.path);
      if (routed.kind === "answer") return routed.out;
      const admission = await admit(routed.route, inc);
      if (admission.kind === "answer") return admission.out;
      const out = await run(admission.admitted, inc, body ? Promise.resolve(body) : NO_BODY);
      // In process the caller reads the answer at once: the credential's hold ends here.
      out.release?.();
      return out;
    },
    finished(req, out, status, ms) {
      requestFinished(cfg, { op: req.op, method: req.method, path: req.path, status, ms, requestId: out?.headers["x-request-id"], context: out?.context, reason: out?.reason });
    },
  };
}
