// Splitting a batched search's result by query_index without decoding it (src/engine/ipc-split.ts),
// in process: every member's file decodes to exactly its own rows, in order, with the schema a
// search of its own answers, for columns of every layout (validity bits, offsets, nested children).
import { describe, expect, it } from "vitest";
import { arrow } from "../../src/engine/arrow.js";
import { splitByQuery } from "../../src/engine/ipc-split.js";

const A = arrow;
/** Query index of each row: runs of 0..4 rows per query; query 4 has none. */
const QI = [0, 0, 1, 1, 1, 2, 3, 3, 3, 3, 5, 6, 6];
const n = QI.length;
const pick = <T>(f: (i: number) => T) => Array.from({ length: n }, (_, i) => f(i));

function result(from: number, to: number) {
  const rows = (xs: unknown[]) => xs.slice(from, to);
  const structType = new A.Struct([new A.Field("a", new A.Int16(), true), new A.Field("b", new A.Utf8(), true)]);
  return new A.Table({
    id: A.vectorFromArray(rows(pick((i) => BigInt(i * 1000))), new A.Int64()),
    query_index: A.vectorFromArray(rows(QI), new A.Int32()),
    text: A.vectorFromArray(rows(pick((i) => (i % 4 === 1 ? null : `row ${i} ${"x".repeat(i)}`))), new A.Utf8()),
    flag: A.vectorFromArray(rows(pick((i) => (i % 5 === 2 ? null : i % 3 === 0))), new A.Bool()),
    vector: A.vectorFromArray(rows(pick((i) => (i === 7 ? null : [i, i + 0.5, -i]))), new A.FixedSizeList(3, new A.Field("item", new A.Float32(), true))),
    tags: A.vectorFromArray(rows(pick((i) => (i % 6 === 3 ? null : Array.from({ length: i % 3 }, (_, j) => i * 10 + j)))), new A.List(new A.Field("item", new A.Int32(), true))),
    nested: A.vectorFromArray(rows(pick((i) => (i % 7 === 4 ? null : { a: i % 2 ? null : i, b: `s${i}` }))), structType),
    at: A.vectorFromArray(rows(pick((i) => (i % 3 === 1 ? null : new Date(Date.UTC(2026, 0, 1 + i))))), new A.TimestampMillisecond()),
    raw: A.vectorFromArray(rows(pick((i) => Uint8Array.of(i, i + 1))), new A.Binary()),
    nothing: A.vectorFromArray(rows(pick(() => null)), new A.Null()),
    _distance: A.vectorFromArray(rows(pick((i) => i / 4)), new A.Float32()),
  });
}

const norm = (v: unknown): unknown => {
  if (typeof v === "bigint") return String(v);
  if (v instanceof Uint8Array) return Array.from(v);
  if (v !== null && typeof v === "object" && "toArray" in v) return Array.from((v as { toArray(): ArrayLike<unknown> }).toArray(), norm);
  if (v !== null && typeof v === "object" && "toJSON" in v) return norm((v as { toJSON(): unknown }).toJSON());
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]));
  return v;
};

/** Column name → values, row by row. */
const columns = (t: import("apache-arrow").Table) =>
  Object.fromEntries(t.schema.fields.map((f, i) => [f.name, Array.from({ length: t.numRows }, (_, r) => norm(t.getChildAt(i)!.get(r)))]));

describe("splitting a batched result by query_index", () => {
  // Two record batches, the second starting inside query 1's run of rows.
  const whole = new A.Table([...result(0, 3).batches, ...result(3, n).batches]);
  const ipc = A.tableToIPC(whole, "file");
  const all = columns(whole);
  // Members sent 1, 3, 1 and 2 vectors: queries 0 | 1 2 3 | 4 | 5 6.
  const counts = [1, 3, 1, 2];
  const owner = [0, 1, 1, 1, 2, 3, 3];
  const base = [0, 1, 4, 5];

  it("gives each member its own rows in the engine's order, every column value for value", () => {
    const out = splitByQuery(ipc, counts, "query_index").map((chunks) => A.tableFromIPC(Buffer.concat(chunks)));
    counts.forEach((c, m) => {
      const rows = QI.flatMap((q, i) => (owner[q] === m ? [i] : []));
      const got = columns(out[m]);
      const names = whole.schema.fields.map((f) => f.name).filter((f) => c > 1 || f !== "query_index");
      expect(out[m].schema.fields.map((f) => `${f.name}: ${f.type}`)).toEqual(
        whole.schema.fields.filter((f) => names.includes(f.name)).map((f) => `${f.name}: ${f.type}`),
      );
      for (const name of names) {
        const want = rows.map((i) => (name === "query_index" ? QI[i] - base[m] : all[name][i]));
        expect(got[name], `member ${m}, column ${name}`).toEqual(want);
      }
    });
    // The member whose one query found nothing gets a file with the schema and no rows.
    expect(out[2].numRows).toBe(0);
    expect(out[2].schema.fields.length).toBe(whole.schema.fields.length - 1);
  });

  it("refuses a result it cannot split by rows (a dictionary column), so the members run alone", () => {
    const dict = new A.Table({
      query_index: A.vectorFromArray([0, 1], new A.Int32()),
      cat: A.vectorFromArray(["a", "b"], new A.Dictionary(new A.Utf8(), new A.Int32())),
    });
    expect(() => splitByQuery(A.tableToIPC(dict, "file"), [1, 1], "query_index")).toThrow(/dictionar/);
  });
});
