// Which filters the serving index evaluates itself (src/engine/serving-predicate.ts): only those
// whose answer is certain to be the engine's; every other one is left to LanceDB (null).
import { expect, it } from "vitest";
import { arrow } from "../../src/engine/arrow.js";
import { compileFilter } from "../../src/engine/serving-predicate.js";
import { columnLayout } from "../../src/engine/serving-rows.js";

const fields = [
  new arrow.Field("id", new arrow.Int32()),
  new arrow.Field("big", new arrow.Int64()),
  new arrow.Field("small", new arrow.Uint8()),
  new arrow.Field("name", new arrow.Utf8()),
  new arrow.Field("bin", new arrow.Binary()),
  new arrow.Field("score", new arrow.Float32()),
  new arrow.Field("Upper", new arrow.Int32()),
];
const { columns } = columnLayout(fields, "vector");
const compiles = (filter: string) => compileFilter(filter, fields, columns) !== null;

it("takes integer comparisons with literals the column's type holds, string equality, IN, IS [NOT] NULL, AND and OR", () => {
  for (const f of ["id = 1", "id <> -5", "id != 2 AND id < 3", "(id < 20 OR id >= 380) AND name != 'beta'", "id IN (1, 2, 3)", "big >= -9223372036854775808",
    "small <= 255", "name = 'it''s'", "name IN ('a','b')", "name IS NULL", "id IS NOT NULL or name = ''", "((id = 1))"]) {
    expect(compiles(f), f).toBe(true);
  }
});

it("leaves to the engine whatever else: other types, out-of-range or fractional literals, NOT, LIKE, functions, quoted or unknown names, broken syntax", () => {
  for (const f of ["id = 1.5", "id = 1e3", "id = 3000000000", "small = -1", "small = 256", "big = 9223372036854775808", "name < 'b'", "name = 'a\\b'", "name = 1", "id = '1'",
    "NOT id = 1", "id NOT IN (1)", "name LIKE 'a%'", "abs(id) = 1", "`id` = 1", "\"id\" = 1", "Upper = 1", "nosuch = 1", "score = 1", "bin = 'a'",
    "id = 1 AND", "(id = 1", "id = 1)", "id", "", "id IN ()", "id BETWEEN 1 AND 2", "id = 1; DROP TABLE x", "true", "id = NULL"]) {
    expect(compiles(f), f).toBe(false);
  }
});

it("parses a filter of 40,000 terms and a long whitespace tail (the tokenizer reads each character a bounded number of times), and leaves parentheses past 16 deep to the engine", () => {
  const long = `id = 1${" OR id = 2".repeat(20_000)}${" ".repeat(100_000)}`;
  expect(compiles(long)).toBe(true);
  expect(compiles(`${"(".repeat(16)}id = 1${")".repeat(16)}`)).toBe(true);
  expect(compiles(`${"(".repeat(17)}id = 1${")".repeat(17)}`)).toBe(false);
});
