// The serving index's map from a live row id to its slot, on the main thread. An open-addressed
// table of slot numbers, linear probing: a slot's row id is already in the graph's record, so a
// bucket holds the slot alone (4 bytes) and the key is read from the graph. A JS Map took 29 bytes
// an entry with stable row ids and 45 with row addresses past 2^31 (heap numbers); this takes 5 to
// 11. Rows without a vector have no slot: they are kept apart, few as they are.
import { rowNumberOf, slotCount, visibleAt, type Graph } from "./graph.js";

export interface RowSlots {
  graph: Graph;
  /** Slot + 1 of each bucket (0: empty); a power of two long, at most three quarters full. */
  buckets: Int32Array;
  /** Slots mapped (rows without a vector aside). */
  slotted: number;
  /** Live row ids without a vector. */
  vectorless: Set<number>;
}

/** What `slotOf` answers for a row without a vector: known, never answered. */
export const NO_VECTOR = -1;
/** Bytes counted for a row without a vector (a Set entry of a heap number, the larger case). */
const VECTORLESS_BYTES = 45;
const MIN_BUCKETS = 1024;
/** Bytes a row with a vector takes at most: 4 a bucket, the table at least a quarter empty and doubled when full. */
export const ROW_SLOT_BYTES = 11;

export const newRowSlots = (graph: Graph, rows = 0): RowSlots => ({ graph, buckets: new Int32Array(bucketsFor(rows)), slotted: 0, vectorless: new Set() });

/** The map of the slots alive at a version, as a pool thread makes it (`rowsAt`). */
export interface RowsAt {
  buckets: Int32Array;
  slotted: number;
  /** Slots written when it was made, and the highest row id among them (-1: none). */
  slots: number;
  maxRowId: number;
}

/**
 * The map of every slot of `graph` alive at `version`, after a build or a load: a pass over every
 * slot (11–63 ms at 50,000 rows here), so it is made in a pool thread and its buckets moved back.
 */
export function rowsAt(graph: Graph, version: number): RowsAt {
  const slots = slotCount(graph);
  const m = newRowSlots(graph, slots);
  let maxRowId = -1;
  for (let s = 0; s < slots; s++) {
    const id = rowNumberOf(graph, s);
    if (id > maxRowId) maxRowId = id;
    if (visibleAt(graph, s, version)) mapRow(m, id, s);
  }
  return { buckets: m.buckets, slotted: m.slotted, slots, maxRowId };
}

/** Live rows mapped, with a vector or not. */
export const mappedRows = (m: RowSlots) => m.slotted + m.vectorless.size;

export const rowSlotsBytes = (m: RowSlots) => m.buckets.byteLength + m.vectorless.size * VECTORLESS_BYTES;

/** The most bytes mapping `rows` more rows adds to `m` (an empty map: null), `vectorless` of them perhaps without a vector. */
export function rowSlotsGrowth(m: RowSlots | null, rows: number, vectorless = rows): number {
  const now = m ? m.buckets.byteLength : 0;
  return Math.max(0, bucketsFor((m?.slotted ?? 0) + rows) * 4 - now) + vectorless * VECTORLESS_BYTES;
}

function bucketsFor(rows: number): number {
  let n = MIN_BUCKETS;
  while (n * 3 < rows * 4) n *= 2;
  return n;
}

/** A row id's first bucket: its two 32-bit halves mixed (row addresses differ in the low half, stable ids too). */
function home(id: number, mask: number): number {
  let h = Math.imul((id >>> 0) ^ Math.imul((id / 4294967296) >>> 0, 0x27d4eb2d), 0x9e3779b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h & mask;
}

/** The bucket holding `id`'s slot, or the empty one where it would go. */
function find(m: RowSlots, id: number): number {
  const { buckets, graph } = m;
  const mask = buckets.length - 1;
  for (let b = home(id, mask); ; b = (b + 1) & mask) {
    const s = buckets[b];
    if (s === 0 || rowNumberOf(graph, s - 1) === id) return b;
  }
}

/** The slot of live row `id`, NO_VECTOR for a row without a vector, undefined when not mapped. */
export function slotOf(m: RowSlots, id: number): number | undefined {
  const s = m.buckets[find(m, id)];
  if (s !== 0) return s - 1;
  return m.vectorless.has(id) ? NO_VECTOR : undefined;
}

/** Map row `id` to `slot` (whose record holds `id`), or to NO_VECTOR; replaces what it mapped to. */
export function mapRow(m: RowSlots, id: number, slot: number): void {
  if (slot === NO_VECTOR) {
    unmapRow(m, id);
    m.vectorless.add(id);
    return;
  }
  m.vectorless.delete(id);
  if ((m.slotted + 1) * 4 > m.buckets.length * 3) grow(m);
  const b = find(m, id);
  if (m.buckets[b] === 0) m.slotted++;
  m.buckets[b] = slot + 1;
}

/** Forget row `id`: the following buckets of its run move back, so that no probe stops short. */
export function unmapRow(m: RowSlots, id: number): void {
  if (m.vectorless.delete(id)) return;
  const { buckets, graph } = m;
  const mask = buckets.length - 1;
  let hole = find(m, id);
  if (buckets[hole] === 0) return;
  m.slotted--;
  for (let b = (hole + 1) & mask; buckets[b] !== 0; b = (b + 1) & mask) {
    const h = home(rowNumberOf(graph, buckets[b] - 1), mask);
    // Movable when its home is not in (hole, b], cyclically.
    if (hole <= b ? h <= hole || h > b : h <= hole && h > b) {
      buckets[hole] = buckets[b];
      hole = b;
    }
  }
  buckets[hole] = 0;
}

/** Every mapped row: [row id, slot or NO_VECTOR]. */
export function* rowsMapped(m: RowSlots): Generator<[number, number]> {
  for (const s of m.buckets) if (s !== 0) yield [rowNumberOf(m.graph, s - 1), s - 1];
  for (const id of m.vectorless) yield [id, NO_VECTOR];
}

function grow(m: RowSlots): void {
  const old = m.buckets;
  m.buckets = new Int32Array(old.length * 2);
  for (const s of old) if (s !== 0) m.buckets[find(m, rowNumberOf(m.graph, s - 1))] = s;
}
