// ajv, compiled once per schema. Unknown fields are ignored (real clients send extras);
// the `x-mode` keyword accepts mode strings case-insensitively in PascalCase or snake_case
// and rewrites them to their canonical snake_case spelling.
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import type { Static, TSchema } from "@sinclair/typebox";
import { invalid } from "../errors.js";

const ajv = new Ajv({ allErrors: false, useDefaults: true, coerceTypes: false, strict: false });

ajv.addKeyword({
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
    const norm = data.toLowerCase().replace(/_/g, "");
    const hit = allowed.find((a) => a.replace(/_/g, "") === norm);
    if (hit === undefined) {
      (check as unknown as { errors: Partial<ErrorObject>[] }).errors = [
        { keyword: "x-mode", message: `must be one of ${allowed.join(", ")} (got ${JSON.stringify(data)})`, params: {} },
      ];
      return false;
    }
    if (cxt) cxt.parentData[cxt.parentDataProperty] = hit;
    return true;
  },
});

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

export type Validator<T> = (data: unknown) => T;

export function compile<S extends TSchema>(schema: S): Validator<Static<S>> {
  const fn: ValidateFunction = ajv.compile(schema);
  return (data: unknown) => {
    if (!fn(data)) throw invalid(describeError(fn.errors![0]));
    return data as Static<S>;
  };
}
