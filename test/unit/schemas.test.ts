// Every route's request schemas are valid JSON Schema: the server's validators skip ajv's
// meta-schema check (src/schemas/validate.ts), so a malformed schema is caught here instead.
import { Ajv } from "ajv";
import type { TSchema } from "@sinclair/typebox";
import { describe, expect, it } from "vitest";
import { routes } from "../../src/routes.js";

describe("request schemas", () => {
  it("each body and query-parameter schema passes JSON Schema's meta-schema", () => {
    const ajv = new Ajv({ strict: false });
    const schemas: [string, TSchema][] = routes.flatMap((r) => {
      const op = r.value.op;
      const named = `${r.method} ${r.path}`;
      return [...(op.schema ? [[`${named} body`, op.schema] as [string, TSchema]] : []), ...(op.query ? [[`${named} query`, op.query] as [string, TSchema]] : [])];
    });
    expect(schemas.length).toBeGreaterThan(40);
    const invalid = schemas.filter(([, s]) => !ajv.validateSchema(s)).map(([name]) => `${name}: ${ajv.errorsText()}`);
    expect(invalid).toEqual([]);
  });

  it("a schema that breaks the meta-schema is caught by the same check", () => {
    const ajv = new Ajv({ strict: false });
    expect(ajv.validateSchema({ type: "object", properties: { k: { type: "integr" } } })).toBe(false);
  });
});
