// Filters the serving index evaluates itself, over the column values its records cache, where its
// answer is certain to be the engine's: an integer column compared with an integer literal that
// its type holds, a string column equal (or not) to a string literal, IN lists of those, IS [NOT]
// NULL, joined by AND and OR in parentheses or none. No NOT: a comparison with a NULL is unknown,
// and an unknown excludes its row under AND and OR alike, so two values decide the same rows as
// the engine's three. Anything else (another type, a function, a cast, a quoted name, NOT, LIKE)
// is null here and the engine evaluates it. A filter on a unique key (`id = 12345`, one per
// search) cost a scan of every fragment in the engine; here it is a lookup in a value index.
// A compiled filter is plain data: the serving pool's threads evaluate it over the shared records
// (src/serving/thread.ts), never the event loop, since its cost grows with the table's rows.
import type { DataType, Field } from "apache-arrow";
import { arrow } from "../engine/arrow.js";
import type { CachedColumn } from "./rows.js";
import { recordAt, refresh, type Graph } from "./graph.js";

type Op = "=" | "!=" | "<" | "<=" | ">" | ">=";
type Literal = bigint | string;
/** A cached column as the evaluator reads it: a string, or an integer of the column's width and sign. */
export interface Operand {
  column: CachedColumn;
  str: boolean;
  signed: boolean;
}
type Node = { all: Node[] } | { any: Node[] } | { on: Operand; test: Test };
type Test = { op: Op; value: Literal } | { in: Literal[] } | { isNull: boolean };

/** Whether the row in a slot passes, from its record alone. */
export type SlotTest = (g: Graph, view: DataView, slot: number) => boolean;

/** A compiled filter: its tree, and for one column equal to one of some values, those (a lookup, not a pass over every slot). */
export interface Compiled {
  tree: Node;
  point: { on: Operand; values: Literal[] } | null;
}

/** A value looked up in a value index: its hash, and its comparison with a slot's value (0: equal). */
export interface Key {
  hash: number;
  /** The hash is the value's alone (integers of up to 32 bits: `mix` is one-to-one there), so an equal hash is an equal value. */
  exact: boolean;
  against: Against;
}

/** Parentheses nested at most this deep; deeper filters are the engine's. */
const MOST_DEPTH = 16;
const KEYWORDS = new Set(["and", "or", "not", "in", "is", "null", "true", "false", "like", "between"]);
const TRAILING = /\s*$/y;
const TOKEN = /\s*(?:(\d+)|'((?:[^'\\]|'')*)'|([a-z_][a-z0-9_]*)|(<=|>=|!=|<>|[=<>(),-]))/iy;

function tokens(s: string): string[] | null {
  const out: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < s.length) {
    // Sticky tests from where the last token ended: linear in the filter's length.
    TRAILING.lastIndex = TOKEN.lastIndex;
    if (TRAILING.test(s)) break;
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(s);
    if (!m || m.index !== at) return null;
    // Strings keep their quote so that a literal is never taken for a name.
    out.push(m[1] ?? (m[2] !== undefined ? `'${m[2].replaceAll("''", "'")}` : (m[3] ?? m[4])));
  }
  return out;
}

/** A column's type as filters read it, plain data for a pool thread: a string, or an integer's range of values and its sign (null: another type). */
export interface FilterType {
  name: string;
  str: boolean;
  range: [bigint, bigint] | null;
  signed: boolean;
}

const intRange = (t: DataType): [bigint, bigint] | null => {
  if (t.typeId !== arrow.Type.Int) return null;
  const { bitWidth, isSigned } = t as import("apache-arrow").Int;
  const bits = BigInt(bitWidth);
  return isSigned ? [-(1n << (bits - 1n)), (1n << (bits - 1n)) - 1n] : [0n, (1n << bits) - 1n];
};
const INT64_MAX = (1n << 63n) - 1n;
const isString = (t: DataType) => t.typeId === arrow.Type.Utf8 || t.typeId === arrow.Type.LargeUtf8;

/** The table's columns a filter may name, as filters read their types. */
export const filterTypes = (fields: Field[]): FilterType[] =>
  fields.map((f) => ({ name: f.name, str: isString(f.type), range: intRange(f.type), signed: f.type.typeId === arrow.Type.Int && (f.type as import("apache-arrow").Int).isSigned }));

/**
 * Compile `filter` against the cached `columns` (with the table's `types`), or null when the engine
 * must evaluate it. O(the filter's length): run in a pool thread (src/serving/thread.ts).
 */
export function compileFilter(filter: string, types: FilterType[], columns: CachedColumn[]): Compiled | null {
  const ts = tokens(filter);
  if (!ts || ts.length === 0) return null;
  let i = 0;
  const peek = () => ts[i]?.toLowerCase();
  const literal = (type: FilterType): Literal | null => {
    const neg = ts[i] === "-";
    if (neg) i++;
    const t = ts[i++];
    if (t === undefined) return null;
    const { range } = type;
    if (range && /^\d+$/.test(t)) {
      // Within the column's type, its digits within a signed 64-bit integer (the engine parses them
      // before the sign: -9223372036854775808 is its error, so it is the engine's to answer).
      const digits = BigInt(t);
      const v = neg ? -digits : digits;
      return v >= range[0] && v <= range[1] && digits <= INT64_MAX ? v : null;
    }
    if (!neg && type.str && t.startsWith("'")) return t.slice(1);
    return null;
  };
  const comparison = (): Node | null => {
    const name = ts[i++];
    if (name === undefined || !/^[a-z_][a-z0-9_]*$/.test(name) || KEYWORDS.has(name)) return null;
    const column = columns.find((c) => c.name === name);
    const type = types.find((f) => f.name === name);
    if (!column || !type || !(type.range || type.str)) return null;
    const on: Operand = { column, str: type.str, signed: type.signed };
    const next = peek();
    if (next === "is") {
      i++;
      const not = peek() === "not";
      if (not) i++;
      if (peek() !== "null") return null;
      i++;
      return { on, test: { isNull: !not } };
    }
    if (next === "in") {
      i++;
      if (ts[i++] !== "(") return null;
      // Each value once: a lookup per repeat would find the same rows again.
      const values = new Set<Literal>();
      for (;;) {
        const v = literal(type);
        if (v === null) return null;
        values.add(v);
        const sep = ts[i++];
        if (sep === ")") break;
        if (sep !== ",") return null;
      }
      return { on, test: { in: [...values] } };
    }
    const op = ts[i++] === "<>" ? "!=" : ts[i - 1];
    if (!["=", "!=", "<", "<=", ">", ">="].includes(op)) return null;
    if (type.str && op !== "=" && op !== "!=") return null;
    const value = literal(type);
    return value === null ? null : { on, test: { op: op as Op, value } };
  };
  let depth = 0;
  const factor = (): Node | null => {
    if (ts[i] !== "(") return comparison();
    // Deeper nesting is left to the engine (src/schemas/expression.ts bounds what reaches either).
    if (++depth > MOST_DEPTH) return null;
    i++;
    const e = either();
    depth--;
    return e && ts[i++] === ")" ? e : null;
  };
  /** Operands joined by `word`, or one alone. */
  const joined = (word: string, operand: () => Node | null, make: (parts: Node[]) => Node) => (): Node | null => {
    const parts: Node[] = [];
    for (;;) {
      const p = operand();
      if (!p) return null;
      parts.push(p);
      if (peek() !== word) return parts.length === 1 ? parts[0] : make(parts);
      i++;
    }
  };
  const both = joined("and", factor, (all) => ({ all }));
  const either = joined("or", both, (any) => ({ any }));
  const tree = either();
  if (!tree || i !== ts.length) return null;
  const point = "on" in tree && ("in" in tree.test || ("op" in tree.test && tree.test.op === "=")) ? tree : null;
  return { tree, point: point ? { on: point.on, values: "in" in point.test ? point.test.in : [(point.test as { value: Literal }).value] } : null };
}

/** The keys a value index looks up for a compiled filter's point. */
export const keysOf = (point: NonNullable<Compiled["point"]>): Key[] => point.values.map((v) => keyOf(point.on, v));

const encoder = new TextEncoder();

const keyOf = (on: Operand, v: Literal): Key => ({ hash: literalHash(on.column, v), exact: typeof v !== "string" && on.column.width <= 4, against: against(on, v) });

/** The hash of two 32-bit words (a value of up to 64 bits): mixed, so that consecutive keys spread over the buckets; each step is invertible, so one word alone never collides. */
function mix(lo: number, hi: number): number {
  let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** FNV-1a of bytes `from` up to `to` of `bytes`, as a signed 32-bit integer (as an Int32Array holds it: the empty string's, unmixed, is above 2^31). */
function bytesHash(bytes: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h | 0;
}

/** The hash of a literal, equal to that of the same value in a record (`valueHash`). */
function literalHash(c: CachedColumn, v: Literal): number {
  if (typeof v === "string") {
    const bytes = encoder.encode(v);
    return bytesHash(bytes, 0, bytes.length);
  }
  return c.width === 8 ? mix(Number(BigInt.asUintN(32, v)), Number(BigInt.asUintN(32, v >> 32n))) : mix(Number(v) | 0, 0);
}

/** The hash of the value at byte `at` of a record (column `on`), read in place. */
function valueHash(g: Graph, view: DataView, at: number, on: Operand): number {
  if (on.str) {
    const from = view.getUint32(at, true);
    return bytesHash(g.u8, from, from + view.getUint32(at + 4, true));
  }
  const c = on.column;
  if (c.width === 8) return mix(view.getUint32(at, true), view.getUint32(at + 4, true));
  return mix(smallInt(c.width, on.signed)(view, at) | 0, 0);
}

type Read = (view: DataView, at: number) => number;
/** Readers of integers of 1, 2 and 4 bytes, as numbers: [unsigned, signed]. */
const SMALL_INTS: Record<number, [Read, Read]> = {
  1: [(v, a) => v.getUint8(a), (v, a) => v.getInt8(a)],
  2: [(v, a) => v.getUint16(a, true), (v, a) => v.getInt16(a, true)],
  4: [(v, a) => v.getUint32(a, true), (v, a) => v.getInt32(a, true)],
};
const smallInt = (width: number, signed: boolean): Read => SMALL_INTS[width][signed ? 1 : 0];

/**
 * Slots by their value of one column, for slots below `upTo`: a hash table of chains in typed
 * arrays, built on the first lookup and extended by later ones. A map of values to lists of slots
 * allocated an object or two a row (a BigInt for a 64-bit key): 100,000 rows held the main thread
 * for 140 ms and its collector for as long again in the write stream's first second. Its arrays
 * are shared memory: a pool thread extends it and looks values up (src/serving/thread.ts).
 */
export interface ValueIndex {
  upTo: number;
  on: Operand;
  /** Each bucket's first slot + 1 (0: empty); a power of two long, at least twice the slots held. */
  heads: Int32Array;
  /** Each slot's next slot + 1 in its bucket (0: the end; -1: a NULL, in no bucket). Chains run from the highest slot down. */
  next: Int32Array;
  /** Each slot's value's hash. */
  hashes: Int32Array;
}

const shared = (length: number) => new Int32Array(new SharedArrayBuffer(length * 4));

export const newValueIndex = (on: Operand): ValueIndex => ({ upTo: 0, on, heads: shared(0), next: shared(0), hashes: shared(0) });

/** Bytes a value index holds. */
export const valueIndexBytes = (index: ValueIndex) => index.heads.byteLength + index.next.byteLength + index.hashes.byteLength;

/** Slots the arrays hold once they take `slots`, and buckets (two a slot, a power of two). */
function capacity(index: ValueIndex, slots: number): { room: number; buckets: number } {
  const room = Math.max(slots, Math.ceil(index.next.length * 1.25));
  let buckets = 1;
  while (buckets < room * 2) buckets *= 2;
  return { room, buckets };
}

/** Bytes a value index adds to hold `slots` slots. */
export function valueIndexGrowth(index: ValueIndex, slots: number): number {
  if (slots <= index.next.length) return 0;
  const { room, buckets } = capacity(index, slots);
  return room * 8 + buckets * 4 - valueIndexBytes(index);
}

/** Room for `slots` slots: the per-slot arrays a quarter larger than needed, the buckets linked again when they grow. */
function reserve(index: ValueIndex, slots: number): void {
  if (slots <= index.next.length) return;
  const { room, buckets } = capacity(index, slots);
  const next = shared(room);
  next.set(index.next);
  const hashes = shared(room);
  hashes.set(index.hashes);
  index.next = next;
  index.hashes = hashes;
  if (buckets === index.heads.length) return;
  index.heads = shared(buckets);
  for (let s = 0; s < index.upTo; s++) if (next[s] !== -1) link(index, s);
}

function link(index: ValueIndex, slot: number): void {
  const b = index.hashes[slot] & (index.heads.length - 1);
  index.next[slot] = index.heads[b];
  index.heads[b] = slot + 1;
}

/** Add to `index` the slots up to `to`. */
export function extendValueIndex(g: Graph, index: ValueIndex, to: number): void {
  refresh(g);
  const view = new DataView(g.u8.buffer);
  const { column } = index.on;
  reserve(index, to);
  for (; index.upTo < to; index.upTo++) {
    const base = recordAt(g, index.upTo) + g.columnsAt;
    if (g.u8[base + column.nullAt] !== 1) {
      index.next[index.upTo] = -1;
      continue;
    }
    index.hashes[index.upTo] = valueHash(g, view, base + column.at, index.on);
    link(index, index.upTo);
  }
}

/**
 * Set in `bits` the slots from `from` up to `to` (all in `index`) whose value of the column is one of
 * `keys`; how many. A chain runs from its highest slot down, so a lookup of the slots added since
 * the last (a new version) stops at the first older one.
 */
export function lookupSlots(g: Graph, index: ValueIndex, keys: Key[], bits: Uint32Array, from: number, to: number): number {
  refresh(g);
  const view = new DataView(g.u8.buffer);
  const mask = index.heads.length - 1;
  let passing = 0;
  for (const k of keys) {
    for (let s = index.heads[k.hash & mask] - 1; s >= from; s = index.next[s] - 1) {
      if (s >= to || index.hashes[s] !== k.hash) continue;
      if (!k.exact && k.against(g, view, recordAt(g, s) + g.columnsAt + index.on.column.at) !== 0) continue;
      bits[s >> 5] |= 1 << (s & 31);
      passing++;
    }
  }
  return passing;
}

/**
 * How the value at byte `at` (a slot's field of one column) compares with one literal: 0 when
 * equal, else its sign says which is larger (strings: only whether they are equal). Read in place,
 * numbers of up to 32 bits as numbers and 64-bit ones as two words, strings as bytes: the whole
 * table is evaluated for each new filter, so nothing is allocated a row.
 */
type Against = (g: Graph, view: DataView, at: number) => number;

function against(on: Operand, literal: Literal): Against {
  if (typeof literal === "string") {
    const want = encoder.encode(literal);
    return (g, view, at) => {
      const from = view.getUint32(at, true);
      if (view.getUint32(at + 4, true) !== want.length) return 1;
      for (let i = 0; i < want.length; i++) if (g.u8[from + i] !== want[i]) return 1;
      return 0;
    };
  }
  const { column: c, signed } = on;
  if (c.width <= 4) {
    const n = Number(literal);
    const read = smallInt(c.width, signed);
    return (_g, view, at) => read(view, at) - n;
  }
  const hi = Number(signed ? BigInt.asIntN(32, literal >> 32n) : BigInt.asUintN(32, literal >> 32n));
  const lo = Number(BigInt.asUintN(32, literal));
  return (_g, view, at) => {
    const h = signed ? view.getInt32(at + 4, true) : view.getUint32(at + 4, true);
    return h !== hi ? h - hi : view.getUint32(at, true) - lo;
  };
}

const OPS: Record<Op, (d: number) => boolean> = { "=": (d) => d === 0, "!=": (d) => d !== 0, "<": (d) => d < 0, "<=": (d) => d <= 0, ">": (d) => d > 0, ">=": (d) => d >= 0 };

export function testOf(n: Node): SlotTest {
  if ("all" in n) {
    const parts = n.all.map(testOf);
    return (g, view, slot) => parts.every((p) => p(g, view, slot));
  }
  if ("any" in n) {
    const parts = n.any.map(testOf);
    return (g, view, slot) => parts.some((p) => p(g, view, slot));
  }
  const { on, test } = n;
  const { column } = on;
  const present = (g: Graph, slot: number) => {
    const base = recordAt(g, slot) + g.columnsAt;
    return g.u8[base + column.nullAt] === 1 ? base + column.at : -1;
  };
  if ("isNull" in test) return (g, _view, slot) => (present(g, slot) < 0) === test.isNull;
  if ("in" in test) {
    // The list's values by hash: a row costs one hash and the values sharing it, not the whole list
    // (8,000 values over 50,000 rows held the event loop 6 s).
    const byHash = new Map<number, Key[]>();
    for (const k of test.in.map((v) => keyOf(on, v))) {
      const same = byHash.get(k.hash);
      if (same) same.push(k);
      else byHash.set(k.hash, [k]);
    }
    return (g, view, slot) => {
      const at = present(g, slot);
      if (at < 0) return false;
      const same = byHash.get(valueHash(g, view, at, on));
      return same !== undefined && same.some((k) => k.exact || k.against(g, view, at) === 0);
    };
  }
  const a = against(on, test.value);
  const holds = OPS[test.op];
  return (g, view, slot) => {
    const at = present(g, slot);
    return at >= 0 && holds(a(g, view, at));
  };
}

/** The slots from `from` up to `to` that pass `test`, set in `bits`; how many. */
export function evaluateSlots(g: Graph, test: SlotTest, bits: Uint32Array, from: number, to: number): number {
  refresh(g);
  const view = new DataView(g.u8.buffer);
  let passing = 0;
  for (let s = from; s < to; s++) {
    if (!test(g, view, s)) continue;
    bits[s >> 5] |= 1 << (s & 31);
    passing++;
  }
  return passing;
}

/** A filter as a pool thread compiles it: over the table's `types` and an index's cached `columns`. */
export interface FilterSource {
  filter: string;
  types: FilterType[];
  columns: CachedColumn[];
}

/** What a pool thread evaluates: a filter over slots `from` to `to` into `bits`, through `values` (its point's value index) where given. */
export interface FilterTask extends FilterSource {
  bits: Uint32Array;
  from: number;
  to: number;
  values: ValueIndex | null;
}

/** Whether the index evaluates `filter` (null: the engine does), and the column its value index would be of. */
export function filterPlan({ filter, types, columns }: FilterSource): { point: Operand | null } | null {
  const c = compileFilter(filter, types, columns);
  return c && { point: c.point?.on ?? null };
}

/** Run a filter task over the records of `g`: the slots passing (set in `bits`), and the value index as extended. */
export function runFilter(g: Graph, task: FilterTask): { passing: number; values: ValueIndex | null } {
  const { bits, from, to, values } = task;
  const filter = compileFilter(task.filter, task.types, task.columns);
  if (!filter) throw new Error("runFilter: a filter the serving index does not evaluate");
  if (values && filter.point) {
    extendValueIndex(g, values, to);
    return { passing: lookupSlots(g, values, keysOf(filter.point), bits, from, to), values };
  }
  return { passing: evaluateSlots(g, testOf(filter.tree), bits, from, to), values: null };
}
