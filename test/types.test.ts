// Every Arrow type goes in through an HTTP create with an IPC stream and comes back intact:
// described as JSON Arrow, counted, and read directly with LanceDB at the reported location.
import path from "node:path";
import {
  Binary, Bool, DateDay, DateMillisecond, Field, FixedSizeBinary, FixedSizeList, Float16, Float32, Float64,
  Int16, Int32, Int64, Int8, LargeBinary, LargeUtf8, List, Struct, Table, TimestampMicrosecond,
  TimestampMillisecond, TimestampNanosecond, TimestampSecond, Uint16, Uint32, Uint64, Uint8, Utf8, vectorFromArray,
  type DataType,
} from "apache-arrow";
import * as lancedb from "@lancedb/lancedb";
import { describe, expect, it } from "vitest";
import { fromJsonType, toJsonType } from "../src/engine/json-arrow.js";
import { toStream } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const q = inProcessForFile();

const bytes = (...b: number[]) => new Uint8Array(b);
// name, type, values (3 rows, the last null where the type allows it), expected JSON type
const columns: [string, DataType, unknown[], object][] = [
  ["i8", new Int8(), [1, -2, null], { type: "int8" }],
  ["i16", new Int16(), [300, -300, null], { type: "int16" }],
  ["i32", new Int32(), [70000, -1, null], { type: "int32" }],
  ["i64", new Int64(), [2n ** 40n, -5n, null], { type: "int64" }],
  ["u8", new Uint8(), [255, 0, null], { type: "uint8" }],
  ["u16", new Uint16(), [65535, 1, null], { type: "uint16" }],
  ["u32", new Uint32(), [4000000000, 2, null], { type: "uint32" }],
  ["u64", new Uint64(), [2n ** 63n, 3n, null], { type: "uint64" }],
  ["f16", new Float16(), [1.5, -2, null], { type: "float16" }],
  ["f32", new Float32(), [1.25, -0.5, null], { type: "float32" }],
  ["f64", new Float64(), [Math.PI, 1e300, null], { type: "float64" }],
  ["s", new Utf8(), ["héllo", "", null], { type: "utf8" }],
  ["ls", new LargeUtf8(), ["big", "x", null], { type: "large_utf8" }],
  ["bin", new Binary(), [bytes(1, 2), bytes(), null], { type: "binary" }],
  ["lbin", new LargeBinary(), [bytes(9), bytes(8, 7), null], { type: "large_binary" }],
  ["fbin", new FixedSizeBinary(4), [bytes(1, 2, 3, 4), bytes(5, 6, 7, 8), null], { type: "fixed_size_binary", length: 4 }],
  ["b", new Bool(), [true, false, null], { type: "bool" }],
  ["d32", new DateDay(), [new Date("2024-02-29"), new Date("1970-01-01"), null], { type: "date32" }],
  ["d64", new DateMillisecond(), [new Date("2024-02-29T12:00:00Z"), new Date(0), null], { type: "date64" }],
  ["ts_s", new TimestampSecond(), [1700000000000, 0, null], { type: "timestamp:s" }],
  ["ts_ms", new TimestampMillisecond("UTC"), [1700000000123, 0, null], { type: "timestamp:ms:UTC" }],
  ["ts_us", new TimestampMicrosecond(), [1700000000123, 1, null], { type: "timestamp" }],
  ["ts_ns", new TimestampNanosecond("Europe/Paris"), [1700000000123, 2, null], { type: "timestamp:ns:Europe/Paris" }],
  ["list", new List(new Field("item", new Int32(), true)), [[1, 2, 3], [], null], {
    type: "list", fields: [{ name: "item", type: { type: "int32" }, nullable: true }],
  }],
  ["vec", new FixedSizeList(3, new Field("item", new Float32(), true)), [[1, 2, 3], [4, 5, 6], [7, 8, 9]], {
    type: "fixed_size_list", fields: [{ name: "item", type: { type: "float32" }, nullable: true }], length: 3,
  }],
  ["st", new Struct([new Field("x", new Int32(), true), new Field("y", new Utf8(), true)]), [{ x: 1, y: "a" }, { x: 2, y: null }, null], {
    type: "struct",
    fields: [
      { name: "x", type: { type: "int32" }, nullable: true },
      { name: "y", type: { type: "utf8" }, nullable: true },
    ],
  }],
];

/** Plain comparable values: bigints and byte arrays as strings/arrays, rows and vectors as JSON. */
const plain = (v: unknown): unknown =>
  JSON.parse(
    JSON.stringify(v, (_k, x) =>
      typeof x === "bigint" ? x.toString() : ArrayBuffer.isView(x) ? Array.from(x as Uint8Array) : x,
    ),
  );

describe("Arrow type round trip", () => {
  it("creates a table of every type, describes its schema and reads the values back", async () => {
    const vectors: Record<string, any> = {};
    for (const [name, type, values] of columns) vectors[name] = vectorFromArray(values as any[], type);
    const sent = new Table(vectors);
    const r = await q.call("POST", "/v1/table/alltypes/create", toStream(sent));
    expect(r.status, r.text).toBe(200);

    const d = await q.call("POST", "/v1/table/alltypes/describe", {});
    expect(d.json.schema.fields).toEqual(columns.map(([name, , , type]) => ({ name, type, nullable: true })));
    expect((await q.call("POST", "/v1/table/alltypes/count_rows", {})).json).toBe(3);

    const loc = r.json.location as string;
    const db = await lancedb.connect(path.dirname(loc));
    const t = await db.openTable(path.basename(loc, ".lance"));
    const got = await t.query().toArrow();
    for (const [name, type] of columns) {
      const f = got.schema.fields.find((x) => x.name === name)!;
      expect(String(f.type), name).toBe(String(type));
      expect(plain(got.getChild(name)!.toArray()), name).toEqual(plain(sent.getChild(name)!.toArray()));
    }
  });

  it("inserting the same types again is accepted by the schema check", async () => {
    const vectors: Record<string, any> = {};
    for (const [name, type, values] of columns) vectors[name] = vectorFromArray(values as any[], type);
    const r = await q.call("POST", "/v1/table/alltypes/insert", toStream(new Table(vectors)));
    expect(r.status, r.text).toBe(200);
    expect((await q.call("POST", "/v1/table/alltypes/count_rows", {})).json).toBe(6);
  });
});

describe("JSON Arrow data types", () => {
  it("accepts both vocabularies case-insensitively", () => {
    const same: [object, object][] = [
      [{ type: "float" }, { type: "float32" }],
      [{ type: "DOUBLE" }, { type: "float64" }],
      [{ type: "halffloat" }, { type: "float16" }],
      [{ type: "string" }, { type: "utf8" }],
      [{ type: "Large_String" }, { type: "large_utf8" }],
      [{ type: "boolean" }, { type: "bool" }],
      [{ type: "date32:day" }, { type: "date32" }],
      [{ type: "date64:ms" }, { type: "date64" }],
      [{ type: "timestamp:us" }, { type: "timestamp" }],
      [{ type: "decimal:128:10:2" }, { type: "decimal128", length: 10002 }],
      [{ type: "decimal:10:2" }, { type: "decimal128", length: 10002 }],
      [{ type: "fixed_size_list:2", fields: [{ name: "item", type: { type: "float" }, nullable: true }] },
        { type: "fixed_size_list", length: 2, fields: [{ name: "item", type: { type: "float32" }, nullable: true }] }],
    ];
    for (const [a, b] of same) expect(String(fromJsonType(a as any)), JSON.stringify(a)).toBe(String(fromJsonType(b as any)));
  });

  it("every type of the round trip converts to JSON and back unchanged", () => {
    for (const [, type, , json] of columns) {
      expect(toJsonType(type as any)).toEqual(json);
      expect(String(fromJsonType(json as any))).toBe(String(type));
    }
  });

  it("keeps a time zone holding ':' in JSON (Lance cannot store it; create refuses it with 400)", async () => {
    expect(String(fromJsonType({ type: "timestamp:ns:+01:00" }))).toBe(String(new TimestampNanosecond("+01:00")));
    const t = new Table({ t: vectorFromArray([1], new TimestampNanosecond("+01:00")) });
    const r = await q.call("POST", "/v1/table/offsettz/create", toStream(t));
    expect(r.status).toBe(400);
    expect(r.json.detail).toContain('column "t"');
    expect((await q.call("POST", "/v1/table/offsettz/exists", {})).status).toBe(404);
  });

  it("a time zone given as the `timezone` field is honoured, not dropped; a conflicting or empty one is a 400", async () => {
    expect(String(fromJsonType({ type: "timestamp", timezone: "UTC" } as any))).toBe(String(new TimestampMicrosecond("UTC")));
    expect(String(fromJsonType({ type: "timestamp:ms", timezone: "Europe/Paris" } as any))).toBe(String(new TimestampMillisecond("Europe/Paris")));
    expect(() => fromJsonType({ type: "timestamp:ms:UTC", timezone: "Europe/Paris" } as any)).toThrow(/"timezone" "Europe\/Paris" differs from the zone in "type"/);
    expect(() => fromJsonType({ type: "timestamp", timezone: 3 } as any)).toThrow(/"timezone" must be a non-empty string/);
    const t = new Table({ id: vectorFromArray([1], new Int32()) });
    expect((await q.call("POST", "/v1/table/zoned/create", toStream(t))).status).toBe(200);
    const add = await q.call("POST", "/v1/table/zoned/add_columns", { new_columns: [{ name: "at", data_type: { type: "timestamp", timezone: "UTC" } }] });
    expect(add.status, add.text).toBe(200);
    const fields = (await q.call("POST", "/v1/table/zoned/describe", {})).json.schema.fields as { name: string; type: { type: string } }[];
    expect(fields.find((f) => f.name === "at")!.type.type).toBe("timestamp:us:UTC");
    // JSON rows with a schema: the zone holds, so the answer's ISO strings end in Z.
    const schema = { fields: [{ name: "at", type: { type: "timestamp", timezone: "UTC" }, nullable: true }] };
    expect((await q.call("POST", "/v1/table/zonedrows/create", { schema, rows: [{ at: "2026-11-23T10:00:00Z" }] })).status).toBe(200);
    const rowsOut = await q.call("POST", "/v1/table/zonedrows/query", {}, { accept: "application/json" });
    expect(rowsOut.json).toEqual([{ at: "2026-11-23T10:00:00.000000Z" }]);
  });

  it("an unknown type is a 400 naming it", () => {
    expect(() => fromJsonType({ type: "quaternion" }, "q")).toThrow(/unknown data type "quaternion" for column "q"/);
    try {
      fromJsonType({ type: "nope" });
    } catch (e) {
      expect((e as { status: number }).status).toBe(400);
    }
  });
});
