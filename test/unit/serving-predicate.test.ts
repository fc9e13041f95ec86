// Which filters the serving index evaluates itself (src/serving/predicate.ts): only those
// whose answer is certain to be the engine's; every other one is left to LanceDB (null). And the
// value index that answers equality filters, against a scan of the same records.
import { expect, it } from "vitest";
// From dist/: the index's records live in a memory whose kernel is dist/native/vectors.wasm.
import { arrow } from "../../dist/src/engine/arrow.js";
import { createGraphMemory, graphOf, slotCount } from "../../dist/src/serving/graph.js";
import { compileFilter, evaluateSlots, extendValueIndex, filterTypes, keysOf, lookupSlots, newValueIndex, testOf, type ValueIndex } from "../../dist/src/serving/predicate.js";
import { applyBatch, columnLayout, knownOf } from "../../dist/src/serving/rows.js";

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
const compiles = (filter: string) => compileFilter(filter, filterTypes(fields), columns) !== null;

it("takes integer comparisons with literals the column's type holds, string equality, IN, IS [NOT] NULL, AND and OR", () => {
  for (const f of ["id = 1", "id <> -5", "id != 2 AND id < 3", "(id < 20 OR id >= 380) AND name != 'beta'", "id IN (1, 2, 3)", "big >= -9223372036854775807",
    "small <= 255", "name = 'it''s'", "name IN ('a','b')", "name IS NULL", "id IS NOT NULL or name = ''", "((id = 1))"]) {
    expect(compiles(f), f).toBe(true);
  }
});

it("leaves to the engine whatever else: other types, out-of-range or fractional literals, NOT, LIKE, functions, quoted or unknown names, broken syntax", () => {
  for (const f of ["id = 1.5", "id = 1e3", "id = 3000000000", "small = -1", "small = 256", "big = 9223372036854775808",
    // The engine reads the digits before the sign, so the 64-bit minimum is its error (400) to answer.
    "big >= -9223372036854775808", "name < 'b'", "name = 'a\\b'", "name = 1", "id = '1'",
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

it("finds through a value index, extended a few slots at a time as rows are added, the slots a scan of the records finds: 64-bit, signed 8-bit and string keys, repeated values, NULLs in none", () => {
  const fields = [
    new arrow.Field("id", new arrow.Int64()),
    new arrow.Field("name", new arrow.Utf8()),
    new arrow.Field("small", new arrow.Int8()),
    new arrow.Field("vector", new arrow.FixedSizeList(2, new arrow.Field("item", new arrow.Float32()))),
  ];
  const layout = columnLayout(fields, "vector");
  const g = graphOf(createGraphMemory({ dim: 2, metric: "l2", m: 4, efConstruction: 8, columnBytes: layout.bytes, maxBytes: 64 << 20 }));
  const add = (from: number, n: number) => {
    const at = Array.from({ length: n }, (_, k) => from + k);
    const t = new arrow.Table({
      _rowid: arrow.vectorFromArray(at.map(BigInt), new arrow.Uint64()),
      id: arrow.vectorFromArray(at.map((i) => (i % 7 === 0 ? null : BigInt(i - 50) * 2n ** 40n)), new arrow.Int64()),
      name: arrow.vectorFromArray(at.map((i) => (i % 11 === 0 ? null : `n${i % 13}`)), new arrow.Utf8()),
      small: arrow.vectorFromArray(at.map((i) => (i % 256) - 128), new arrow.Int8()),
      vector: arrow.vectorFromArray(at.map((i) => [i, -i]), fields[3].type),
    });
    for (const batch of t.batches) applyBatch(g, layout.columns, batch, "vector", 1, knownOf(g, [], [], []), { remapSlots: [], remapIds: [], replaced: [], written: 0, vectorless: [] }, false);
  };
  const filters = [`id = ${-3n * 2n ** 40n}`, `id IN (${-50n * 2n ** 40n}, ${40n * 2n ** 40n}, ${2n ** 40n}, 5)`, "name = 'n4'", "name IN ('n0', 'n12', 'none')", "small = -128", "small IN (-100, 0, 127)"];
  const indexes = new Map<string, ValueIndex>();
  /** Each filter's slots from `from` on, looked up and scanned. */
  const check = (from: number) => {
    for (const filter of filters) {
      const compiled = compileFilter(filter, filterTypes(fields), layout.columns)!;
      const { on } = compiled.point!;
      if (!indexes.has(on.column.name)) indexes.set(on.column.name, newValueIndex(on));
      const index = indexes.get(on.column.name)!;
      const to = slotCount(g);
      while (index.upTo < to) extendValueIndex(g, index, Math.min(index.upTo + 5, to));
      const [looked, scanned, joined] = [new Uint32Array(Math.ceil(to / 32)), new Uint32Array(Math.ceil(to / 32)), new Uint32Array(Math.ceil(to / 32))];
      expect(lookupSlots(g, index, keysOf(compiled.point!), looked, from, to), filter).toBe(evaluateSlots(g, testOf(compiled.tree), scanned, from, to));
      expect(looked, filter).toEqual(scanned);
      if (from === 0) expect(scanned.some((w) => w !== 0), filter).toBe(true);
      // Under AND the list is a test of each row (by its value's hash), with the same answer.
      const both = compileFilter(`${on.column.name} IS NOT NULL AND (${filter})`, filterTypes(fields), layout.columns)!;
      expect(both.point).toBeNull();
      expect(evaluateSlots(g, testOf(both.tree), joined, from, to), filter).toBe(evaluateSlots(g, testOf(compiled.tree), scanned.fill(0), from, to));
      expect(joined, filter).toEqual(scanned);
    }
  };
  add(0, 60);
  check(0);
  // Past the room the first build reserved: the buckets grow and are linked again; a later
  // version's lookup of only the slots added since finds those alone.
  add(60, 500);
  check(0);
  check(60);
});
