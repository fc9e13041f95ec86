// The sizing rule of src/schemas/expression-size.ts, shape by shape: what a value can hold is
// counted through nesting, casts and quoting as the engine reads them; what answers a boolean or a
// number counts nothing. test/security/expression-memory.test.ts drives it over HTTP.
import { describe, expect, it } from "vitest";
import { expressionSizeFault } from "../../src/schemas/expression-size.js";
import { checkExpression, checkSqlBody } from "../../src/schemas/expression.js";

const limits = { maxExpressionArray: 1024, maxExpressionCopies: 16 };
const fault = (e: string) => expressionSizeFault(e, limits);

describe("expression sizing", () => {
  it("array_repeat and repeat multiply what they repeat by a literal count, through nesting", () => {
    expect(fault("array_repeat(1, 1024)")).toBe(null);
    expect(fault("array_repeat(1, 1025)")).toMatch(/^array_repeat\(…\) builds up to 1025 elements .* limit of 1024 \(--max-expression-array\)$/);
    expect(fault("array_repeat(array_repeat(1, 32), 32)")).toBe(null);
    expect(fault("array_repeat(array_repeat(1, 32), 33)")).toMatch(/builds up to 1056 elements/);
    expect(fault("array_repeat(array_repeat(id, 4), 4)")).toBe(null);
    expect(fault("array_repeat(array_repeat(id, 4), 5)")).toMatch(/holds column "id" up to 20 times in one value, past the limit of 16 \(--max-expression-copies\)/);
    expect(fault("repeat('ab', 512)")).toBe(null);
    expect(fault("repeat('ab', 513)")).toMatch(/repeat\(…\) builds up to 1026 elements/);
    expect(fault("LIST_REPEAT(id, -3)")).toBe(null);
    expect(fault("array_repeat(id, +17)")).toMatch(/up to 17 times/);
  });

  it("levenshtein's work is the product of its arguments' sizes: literal by literal, literal by column, never column by column", () => {
    expect(fault("levenshtein(rpad(s, 32, 'x'), rpad(s, 32, 'y')) > 0")).toBe(null);
    expect(fault("levenshtein(rpad(s, 1024, 'x'), rpad(s, 1024, 'y')) > 0")).toMatch(
      /^levenshtein\(…\) compares each character of one argument with each of the other: 1048576 steps in one row, past the limit of 1024 \(--max-expression-array\)$/,
    );
    expect(fault("levenshtein(name, 'kitten') < 3")).toBe(null);
    expect(fault("levenshtein(name, 'sixteen chars ok') < 3")).toBe(null);
    expect(fault("levenshtein(name, 'seventeen chars!!') < 3")).toMatch(/^levenshtein\(…\) compares each character of column "name" with up to 17 others in one row, past the limit of 16/);
    expect(fault("LEVENSHTEIN(a, b) = 0")).toMatch(/^levenshtein\(…\) grows with the product of two stored values; give it a literal$/);
    expect(fault("levenshtein(concat(s, s), 'abcdefghi') > 0")).toMatch(/column "s" with up to 18 others/);
    // Its answer is a number: what encloses it builds nothing from its arguments.
    expect(fault("array_repeat(levenshtein(s, 'ab'), 1024)")).toBe(null);
  });

  it("a size that is not an integer literal is refused: columns, arithmetic, casts, floats", () => {
    for (const e of ["array_repeat(id, id)", "array_repeat(1, 2 * 3)", "array_repeat(1, CAST(3 AS INT))", "array_repeat(1, 3::bigint)", "repeat(s, 3e2)", "lpad(s, (10))", "array_resize(a, n)"]) {
      expect(fault(e), e).toMatch(/must be an integer literal/);
    }
    expect(fault("range(0, id)")).toMatch(/^range needs integer literal bounds/);
    expect(fault("generate_series(1, 10, 0.5)")).toMatch(/^generate_series needs integer literal bounds/);
  });

  it("functions that build a fixed size, or a series, count that size", () => {
    expect(fault("lpad(s, 1024, 'xy')")).toBe(null);
    expect(fault("rpad(repeat(s, 16), 1025)")).toMatch(/^rpad\(…\) builds up to 1025 elements/);
    expect(fault("range(1024)")).toBe(null);
    expect(fault("range(0, 2048, 2)")).toBe(null);
    expect(fault("range(0, 2048)")).toMatch(/builds up to 2048 elements/);
    expect(fault("generate_series(1, 1024)")).toBe(null);
    expect(fault("generate_series(0, 1024)")).toMatch(/builds up to 1025 elements/);
    expect(fault("generate_series(10, 1, -1)")).toBe(null);
    expect(fault("array_resize(make_array(s), 1000, s)")).toMatch(/holds column "s" up to 1001 times/);
  });

  it("functions that grow their input by a factor scale it; one that multiplies two stored values is refused", () => {
    expect(fault("encode(encode(encode(encode(s, 'hex'), 'hex'), 'hex'), 'hex')")).toBe(null);
    expect(fault("encode(encode(encode(encode(encode(s, 'hex'), 'hex'), 'hex'), 'hex'), 'hex')")).toMatch(/encode\(…\) holds column "s" up to 32 times/);
    expect(fault("replace(s, 'a', 'b')")).toBe(null);
    expect(fault("replace(s, 'a', '" + "b".repeat(17) + "')")).toMatch(/replace\(…\) holds column "s" up to 17 times/);
    expect(fault("replace(s, '', 'x')")).toBe(null);
    expect(fault("replace(s, 'a', t)")).toMatch(/^replace grows with the product of two stored values/);
    expect(fault("regexp_replace(s, 'a', t, 'g')")).toMatch(/^regexp_replace grows with the product/);
    expect(fault("array_to_string(array_repeat(1, 100), s)")).toMatch(/holds column "s" up to 100 times/);
    expect(fault("regexp_match(s, '" + "(a)".repeat(16) + "')")).toMatch(/holds column "s" up to 17 times/);
    expect(fault("concat_ws(s, a, b, c)")).toBe(null);
    expect(fault("concat(" + Array(17).fill("s").join(", ") + ")")).toMatch(/^concat\(…\) holds column "s" up to 17 times/);
    expect(fault(Array(17).fill("s").join(" || "))).toMatch(/^\|\| holds column "s" up to 17 times/);
  });

  it("booleans and numbers count nothing: long IN lists, long patterns, comparisons of large literals", () => {
    expect(fault("id IN (" + Array.from({ length: 5000 }, (_, i) => i).join(", ") + ")")).toBe(null);
    expect(fault(`s LIKE '${"x".repeat(5000)}'`)).toBe(null);
    expect(fault(`contains(s, '${"x".repeat(5000)}') AND length(s) > 2`)).toBe(null);
    expect(fault(`s || 'x' = '${"y".repeat(5000)}'`)).toBe(null);
    expect(fault("array_length(array_repeat(id, 5)) > 0 OR id = 1")).toBe(null);
    // A projected literal is made for every row.
    expect(fault(`'${"y".repeat(2000)}'`)).toMatch(/^the expression builds up to 2000 elements/);
  });

  it("a CASE is as large as its branches together", () => {
    expect(fault("array_repeat(CASE WHEN id > 1 THEN array_repeat(1, 100) ELSE make_array(1) END, 9)")).toBe(null);
    expect(fault("array_repeat(CASE WHEN id > 1 THEN array_repeat(1, 100) ELSE make_array(1) END, 11)")).toMatch(/^array_repeat\(…\) builds up to 11\d\d elements/);
    expect(fault("CASE WHEN a = 1 THEN s ELSE t END")).toBe(null);
  });

  it("reads quoting and comments as the engine does, and refuses what it could read otherwise", () => {
    expect(fault('"array_repeat"(id, 300000000)')).toMatch(/holds column "id" up to 300000000 times/);
    expect(fault("`array_repeat`(id, 300000000)")).toMatch(/holds column "id" up to 300000000 times/);
    expect(fault("ARRAY_REPEAT (id, 300000000)")).toMatch(/holds column "id"/);
    expect(fault("array_repeat/* hidden */(id, 300000000)")).toMatch(/holds column "id"/);
    expect(fault("'array_repeat(id, 300000000)' = s")).toBe(null);
    expect(fault("'it''s' || array_repeat(id, 99)")).toMatch(/up to 99 times/);
    expect(fault("s = 'a' -- array_repeat(id, 300000000)\n")).toBe(null);
    expect(fault("s /* a /* b */ || array_repeat(id, 99) */")).toMatch(/^a block comment inside a block comment/);
    expect(fault("E'\\'' || s")).toMatch(/^a backslash in an E'…' string/);
    expect(fault("$$ ' $$ || array_repeat(id, 99) || '")).toMatch(/^\$ \(placeholders and dollar-quoted strings/);
    expect(fault("s.x || s.y")).toBe(null);
    expect(fault("tags[1] || 'x'")).toBe(null);
  });

  it("SQL udtf bodies (run by sql.js in the sandbox, not by the engine) are bounded in shape only", () => {
    const all = { ...limits, maxExpressionLength: 65_536, maxExpressionCost: 160 };
    const body = `SELECT ${Array(20).fill("x").join(", ")}, '${"y".repeat(2000)}' AS note FROM source`;
    expect(() => checkSqlBody("udtf_spec.udtf.sql", body, all)).not.toThrow();
    expect(() => checkExpression("filter", body, all)).toThrow(/^filter: the expression (builds up to \d+ elements|holds column "x" up to 20 times)/);
  });
});
