// Rows of the serving index: which of a table's columns its records cache and where, writing rows
// from the engine's Arrow batches into slots, and an answer's Arrow IPC file gathered from slots
// (in a worker, without an engine call): the same schema the engine answers, taken from the
// engine's own output schema for the same projection.
import type { DataType, Field, RecordBatch, Schema } from "apache-arrow";
import { arrow } from "../engine/arrow.js";
import { FileBlock, Footer, MAGIC, TAIL_MAGIC } from "../engine/ipc-out.js";
import { batchMessage, footerTemplate, newWriter, node, put, schemaMessage, widthOf, type Writer } from "../engine/ipc-split.js";
import { allocateValue, assignLevel, link, newSlot, recordAt, rowIdOf, type Graph } from "./graph.js";

const T = arrow.Type;

/**
 * How a record holds one column: `fixed` values of `width` bytes, `bool` as a byte, `var` (and
 * `var64`, written with 64-bit offsets) as an address and a length into the memory, `list` as
 * `size` fixed values inline. `at` and `nullAt` (its validity byte) count from the record's
 * column area.
 */
export interface CachedColumn {
  name: string;
  kind: "fixed" | "bool" | "var" | "var64" | "list";
  width: number;
  size: number;
  at: number;
  nullAt: number;
}

const FIXED = new Set<number>([T.Int, T.Float, T.Date, T.Time, T.Timestamp, T.Duration, T.Decimal, T.FixedSizeBinary, T.Interval]);

function kindOf(type: DataType): Pick<CachedColumn, "kind" | "width" | "size"> | null {
  if (FIXED.has(type.typeId)) return { kind: "fixed", width: widthOf(type), size: 1 };
  if (type.typeId === T.Bool) return { kind: "bool", width: 1, size: 1 };
  if (type.typeId === T.Utf8 || type.typeId === T.Binary) return { kind: "var", width: 8, size: 1 };
  if (type.typeId === T.LargeUtf8 || type.typeId === T.LargeBinary) return { kind: "var64", width: 8, size: 1 };
  if (type.typeId === T.FixedSizeList) {
    // A record has no room for nulls inside a list: a list whose values may be null is taken from the engine.
    const { type: child, nullable } = (type as import("apache-arrow").FixedSizeList).children[0];
    if (FIXED.has(child.typeId) && !nullable) return { kind: "list", width: widthOf(child), size: (type as import("apache-arrow").FixedSizeList).listSize };
  }
  return null;
}

/**
 * Record fields for the columns of `fields` a record can cache (every column but the indexed
 * vector, which the record holds anyway, of a type above), and the bytes they take a row.
 */
export function columnLayout(fields: Field[], vectorColumn: string): { columns: CachedColumn[]; bytes: number } {
  const columns: CachedColumn[] = [];
  let at = 0;
  for (const f of fields) {
    if (f.name === vectorColumn) continue;
    const k = kindOf(f.type);
    if (!k) continue;
    const bytes = k.width * k.size;
    at = Math.ceil(at / Math.min(8, k.width)) * Math.min(8, k.width);
    columns.push({ name: f.name, ...k, at, nullAt: 0 });
    at += bytes;
  }
  for (const c of columns) c.nullAt = at++;
  return { columns, bytes: at };
}

/** Bytes one row of an Arrow column's data holds at `i` (its own offset applied). */
const bytesOf = (values: ArrayBufferView) => new Uint8Array(values.buffer, values.byteOffset, values.byteLength);

/**
 * What a batch of rows read after a commit is measured against: the slots of rows gone at the
 * version (a row equal to one of them is that row under a new row id, as compaction moves rows of
 * tables without stable row ids), and rows still there that may have changed (by row id).
 */
export interface Known {
  /** Removed slots by their vector's hash; a slot matched to a row leaves its list. */
  moved: Map<number, number[]>;
  changed: Map<bigint, number>;
}

export function knownOf(g: Graph, removed: ArrayLike<number>, changedIds: ArrayLike<bigint>, changedSlots: ArrayLike<number>): Known {
  const moved = new Map<number, number[]>();
  for (let i = 0; i < removed.length; i++) {
    const h = vectorHash(g.u32, recordAt(g, removed[i]) >> 2, g.dim);
    moved.set(h, [...(moved.get(h) ?? []), removed[i]]);
  }
  const changed = new Map<bigint, number>();
  for (let i = 0; i < changedIds.length; i++) changed.set(changedIds[i], changedSlots[i]);
  return { moved, changed };
}

/**
 * What applying rows did: slots given a new row id (to write while no search runs), slots
 * replaced, rows written, and the row ids of rows without a vector (known, never searched).
 */
export interface Applied {
  remapSlots: number[];
  remapIds: bigint[];
  replaced: number[];
  written: number;
  vectorless: bigint[];
}

/** FNV-1a over a vector's float bits: finds the slots a moved row may be. */
function vectorHash(bits: Uint32Array, from: number, dim: number): number {
  let h = 0x811c9dc5;
  for (let d = 0; d < dim; d++) h = Math.imul(h ^ bits[from + d], 16777619);
  return h >>> 0;
}

/** Whether slot `slot` holds the same vector and cached values as row `i` of the batch. */
function sameRow(g: Graph, columns: CachedColumn[], slot: number, vecBits: Uint32Array, from: number, datas: import("apache-arrow").Data[], i: number): boolean {
  const at = recordAt(g, slot);
  for (let d = 0; d < g.dim; d++) if (g.u32[(at >> 2) + d] !== vecBits[from + d]) return false;
  const base = at + g.columnsAt;
  return columns.every((c, j) => {
    const d = datas[j];
    const valid = !(d.nullCount > 0 && !d.getValid(i));
    if (valid !== (g.u8[base + c.nullAt] === 1)) return false;
    if (!valid) return true;
    const row = d.offset + i;
    switch (c.kind) {
      case "fixed":
        return equalBytes(g.u8, base + c.at, bytesOf(d.values), row * c.width, c.width);
      case "bool":
        return g.u8[base + c.at] === ((d.values[row >> 3] >> (row & 7)) & 1);
      case "list": {
        const ch = d.children[0];
        return equalBytes(g.u8, base + c.at, bytesOf(ch.values), (ch.offset + row * c.size) * c.width, c.size * c.width);
      }
      default: {
        const offs = d.valueOffsets as Int32Array | BigInt64Array;
        const from = Number(offs[row]);
        const len = Number(offs[row + 1]) - from;
        return g.u32[((base + c.at) >> 2) + 1] === len && equalBytes(g.u8, g.u32[(base + c.at) >> 2], bytesOf(d.values), from, len);
      }
    }
  });
}

function equalBytes(a: Uint8Array, at: number, b: Uint8Array, from: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (a[at + i] !== b[from + i]) return false;
  return true;
}

/**
 * Apply a batch of rows (with `_rowid`, the vector column and the cached columns) at `version`: a
 * row equal to a `known.changed` slot of its row id is left as it is; one equal to a removed slot
 * is that slot under a new row id (returned, not written: searches may be reading it); any other
 * is written to a new slot born at `version` and (with `linkNow`) linked into the graph, and the
 * slot it replaces, if any, returned to be retired. Rows without a vector are not indexed (no
 * distance to answer).
 */
export function applyBatch(g: Graph, columns: CachedColumn[], batch: RecordBatch, vectorColumn: string, version: number, known: Known, out: Applied, linkNow: boolean): void {
  const rowIds = batch.getChild("_rowid")!.data[0];
  const vec = batch.getChild(vectorColumn)!.data[0];
  const child = vec.children[0];
  const values = child.values as Float32Array;
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const dim = (vec.type as import("apache-arrow").FixedSizeList).listSize;
  const datas = columns.map((c) => batch.getChild(c.name)!.data[0]);
  const moved = known.moved;
  for (let i = 0; i < batch.numRows; i++) {
    const from = child.offset + (vec.offset + i) * dim;
    const rowId = (rowIds.values as BigUint64Array)[rowIds.offset + i];
    const old = known.changed.get(rowId);
    if (!vec.getValid(i)) {
      if (old !== undefined && old >= 0) out.replaced.push(old);
      out.vectorless.push(rowId);
      continue;
    }
    if (old !== undefined && old < 0) {
      // It had no vector before.
    } else if (old !== undefined) {
      if (sameRow(g, columns, old, bits, from, datas, i)) continue;
      out.replaced.push(old);
    } else if (moved.size > 0) {
      const same = moved.get(vectorHash(bits, from, dim));
      const at = same?.findIndex((slot) => sameRow(g, columns, slot, bits, from, datas, i)) ?? -1;
      if (at >= 0) {
        out.remapSlots.push(same!.splice(at, 1)[0]);
        out.remapIds.push(rowId);
        continue;
      }
    }
    const slot = newSlot(g, values, from, rowId, version);
    const base = recordAt(g, slot) + g.columnsAt;
    columns.forEach((c, j) => writeValue(g, c, datas[j], i, base));
    assignLevel(g, slot);
    // A build links its rows afterwards, in several threads at once (src/serving/pool.ts).
    if (linkNow) link(g, slot, 0);
    out.written++;
  }
}

function writeValue(g: Graph, c: CachedColumn, d: import("apache-arrow").Data, i: number, base: number): void {
  if (d.nullCount > 0 && !d.getValid(i)) return;
  g.u8[base + c.nullAt] = 1;
  const row = d.offset + i;
  switch (c.kind) {
    case "fixed":
      g.u8.set(bytesOf(d.values).subarray(row * c.width, (row + 1) * c.width), base + c.at);
      return;
    case "bool":
      g.u8[base + c.at] = (d.values[row >> 3] >> (row & 7)) & 1;
      return;
    case "list": {
      const ch = d.children[0];
      const n = c.size * c.width;
      g.u8.set(bytesOf(ch.values).subarray((ch.offset + row * c.size) * c.width, (ch.offset + row * c.size) * c.width + n), base + c.at);
      return;
    }
    default: {
      const offs = d.valueOffsets as Int32Array | BigInt64Array;
      const from = Number(offs[row]);
      const len = Number(offs[row + 1]) - from;
      const addr = len > 0 ? allocateValue(g, len) : 0;
      if (len > 0) g.u8.set(bytesOf(d.values).subarray(from, from + len), addr);
      g.u32[(base + c.at) >> 2] = addr;
      g.u32[((base + c.at) >> 2) + 1] = len;
    }
  }
}

// ---- answers ---------------------------------------------------------------------------------

/** Where one field of an answer comes from. */
export type Source = { from: "distance" } | { from: "rowid" } | { from: "query" } | { from: "vector" } | { from: "column"; column: number };

/** An answer's shape: the engine's output schema for the projection (an empty IPC file) and each field's source. */
export interface AnswerPlan {
  key: string;
  schema: Uint8Array;
  sources: Source[];
}

/** The rows of one answer: slots nearest first, their distances, and for several query vectors each row's query. */
export interface Hits {
  slots: Int32Array;
  distances: Float32Array;
  queries: Int32Array | null;
}

/** A plan decoded once per worker: the file's head (magic and schema message) and its footer. */
interface Prepared {
  head: Uint8Array;
  schema: Schema;
  footer: ((b: InstanceType<typeof FileBlock>) => Uint8Array) | null;
}

const prepared = new Map<string, Prepared>();

function prepare(plan: AnswerPlan): Prepared {
  let p = prepared.get(plan.key);
  if (!p) {
    const schema = arrow.tableFromIPC(plan.schema).schema;
    const message = schemaMessage(schema);
    const head = new Uint8Array(MAGIC.length + message.byteLength);
    head.set(MAGIC);
    head.set(message, MAGIC.length);
    p = { head, schema, footer: footerTemplate(schema, arrow.MetadataVersion.V5) };
    if (prepared.size > 256) prepared.clear();
    prepared.set(plan.key, p);
  }
  return p;
}

/** A validity bitmap for `n` rows from per-row validity bytes, or an empty buffer when none is null. */
function validity(w: Writer, valid: Uint8Array, n: number): void {
  let nulls = 0;
  for (let i = 0; i < n; i++) if (!valid[i]) nulls++;
  node(w, n, nulls);
  if (nulls === 0) return put(w, new Uint8Array(0));
  const bits = new Uint8Array(Math.ceil(n / 8));
  for (let i = 0; i < n; i++) if (valid[i]) bits[i >> 3] |= 1 << (i & 7);
  put(w, bits);
}

function gatherColumn(g: Graph, c: CachedColumn, slots: Int32Array, w: Writer): void {
  const n = slots.length;
  const bases = Array.from(slots, (s) => recordAt(g, s) + g.columnsAt);
  validity(w, Uint8Array.from(bases, (b) => g.u8[b + c.nullAt]), n);
  switch (c.kind) {
    case "fixed": {
      const out = new Uint8Array(n * c.width);
      bases.forEach((b, i) => out.set(g.u8.subarray(b + c.at, b + c.at + c.width), i * c.width));
      return put(w, out);
    }
    case "bool": {
      const out = new Uint8Array(Math.ceil(n / 8));
      bases.forEach((b, i) => g.u8[b + c.at] && (out[i >> 3] |= 1 << (i & 7)));
      return put(w, out);
    }
    case "list": {
      const bytes = c.size * c.width;
      const out = new Uint8Array(n * bytes);
      bases.forEach((b, i) => out.set(g.u8.subarray(b + c.at, b + c.at + bytes), i * bytes));
      node(w, n * c.size, 0);
      put(w, new Uint8Array(0));
      return put(w, out);
    }
    default: {
      const large = c.kind === "var64";
      const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
      let total = 0;
      const spans = bases.map((b) => [g.u32[(b + c.at) >> 2], g.u32[((b + c.at) >> 2) + 1]]);
      spans.forEach(([, len], i) => {
        total += len;
        offsets[i + 1] = large ? BigInt(total) : (total as never);
      });
      const data = new Uint8Array(total);
      let at = 0;
      for (const [addr, len] of spans) {
        data.set(g.u8.subarray(addr, addr + len), at);
        at += len;
      }
      put(w, bytesOf(offsets));
      return put(w, data);
    }
  }
}

/** A field without nulls of `n` values of `bytes` (its node, an empty validity buffer, the data). */
function plainField(w: Writer, n: number, bytes: Uint8Array): void {
  node(w, n, 0);
  put(w, new Uint8Array(0));
  put(w, bytes);
}

/** One answer as one Arrow IPC file, with the plan's schema: rows gathered from the index's records. */
export function encodeAnswer(g: Graph, columns: CachedColumn[], plan: AnswerPlan, hits: Hits): Uint8Array {
  const p = prepare(plan);
  const n = hits.slots.length;
  const parts: Uint8Array[] = [p.head];
  let blocks: InstanceType<typeof FileBlock>[] = [];
  if (n > 0) {
    const w = newWriter();
    for (const s of plan.sources) {
      if (s.from === "distance") plainField(w, n, bytesOf(hits.distances));
      else if (s.from === "query") plainField(w, n, bytesOf(hits.queries ?? new Int32Array(n)));
      else if (s.from === "rowid") plainField(w, n, bytesOf(BigUint64Array.from(hits.slots, (slot) => rowIdOf(g, slot))));
      else if (s.from === "vector") {
        const out = new Float32Array(n * g.dim);
        hits.slots.forEach((slot, i) => out.set(g.f32.subarray(recordAt(g, slot) >> 2, (recordAt(g, slot) >> 2) + g.dim), i * g.dim));
        node(w, n, 0);
        put(w, new Uint8Array(0));
        plainField(w, n * g.dim, bytesOf(out));
      } else gatherColumn(g, columns[s.column], hits.slots, w);
    }
    const message = batchMessage(n, w);
    blocks = [new FileBlock(message.byteLength, w.bytes, p.head.byteLength)];
    parts.push(message, ...w.parts);
  }
  const footer = blocks.length === 1 && p.footer ? p.footer(blocks[0]) : Footer.encode(new Footer(p.schema, arrow.MetadataVersion.V5, blocks, []));
  const tail = new Uint8Array(10);
  new DataView(tail.buffer).setInt32(0, footer.byteLength, true);
  tail.set(TAIL_MAGIC, 4);
  parts.push(footer, tail);
  return Buffer.concat(parts);
}

/** Rows found by a search, answered with columns the index does not cache (src/serving/indexes.ts). */
export interface Found {
  rowIds: BigUint64Array;
  distances: Float32Array;
  queries: Int32Array;
}

/**
 * An answer's IPC file (`schema`) from rows found and their columns taken from the engine, answer
 * row i being row `at[i].i` of `taken[at[i].t]`: each row's values sliced from the engine's own
 * data, one batch a row. Rebuilt from values read out (`get`), lists of strings, of numbers with
 * nulls and of structs came back as ["",""], [0,0,0] and [null,null].
 */
export function takenAnswer(schema: Schema, taken: import("apache-arrow").Table[], at: { t: number; i: number }[], found: Found): Uint8Array {
  const one = (values: Float32Array | BigUint64Array | Int32Array, i: number) => arrow.makeVector(values.subarray(i, i + 1) as Float32Array).data[0];
  const batches = at.map(({ t, i }, row) => {
    const children = schema.fields.map((f) => {
      if (f.name === "_distance") return one(found.distances, row);
      if (f.name === "_rowid") return one(found.rowIds, row);
      if (f.name === "query_index") return one(found.queries, row);
      return taken[t].getChild(f.name)!.slice(i, i + 1).data[0];
    });
    return new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: 1, nullCount: 0, children }));
  });
  return arrow.tableToIPC(new arrow.Table(schema, batches), "file");
}
