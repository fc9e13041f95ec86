// Normalising a validated query request (either wire shape) to the engine's QuerySpec, in process.
import { describe, expect, it } from "vitest";
import { mostRows } from "../../src/engine/query-spec.js";
import { querySpec } from "../../src/operations/query-spec.js";
import type { QueryRequest } from "../../src/schemas/query.js";

const spec = (b: Record<string, unknown>) => querySpec({ k: 10, ...b } as QueryRequest);

describe("query spec", () => {
  it("a single vector in either shape", () => {
    expect(spec({ vector: { single_vector: [1, 2] } })).toMatchObject({ vectors: [[1, 2]], multi: false, k: 10 });
    expect(spec({ vector: [1, 2] })).toMatchObject({ vectors: [[1, 2]], multi: false });
    expect(spec({ vector: [] })).toMatchObject({ vectors: null });
  });

  it("several vectors must share a dimension", () => {
    expect(spec({ vector: { multi_vector: [[1, 2], [3, 4]] } })).toMatchObject({ vectors: [[1, 2], [3, 4]], multi: true });
    expect(() => spec({ vector: { multi_vector: [[1, 2], [3]] } })).toThrow("vector.multi_vector[1]: has 1 dimensions, vector.multi_vector[0] has 2");
    expect(() => spec({ vector: { single_vector: [1], multi_vector: [[1]] } })).toThrow(/not both/);
  });

  it("columns: names, aliases, or LanceDB's expression map", () => {
    expect(spec({ columns: { column_names: ["a", "b.c"] } })).toMatchObject({ columns: ["a", "b.c"], columnPaths: ["a", "b.c"] });
    expect(spec({ columns: { column_aliases: { x: "a" } } })).toMatchObject({ columns: { x: "a" }, columnPaths: ["a"] });
    expect(spec({ columns: { twice: "a * 2" } })).toMatchObject({ columns: { twice: "a * 2" }, columnPaths: [] });
    expect(() => spec({ columns: { column_names: ["a"], column_aliases: { x: "a" } } })).toThrow(/not both/);
  });

  it("a search's k + offset and its candidates over all query vectors are bounded, naming the field", () => {
    const one = { vector: [1, 2] };
    expect(spec({ ...one, k: 10_000 })).toMatchObject({ k: 10_000 });
    expect(() => spec({ ...one, k: 10_001 })).toThrow(/^k: 10001 is more than 10000/);
    expect(() => spec({ full_text_query: { string_query: { query: "x" } }, k: 10_001 })).toThrow(/^k: /);
    expect(() => spec({ ...one, k: 9_000, offset: 1_001 })).toThrow(/^offset: k \+ offset \(10001\)/);
    expect(spec({ ...one, k: 1_000, refine_factor: 1_000 })).toMatchObject({ refineFactor: 1_000 });
    expect(() => spec({ ...one, k: 1_001, refine_factor: 1_000 })).toThrow(/^refine_factor: 1 query vector\(s\) × 1001000 candidates/);
    const many = { vector: Array.from({ length: 1_000 }, () => [1, 2]) };
    expect(spec({ ...many, k: 1_000 }).vectors).toHaveLength(1_000);
    expect(() => spec({ ...many, k: 1_001 })).toThrow(/^k: 1000 query vector\(s\) × 1001 candidates/);
    expect(() => spec({ ...many, k: 10, ef: 1_001 })).toThrow(/^ef: /);
    // A scan's k is a plain limit.
    expect(spec({ k: 1_000_000_000 })).toMatchObject({ k: 1_000_000_000 });
  });

  it("0 knobs mean the engine default; an i64::MAX k means no limit", () => {
    expect(spec({ nprobes: 0, ef: 0, refine_factor: 0 })).toMatchObject({ minNprobes: null, maxNprobes: null, ef: null, refineFactor: null });
    expect(spec({ nprobes: 20 })).toMatchObject({ minNprobes: 20, maxNprobes: 20 });
    expect(spec({ k: 9223372036854775807 })).toMatchObject({ k: null });
  });

  it("bounds and probes are checked against each other", () => {
    expect(() => spec({ lower_bound: 2, upper_bound: 1 })).toThrow("lower_bound: 2 is greater than upper_bound 1");
    expect(() => spec({ minimum_nprobes: 5, maximum_nprobes: 2 })).toThrow("maximum_nprobes: 2 is less than minimum_nprobes 5");
  });

  it("full-text: a string query, or a structured tree with exactly one kind per node", () => {
    expect(spec({ full_text_query: { string_query: { query: "fox", columns: ["text"] } } }).fts).toEqual({ query: "fox", columns: ["text"] });
    const tree = { match: { terms: "fox", column: "text" } };
    expect(spec({ full_text_query: { structured_query: { query: tree } } }).fts).toEqual({ query: tree, columns: null });
    expect(() => spec({ full_text_query: { structured_query: { query: { match: { terms: "a" }, phrase: { terms: "b" } } } } })).toThrow(/exactly one of/);
  });

  it("the most rows the engine's limit allows: k a query vector, none known for hybrid or without k", () => {
    expect(mostRows(spec({ vector: { single_vector: [1, 2] } }))).toBe(10);
    expect(mostRows(spec({ vector: { multi_vector: [[1, 2], [3, 4], [5, 6]] }, k: 4 }))).toBe(12);
    expect(mostRows(spec({ full_text_query: { string_query: { query: "fox" } }, k: 3, offset: 5 }))).toBe(3);
    expect(mostRows(spec({ vector: [1, 2], full_text_query: { string_query: { query: "fox" } } }))).toBeNull();
    expect(mostRows(spec({ k: 9223372036854775807 }))).toBeNull();
    expect(mostRows(spec({ k: 0, vector: [1, 2] }))).toBeNull();
  });
});
