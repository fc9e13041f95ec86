// Arrow IPC request bodies: decoded with LanceDB's arrow copy and checked against the table's
// schema before anything is written, because LanceDB silently casts wrong types and even writes
// nulls into non-nullable columns.
import type * as A from "apache-arrow";
import { invalid } from "../errors.js";
import { arrow } from "./arrow.js";
import { decompressIpc, isCompressedBatchError } from "./ipc-codecs.js";
import { toJsonType } from "./json-arrow.js";

/**
 * THE decode of a request body, run inline for small bodies and in a worker for large ones
 * (workers/pool.ts): the body as a storable table (dictionary columns flattened), and whether
 * that table differs from the bytes sent. 400 when the body is missing, not an Arrow IPC stream (or file), or unstorable.
 */
export function normaliseIpc(raw: Uint8Array | undefined): { table: A.Table; rewritten: boolean } {
  if (!raw || raw.length === 0) throw invalid("body: an Arrow IPC stream is required");
  let t: A.Table;
  try {
    t = readIpc(raw);
  } catch (e) {
    throw invalid(`body: not a valid Arrow IPC stream (${(e as Error).message})`);
  }
  // A byte soup that happens to parse yields no schema at all.
  if (t.schema.fields.length === 0) throw invalid("body: not a valid Arrow IPC stream (no schema with columns)");
  const table = storable(t);
  return { table, rewritten: table !== t };
}

/** `t` as Lance can store it (dictionary columns flattened); 400 for what it cannot store. */
export function storable(t: A.Table): A.Table {
  t.schema.fields.forEach((f) => checkStorable(f, f.name));
  return plainColumns(t);
}

function readIpc(raw: Uint8Array): A.Table {
  try {
    return arrow.tableFromIPC(raw);
  } catch (e) {
    if (!isCompressedBatchError(e)) throw e;
    return arrow.tableFromIPC(decompressIpc(raw));
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

// LanceDB's merge_insert rejects dictionary-encoded columns (apache-arrow's default for strings);
// store them as their value type.
function plainColumns(t: A.Table): A.Table {
  if (!t.schema.fields.some((f) => arrow.DataType.isDictionary(f.type))) return t;
  const cols: Record<string, A.Vector> = {};
  for (const f of t.schema.fields) {
    const v = t.getChild(f.name)!;
    cols[f.name] = arrow.DataType.isDictionary(f.type)
      ? arrow.vectorFromArray([...v], (f.type as A.Dictionary).dictionary)
      : v;
  }
  return new arrow.Table(cols);
}

/** Type identity ignoring child field names and nullability (but keeping struct member names). */
function shape(t: A.DataType): string {
  const j = toJsonType(t);
  const kids = arrow.DataType.isDictionary(t) ? [] : (t.children ?? []);
  const isStruct = arrow.DataType.isStruct(t);
  const inner = kids.map((c) => (isStruct ? `${c.name}:` : "") + shape(c.type)).join(",");
  return `${j.type}${j.length !== undefined ? `[${j.length}]` : ""}${inner ? `<${inner}>` : ""}`;
}

/** 400 naming the column when `data` does not fit `schema` (of table `table`); nothing is written before this. */
export function checkFits(data: A.Table, schema: A.Schema, table: string): void {
  const q = JSON.stringify;
  const want = new Map(schema.fields.map((f) => [f.name, f]));
  for (const f of data.schema.fields) {
    const target = want.get(f.name);
    if (!target) throw invalid(`column ${q(f.name)} is not in table ${q(table)}`);
    if (shape(f.type) !== shape(target.type)) {
      throw invalid(`column ${q(f.name)}: table ${q(table)} has type ${shape(target.type)}, the data has ${shape(f.type)}`);
    }
    if (!target.nullable && data.getChild(f.name)!.nullCount > 0) {
      throw invalid(`column ${q(f.name)} is not nullable in table ${q(table)} but the data holds nulls`);
    }
  }
  for (const target of schema.fields) {
    if (!target.nullable && !data.schema.fields.some((f) => f.name === target.name)) {
      throw invalid(`column ${q(target.name)} is missing from the data and is not nullable in table ${q(table)}`);
    }
  }
}
