// A large query-shaped body read in the worker pool (row 4 of issue 50: 55,000 query vectors in 990 KB
// held the event loop ~30-100 ms in JSON.parse and validation): a query's, an analyze_plan's (the
// same fields) or an explain_plan's (the query under `query`). The worker parses, depth-checks and
// validates the whole body with its operation's own schema, so every refusal is the one the event
// loop gives; it sends back the body without the query's `vector` and the vector's number lists as
// views of one Float32Array, moved, not copied (LanceDB and the serving index read float32s: the
// values they get are the same).
import { ApiError, type ErrorCode } from "../errors.js";
import type { ExpressionLimits } from "./expression.js";
import { parseJsonBody } from "./json-body.js";
import { ExplainRequest, QueryRequest } from "./query.js";
import { compileBody } from "./validate.js";

/** Query bodies this long are read in the worker pool; shorter ones on the event loop, as before. */
export const READ_AHEAD = 64 * 1024;

/** A client error, as data a worker can send. */
export interface Refusal {
  error: string;
  code: ErrorCode;
  status: number;
}

/** Where a body holds its query: the body itself (query, analyze_plan), or its `query` field (explain_plan). */
export type QueryAt = "body" | "query";

/** The operations whose bodies are query-shaped, and where each holds its query. */
export const QUERY_BODIES: Readonly<Record<string, QueryAt>> = { QueryTable: "body", AnalyzeTableQueryPlan: "body", ExplainTableQueryPlan: "query" };

/**
 * The body without its query's `vector`, the refusal its validation gave (raised where validation
 * runs), and `vector` read into float32s: views of `floats`, the one array the worker moves back.
 */
export interface QueryBodyRead {
  body: Record<string, unknown>;
  fault: Refusal | null;
  vector?: unknown;
  floats?: Float32Array;
}

const validators = { body: compileBody(QueryRequest), query: compileBody(ExplainRequest) };

/** The query a body holds (a validated one: an object). */
export const queryIn = (body: Record<string, unknown>, at: QueryAt) => (at === "body" ? body : (body.query as Record<string, unknown>));

export const refusalOf = (err: ApiError): Refusal => ({ error: err.message, code: err.code, status: err.status });

const isNumbers = (x: unknown[]) => x.length === 0 || typeof x[0] === "number";

/** A validated `vector` with each list of numbers replaced by `f` of it; its other values kept. */
function mapLists(v: unknown, f: (xs: number[]) => Float32Array): unknown {
  if (Array.isArray(v)) return isNumbers(v) ? f(v as number[]) : v.map((x) => f(x as number[]));
  if (v === null || typeof v !== "object") return v;
  const o = { ...(v as Record<string, unknown>) };
  for (const k of ["single_vector", "multi_vector"]) if (Array.isArray(o[k])) o[k] = mapLists(o[k], f);
  return o;
}

/** `v` with its number lists as views of one Float32Array, `floats`. */
function packed(v: unknown): { vector: unknown; floats: Float32Array } {
  let total = 0;
  mapLists(v, (xs) => ((total += xs.length), new Float32Array(0)));
  const floats = new Float32Array(total);
  let at = 0;
  const vector = mapLists(v, (xs) => {
    const view = floats.subarray(at, (at += xs.length));
    view.set(xs);
    return view;
  });
  return { vector, floats };
}

/** `whole` without its query's `vector` (the query a shallow copy), and that vector. */
function withoutVector(whole: Record<string, unknown>, at: QueryAt): { body: Record<string, unknown>; vector: unknown } {
  if (at === "body") {
    const { vector, ...body } = whole;
    return { body, vector };
  }
  const q = whole.query;
  // Not an object: validation refuses it, naming `query`.
  if (q === null || typeof q !== "object" || Array.isArray(q)) return { body: whole, vector: undefined };
  const { vector, ...query } = q as Record<string, unknown>;
  return { body: { ...whole, query }, vector };
}

/** A malformed or too deep body throws its 400, as on the event loop; a body its schema refuses comes back with its `fault`. */
export function readQueryBody(bytes: Uint8Array, at: QueryAt, maxJsonDepth: number, limits: ExpressionLimits): QueryBodyRead {
  const whole = parseJsonBody(bytes, maxJsonDepth);
  const { body, vector } = withoutVector(whole, at);
  try {
    validators[at](whole, limits);
  } catch (err) {
    if (err instanceof ApiError) return { body, fault: refusalOf(err) };
    throw err;
  }
  return vector === undefined || vector === null ? { body, fault: null } : { body, fault: null, ...packed(vector) };
}
