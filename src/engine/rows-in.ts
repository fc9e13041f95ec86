// JSON rows as an Arrow table, for writes sent as `Content-Type: application/json` (an array of
// objects, or `{"schema": …, "rows": […]}`) or `application/x-ndjson` (one object per line).
// Values are read as json-rows.ts writes them, so an answer can be written back as is: 64-bit
// integers as numbers or decimal strings, binary as base64, dates and timestamps as ISO 8601
// (timestamps also as epoch milliseconds), "NaN"/"Infinity"/"-Infinity" for such floats.
// A value that does not fit its column is a 400 naming the row and the column.
import type * as A from "apache-arrow";
import { invalid } from "../errors.js";
import { arrow } from "./arrow.js";
import { fromJsonSchema, type JsonArrowSchema } from "./json-arrow.js";
import { checkJsonDepth } from "../util/json-depth.js";

export interface JsonRows {
  rows: Record<string, unknown>[];
  schema?: JsonArrowSchema;
}

type Read = (v: unknown, at: string) => unknown;

const q = JSON.stringify;
const describe = (v: unknown) => (typeof v === "string" ? q(v.length > 40 ? v.slice(0, 40) + "…" : v) : Array.isArray(v) ? "an array" : v === null ? "null" : typeof v === "object" ? "an object" : String(v));
const misfit = (at: string, want: string, v: unknown) => invalid(`${at}: expected ${want}, got ${describe(v)}`);

// A row's keys become the properties of the objects rows are built in, where `__proto__` sets the
// prototype instead (a column or struct field lost, or a 500): refused, found by a walk only when
// the text holds the name at all. A schema's field of that name is refused by fromJsonField.
const PROTO = "__proto__";

/** 400 naming the first `__proto__` key in `v` (a row, or a value in one), at `at`. */
function refuseProtoKeys(v: unknown, at: string): void {
  if (!v || typeof v !== "object") return;
  if (Array.isArray(v)) return v.forEach((x, i) => refuseProtoKeys(x, `${at}[${i}]`));
  for (const [k, x] of Object.entries(v)) {
    if (k === PROTO) throw invalid(`${at}: ${q(PROTO)} cannot be a column or field name`);
    refuseProtoKeys(x, `${at}.${k}`);
  }
}

/** Parse a body of JSON rows (array, `{schema, rows}` object, or NDJSON lines). */
function parseJsonRows(text: string, ndjson: boolean): JsonRows {
  const rows = parseRows(text, ndjson);
  if (text.includes(`"${PROTO}"`)) rows.rows.forEach((r, i) => refuseProtoKeys(r, `rows[${i}]`));
  return rows;
}

function parseRows(text: string, ndjson: boolean): JsonRows {
  if (ndjson) {
    const rows: Record<string, unknown>[] = [];
    text.split("\n").forEach((line, i) => {
      if (!line.trim()) return;
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch (e) {
        throw invalid(`body: line ${i + 1} is not JSON (${(e as Error).message})`);
      }
      rows.push(objectRow(v, `rows[${rows.length}]`));
    });
    return { rows };
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw invalid(`body: malformed JSON (${(e as Error).message})`);
  }
  if (Array.isArray(v)) return { rows: v.map((r, i) => objectRow(r, `rows[${i}]`)) };
  if (v && typeof v === "object" && Array.isArray((v as JsonRows).rows)) {
    const { rows, schema } = v as JsonRows;
    if (schema !== undefined && (typeof schema !== "object" || schema === null || !Array.isArray(schema.fields))) {
      throw invalid("schema: must be an object with a fields array (lance-namespace JsonArrowSchema)");
    }
    return { rows: rows.map((r, i) => objectRow(r, `rows[${i}]`)), schema };
  }
  throw invalid("body: JSON rows must be an array of objects, or an object with a rows array (and an optional schema)");
}

function objectRow(v: unknown, at: string): Record<string, unknown> {
  if (!v || typeof v !== "object" || Array.isArray(v)) throw misfit(at, "an object (one row)", v);
  return v as Record<string, unknown>;
}

function integer(bits: number, signed: boolean): Read {
  const lo = signed ? -(2 ** (bits - 1)) : 0;
  const hi = signed ? 2 ** (bits - 1) - 1 : 2 ** bits - 1;
  return (v, at) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < lo || v > hi) throw misfit(at, `an integer in [${lo}, ${hi}]`, v);
    return v;
  };
}

function int64(signed: boolean): Read {
  return (v, at) => {
    let b: bigint;
    if (typeof v === "number" && Number.isSafeInteger(v)) b = BigInt(v);
    else if (typeof v === "string" && /^-?\d{1,20}$/.test(v)) b = BigInt(v);
    else throw misfit(at, "a 64-bit integer (a number, or a decimal string beyond 2^53)", v);
    const [lo, hi] = signed ? [-(2n ** 63n), 2n ** 63n - 1n] : [0n, 2n ** 64n - 1n];
    if (b < lo || b > hi) throw misfit(at, `an integer in [${lo}, ${hi}]`, v);
    return b;
  };
}

const SPECIAL = new Map([["NaN", NaN], ["Infinity", Infinity], ["-Infinity", -Infinity]]);
/** Whether a finite number stays finite in a float of the column's precision (half, single, double). */
const FITS = [(n: number) => Math.abs(n) < 65520, (n: number) => Number.isFinite(Math.fround(n)), () => true];

/** A number a float column of `precision` takes as it is (no error, no special value). */
const plainFloat = (precision: A.Precision) => (v: unknown) => typeof v === "number" && Number.isFinite(v) && FITS[precision](v);

function float(precision: A.Precision): Read {
  const bits = [16, 32, 64][precision];
  const plain = plainFloat(precision);
  return (v, at) => {
    if (plain(v)) return v;
    // JSON has no infinite numbers: one here is a literal past the float's range (1e400; 1e39 in a
    // float32 column), not a value to store: Arrow would store it as Infinity.
    if (typeof v === "number") throw invalid(`${at}: a number outside the range of a ${bits}-bit float; send "Infinity" or "-Infinity" for an infinite value`);
    if (typeof v === "string" && SPECIAL.has(v)) return SPECIAL.get(v);
    throw misfit(at, "a number", v);
  };
}

const typed = (kind: string): Read => (v, at) => {
  if (typeof v !== kind) throw misfit(at, `a ${kind}`, v);
  return v;
};

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const binary: Read = (v, at) => {
  if (typeof v !== "string" || v.length % 4 !== 0 || !BASE64.test(v)) throw misfit(at, "base64 bytes", v);
  return new Uint8Array(Buffer.from(v, "base64"));
};

/** Epoch milliseconds from an ISO 8601 string or a number of milliseconds. */
function millis(v: unknown, at: string, what: string): number {
  const ms = typeof v === "number" ? v : typeof v === "string" ? Date.parse(v) : NaN;
  if (!Number.isFinite(ms)) throw misfit(at, what, v);
  // Date.parse keeps milliseconds; finer digits of an ISO string are added back.
  const fine = typeof v === "string" ? /\.\d{3}(\d{1,3})/.exec(v) : null;
  return fine ? ms + Number(fine[1].padEnd(3, "0")) / 1000 : ms;
}

/** Arrays of `item`; items that `plain` passes are kept as they are, without naming their place (a vector's 128 floats named 128 places). */
function list(item: Read, length?: number, plain?: (v: unknown) => boolean): Read {
  return (v, at) => {
    if (!Array.isArray(v)) throw misfit(at, length === undefined ? "an array" : `an array of ${length} values`, v);
    if (length !== undefined && v.length !== length) throw invalid(`${at}: expected an array of ${length} values, got ${v.length} values`);
    return v.map((x, i) => (x === null || plain?.(x) ? x : item(x, `${at}[${i}]`)));
  };
}

function struct(fields: A.Field[]): Read {
  const members = fields.map((f) => [f.name, reader(f.type)] as const);
  return (v, at) => {
    if (!v || typeof v !== "object" || Array.isArray(v)) throw misfit(at, "an object", v);
    const o = v as Record<string, unknown>;
    const extra = Object.keys(o).find((k) => !members.some(([n]) => n === k));
    if (extra !== undefined) throw invalid(`${at}: field ${q(extra)} is not in the struct`);
    const out: Record<string, unknown> = {};
    for (const [name, read] of members) out[name] = o[name] === undefined || o[name] === null ? null : read(o[name], `${at}.${name}`);
    return out;
  };
}

function reader(t: A.DataType): Read {
  const D = arrow.DataType;
  if (D.isInt(t)) {
    const i = t as A.Int;
    return i.bitWidth === 64 ? int64(i.isSigned) : integer(i.bitWidth, i.isSigned);
  }
  if (D.isFloat(t)) return float((t as A.Float).precision);
  if (D.isBool(t)) return typed("boolean");
  if (D.isUtf8(t) || D.isLargeUtf8(t)) return typed("string");
  if (D.isBinary(t) || D.isLargeBinary(t)) return binary;
  if (D.isDate(t)) return (v, at) => new Date(millis(v, at, "a date (YYYY-MM-DD)"));
  if (D.isTimestamp(t)) return (v, at) => millis(v, at, "a timestamp (ISO 8601, or epoch milliseconds)");
  const item = t.children?.[0]?.type;
  const plain = item && D.isFloat(item) ? plainFloat((item as A.Float).precision) : undefined;
  if (D.isFixedSizeList(t)) return list(reader(item), (t as A.FixedSizeList).listSize, plain);
  if (D.isList(t)) return list(reader(item), undefined, plain);
  if (D.isStruct(t)) return struct(t.children);
  throw invalid(`schema: columns of type ${t} cannot be written from JSON rows; send Arrow IPC`);
}

/** Bytes a null of type `t` takes once built (at most 8 for a number or an offset). */
function slotBytes(t: A.DataType): number {
  const D = arrow.DataType;
  if (D.isFixedSizeList(t)) return (t as A.FixedSizeList).listSize * slotBytes(t.children[0].type);
  if (D.isFixedSizeBinary(t)) return (t as A.FixedSizeBinary).byteWidth;
  if (D.isStruct(t)) return t.children.reduce((n, c) => n + slotBytes(c.type), 0);
  return D.isDecimal(t) ? 32 : 8;
}

/** Bytes one row of `schema` builds at least, every value absent or null: what any row costs. */
export const rowBytes = (schema: A.Schema): number => schema.fields.reduce((n, f) => n + slotBytes(f.type), 0);

/** Limits on what a write's rows may build (from the configuration). */
export interface DecodeLimits {
  maxDecodedBody: number;
  maxValueBytes: number;
}

/**
 * 400 when `rows` rows of `schema` build more than `maxDecoded` bytes with every value null:
 * an absent value is built as a null at its column's width (a body of `{}` lines into a table of
 * 2,000 columns grew the server by 4 GB), so this holds before a value is read.
 */
export function checkRowCount(rows: number, schema: A.Schema, maxDecoded: number): void {
  const width = rowBytes(schema);
  if (rows * width > maxDecoded) {
    throw invalid(`rows: ${rows} rows of ${width} bytes (${schema.fields.length} columns, absent and null values counted) build ${rows * width} bytes or more, past the limit of ${maxDecoded} (--max-decoded-body)`);
  }
}

/** Bytes `v` (of type `t`) takes once built, counting what its nulls take and what a string or binary holds. */
function builtBytes(v: unknown, t: A.DataType): number {
  const D = arrow.DataType;
  if (v === null || v === undefined) return slotBytes(t);
  // Items without children take their slot whatever they hold: the list's size, without a walk.
  if (D.isFixedSizeList(t) && Array.isArray(v) && v.length === (t as A.FixedSizeList).listSize && !t.children[0].type.children?.length) return slotBytes(t);
  if (D.isFixedSizeList(t) && Array.isArray(v)) return v.reduce((n: number, x) => n + builtBytes(x, t.children[0].type), 0);
  if (D.isList(t) && Array.isArray(v)) return v.reduce((n: number, x) => n + builtBytes(x, t.children[0].type), slotBytes(t));
  if (D.isStruct(t) && typeof v === "object") return t.children.reduce((n, c) => n + builtBytes((v as Record<string, unknown>)[c.name], c.type), 0);
  if (typeof v === "string" && (D.isUtf8(t) || D.isLargeUtf8(t))) return slotBytes(t) + Buffer.byteLength(v);
  // Base64: three bytes for four characters.
  if (typeof v === "string" && (D.isBinary(t) || D.isLargeBinary(t))) return slotBytes(t) + Math.ceil(v.length / 4) * 3;
  return slotBytes(t);
}

/**
 * 400 when the rows build more than `maxDecodedBody` bytes, every value counted (an absent or
 * null one at its column's width, a string at its bytes), or when one value holds more than
 * `maxValueBytes`; the row count alone is checked first, then the values present (a walk as
 * long as the body). Nothing is built before this.
 */
function checkBuiltSize(rows: Record<string, unknown>[], schema: A.Schema, limits: DecodeLimits): void {
  checkRowCount(rows.length, schema, limits.maxDecodedBody);
  const types = new Map(schema.fields.map((f) => [f.name, f.type]));
  let built = rows.length * rowBytes(schema);
  rows.forEach((r, i) => {
    for (const [name, v] of Object.entries(r)) {
      const t = types.get(name);
      if (!t || v === null || v === undefined) continue;
      const bytes = builtBytes(v, t);
      if (bytes > limits.maxValueBytes) throw invalid(`rows[${i}].${name}: a value of ${bytes} bytes or more in column ${q(name)}, past the limit of ${limits.maxValueBytes} (--max-value-bytes)`);
      built += bytes - slotBytes(t);
    }
    if (built > limits.maxDecodedBody) throw invalid(`rows: the rows build ${built} bytes or more (rows[${i}] reached it), past the limit of ${limits.maxDecodedBody} (--max-decoded-body)`);
  });
}

/**
 * `rows` as a table of `schema`; every key of every row must be a column. What the rows build,
 * absent and null values at their columns' widths, is held to `limits` before anything is built
 * (a null row of a list of 10^9 floats was 4 GB from 9 bytes; `{}` lines into a wide table 4 GB
 * from 146 KB).
 */
export function rowsToTable(rows: Record<string, unknown>[], schema: A.Schema, table: string, limits: DecodeLimits): A.Table {
  if (rows.length === 0) return new arrow.Table(new arrow.Schema(schema.fields) as never);
  checkBuiltSize(rows, schema, limits);
  const names = new Set(schema.fields.map((f) => f.name));
  rows.forEach((r, i) => {
    const extra = Object.keys(r).find((k) => !names.has(k));
    if (extra !== undefined) throw invalid(`rows[${i}]: column ${q(extra)} is not in table ${q(table)}`);
  });
  const columns: Record<string, A.Vector> = {};
  for (const f of schema.fields) {
    const read = reader(f.type);
    const values = rows.map((r, i) => {
      const v = r[f.name];
      if (v === undefined || v === null) {
        if (!f.nullable) throw invalid(`rows[${i}].${f.name}: column ${q(f.name)} is not nullable in table ${q(table)}`);
        return null;
      }
      return read(v, `rows[${i}].${f.name}`);
    });
    columns[f.name] = arrow.DataType.isFixedSizeList(f.type) ? fixedSizeLists(values as (unknown[] | null)[], f.type as A.FixedSizeList) : arrow.vectorFromArray(values, f.type);
  }
  return new arrow.Table(new arrow.Schema(schema.fields), columns as never);
}

/**
 * apache-arrow's builder leaves no child slots for null fixed-size lists (the engine then rejects
 * the data), so these columns are assembled here: a null row holds `size` null items.
 */
function fixedSizeLists(values: (unknown[] | null)[], type: A.FixedSizeList): A.Vector {
  if (!values.includes(null)) return floatLists(values as unknown[][], type) ?? arrow.vectorFromArray(values, type);
  const size = type.listSize;
  const items = arrow.vectorFromArray(values.flatMap((v) => v ?? new Array(size).fill(null)), type.children[0].type);
  const valid = values.map((v) => v !== null);
  const nullBitmap = new Uint8Array(Math.ceil(values.length / 8));
  valid.forEach((ok, i) => ok && (nullBitmap[i >> 3] |= 1 << (i & 7)));
  const nullCount = valid.filter((ok) => !ok).length;
  return arrow.makeVector(arrow.makeData({ type, length: values.length, nullCount, nullBitmap, child: items.data[0] }));
}

/**
 * Vectors (fixed-size lists of 32- or 64-bit floats, no null item): written straight into one
 * typed array. apache-arrow's builder takes each item through a child builder and its validity
 * bitmap (100 rows of 128 floats: 0.67–0.94 ms with it, 0.53–0.54 ms without). Null if an item is null.
 */
function floatLists(values: unknown[][], type: A.FixedSizeList): A.Vector | null {
  const item = type.children[0].type;
  if (!arrow.DataType.isFloat(item) || (item as A.Float).precision === arrow.Precision.HALF) return null;
  const size = type.listSize;
  const flat = (item as A.Float).precision === arrow.Precision.SINGLE ? new Float32Array(values.length * size) : new Float64Array(values.length * size);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    for (let j = 0; j < size; j++) {
      const x = v[j];
      if (typeof x !== "number") return null;
      flat[i * size + j] = x;
    }
  }
  const child = arrow.makeData({ type: item as A.Float, length: flat.length, nullCount: 0, data: flat });
  return arrow.makeVector(arrow.makeData({ type, length: values.length, nullCount: 0, child }));
}

/** The schema JSON rows imply (docs/api.md, "JSON rows"): the first non-null value of each column decides. */
function inferSchema(rows: Record<string, unknown>[]): A.Schema {
  const names: string[] = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!names.includes(k)) names.push(k);
  return new arrow.Schema(names.map((n) => new arrow.Field(n, infer(rows.map((r) => r[n]), `column ${q(n)}`), true)));
}

function infer(values: unknown[], what: string): A.DataType {
  const present = values.filter((v) => v !== null && v !== undefined);
  const v = present[0];
  if (v === undefined) throw invalid(`rows: cannot infer the type of ${what} (it holds only nulls); give a schema`);
  const same = (kind: string) => present.every((x) => typeof x === kind);
  if (typeof v === "boolean" && same("boolean")) return new arrow.Bool();
  if (typeof v === "number" && same("number")) return present.every((x) => Number.isSafeInteger(x)) ? new arrow.Int64() : new arrow.Float64();
  if (typeof v === "string" && same("string")) return new arrow.Utf8();
  if (Array.isArray(v) && present.every(Array.isArray)) {
    const items = (present as unknown[][]).flat();
    const lengths = new Set((present as unknown[][]).map((a) => a.length));
    // Equal-length arrays of numbers are vectors: fixed-size lists of float32, which vector indexes and search need.
    if (lengths.size === 1 && items.length > 0 && items.every((x) => typeof x === "number")) {
      return new arrow.FixedSizeList(present[0].length, new arrow.Field("item", new arrow.Float32(), true));
    }
    return new arrow.List(new arrow.Field("item", infer(items, `the items of ${what}`), true));
  }
  if (typeof v === "object" && present.every((x) => typeof x === "object" && !Array.isArray(x))) {
    const objs = present as Record<string, unknown>[];
    const keys: string[] = [];
    for (const o of objs) for (const k of Object.keys(o)) if (!keys.includes(k)) keys.push(k);
    return new arrow.Struct(keys.map((k) => new arrow.Field(k, infer(objs.map((o) => o[k]), `${what}.${k}`), true)));
  }
  throw invalid(`rows: ${what} mixes value kinds (${[...new Set(present.map((x) => (Array.isArray(x) ? "array" : typeof x)))].join(", ")}); give a schema`);
}

/** The table for a create from JSON rows: the schema given with the rows, or the one they imply. */
function createTableFromRows(body: JsonRows, table: string, limits: DecodeLimits): A.Table {
  const schema = body.schema ? fromJsonSchema(body.schema) : inferSchema(body.rows);
  return rowsToTable(body.rows, schema, table, limits);
}

/** A body of JSON rows as received: its bytes, and whether they are NDJSON lines. */
export interface JsonRowsBody {
  bytes: Uint8Array;
  ndjson: boolean;
}

/**
 * What JSON rows are read into: a table's `schema`, less its `optional` columns (SQL virtual ones)
 * that no row names; or, with none, the schema the body gives or the rows imply (a new table).
 */
export interface RowsTarget {
  schema: A.Schema | null;
  optional: string[];
  table: string;
  limits: DecodeLimits;
  maxJsonDepth: number;
}

/** A body of JSON rows as an Arrow table: O(bytes), so the worker pool runs it for all but small bodies (workers/pool.ts). */
export function jsonRowsTable(body: JsonRowsBody, to: RowsTarget): A.Table {
  checkJsonDepth(body.bytes, to.maxJsonDepth, "rows");
  const parsed = parseJsonRows(Buffer.from(body.bytes.buffer, body.bytes.byteOffset, body.bytes.byteLength).toString("utf8"), body.ndjson);
  if (!to.schema) return createTableFromRows(parsed, to.table, to.limits);
  const written = (f: A.Field) => !to.optional.includes(f.name) || parsed.rows.some((r) => f.name in r);
  return rowsToTable(parsed.rows, new arrow.Schema(to.schema.fields.filter(written)), to.table, to.limits);
}
