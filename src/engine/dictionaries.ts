// Dictionary-encoded columns of a request body, as their value type (LanceDB's merge_insert
// refuses dictionaries, and Lance stores a string column as strings). Expanding a dictionary is
// where a small body becomes a large table: an 8 MiB value referenced 4,096 times is 32 GiB. So
// the expanded size is computed from the dictionary's offsets and the indices first, without
// allocating, and held to the decoded-body limit; then each column is built by copying bytes
// from the dictionary's buffers: no JavaScript value per row.
import type * as A from "apache-arrow";
import { invalid } from "../errors.js";
import { arrow } from "./arrow.js";

const T = arrow.Type;

/** A dictionary's entries across its chunks (a delta dictionary adds a chunk). */
interface Entries {
  count: number;
  /** Byte range and chunk of entry k (variable width), or its chunk and index in it. */
  chunk: Uint32Array;
  start: Float64Array;
  end: Float64Array;
  valid: Uint8Array;
  bytes: Uint8Array[];
  /** Bytes per entry of a fixed-width type; 0 for variable width; -1 for booleans (bits). */
  width: number;
}

const bit = (bitmap: Uint8Array | undefined, i: number) => !bitmap || bitmap.length === 0 || (bitmap[i >> 3] & (1 << (i & 7))) !== 0;
const isVariable = (t: A.DataType) => [T.Utf8, T.Binary, T.LargeUtf8, T.LargeBinary].includes(t.typeId);
const isLarge = (t: A.DataType) => t.typeId === T.LargeUtf8 || t.typeId === T.LargeBinary;
const FIXED = [T.Int, T.Float, T.Date, T.Time, T.Timestamp, T.Decimal, T.Interval, T.Duration, T.FixedSizeBinary];

function entriesOf(dictionary: A.Vector, column: string): Entries {
  const type = dictionary.type as A.DataType;
  const width = type.typeId === T.Bool ? -1 : isVariable(type) ? 0 : FIXED.includes(type.typeId) ? -2 : null;
  if (width === null) throw invalid(`column ${JSON.stringify(column)}: dictionary-encoded ${type} values are not supported; send the column without a dictionary`);
  const count = dictionary.length;
  const e: Entries = { count, chunk: new Uint32Array(count), start: new Float64Array(count), end: new Float64Array(count), valid: new Uint8Array(count), bytes: [], width };
  let k = 0;
  dictionary.data.forEach((d, c) => {
    const values = d.values as ArrayBufferView & { BYTES_PER_ELEMENT: number };
    e.bytes.push(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
    if (e.width === -2) e.width = values.BYTES_PER_ELEMENT * d.stride;
    const offsets = d.valueOffsets as Int32Array | BigInt64Array | undefined;
    for (let j = 0; j < d.length; j++, k++) {
      e.chunk[k] = c;
      e.valid[k] = bit(d.nullBitmap, d.offset + j) ? 1 : 0;
      if (e.width === 0) {
        e.start[k] = Number(offsets![j]);
        e.end[k] = Number(offsets![j + 1]);
      } else e.start[k] = e.width === -1 ? d.offset + j : j * e.width;
    }
  });
  return e;
}

/** The dictionary index of row i of `d`, or -1 for a null row; 400 for an index outside the dictionary. */
function indexAt(d: A.Data, i: number, e: Entries, column: string): number {
  if (!bit(d.nullBitmap, d.offset + i)) return -1;
  const k = Number((d.values as ArrayLike<number | bigint>)[i]);
  if (!(k >= 0 && k < e.count)) throw invalid(`column ${JSON.stringify(column)}: dictionary index ${k} is outside its dictionary of ${e.count} values`);
  return e.valid[k] ? k : -1;
}

/** Bytes the expanded chunk `d` takes. */
function expandedBytes(d: A.Data, e: Entries, large: boolean, column: string): number {
  const bitmap = Math.ceil(d.length / 8);
  if (e.width === -1) return bitmap * 2;
  if (e.width > 0) return bitmap + d.length * e.width;
  let n = bitmap + (d.length + 1) * (large ? 8 : 4);
  for (let i = 0; i < d.length; i++) {
    const k = indexAt(d, i, e, column);
    if (k >= 0) n += e.end[k] - e.start[k];
  }
  return n;
}

/** The chunk `d` of a dictionary column as a chunk of its value type, copied from `e`. */
function expand(d: A.Data, e: Entries, type: A.DataType, column: string): A.Data {
  const n = d.length;
  const keys = new Int32Array(n);
  let nulls = 0;
  for (let i = 0; i < n; i++) if ((keys[i] = indexAt(d, i, e, column)) < 0) nulls++;
  let nullBitmap: Uint8Array | undefined;
  if (nulls > 0) {
    nullBitmap = new Uint8Array(Math.ceil(n / 8));
    for (let i = 0; i < n; i++) if (keys[i] >= 0) nullBitmap[i >> 3] |= 1 << (i & 7);
  }
  const base = { type, length: n, nullCount: nulls, nullBitmap };
  if (e.width === -1) {
    const data = new Uint8Array(Math.ceil(n / 8));
    for (let i = 0; i < n; i++) {
      const k = keys[i];
      if (k >= 0 && bit(e.bytes[e.chunk[k]], e.start[k])) data[i >> 3] |= 1 << (i & 7);
    }
    return arrow.makeData({ ...base, data } as never);
  }
  if (e.width > 0) {
    const w = e.width;
    const out = new Uint8Array(n * w);
    for (let i = 0; i < n; i++) {
      const k = keys[i];
      if (k < 0) continue;
      const src = e.bytes[e.chunk[k]];
      const s = e.start[k];
      for (let b = 0; b < w; b++) out[i * w + b] = src[s + b];
    }
    const ArrayType = (type as unknown as { ArrayType: { new (b: ArrayBuffer, o: number, n: number): ArrayBufferView; BYTES_PER_ELEMENT: number } }).ArrayType;
    return arrow.makeData({ ...base, data: new ArrayType(out.buffer, 0, out.byteLength / ArrayType.BYTES_PER_ELEMENT) } as never);
  }
  const large = isLarge(type);
  const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  let size = 0;
  for (let i = 0; i < n; i++) {
    const k = keys[i];
    if (k >= 0) size += e.end[k] - e.start[k];
    offsets[i + 1] = large ? BigInt(size) : size;
  }
  const data = Buffer.allocUnsafe(size);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const k = keys[i];
    if (k < 0) continue;
    const src = e.bytes[e.chunk[k]];
    const [s, end] = [e.start[k], e.end[k]];
    // Short values are copied byte by byte: cheaper than a native copy call each.
    if (end - s <= 16) for (let b = s; b < end; b++) data[at++] = src[b];
    else {
      data.set(src.subarray(s, end), at);
      at += end - s;
    }
  }
  return arrow.makeData({ ...base, valueOffsets: offsets, data } as never);
}

/**
 * `t` with its dictionary-encoded columns as their value type; 400 when the expanded columns
 * together with `decoded` (the rest of the body's decoded bytes) pass `maxDecoded`.
 */
export function plainDictionaries(t: A.Table, decoded: number, maxDecoded: number): A.Table {
  const at = t.schema.fields.flatMap((f, i) => (arrow.DataType.isDictionary(f.type) ? [i] : []));
  if (at.length === 0) return t;
  const entries = new Map<number, Entries[]>();
  // Batches share a dictionary until a replacement or delta arrives.
  const seen = new Map<A.Vector, Entries>();
  let total = decoded;
  for (const i of at) {
    const f = t.schema.fields[i];
    const valueType = (f.type as A.Dictionary).dictionary;
    const perBatch = t.batches.map((b) => {
      const dictionary = b.data.children[i].dictionary!;
      let e = seen.get(dictionary);
      if (!e) seen.set(dictionary, (e = entriesOf(dictionary, f.name)));
      return e;
    });
    entries.set(i, perBatch);
    t.batches.forEach((b, j) => (total += expandedBytes(b.data.children[i], perBatch[j], isLarge(valueType), f.name)));
    if (total > maxDecoded) {
      throw invalid(`column ${JSON.stringify(f.name)}: its dictionary expands the body to ${total} bytes or more, past the limit of ${maxDecoded} (--max-decoded-body)`);
    }
  }
  const fields = t.schema.fields.map((f) => (arrow.DataType.isDictionary(f.type) ? new arrow.Field(f.name, (f.type as A.Dictionary).dictionary, f.nullable, f.metadata) : f));
  const schema = new arrow.Schema(fields, t.schema.metadata);
  const batches = t.batches.map((b, j) => {
    const children = b.data.children.map((c, i) => (entries.has(i) ? expand(c, entries.get(i)![j], fields[i].type, fields[i].name) : c));
    return new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(fields), length: b.numRows, nullCount: 0, children }));
  });
  return new arrow.Table(schema, batches);
}
