// A large query body read in the worker pool (row 4 of issue 50: 55,000 query vectors in 990 KB held
// the event loop ~30-100 ms in JSON.parse and validation). The worker parses, depth-checks and
// validates the whole body with the query's own rules, so every refusal is the one the event loop
// gives; it sends back the body without `vector` and the vector's number lists as views of one
// Float32Array (LanceDB and the serving index read float32s: the values they get are the same).
import { ApiError, type ErrorCode } from "../errors.js";
import type { ExpressionLimits } from "./expression.js";
import { parseJsonBody } from "./json-body.js";
import { QueryRequest } from "./query.js";
import { compileBody } from "./validate.js";

/** Query bodies this long are read in the worker pool; shorter ones on the event loop, as before. */
export const READ_AHEAD = 64 * 1024;

/** A client error, as data a worker can send. */
export interface Refusal {
  error: string;
  code: ErrorCode;
  status: number;
}

/** The body without `vector`, the refusal its validation gave (raised where validation runs), and `vector` read into float32s. */
export interface QueryBodyRead {
  body: Record<string, unknown>;
  fault: Refusal | null;
  vector?: unknown;
}

const validateQuery = compileBody(QueryRequest);

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

function packed(v: unknown): unknown {
  let total = 0;
  mapLists(v, (xs) => ((total += xs.length), new Float32Array(0)));
  const all = new Float32Array(total);
  let at = 0;
  return mapLists(v, (xs) => {
    const view = all.subarray(at, (at += xs.length));
    view.set(xs);
    return view;
  });
}

/** A malformed or too deep body throws its 400, as on the event loop; a body the schema refuses comes back with its `fault`. */
export function readQueryBody(bytes: Uint8Array, maxJsonDepth: number, limits: ExpressionLimits): QueryBodyRead {
  const whole = parseJsonBody(bytes, maxJsonDepth);
  const { vector, ...body } = whole;
  try {
    validateQuery(whole, limits);
  } catch (err) {
    if (err instanceof ApiError) return { body, fault: refusalOf(err) };
    throw err;
  }
  return vector === undefined || vector === null ? { body, fault: null } : { body, fault: null, vector: packed(vector) };
}
