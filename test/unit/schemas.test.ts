// Every route's request schemas are valid JSON Schema: the server's validators skip ajv's
// meta-schema check (src/schemas/validate.ts), so a malformed schema is caught here instead.
import { Ajv } from "ajv";
import type { TSchema } from "@sinclair/typebox";
import { describe, expect, it } from "vitest";
import { routes } from "../../src/routes.js";
import { FtsQuery } from "../../src/schemas/query.js";

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

  it("every integer and number a request names has a maximum (src/schemas/bounds.ts)", () => {
    // Not sizes: query vectors' values, a distance range and full-text score weights; nothing is
    // allocated or looped from them (a vector's length is bounded by the body's).
    const notSizes = new Set(["vector", "single_vector", "multi_vector", "lower_bound", "upper_bound", "boost", "negative_boost"]);
    const unbounded: string[] = [];
    /** `field`: the property `s` is (the nearest one above it, through unions and items). */
    const walk = (s: unknown, at: string, field: string): void => {
      if (Array.isArray(s)) return s.forEach((x, i) => walk(x, `${at}[${i}]`, field));
      if (s === null || typeof s !== "object") return;
      const o = s as Record<string, unknown>;
      const types = [o.type].flat();
      if ((types.includes("integer") || types.includes("number")) && o.maximum === undefined && !notSizes.has(field)) unbounded.push(at);
      for (const [k, v] of Object.entries(o)) {
        if (k === "properties") for (const [name, p] of Object.entries(v as object)) walk(p, `${at}.${name}`, name);
        else walk(v, `${at}.${k}`, field);
      }
    };
    for (const r of routes) {
      const op = r.value.op;
      if (op.schema) walk(op.schema, `${r.method} ${r.path} body`, "");
      if (op.query) walk(op.query, `${r.method} ${r.path} query`, "");
    }
    walk(FtsQuery, "FtsQuery", "");
    expect(unbounded).toEqual([]);
    // The walk sees a field without one.
    walk({ type: "object", properties: { n: { anyOf: [{ type: "integer" }, { type: "null" }] } } }, "probe", "");
    expect(unbounded).toEqual(["probe.n.anyOf[0]"]);
  });

  it("a schema that breaks the meta-schema is caught by the same check", () => {
    const ajv = new Ajv({ strict: false });
    expect(ajv.validateSchema({ type: "object", properties: { k: { type: "integr" } } })).toBe(false);
  });
});
