// Filters the serving index evaluates itself, over the column values its records cache, where its
// answer is certain to be the engine's: an integer column compared with an integer literal that
// its type holds, a string column equal (or not) to a string literal, IN lists of those, IS [NOT]
// NULL, joined by AND and OR in parentheses or none. No NOT: a comparison with a NULL is unknown,
// and an unknown excludes its row under AND and OR alike, so two values decide the same rows as
// the engine's three. Anything else (another type, a function, a cast, a quoted name, NOT, LIKE)
// is null here and the engine evaluates it. A filter on a unique key (`id = 12345`, one per
// search) cost a scan of every fragment in the engine; here it is a lookup in a value index.
import type { DataType, Field } from "apache-arrow";
import { arrow } from "./arrow.js";
import type { CachedColumn } from "./serving-rows.js";
import { recordAt, refresh, type Graph } from "./serving-graph.js";

type Op = "=" | "!=" | "<" | "<=" | ">" | ">=";
type Literal = bigint | string;
type Node = { all: Node[] } | { any: Node[] } | { column: CachedColumn; type: DataType; test: Test };
type Test = { op: Op; value: Literal } | { in: Literal[] } | { isNull: boolean };

/** Whether the row in a slot passes, from its record alone. */
export type SlotTest = (g: Graph, view: DataView, slot: number) => boolean;

/** A compiled filter: its test, and for one column equal to one of some values, those (a lookup, not a pass over every slot). */
export interface Compiled {
  test: SlotTest;
  point: { column: CachedColumn; type: DataType; keys: Key[] } | null;
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

const intRange = (t: DataType): [bigint, bigint] | null => {
  if (t.typeId !== arrow.Type.Int) return null;
  const { bitWidth, isSigned } = t as import("apache-arrow").Int;
  const bits = BigInt(bitWidth);
  return isSigned ? [-(1n << (bits - 1n)), (1n << (bits - 1n)) - 1n] : [0n, (1n << bits) - 1n];
};
const INT64 = [-(1n << 63n), (1n << 63n) - 1n];
const isString = (t: DataType) => t.typeId === arrow.Type.Utf8 || t.typeId === arrow.Type.LargeUtf8;

/** Compile `filter` against the cached `columns` (with the table's `fields` for their types), or null when the engine must evaluate it. */
export function compileFilter(filter: string, fields: Field[], columns: CachedColumn[]): Compiled | null {
  const ts = tokens(filter);
  if (!ts || ts.length === 0) return null;
  let i = 0;
  const peek = () => ts[i]?.toLowerCase();
  const literal = (type: DataType): Literal | null => {
    const neg = ts[i] === "-";
    if (neg) i++;
    const t = ts[i++];
    if (t === undefined) return null;
    const range = intRange(type);
    if (range && /^\d+$/.test(t)) {
      // Within the column's type and a signed 64-bit integer (the engine's type for the literal).
      const v = neg ? -BigInt(t) : BigInt(t);
      return v >= range[0] && v <= range[1] && v >= INT64[0] && v <= INT64[1] ? v : null;
    }
    if (!neg && isString(type) && t.startsWith("'")) return t.slice(1);
    return null;
  };
  const comparison = (): Node | null => {
    const name = ts[i++];
    if (name === undefined || !/^[a-z_][a-z0-9_]*$/.test(name) || KEYWORDS.has(name)) return null;
    const column = columns.find((c) => c.name === name);
    const type = fields.find((f) => f.name === name)?.type;
    if (!column || !type || !(intRange(type) || isString(type))) return null;
    const next = peek();
    if (next === "is") {
      i++;
      const not = peek() === "not";
      if (not) i++;
      if (peek() !== "null") return null;
      i++;
      return { column, type, test: { isNull: !not } };
    }
    if (next === "in") {
      i++;
      if (ts[i++] !== "(") return null;
      const values: Literal[] = [];
      for (;;) {
        const v = literal(type);
        if (v === null) return null;
        values.push(v);
        const sep = ts[i++];
        if (sep === ")") break;
        if (sep !== ",") return null;
      }
      return { column, type, test: { in: values } };
    }
    const op = ts[i++] === "<>" ? "!=" : ts[i - 1];
    if (!["=", "!=", "<", "<=", ">", ">="].includes(op)) return null;
    if (isString(type) && op !== "=" && op !== "!=") return null;
    const value = literal(type);
    return value === null ? null : { column, type, test: { op: op as Op, value } };
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
  const point = "column" in tree && ("in" in tree.test || ("op" in tree.test && tree.test.op === "=")) ? tree : null;
  const keys = point ? ("in" in point.test ? point.test.in : [(point.test as { value: Literal }).value]).map((v) => keyOf(point.column, point.type, v)) : [];
  return { test: testOf(tree), point: point ? { column: point.column, type: point.type, keys } : null };
}

const encoder = new TextEncoder();

const keyOf = (c: CachedColumn, type: DataType, v: Literal): Key => ({ hash: literalHash(c, v), exact: typeof v !== "string" && c.width <= 4, against: against(c, type, v) });

/** The hash of two 32-bit words (a value of up to 64 bits): mixed, so that consecutive keys spread over the buckets; each step is invertible, so one word alone never collides. */
function mix(lo: number, hi: number): number {
  let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** FNV-1a of bytes `from` up to `to` of `bytes`. */
function bytesHash(bytes: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h;
}

/** The hash of a literal, equal to that of the same value in a record (`valueHash`). */
function literalHash(c: CachedColumn, v: Literal): number {
  if (typeof v === "string") {
    const bytes = encoder.encode(v);
    return bytesHash(bytes, 0, bytes.length);
  }
  return c.width === 8 ? mix(Number(BigInt.asUintN(32, v)), Number(BigInt.asUintN(32, v >> 32n))) : mix(Number(v) | 0, 0);
}

/** The hash of the value at byte `at` of a record (column `c`, of `type`), read in place. */
function valueHash(g: Graph, view: DataView, at: number, c: CachedColumn, type: DataType): number {
  if (isString(type)) {
    const from = view.getUint32(at, true);
    return bytesHash(g.u8, from, from + view.getUint32(at + 4, true));
  }
  if (c.width === 8) return mix(view.getUint32(at, true), view.getUint32(at + 4, true));
  return mix(smallInt(c.width, (type as import("apache-arrow").Int).isSigned)(view, at) | 0, 0);
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
 * for 140 ms and its collector for as long again in the write stream's first second.
 */
export interface ValueIndex {
  upTo: number;
  column: CachedColumn;
  type: DataType;
  /** Each bucket's first slot + 1 (0: empty); a power of two long, at least twice the slots held. */
  heads: Int32Array;
  /** Each slot's next slot + 1 in its bucket (0: the end; -1: a NULL, in no bucket). Chains run from the highest slot down. */
  next: Int32Array;
  /** Each slot's value's hash. */
  hashes: Int32Array;
  /** Extensions, one after another. */
  growing: Promise<void>;
}

export const newValueIndex = (column: CachedColumn, type: DataType): ValueIndex => ({
  upTo: 0,
  column,
  type,
  heads: new Int32Array(0),
  next: new Int32Array(0),
  hashes: new Int32Array(0),
  growing: Promise.resolve(),
});

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
  const next = new Int32Array(room);
  next.set(index.next);
  const hashes = new Int32Array(room);
  hashes.set(index.hashes);
  index.next = next;
  index.hashes = hashes;
  if (buckets === index.heads.length) return;
  index.heads = new Int32Array(buckets);
  for (let s = 0; s < index.upTo; s++) if (next[s] !== -1) link(index, s);
}

function link(index: ValueIndex, slot: number): void {
  const b = index.hashes[slot] & (index.heads.length - 1);
  index.next[slot] = index.heads[b];
  index.heads[b] = slot + 1;
}

/** Add to `index` the slots up to `to`, at most `most` of them (the caller gives the event loop turns between). */
export function extendValueIndex(g: Graph, index: ValueIndex, to: number, most: number): void {
  refresh(g);
  const view = new DataView(g.u8.buffer);
  const { column, type } = index;
  const end = Math.min(to, index.upTo + most);
  reserve(index, to);
  for (; index.upTo < end; index.upTo++) {
    const base = recordAt(g, index.upTo) + g.columnsAt;
    if (g.u8[base + column.nullAt] !== 1) {
      index.next[index.upTo] = -1;
      continue;
    }
    index.hashes[index.upTo] = valueHash(g, view, base + column.at, column, type);
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
      if (!k.exact && k.against(g, view, recordAt(g, s) + g.columnsAt + index.column.at) !== 0) continue;
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

function against(c: CachedColumn, type: DataType, literal: Literal): Against {
  if (typeof literal === "string") {
    const want = encoder.encode(literal);
    return (g, view, at) => {
      const from = view.getUint32(at, true);
      if (view.getUint32(at + 4, true) !== want.length) return 1;
      for (let i = 0; i < want.length; i++) if (g.u8[from + i] !== want[i]) return 1;
      return 0;
    };
  }
  const signed = (type as import("apache-arrow").Int).isSigned;
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

function testOf(n: Node): SlotTest {
  if ("all" in n) {
    const parts = n.all.map(testOf);
    return (g, view, slot) => parts.every((p) => p(g, view, slot));
  }
  if ("any" in n) {
    const parts = n.any.map(testOf);
    return (g, view, slot) => parts.some((p) => p(g, view, slot));
  }
  const { column, type, test } = n;
  const present = (g: Graph, slot: number) => {
    const base = recordAt(g, slot) + g.columnsAt;
    return g.u8[base + column.nullAt] === 1 ? base + column.at : -1;
  };
  if ("isNull" in test) return (g, _view, slot) => (present(g, slot) < 0) === test.isNull;
  if ("in" in test) {
    const each = test.in.map((x) => against(column, type, x));
    return (g, view, slot) => {
      const at = present(g, slot);
      return at >= 0 && each.some((a) => a(g, view, at) === 0);
    };
  }
  const a = against(column, type, test.value);
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
