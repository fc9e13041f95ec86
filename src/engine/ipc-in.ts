// Arrow IPC request bodies: decoded with LanceDB's arrow copy and checked against the table's
// schema before anything is written, because LanceDB silently casts wrong types and even writes
// nulls into non-nullable columns.
import { createRequire } from "node:module";
import type * as A from "apache-arrow";
import { ApiError, invalid } from "../errors.js";
import { arrow } from "./arrow.js";
import { plainDictionaries } from "./dictionaries.js";
import { decompressIpc, isCompressedBatchError } from "./ipc-codecs.js";
import { ipcMessages } from "./ipc-messages.js";
import { toJsonType } from "./json-arrow.js";
import type { DecodeLimits } from "./rows-in.js";

/**
 * THE decode of a request body, run inline for small plain bodies and in a worker for the others
 * (workers/pool.ts): the body as a storable table (dictionary columns expanded), and whether that
 * table differs from the bytes sent. 400 when the body is missing, not an Arrow IPC stream (or
 * file), unstorable, decodes to more than `maxDecodedBody` bytes (compressed buffers and
 * dictionaries expanded; checked before either is), or holds a value of more than `maxValueBytes`.
 */
export function normaliseIpc(raw: Uint8Array | undefined, limits: DecodeLimits): { table: A.Table; stream: Uint8Array | null } {
  const maxDecoded = limits.maxDecodedBody;
  if (!raw || raw.length === 0) throw invalid("body: an Arrow IPC stream is required");
  let t: A.Table;
  let plain: Uint8Array;
  try {
    ({ t, plain } = readIpc(raw, maxDecoded));
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw invalid(`body: not a valid Arrow IPC stream (${(e as Error).message})`);
  }
  // A byte soup that happens to parse yields no schema at all.
  if (t.schema.fields.length === 0) throw invalid("body: not a valid Arrow IPC stream (no schema with columns)");
  storable(t.schema);
  const table = plainDictionaries(t, plain.length, maxDecoded);
  checkValueSizes(table, limits.maxValueBytes);
  return { table, stream: table === t ? plain : null };
}

/**
 * The bytes values `a` to `b` (excluded) of `d` hold: a string's or binary's bytes, a list's
 * items', a struct's fields', a fixed-width value its width. Read from the offsets, without a
 * walk or an allocation per value: a list's offsets index its child's values.
 */
function rangeBytes(d: A.Data): (a: number, b: number) => number {
  const D = arrow.DataType;
  const t = d.type;
  const o = d.valueOffsets as ArrayLike<number | bigint> | undefined;
  const at = (i: number) => Number(o![d.offset + i]);
  if (D.isUtf8(t) || D.isLargeUtf8(t) || D.isBinary(t) || D.isLargeBinary(t)) return (a, b) => at(b) - at(a);
  if (D.isList(t) || D.isMap(t)) {
    const items = rangeBytes(d.children[0]);
    return (a, b) => items(at(a), at(b));
  }
  if (D.isFixedSizeList(t)) {
    const items = rangeBytes(d.children[0]);
    const size = (t as A.FixedSizeList).listSize;
    return (a, b) => items((d.offset + a) * size, (d.offset + b) * size);
  }
  if (D.isStruct(t)) {
    const fields = d.children.map(rangeBytes);
    return (a, b) => fields.reduce((n, f) => n + f(a, b), 0);
  }
  const width = widthOf(t);
  return (a, b) => (b - a) * width;
}

/** Bytes one value of a type without children or offsets holds (8 where the type names no width). */
export const widthOf = (t: A.DataType): number => (arrow.DataType.isBool(t) ? 1 : arrow.DataType.isFixedSizeBinary(t) ? (t as A.FixedSizeBinary).byteWidth : Math.ceil(((t as { bitWidth?: number }).bitWidth ?? 64) / 8));

/** Whether values of `t` differ in size (it holds a string, a binary, a list or a map). */
function varies(t: A.DataType): boolean {
  const D = arrow.DataType;
  return D.isUtf8(t) || D.isLargeUtf8(t) || D.isBinary(t) || D.isLargeBinary(t) || D.isList(t) || D.isMap(t) || (t.children ?? []).some((c) => varies(c.type));
}

/** 400 naming the column and row of the first value holding more than `maxValue` bytes (a string, a binary, a list's items, a struct's fields). */
function checkValueSizes(t: A.Table, maxValue: number): void {
  t.schema.fields.forEach((f, c) => {
    let row = 0;
    // Values of a type without offsets all hold the same: the first row stands for the rest.
    const rows = (d: A.Data) => (varies(f.type) ? d.length : Math.min(d.length, 1));
    for (const d of t.getChildAt(c)!.data) {
      const bytes = rangeBytes(d);
      for (let i = 0; i < rows(d); i++) {
        const n = bytes(i, i + 1);
        if (n > maxValue) throw invalid(`column ${JSON.stringify(f.name)}: row ${row + i} holds a value of ${n} bytes, past the limit of ${maxValue} (--max-value-bytes)`);
      }
      row += d.length;
    }
  });
}

// The CommonJS copy's message decoder, as ipc-out.ts explains.
type MessageModule = typeof import("apache-arrow/ipc/metadata/message");
const { Message } = createRequire(import.meta.url)("apache-arrow/ipc/metadata/message") as MessageModule;
const DICTIONARY_BATCH = 2;

/**
 * Whether the body is a plain Arrow IPC stream: no compressed buffer and no dictionary, so it
 * decodes to no more than its own size (read from the messages' metadata alone). Anything else,
 * malformed bodies included, is decoded in the worker pool whatever its size.
 */
export function isPlainIpc(raw: Uint8Array): boolean {
  try {
    let message!: InstanceType<MessageModule["Message"]>;
    const bodyLength = (m: Uint8Array) => Number((message = Message.decode(m)).bodyLength);
    for (const _ of ipcMessages(raw, bodyLength)) {
      if (message.headerType === DICTIONARY_BATCH) return false;
      // apache-arrow 18 throws reading a compressed batch's header.
      const header = message.header();
      if (message.isSchema() && (header as A.Schema).dictionaries.size > 0) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** 400 for what Lance cannot store of columns `s`. */
export function storable(s: A.Schema): void {
  s.fields.forEach((f) => checkStorable(f, f.name));
}

/** The body's table, and its bytes as an uncompressed stream (the body itself when it was one). */
function readIpc(raw: Uint8Array, maxDecoded: number): { t: A.Table; plain: Uint8Array } {
  try {
    return { t: arrow.tableFromIPC(raw), plain: raw };
  } catch (e) {
    if (!isCompressedBatchError(e)) throw e;
    const plain = decompressIpc(raw, maxDecoded);
    return { t: arrow.tableFromIPC(plain), plain };
  }
}

// Lance writes a timestamp's zone into a ':'-separated type string, so a zone such as "+01:00"
// makes its writer panic; refuse it up front.
function checkStorable(f: A.Field, path: string): void {
  const tz = arrow.DataType.isTimestamp(f.type) ? (f.type as A.Timestamp).timezone : null;
  if (tz && tz.includes(":")) {
    throw invalid(`column ${JSON.stringify(path)}: time zone ${JSON.stringify(tz)} cannot be stored by Lance; use a named zone such as "UTC" or "Europe/Paris"`);
  }
  for (const c of f.type.children ?? []) checkStorable(c, `${path}.${c.name}`);
}

/** Type identity ignoring child field names and nullability (but keeping struct member names). */
function shape(t: A.DataType): string {
  const j = toJsonType(t);
  const kids = arrow.DataType.isDictionary(t) ? [] : (t.children ?? []);
  const isStruct = arrow.DataType.isStruct(t);
  const inner = kids.map((c) => (isStruct ? `${c.name}:` : "") + shape(c.type)).join(",");
  return `${j.type}${j.length !== undefined ? `[${j.length}]` : ""}${inner ? `<${inner}>` : ""}`;
}

/**
 * 400 naming the column when columns `data` holding `nulls` nulls each (in order) do not fit
 * `schema` (of table `table`); nothing is written before this.
 */
export function checkFits(data: A.Schema, nulls: number[], schema: A.Schema, table: string): void {
  const q = JSON.stringify;
  const want = new Map(schema.fields.map((f) => [f.name, f]));
  for (const [i, f] of data.fields.entries()) {
    const target = want.get(f.name);
    if (!target) throw invalid(`column ${q(f.name)} is not in table ${q(table)}`);
    if (shape(f.type) !== shape(target.type)) {
      throw invalid(`column ${q(f.name)}: table ${q(table)} has type ${shape(target.type)}, the data has ${shape(f.type)}`);
    }
    if (!target.nullable && nulls[i] > 0) {
      throw invalid(`column ${q(f.name)} is not nullable in table ${q(table)} but the data holds nulls`);
    }
  }
  for (const target of schema.fields) {
    if (!target.nullable && !data.fields.some((f) => f.name === target.name)) {
      throw invalid(`column ${q(target.name)} is missing from the data and is not nullable in table ${q(table)}`);
    }
  }
}
