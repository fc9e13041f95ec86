// ajv, compiled once per schema, on its first use, for JSON bodies and (coercing strings) query
// parameters: compiling every operation's schemas as the routes load was half of a server's
// start-up CPU, and most processes that load them (job processes, short-lived test servers) use few.
// A request body's unknown top-level fields are refused, naming them (a misspelt field must not be
// silently ignored: `count_rows {"filter": …}` once counted every row); the schemas list what the
// lance-namespace spec and LanceDB's clients send. Inside a body, unknown fields are ignored.
// The `x-mode` keyword accepts mode strings case-insensitively in PascalCase or snake_case
// and rewrites them to their canonical snake_case spelling.
import { Ajv, type ErrorObject, type FuncKeywordDefinition, type ValidateFunction } from "ajv";
import type { Static, TObject, TSchema } from "@sinclair/typebox";
import { invalid } from "../errors.js";
import { expressionFault, type ExpressionLimits } from "./expression.js";
import { matchMode } from "./mode.js";
import { refNameFault, type RefKind } from "../util/ref-names.js";

// passContext: a validator is called with the server's expression limits as `this`. strictNumbers:
// a number literal past float64's range (1e400) parses as Infinity, which no number field takes;
// verbose keeps the value in the error, so the answer can say why. validateSchema off: checking a
// schema against JSON Schema's meta-schema first compiled that meta-schema on each instance's first
// use, 40–55 ms holding the event loop (every search in flight waited at a server's first write);
// the schemas are code, checked once by test/unit/schemas.test.ts.
const options = { allErrors: false, useDefaults: true, strict: false, strictNumbers: true, verbose: true, passContext: true, validateSchema: false } as const;
const ajv = new Ajv({ ...options, coerceTypes: false });
// Query parameters are strings on the wire: "10" is coerced to 10, "true" to true, one value to a list.
const coercing = new Ajv({ ...options, coerceTypes: "array" });

const modeKeyword: FuncKeywordDefinition = {
  keyword: "x-mode",
  type: "string",
  modifying: true,
  errors: true,
  validate: function check(
    allowed: string[],
    data: string,
    _parent?: unknown,
    cxt?: { parentData: Record<string | number, unknown>; parentDataProperty: string | number },
  ): boolean {
    const hit = matchMode(data, allowed);
    if (hit === undefined) {
      (check as unknown as { errors: Partial<ErrorObject>[] }).errors = [
        { keyword: "x-mode", message: `must be one of ${allowed.join(", ")} (got ${JSON.stringify(data)})`, params: {} },
      ];
      return false;
    }
    if (cxt) cxt.parentData[cxt.parentDataProperty] = hit;
    return true;
  },
};
for (const a of [ajv, coercing]) a.addKeyword(modeKeyword);

/** A SQL expression the engine will parse: bounded in length and complexity (src/schemas/expression.ts). */
const expressionKeyword: FuncKeywordDefinition = {
  keyword: "x-expression",
  type: "string",
  errors: true,
  validate: function check(this: ExpressionLimits | undefined, _on: boolean, data: string): boolean {
    // A schema with expressions validated without the limits is a programming error, not a pass.
    if (this === undefined) throw new Error("an x-expression schema was validated without expression limits");
    const fault = this.checked?.has(data) ? this.checked.get(data)! : expressionFault(data, this);
    if (fault !== null) (check as unknown as { errors: Partial<ErrorObject>[] }).errors = [{ keyword: "x-expression", message: fault, params: {} }];
    return fault === null;
  },
};
for (const a of [ajv, coercing]) a.addKeyword(expressionKeyword);

/** A branch or tag name, which becomes a path in the table's directory (src/util/ref-names.ts). */
const refKeyword: FuncKeywordDefinition = {
  keyword: "x-ref",
  type: "string",
  errors: true,
  validate: function check(kind: RefKind, data: string): boolean {
    const fault = refNameFault(kind, data);
    if (fault !== null) (check as unknown as { errors: Partial<ErrorObject>[] }).errors = [{ keyword: "x-ref", message: fault, params: {} }];
    return fault === null;
  },
};
for (const a of [ajv, coercing]) a.addKeyword(refKeyword);

/** `/vector/single_vector/0` → `vector.single_vector[0]` */
function fieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split("/").slice(1).map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (extra !== undefined) parts.push(extra);
  let out = "";
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out ? `.${p}` : p;
  return out || "body";
}

export function describeError(e: ErrorObject): string {
  if (e.keyword === "required") {
    return `${fieldPath(e.instancePath, (e.params as { missingProperty: string }).missingProperty)}: is required`;
  }
  return `${fieldPath(e.instancePath)}: ${e.message ?? "is invalid"}`;
}

const SIZE_BOUNDS = new Set(["maxItems", "maximum", "maxLength", "maxProperties"]);
const isUnion = (e: ErrorObject) => e.keyword === "anyOf" || e.keyword === "oneOf";
const depth = (e: ErrorObject) => (e.instancePath === "" ? 0 : e.instancePath.split("/").length);

/**
 * The error to report. ajv lists a failed union's branch errors before the union's own; a branch
 * whose type did not match the value says little ("must be array" for an object), so the error
 * from a branch of the value's type is chosen, the deepest first. When no branch had the right
 * type, the answer lists the types the value may have (null, the "optional" branch, left out).
 * A size bound's error comes first: its branch had the value's shape, and another branch's item
 * error is only where that branch stopped (300,000 vectors: `vector[0]` is no number).
 */
function pick(errors: ErrorObject[]): string {
  const infinite = errors.find((e) => e.keyword === "type" && typeof e.data === "number" && !Number.isFinite(e.data));
  if (infinite) return `${fieldPath(infinite.instancePath)}: a number outside the range of a 64-bit float`;
  if (!errors.some(isUnion)) return describeError(errors[0]);
  const unionPaths = new Set(errors.filter(isUnion).map((e) => e.instancePath));
  const typeMiss = (e: ErrorObject) => e.keyword === "type" && unionPaths.has(e.instancePath);
  const inBranch = errors.filter((e) => !isUnion(e) && !typeMiss(e));
  const bound = inBranch.find((e) => SIZE_BOUNDS.has(e.keyword));
  if (bound) return describeError(bound);
  if (inBranch.length > 0) return describeError(inBranch.reduce((best, e) => (depth(e) > depth(best) ? e : best)));
  const at = errors[0].instancePath;
  const types = errors
    .filter((e) => typeMiss(e) && e.instancePath === at)
    .map((e) => String((e.params as { type: string }).type))
    .filter((t, i, all) => t !== "null" && all.indexOf(t) === i);
  return `${fieldPath(at)}: must be ${types.join(" or ") || "null"}`;
}

/** Compiled on first use, or ahead by `prepare()` (compiling one holds the event loop up to ~100 ms). */
interface Preparable {
  prepare(): void;
}

/** `limits` must be given where the schema holds expressions (`x-expression`). */
export type Validator<T> = ((data: unknown, limits?: ExpressionLimits) => T) & Preparable;

export function compile<S extends TSchema>(schema: S): Validator<Static<S>> {
  let fn: ValidateFunction | undefined;
  const compiled = () => (fn ??= ajv.compile(schema));
  const validate = (data: unknown, limits?: ExpressionLimits) => {
    const f = compiled();
    if (!f.call(limits, data)) throw invalid(pick(f.errors!));
    return data as Static<S>;
  };
  return Object.assign(validate, { prepare: () => void compiled() });
}

/** Compile `validators` now, one an event-loop turn, so that no request waits for one's compilation. */
export function prepareInTurns(validators: readonly Preparable[]): void {
  let i = 0;
  const next = () => {
    if (i >= validators.length) return;
    validators[i++].prepare();
    setImmediate(next);
  };
  setImmediate(next);
}

/** The top-level fields a body schema names; null when it takes others too (its `additionalProperties` say of what kind). */
function fieldsOf(schema: TSchema): string[] | null {
  if (schema.type !== "object" || schema.additionalProperties !== undefined || !schema.properties) return null;
  return Object.keys(schema.properties as object);
}

/** A request body's validator: `compile`, after refusing top-level fields the schema does not name. */
export function compileBody<S extends TSchema>(schema: S): Validator<Static<S>> {
  const validate = compile(schema);
  const fields = fieldsOf(schema);
  if (fields === null) return validate;
  const known = new Set(fields);
  const checked = (data: unknown, limits?: ExpressionLimits) => {
    const unknown = data !== null && typeof data === "object" && !Array.isArray(data) ? Object.keys(data).filter((k) => !known.has(k)) : [];
    if (unknown.length > 0) {
      const named = unknown.slice(0, 5).map((k) => JSON.stringify(k.slice(0, 64))).join(", ") + (unknown.length > 5 ? `, … (${unknown.length} in all)` : "");
      throw invalid(`body: unknown field${unknown.length > 1 ? "s" : ""} ${named}; this operation takes ${fields.join(", ")}`);
    }
    return validate(data, limits);
  };
  return Object.assign(checked, { prepare: validate.prepare });
}

/** A query-string parser made from its schema: parameters coerced to the schema's types; 400 naming the parameter. */
export type ParamsValidator<T> = ((q: URLSearchParams, limits: ExpressionLimits) => T) & Preparable;

export function compileParams<S extends TObject>(schema: S): ParamsValidator<Static<S>> {
  let fn: ValidateFunction | undefined;
  const compiled = () => (fn ??= coercing.compile(schema));
  const lists = new Set(Object.entries(schema.properties).filter(([, p]) => (p as TSchema).type === "array").map(([k]) => k));
  const parse = (q: URLSearchParams, limits: ExpressionLimits) => {
    const data: Record<string, unknown> = {};
    for (const k of new Set(q.keys())) {
      // A list is given repeated and/or comma-separated; an empty value is no value.
      if (lists.has(k)) data[k] = q.getAll(k).flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v.length > 0);
      else if (q.get(k) !== "") data[k] = q.get(k);
    }
    const f = compiled();
    if (!f.call(limits, data)) throw invalid(pick(f.errors!));
    return data as Static<S>;
  };
  return Object.assign(parse, { prepare: () => void compiled() });
}
