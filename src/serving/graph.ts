// The serving index's graph: HNSW (hierarchical navigable small world) over ONE shared WebAssembly
// memory that every worker thread maps, so the index exists once however many workers search it.
// The memory holds a header, a table of record chunks, per-task scratch lanes, then what a bump
// allocator hands out: chunks of fixed-size slot records (the vector, padded to 4 floats; its
// level-0 links; its row id, the versions it was born and died at; the cached columns' fields),
// upper-level link lists and variable-width column values. Nothing is ever freed in place: a
// deleted or replaced row is a tombstone (its `died` version), so one writer appends while any
// number of readers search, each at a version of its own (a row counts where born <= version <
// died). Distances come from the SIMD kernel (kernel.ts); the graph walk is here.
import { kernelFor, type Kernel } from "./kernel.js";

export type Metric = "l2" | "cosine" | "dot";
const METRICS: Metric[] = ["l2", "cosine", "dot"];

/** Header words (Int32 indexes). */
const H = {
  MAGIC: 0,
  FORMAT: 1,
  DIM: 2,
  DIM_PAD: 3,
  METRIC: 4,
  M: 5,
  EF_CONSTRUCTION: 6,
  RECORD: 7,
  COUNT: 8,
  ENTRY: 9,
  MAX_LEVEL: 10,
  BUMP: 11,
  RNG: 12,
  LANE_BYTES: 13,
  COLUMNS_AT: 14,
  TOMBSTONES: 15,
  /** Held while the entry point and top level change (threads link rows at once while building). */
  LOCK: 16,
  /** Bytes allocated for the cached columns' variable-width values (what /metrics counts as theirs). */
  VALUE_BYTES: 17,
  /** Where the bump allocator must stop (0: the memory's maximum): the room the budget granted the writer. */
  LIMIT: 18,
  /** The search width calibrated on a sample of the index's rows (0: not yet), its recall@10 in millionths, and the slots then. */
  CAL_EF: 19,
  CAL_RECALL: 20,
  CAL_SLOTS: 21,
} as const;
const MAGIC = 0x51564958;
/**
 * 3: the header counts the cached columns' values (`VALUE_BYTES`); 2: nodes linked at every level
 * at once (`link`). A save of an older format is built again.
 */
const FORMAT = 3;
const HEADER_BYTES = 4096;
const CHUNK_SHIFT = 10;
const CHUNK_SLOTS = 1 << CHUNK_SHIFT;
const MAX_CHUNKS = 16384;
/** The most rows (slots) an index holds: its chunk table's room. */
export const MAX_SLOTS = MAX_CHUNKS * CHUNK_SLOTS;
const CHUNKS_AT = HEADER_BYTES;
const LANES_AT = CHUNKS_AT + MAX_CHUNKS * 4;
/** Scratch lanes: lane 0 is the writer's, the others one per search task running. */
export const LANES = 64;
/** Vectors one kernel call measures at most (a lane's address and output room). */
const BATCH = 256;
const PAGE = 65536;
/** A WebAssembly memory's pages at most (32-bit addresses). */
const MAX_PAGES = 65536;
/** The most bytes an index memory can grow to, whatever the budget. */
export const MAX_MEMORY_BYTES = MAX_PAGES * PAGE;
/** Record fields after the links: level, upper links' address, row id (low, high), born, died, norm, and the lock of its link lists. */
const META = { LEVEL: 0, UPPER: 1, ROW_LO: 2, ROW_HI: 3, BORN: 4, DIED: 5, NORM: 6, LOCK: 7 } as const;
const META_BYTES = 32;
/** `died` of a row still alive. */
const ALIVE = 0x7fffffff;

export interface GraphParams {
  dim: number;
  metric: Metric;
  /** Links a node keeps per upper level (twice that at level 0). */
  m: number;
  efConstruction: number;
  /** Bytes of cached column fields in each record. */
  columnBytes: number;
  /** The most the memory may grow to. */
  maxBytes: number;
}

/** A thread's view of an index memory: typed arrays over it (renewed when it grows) and its kernel. */
export interface Graph {
  memory: WebAssembly.Memory;
  kernel: Kernel;
  i32: Int32Array;
  u32: Uint32Array;
  f32: Float32Array;
  u8: Uint8Array;
  dim: number;
  dimPad: number;
  metric: Metric;
  m: number;
  m0: number;
  record: number;
  linksAt: number;
  metaAt: number;
  columnsAt: number;
}

const align = (n: number, to: number) => Math.ceil(n / to) * to;

/** The byte size of an index memory's fixed part (header, chunk table, lanes) for `dimPad` floats. */
const laneBytesOf = (dimPad: number) => align(dimPad * 4 + BATCH * 8, 16);

/** A new, empty index memory; `maxBytes` bounds its growth (a RangeError past it). */
export function createGraphMemory(p: GraphParams): WebAssembly.Memory {
  const dimPad = align(p.dim, 4);
  const laneBytes = laneBytesOf(dimPad);
  const first = align(LANES_AT + LANES * laneBytes, 16);
  const maximum = Math.max(Math.ceil(first / PAGE) + 1, Math.min(MAX_PAGES, Math.floor(p.maxBytes / PAGE)));
  const memory = new WebAssembly.Memory({ initial: Math.ceil(first / PAGE), maximum, shared: true });
  const i32 = new Int32Array(memory.buffer);
  const m0 = 2 * p.m;
  const record = align(dimPad * 4 + (m0 + 1) * 4 + META_BYTES + p.columnBytes, 16);
  i32[H.MAGIC] = MAGIC;
  i32[H.FORMAT] = FORMAT;
  i32[H.DIM] = p.dim;
  i32[H.DIM_PAD] = dimPad;
  i32[H.METRIC] = METRICS.indexOf(p.metric);
  i32[H.M] = p.m;
  i32[H.EF_CONSTRUCTION] = p.efConstruction;
  i32[H.RECORD] = record;
  i32[H.COUNT] = 0;
  i32[H.ENTRY] = -1;
  i32[H.MAX_LEVEL] = -1;
  i32[H.BUMP] = first;
  i32[H.RNG] = 0x2545f491;
  i32[H.LANE_BYTES] = laneBytes;
  i32[H.COLUMNS_AT] = dimPad * 4 + (m0 + 1) * 4 + META_BYTES;
  return memory;
}

/**
 * An empty memory for a saved index of `bytes` bytes (its `usedBytes`), growable to `maxBytes`: a
 * pool thread reads the saved bytes into it (store.ts), then `checkSaved`.
 */
export function savedGraphMemory(bytes: number, maxBytes: number): WebAssembly.Memory {
  const pages = Math.ceil(bytes / PAGE);
  return new WebAssembly.Memory({ initial: pages, maximum: Math.max(pages + 1, Math.min(MAX_PAGES, Math.floor(maxBytes / PAGE))), shared: true });
}

/** Throws unless `memory` holds a saved index of this format whose bytes are `bytes` long. */
export function checkSaved(memory: WebAssembly.Memory, bytes: number): void {
  const head = new Int32Array(memory.buffer, 0, Math.min(16, memory.buffer.byteLength >> 2));
  if (head[H.MAGIC] !== MAGIC || head[H.FORMAT] !== FORMAT || head[H.BUMP] !== bytes) throw new Error("not a serving index of this format");
}

export function graphOf(memory: WebAssembly.Memory): Graph {
  const i32 = new Int32Array(memory.buffer);
  const dimPad = i32[H.DIM_PAD];
  const m = i32[H.M];
  return {
    memory,
    kernel: kernelFor(memory),
    i32,
    u32: new Uint32Array(memory.buffer),
    f32: new Float32Array(memory.buffer),
    u8: new Uint8Array(memory.buffer),
    dim: i32[H.DIM],
    dimPad,
    metric: METRICS[i32[H.METRIC]],
    m,
    m0: 2 * m,
    record: i32[H.RECORD],
    linksAt: dimPad * 4,
    metaAt: dimPad * 4 + (2 * m + 1) * 4,
    columnsAt: i32[H.COLUMNS_AT],
  };
}

/** Renew the typed arrays after another thread grew the memory. */
export function refresh(g: Graph): void {
  if (g.u8.byteLength === g.memory.buffer.byteLength) return;
  g.i32 = new Int32Array(g.memory.buffer);
  g.u32 = new Uint32Array(g.memory.buffer);
  g.f32 = new Float32Array(g.memory.buffer);
  g.u8 = new Uint8Array(g.memory.buffer);
}

/** Slots written (published after each row's record is whole). */
export const slotCount = (g: Graph) => Atomics.load(g.i32, H.COUNT);
/** Bytes in use: what a save writes and what the budget counts. */
export const usedBytes = (g: Graph) => g.i32[H.BUMP];
export const tombstones = (g: Graph) => g.i32[H.TOMBSTONES];
export const dimensionOf = (g: Graph) => g.dim;

/** The width `calibrate` chose (0: none yet), the recall@10 it measured there, and the slots the index had then. */
export const calibration = (g: Graph) => ({ ef: g.i32[H.CAL_EF], recall: g.i32[H.CAL_RECALL] / 1e6, slots: g.i32[H.CAL_SLOTS] });

/** Keep a calibrated width with the index (its saved copy too). */
export function setCalibration(g: Graph, ef: number, recall: number, slots: number): void {
  g.i32[H.CAL_RECALL] = Math.round(recall * 1e6);
  g.i32[H.CAL_SLOTS] = slots;
  Atomics.store(g.i32, H.CAL_EF, ef);
}

/** Byte address of a slot's record. */
export function recordAt(g: Graph, slot: number): number {
  return g.i32[(CHUNKS_AT >> 2) + (slot >> CHUNK_SHIFT)] + (slot & (CHUNK_SLOTS - 1)) * g.record;
}

const metaWord = (g: Graph, slot: number, field: number) => ((recordAt(g, slot) + g.metaAt) >> 2) + field;

export function rowIdOf(g: Graph, slot: number): bigint {
  const w = metaWord(g, slot, META.ROW_LO);
  return (BigInt(g.u32[w + 1]) << 32n) | BigInt(g.u32[w]);
}

/** A slot's row id as a number (below 2^53 in both of Lance's schemes): no BigInt made. */
export function rowNumberOf(g: Graph, slot: number): number {
  const w = metaWord(g, slot, META.ROW_LO);
  return g.u32[w + 1] * 4294967296 + g.u32[w];
}

/** Give a slot's row a new row id (a row compaction moved); only while no search reads the index. */
export function setRowId(g: Graph, slot: number, id: bigint): void {
  const w = metaWord(g, slot, META.ROW_LO);
  g.u32[w] = Number(id & 0xffffffffn);
  g.u32[w + 1] = Number(id >> 32n);
}

/** Whether a slot's row is part of the table at `version`. */
export function visibleAt(g: Graph, slot: number, version: number): boolean {
  const w = metaWord(g, slot, META.BORN);
  return g.i32[w] <= version && g.i32[w + 1] > version;
}

/** Tombstone a slot's row from `version` on (a delete, or the old copy of an updated row). */
export function retire(g: Graph, slot: number, version: number): void {
  const w = metaWord(g, slot, META.DIED);
  if (g.i32[w] !== ALIVE) return;
  g.i32[w] = version;
  g.i32[H.TOMBSTONES]++;
}

/** What `allocate` throws past the limit the main thread set (`setLimit`). */
export const PAST_GRANT = "serving index: past its memory grant";

/**
 * Let the writer allocate up to `bytes` in all (0: up to the memory's maximum). The memories of all
 * indexes together are bounded by `--serving-memory-mb`: each may grow only by what the budget
 * granted it, checked where memory grows, in the thread that grows it.
 */
export const setLimit = (g: Graph, bytes: number) => Atomics.store(g.i32, H.LIMIT, bytes);

/** Bump-allocate `bytes` (16-aligned), growing the memory as needed. Writer only. */
export function allocate(g: Graph, bytes: number): number {
  const at = g.i32[H.BUMP];
  const end = align(at + bytes, 16);
  const limit = Atomics.load(g.i32, H.LIMIT);
  if (limit > 0 && end > limit) throw new RangeError(PAST_GRANT);
  if (end > g.memory.buffer.byteLength) {
    g.memory.grow(Math.ceil((end - g.memory.buffer.byteLength) / PAGE));
    refresh(g);
  }
  g.i32[H.BUMP] = end;
  return at;
}

/** Bump-allocate a cached column's variable-width value, counted as the columns' memory. Writer only. */
export function allocateValue(g: Graph, bytes: number): number {
  const at = allocate(g, bytes);
  g.i32[H.VALUE_BYTES] += g.i32[H.BUMP] - at;
  return at;
}

/** Of `usedBytes`, what the cached columns hold: their fields in every record allocated, and their values. */
export function columnBytes(g: Graph): number {
  const chunks = Math.ceil(slotCount(g) / CHUNK_SLOTS);
  return chunks * CHUNK_SLOTS * (g.record - align(g.columnsAt, 16)) + g.i32[H.VALUE_BYTES];
}

const laneAt = (g: Graph, lane: number) => LANES_AT + lane * g.i32[H.LANE_BYTES];

/**
 * A new slot for a row: its record, with the vector (and its norm), row id and birth version
 * written; cached columns are the caller's to write (`recordAt` + `columnsAt`) before it is linked.
 */
export function newSlot(g: Graph, vector: ArrayLike<number>, from: number, rowId: bigint, born: number): number {
  const slot = g.i32[H.COUNT];
  if (slot >> CHUNK_SHIFT >= MAX_CHUNKS) throw new RangeError("serving index: too many rows");
  if ((slot & (CHUNK_SLOTS - 1)) === 0) {
    const chunk = allocate(g, CHUNK_SLOTS * g.record);
    g.i32[(CHUNKS_AT >> 2) + (slot >> CHUNK_SHIFT)] = chunk;
  }
  const at = recordAt(g, slot);
  let norm = 0;
  for (let d = 0; d < g.dim; d++) {
    const x = vector[from + d];
    g.f32[(at >> 2) + d] = x;
    norm += x * x;
  }
  const w = (at + g.metaAt) >> 2;
  g.u32[w + META.ROW_LO] = Number(rowId & 0xffffffffn);
  g.u32[w + META.ROW_HI] = Number(rowId >> 32n);
  g.i32[w + META.BORN] = born;
  g.i32[w + META.DIED] = ALIVE;
  g.f32[w + META.NORM] = Math.sqrt(norm);
  g.i32[w + META.LEVEL] = -1;
  Atomics.store(g.i32, H.COUNT, slot + 1);
  return slot;
}

// ---- distances -------------------------------------------------------------------------------

/** Distance on LanceDB's scale from raw kernel output: squared L2, 1 - cosine, 1 - dot. */
function scale(g: Graph, raw: number, slot: number, queryNorm: number): number {
  if (g.metric === "l2") return raw;
  if (g.metric === "dot") return 1 - raw;
  return 1 - raw / (queryNorm * g.f32[metaWord(g, slot, META.NORM)]);
}

const dots = (g: Graph) => (g.metric === "l2" ? 0 : 1);

/** Distance between two stored slots (graph building). */
function between(g: Graph, a: number, b: number): number {
  const ra = recordAt(g, a);
  const rb = recordAt(g, b);
  if (g.metric === "l2") return g.kernel.l2sq(ra, rb, g.dimPad);
  const d = g.kernel.dot(ra, rb, g.dimPad);
  if (g.metric === "dot") return 1 - d;
  return 1 - d / (g.f32[metaWord(g, a, META.NORM)] * g.f32[metaWord(g, b, META.NORM)]);
}

// ---- per-thread scratch: visited marks and two heaps -----------------------------------------

let visited = new Uint32Array(0);
let epoch = 0;
/**
 * A binary min-heap of (distance, slot) pairs in typed arrays. Candidates are kept by distance;
 * results by negated distance, so that their top is the farthest (a max-heap by distance), and
 * among equal distances the highest row id: LanceDB orders ties by `_rowid` ascending, and keeps
 * the lowest row ids where k cuts through them (slot order is not row-id order once rows were
 * updated or moved). Row ids are read only on a tie.
 */
interface Heap {
  d: Float32Array;
  i: Int32Array;
  n: number;
  /** Ties put the higher row id on top (the results heap); null: ties in any order. */
  g: Graph | null;
}
const newHeap = (): Heap => ({ d: new Float32Array(1024), i: new Int32Array(1024), n: 0, g: null });
const candidates = newHeap();
const results = newHeap();

/** Whether slot a goes above slot b at an equal distance in heap `h`: the higher row id, in the results heap. */
const tieAbove = (h: Heap, a: number, b: number) => h.g !== null && rowNumberOf(h.g, a) > rowNumberOf(h.g, b);

/**
 * Whether a row at distance d (slot) goes into a results heap whose top is the farthest kept:
 * nearer, or as near (as stored) with a lower row id.
 */
function nearer(d: number, slot: number): boolean {
  const top = -results.d[0];
  return d < top || (Math.fround(d) === top && tieAbove(results, results.i[0], slot));
}

function fresh(count: number): void {
  if (visited.length < count) {
    visited = new Uint32Array(Math.max(count, visited.length * 2, 1024));
    epoch = 0;
  }
  if (++epoch === 0xffffffff) {
    visited.fill(0);
    epoch = 1;
  }
}

function room(n: number): void {
  for (const h of [candidates, results]) {
    if (h.d.length > n) continue;
    const size = Math.max(n + 1, h.d.length * 2);
    const d = new Float32Array(size);
    const i = new Int32Array(size);
    d.set(h.d);
    i.set(h.i);
    h.d = d;
    h.i = i;
  }
}

function push(h: Heap, dist: number, id: number): void {
  if (h.n + 1 >= h.d.length) room(h.n + 1);
  // As stored: a tie is seen between the values kept.
  const d = Math.fround(dist);
  const hd = h.d;
  const hi = h.i;
  let i = h.n++;
  while (i > 0) {
    const p = (i - 1) >> 1;
    const pd = hd[p];
    if (pd < d || (pd === d && !tieAbove(h, id, hi[p]))) break;
    hd[i] = hd[p];
    hi[i] = hi[p];
    i = p;
  }
  hd[i] = d;
  hi[i] = id;
}

function pop(h: Heap): void {
  const hd = h.d;
  const hi = h.i;
  const n = --h.n;
  const d = hd[n];
  const id = hi[n];
  let i = 0;
  for (;;) {
    let c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && (hd[c + 1] < hd[c] || (hd[c + 1] === hd[c] && tieAbove(h, hi[c + 1], hi[c])))) c++;
    const cd = hd[c];
    if (cd > d || (cd === d && !tieAbove(h, hi[c], id))) break;
    hd[i] = hd[c];
    hi[i] = hi[c];
    i = c;
  }
  hd[i] = d;
  hi[i] = id;
}

/** The results heap, drained nearest first. */
function drain(): { slots: Int32Array; distances: Float32Array } {
  const slots = new Int32Array(results.n);
  const distances = new Float32Array(results.n);
  for (let i = results.n - 1; i >= 0; i--) {
    slots[i] = results.i[0];
    distances[i] = -results.d[0];
    pop(results);
  }
  return { slots, distances };
}

// ---- the graph walk --------------------------------------------------------------------------

const levelOf = (g: Graph, slot: number) => g.i32[metaWord(g, slot, META.LEVEL)];

/** Int32 index of a slot's link list at `level` (its count, then the links). */
function linksWord(g: Graph, slot: number, level: number): number {
  if (level === 0) return (recordAt(g, slot) + g.linksAt) >> 2;
  return (g.i32[metaWord(g, slot, META.UPPER)] >> 2) + (level - 1) * (g.m + 1);
}

/** What a walk may answer besides being near: the row exists at the version, passes the filter, lies in range. */
export interface Admit {
  version: number;
  /** Bit per slot: 1 where the row passes the filter; null for no filter. */
  bits: Uint32Array | null;
  lower: number;
  upper: number;
}

const admits = (g: Graph, slot: number, d: number, a: Admit) =>
  d >= a.lower && d < a.upper && (a.bits === null || (a.bits[slot >> 5] & (1 << (slot & 31))) !== 0) && visibleAt(g, slot, a.version);

/** Measure the query at `q` against the slots in `ids` (i32s at lane addrs): distances land at lane out. */
function measure(g: Graph, q: number, addrs: number, out: number, ids: Int32Array, n: number): void {
  for (let j = 0; j < n; j++) g.i32[(addrs >> 2) + j] = recordAt(g, ids[j]);
  g.kernel.many(q, addrs, n, out, g.dimPad, dots(g));
}

const idsBuf = new Int32Array(BATCH);

/** Greedy descent at one upper level: the nearest node found from `cur`. */
function greedy(g: Graph, lane: number, qNorm: number, cur: number, curD: number, level: number, limit: number): [number, number] {
  const q = laneAt(g, lane);
  const addrs = q + g.dimPad * 4;
  const out = addrs + BATCH * 4;
  for (let changed = true; changed; ) {
    changed = false;
    const w = linksWord(g, cur, level);
    const n = Math.min(g.i32[w], g.m);
    let m = 0;
    for (let j = 1; j <= n; j++) {
      const id = g.i32[w + j];
      if (id < limit) idsBuf[m++] = id;
    }
    measure(g, q, addrs, out, idsBuf, m);
    for (let j = 0; j < m; j++) {
      const d = scale(g, g.f32[(out >> 2) + j], idsBuf[j], qNorm);
      if (d < curD) {
        curD = d;
        cur = idsBuf[j];
        changed = true;
      }
    }
  }
  return [cur, curD];
}

/**
 * Beam search at one level from `ep`: leaves up to `ef` admitted nodes in the results heap. Nodes
 * not admitted still guide the walk. Returns false when it visited more than `cap` nodes (a filter
 * that passes few rows): the caller then measures every passing row instead.
 */
function beam(g: Graph, lane: number, qNorm: number, ep: number, epD: number, ef: number, level: number, limit: number, admit: Admit | null, cap: number, hide = -1): boolean {
  const q = laneAt(g, lane);
  const addrs = q + g.dimPad * 4;
  const out = addrs + BATCH * 4;
  fresh(limit);
  room(ef + g.m0 + 2);
  candidates.n = 0;
  results.n = 0;
  results.g = g;
  let visits = 1;
  if (hide >= 0) visited[hide] = epoch;
  visited[ep] = epoch;
  push(candidates, epD, ep);
  if (admit === null || admits(g, ep, epD, admit)) push(results, -epD, ep);
  while (candidates.n > 0) {
    const d = candidates.d[0];
    const c = candidates.i[0];
    if (results.n >= ef && d > -results.d[0]) break;
    pop(candidates);
    const w = linksWord(g, c, level);
    const n = Math.min(g.i32[w], level === 0 ? g.m0 : g.m);
    let m = 0;
    for (let j = 1; j <= n; j++) {
      const id = g.i32[w + j];
      if (id < limit && visited[id] !== epoch) {
        visited[id] = epoch;
        idsBuf[m++] = id;
      }
    }
    if (m === 0) continue;
    visits += m;
    if (visits > cap) return false;
    measure(g, q, addrs, out, idsBuf, m);
    for (let j = 0; j < m; j++) {
      const dd = scale(g, g.f32[(out >> 2) + j], idsBuf[j], qNorm);
      const id = idsBuf[j];
      if (results.n < ef || nearer(dd, id)) {
        push(candidates, dd, id);
        if (admit === null || admits(g, id, dd, admit)) {
          push(results, -dd, id);
          if (results.n > ef) pop(results);
        }
      }
    }
  }
  return true;
}

/** Copy the query into lane `lane` (padded with zeros); returns its norm. */
function placeQuery(g: Graph, lane: number, query: ArrayLike<number>): number {
  const q = laneAt(g, lane) >> 2;
  let norm = 0;
  for (let d = 0; d < g.dimPad; d++) {
    const x = d < g.dim ? query[d] : 0;
    g.f32[q + d] = x;
    norm += x * x;
  }
  return Math.sqrt(norm);
}

/** Every admitted slot of `slots` (or all below `limit`) measured; the nearest `k` kept in the results heap. */
function scan(g: Graph, lane: number, qNorm: number, k: number, limit: number, admit: Admit, slots: Int32Array | null): void {
  const q = laneAt(g, lane);
  const addrs = q + g.dimPad * 4;
  const out = addrs + BATCH * 4;
  room(k + 2);
  results.n = 0;
  results.g = g;
  const total = slots ? slots.length : limit;
  const bits = admit.bits;
  const version = admit.version;
  const i32 = g.i32;
  for (let s = 0; s < total; ) {
    let m = 0;
    for (; s < total && m < BATCH; s++) {
      const slot = slots ? slots[s] : s;
      if (bits !== null && (bits[slot >> 5] & (1 << (slot & 31))) === 0) continue;
      const at = recordAt(g, slot);
      const w = ((at + g.metaAt) >> 2) + META.BORN;
      if (i32[w] > version || i32[w + 1] <= version) continue;
      i32[(addrs >> 2) + m] = at;
      idsBuf[m++] = slot;
    }
    g.kernel.many(q, addrs, m, out, g.dimPad, dots(g));
    for (let j = 0; j < m; j++) {
      const d = scale(g, g.f32[(out >> 2) + j], idsBuf[j], qNorm);
      if (d >= admit.lower && d < admit.upper && (results.n < k || nearer(d, idsBuf[j]))) {
        push(results, -d, idsBuf[j]);
        if (results.n > k) pop(results);
      }
    }
  }
}

export interface SearchOptions extends Admit {
  /** Rows wanted (k + offset). */
  k: number;
  ef: number;
  /** Measure every row (bypass_vector_index), not the graph. */
  exact: boolean;
  /** Rows the filter passes (bits set), to choose between the graph and measuring them all. */
  passing: number;
  /** Apply `bits` to the nearest rows found without it (LanceDB's postfilter), not during the search. */
  postfilter: boolean;
  /** A slot of level 0 the walk steps over as if it were not there (calibration's held-out row). */
  hide?: number;
}

/** Tables up to this many rows are measured whole: as fast as the graph, and exact. */
export const MEASURE_ALL_BELOW = 2048;

/** Slots whose bit is set, below `limit`. */
function passingSlots(bits: Uint32Array, limit: number, passing: number): Int32Array {
  const out = new Int32Array(passing);
  let n = 0;
  for (let w = 0; w << 5 < limit; w++) {
    let word = bits[w];
    while (word !== 0 && n < passing) {
      const b = 31 - Math.clz32(word & -word);
      const slot = (w << 5) + b;
      if (slot < limit) out[n++] = slot;
      word &= word - 1;
    }
  }
  return out.subarray(0, n);
}

/**
 * The nearest rows to `query` that `o` admits, nearest first: slots and distances on LanceDB's
 * scale. `lane` is this task's scratch lane (1..LANES-1 for searches).
 */
export function search(g: Graph, lane: number, query: ArrayLike<number>, o: SearchOptions): { slots: Int32Array; distances: Float32Array } {
  // The count first: the memory holding every slot below it has grown by then.
  const limit = slotCount(g);
  refresh(g);
  const qNorm = placeQuery(g, lane, query);
  const during: Admit = o.postfilter ? { ...o, bits: null } : o;
  const k = Math.max(1, o.k);
  const entry = g.i32[H.ENTRY];
  const filtered = during.bits !== null;
  // A walk that must step over rows it may not answer (a filter's, tombstones) is widened by the
  // share of rows it may answer: a filter passing whole clusters, the query in one it does not
  // pass, ended its walk in the first passing cluster it reached (recall@10 0.97 with half of 64
  // Gaussian clusters passing, 20,000 rows of 32 dimensions; 0.98 widened by the square root of
  // the share, 0.99 by the share).
  const admitted = filtered ? o.passing : limit - tombstones(g);
  const width = Math.ceil((o.ef * limit) / Math.max(1, admitted));
  // A filter passing few rows: measuring them is cheaper than the walk it would need (its cost
  // grows as 1/selectivity: ~20 ef rows measured unfiltered).
  const few = filtered && o.passing * o.passing < 20 * width * limit;
  if (o.exact || entry < 0 || limit < MEASURE_ALL_BELOW || few) {
    scan(g, lane, qNorm, k, limit, during, few && !o.exact && limit >= MEASURE_ALL_BELOW ? passingSlots(during.bits!, limit, o.passing) : null);
  } else {
    let cur = entry;
    let curD = scale(g, measureOne(g, lane, cur), cur, qNorm);
    for (let l = Math.min(g.i32[H.MAX_LEVEL], levelOf(g, entry)); l > 0; l--) [cur, curD] = greedy(g, lane, qNorm, cur, curD, l, limit);
    const ef = Math.max(width, k);
    if (!beam(g, lane, qNorm, cur, curD, ef, 0, limit, during, Math.max(limit >> 2, ef * g.m0 * 2), o.hide ?? -1)) scan(g, lane, qNorm, k, limit, during, null);
    while (results.n > k) pop(results);
  }
  const found = drain();
  if (!o.postfilter || o.bits === null) return found;
  const keep = found.slots.map((s) => ((o.bits![s >> 5] & (1 << (s & 31))) !== 0 ? 1 : 0));
  return { slots: found.slots.filter((_, i) => keep[i]), distances: found.distances.filter((_, i) => keep[i]) };
}

/** The widths calibration tries, narrowest first (a row's ten nearest and more). */
export const CALIBRATION_WIDTHS = [10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512];
/** Rows a calibration recall counts per query: recall@10, as clients measure it. */
const CALIBRATION_K = 10;

/**
 * Up to `count` rows to calibrate with, spread over the slots: alive at `version`, of level 0 and not
 * the entry point, so that a walk can step over each as if it were a query's, not a row's (`hide`).
 */
export function calibrationSample(g: Graph, count: number, version: number): Int32Array {
  const limit = slotCount(g);
  refresh(g);
  const entry = g.i32[H.ENTRY];
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    for (let s = Math.floor((i * limit) / count), end = Math.floor(((i + 1) * limit) / count); s < end; s++) {
      if (s !== entry && levelOf(g, s) === 0 && visibleAt(g, s, version)) {
        out.push(s);
        break;
      }
    }
  }
  return Int32Array.from(out);
}

/**
 * For each of `widths` (then the whole count), how many of their ten nearest rows (measured exactly) searches at that
 * width found, the rows `sample` standing for queries. Each row is held out of its own searches:
 * the walk steps over it and the answers leave it out. Searched for with the row in place, its own
 * links lead straight to its neighbours: recall 0.95 at ef 64 on uniform random vectors, where
 * held-out queries found 0.82 (held out as here: 0.81).
 */
export function calibrationHits(g: Graph, lane: number, sample: ArrayLike<number>, widths: number[], version: number): Int32Array {
  // The last: the nearest rows there were to find (fewer than ten a query in a table of few rows).
  const hits = new Int32Array(widths.length + 1);
  const q = new Float32Array(g.dim);
  const base = { version, bits: null, lower: -Infinity, upper: Infinity, k: CALIBRATION_K + 1, passing: 0, postfilter: false };
  for (let i = 0; i < sample.length; i++) {
    const slot = sample[i];
    refresh(g);
    const at = recordAt(g, slot) >> 2;
    q.set(g.f32.subarray(at, at + g.dim));
    const others = (found: Int32Array) => Array.from(found).filter((s) => s !== slot).slice(0, CALIBRATION_K);
    const truth = new Set(others(search(g, lane, q, { ...base, ef: CALIBRATION_K + 1, exact: true }).slots));
    hits[widths.length] += truth.size;
    widths.forEach((ef, w) => {
      for (const s of others(search(g, lane, q, { ...base, ef, exact: false, hide: slot }).slots)) if (truth.has(s)) hits[w]++;
    });
  }
  return hits;
}

function measureOne(g: Graph, lane: number, slot: number): number {
  const q = laneAt(g, lane);
  const r = recordAt(g, slot);
  return g.metric === "l2" ? g.kernel.l2sq(q, r, g.dimPad) : g.kernel.dot(q, r, g.dimPad);
}

// ---- building: inserting a slot into the graph (one writer at a time) --------------------------

function nextRandom(g: Graph): number {
  let a = (g.i32[H.RNG] + 0x6d2b79f5) | 0;
  g.i32[H.RNG] = a;
  a = Math.imul(a ^ (a >>> 15), a | 1);
  a ^= a + Math.imul(a ^ (a >>> 7), a | 61);
  return ((a ^ (a >>> 14)) >>> 0) / 4294967296;
}

/**
 * Of candidates sorted nearest first, those not closer to an already kept one than to the base
 * (HNSW's neighbour heuristic, which keeps links spread out), at most `max`.
 */
function select(g: Graph, ids: ArrayLike<number>, ds: ArrayLike<number>, max: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < ids.length && out.length < max; i++) {
    const e = ids[i];
    let keep = true;
    for (const s of out) {
      if (between(g, e, s) < ds[i]) {
        keep = false;
        break;
      }
    }
    if (keep) out.push(e);
  }
  return out;
}

/** Write a link list; the count last, so a reader sees either list's links, never garbage. */
function setLinks(g: Graph, slot: number, level: number, list: number[]): void {
  const w = linksWord(g, slot, level);
  for (let j = 0; j < list.length; j++) g.i32[w + 1 + j] = list[j];
  Atomics.store(g.i32, w, list.length);
}

function addLink(g: Graph, n: number, slot: number, level: number): void {
  const max = level === 0 ? g.m0 : g.m;
  const w = linksWord(g, n, level);
  const c = g.i32[w];
  if (c < max) {
    g.i32[w + 1 + c] = slot;
    Atomics.store(g.i32, w, c + 1);
    return;
  }
  const cand: number[] = [slot];
  for (let j = 1; j <= c; j++) cand.push(g.i32[w + j]);
  const ds = cand.map((x) => between(g, n, x));
  const order = cand.map((_, i) => i).sort((a, b) => ds[a] - ds[b]);
  setLinks(g, n, level, select(g, order.map((i) => cand[i]), order.map((i) => ds[i]), max));
}

/**
 * About the most bytes the writer allocates for `rows` more rows carrying `valueBytes` of cached
 * variable-width values: their records' chunks, their upper link lists (a level is drawn once in m
 * rows: four times that, and one list at the top level), and the values. A sync asks the budget
 * for it before it writes; the limit (`setLimit`) holds whatever the draws.
 */
export function growthBound(g: Graph, rows: number, valueBytes: number): number {
  const count = slotCount(g);
  const chunks = Math.ceil((count + rows) / CHUNK_SLOTS) - Math.ceil(count / CHUNK_SLOTS);
  const list = (g.m + 1) * 4 + 16;
  return chunks * CHUNK_SLOTS * g.record + Math.ceil((4 * rows * list) / (g.m - 1)) + 16 * list + valueBytes;
}

/** Draw a written slot's level and give it its upper link lists. Writer only, before `link`. */
export function assignLevel(g: Graph, slot: number): void {
  const level = Math.min(16, Math.floor(-Math.log(nextRandom(g) + 1e-12) / Math.log(g.m)));
  const meta = metaWord(g, slot, 0);
  if (level > 0) g.i32[meta + META.UPPER] = allocate(g, level * (g.m + 1) * 4);
  g.i32[meta + META.LEVEL] = level;
}

/** Take the lock word at Int32 index `w`, waiting while another thread holds it. */
function lock(g: Graph, w: number): void {
  while (Atomics.compareExchange(g.i32, w, 0, 1) !== 0) Atomics.wait(g.i32, w, 1, 1);
}

function unlock(g: Graph, w: number): void {
  Atomics.store(g.i32, w, 0);
  Atomics.notify(g.i32, w, 1);
}

/**
 * Link a written slot (`newSlot`, `assignLevel`) into the graph, from scratch lane `lane`. Several
 * threads may link different slots at once (a build): a node's link lists change under its lock,
 * the entry point under the header's; searches read lists without locks (a list is written before
 * its count, so a reader sees valid links of either list).
 */
export function link(g: Graph, slot: number, lane: number): void {
  const limit = slotCount(g);
  refresh(g);
  const level = levelOf(g, slot);
  lock(g, H.LOCK);
  const entry = g.i32[H.ENTRY];
  const top = g.i32[H.MAX_LEVEL];
  if (entry < 0) {
    g.i32[H.MAX_LEVEL] = level;
    Atomics.store(g.i32, H.ENTRY, slot);
    return unlock(g, H.LOCK);
  }
  // A node above the top level becomes the entry point: no other may do so meanwhile.
  const raises = level > top;
  if (!raises) unlock(g, H.LOCK);
  const at = recordAt(g, slot) >> 2;
  const qNorm = placeQuery(g, lane, g.f32.subarray(at, at + g.dim));
  let cur = entry;
  let curD = scale(g, measureOne(g, lane, cur), cur, qNorm);
  for (let l = top; l > level; l--) [cur, curD] = greedy(g, lane, qNorm, cur, curD, l, limit);
  const near: number[][] = [];
  for (let l = Math.min(level, top); l >= 0; l--) {
    beam(g, lane, qNorm, cur, curD, g.i32[H.EF_CONSTRUCTION], l, limit, null, Infinity);
    const found = drain();
    near[l] = select(g, found.slots.filter((s) => s !== slot), found.distances.filter((_, i) => found.slots[i] !== slot), l === 0 ? g.m0 : g.m);
    if (found.slots.length > 0) {
      cur = found.slots[0];
      curD = found.distances[0];
    }
  }
  // The node's lists at every level before any link to it: another thread's walk that reaches it
  // at one level goes on from it at the levels below. Linked one level at a time, such a walk found
  // lists still empty there, linked its own node from this one alone, and that link was then
  // overwritten: nodes no walk reached, and 0.1–0.5% of rows not found by their own vector.
  const own = metaWord(g, slot, META.LOCK);
  lock(g, own);
  near.forEach((list, l) => setLinks(g, slot, l, list));
  unlock(g, own);
  near.forEach((list, l) => {
    for (const n of list) {
      const w = metaWord(g, n, META.LOCK);
      lock(g, w);
      addLink(g, n, slot, l);
      unlock(g, w);
    }
  });
  if (raises) {
    g.i32[H.MAX_LEVEL] = level;
    Atomics.store(g.i32, H.ENTRY, slot);
    unlock(g, H.LOCK);
  }
}

// ---- reachability: rows a walk can answer ------------------------------------------------------

/** Mark in `seen` every slot below `limit` that a walk at level 0 from `from` reaches (unmarked ones only). */
function spread(g: Graph, from: number, seen: Uint8Array, limit: number, stack: Int32Array): void {
  const i32 = g.i32;
  const linksAt = g.linksAt;
  const record = g.record;
  let top = 0;
  stack[top++] = from;
  seen[from] = 1;
  while (top > 0) {
    const slot = stack[--top];
    const w = (i32[(CHUNKS_AT >> 2) + (slot >> CHUNK_SHIFT)] + (slot & (CHUNK_SLOTS - 1)) * record + linksAt) >> 2;
    for (let j = 1, n = Math.min(i32[w], g.m0); j <= n; j++) {
      const s = i32[w + j];
      if (s < limit && seen[s] === 0) {
        seen[s] = 1;
        stack[top++] = s;
      }
    }
  }
}

/** The slots below `limit` a walk at level 0 from the entry point reaches (1 each); none when the graph is empty. */
export function reachable(g: Graph, limit = slotCount(g)): Uint8Array {
  refresh(g);
  const seen = new Uint8Array(limit);
  const entry = g.i32[H.ENTRY];
  if (entry >= 0 && entry < limit) spread(g, entry, seen, limit, new Int32Array(limit));
  return seen;
}

/**
 * Link every live row no walk reaches from the nearest live row that one does; returns how many.
 * The neighbour heuristic's pruning can leave such a row (1 of 20,000 built on one thread): a row
 * no graph search could ever answer. It is linked into a free place of its neighbour's list, else
 * in place of the farthest link whose node other lists name too. The index's writer only (links
 * change under each node's lock; searches read lists as `link` leaves them).
 */
export function connect(g: Graph, lane: number): number {
  const limit = slotCount(g);
  const seen = reachable(g, limit);
  const alive = (s: number) => g.i32[metaWord(g, s, META.DIED)] === ALIVE;
  const lost = [];
  for (let x = 0; x < limit; x++) if (seen[x] === 0 && alive(x)) lost.push(x);
  if (lost.length === 0 || g.i32[H.ENTRY] < 0) return 0;
  const into = new Uint32Array(limit);
  for (let s = 0; s < limit; s++) {
    const w = linksWord(g, s, 0);
    for (let j = 1, n = Math.min(g.i32[w], g.m0); j <= n; j++) into[g.i32[w + j]]++;
  }
  const stack = new Int32Array(limit);
  let linked = 0;
  for (const x of lost) {
    if (seen[x] === 1) continue;
    const at = recordAt(g, x) >> 2;
    const near = search(g, lane, g.f32.subarray(at, at + g.dim), { k: 16, ef: g.i32[H.EF_CONSTRUCTION], exact: false, passing: 0, postfilter: false, version: ALIVE - 1, bits: null, lower: -Infinity, upper: Infinity });
    for (const n of near.slots) {
      if (n === x || seen[n] === 0) continue;
      const lockWord = metaWord(g, n, META.LOCK);
      lock(g, lockWord);
      const w = linksWord(g, n, 0);
      const count = g.i32[w];
      let place = count < g.m0 ? count + 1 : -1;
      for (let j = 1, far = -Infinity; count >= g.m0 && j <= count; j++) {
        const y = g.i32[w + j];
        if (into[y] < 2) continue;
        const d = between(g, n, y);
        if (d > far) [far, place] = [d, j];
      }
      if (place > 0) {
        if (place <= count) into[g.i32[w + place]]--;
        g.i32[w + place] = x;
        if (place > count) Atomics.store(g.i32, w, place);
        into[x]++;
      }
      unlock(g, lockWord);
      if (place > 0) {
        linked++;
        spread(g, x, seen, limit, stack);
        break;
      }
    }
  }
  return linked;
}
