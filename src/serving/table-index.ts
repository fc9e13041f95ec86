// One table's serving index as the main thread keeps it, and keeping it at the table's versions:
// the build from the table's rows, and the sync after commits (rows added, changed, moved or gone
// between two versions, found by their row ids, which must stay LanceDB's at every version).
import type { Entry } from "../catalog/catalog.js";
import { calibration, CALIBRATION_WIDTHS, calibrationSample, columnBytes, createGraphMemory, graphOf, growthBound, MAX_MEMORY_BYTES, MEASURE_ALL_BELOW, MAX_SLOTS, refresh, retire, rowNumberOf, setCalibration, setLimit, setRowId, slotCount, tombstones, usedBytes, type Graph } from "./graph.js";
import { mappedRows, mapRow, newRowSlots, NO_VECTOR, ROW_SLOT_BYTES, rowsMapped, rowSlotsBytes, rowSlotsGrowth, slotOf, unmapRow, type RowsAt, type RowSlots } from "./row-slots.js";
import { columnLayout, type Applied, type CachedColumn } from "./rows.js";
import { valueIndexBytes, type ValueIndex } from "./predicate.js";
import { arrow } from "../engine/arrow.js";
import { readRows, rowIdsOf, schemaOf, takeRows, type IndexedVectors } from "../engine/serving-source.js";
import { countRows, tableVersion } from "../engine/table-info.js";
import type { TableHandle } from "../engine/tables.js";
import type { LanceOperation, VersionOperation } from "../engine/versions.js";
import { slicer } from "../util/turns.js";
import type { ServingPool } from "./pool.js";
import type { IndexRef } from "./thread.js";

/** HNSW's links per node (32 at level 0) and candidates kept while linking a row. */
export const GRAPH_M = 16;
export const EF_CONSTRUCTION = 128;

export interface ServingIndex {
  entry: Entry;
  column: string;
  metric: IndexedVectors["metric"];
  /** What tasks name: the memory, its cached columns and a key unique to this build. */
  ref: IndexRef;
  /** The main thread's view: row ids, tombstones, counts. */
  graph: Graph;
  /** Columns read for each row: the vector column, then the cached ones. */
  names: string[];
  /** The table version it answers at; searches at another are LanceDB's. */
  version: number;
  /** Slots written when `version` was published (later ones are born after it). */
  slotsAtVersion: number;
  /** Live row id → its slot at `version`; NO_VECTOR for a row without a vector, which is known but never answered. */
  rowSlots: RowSlots;
  /** Slots by value of the cached columns that equality filters named (src/serving/filters.ts), by column. */
  valueIndexes: Map<string, ValueIndex>;
  /** Bytes of the filters' bitmaps remembered for it (src/serving/filters.ts). */
  filterBytes: number;
  /**
   * The latest version at which rows kept their slots while columns it does not cache may have
   * changed (an update leaves an equal record in place; a row re-added under a new id is remapped):
   * a bitmap LanceDB evaluated before it is evaluated again whole.
   */
  changedAt: number;
  /** The highest row id ever indexed: rows added later have higher ones (fragment ids and stable ids only grow). */
  maxRowId: number;
  /** While slots get new row ids in place (exclusive), resolves once they have: searches wait for it. */
  remapped: Promise<void> | null;
  /** How many times slots got new row ids: a search that began before one starts again (or LanceDB answers it). */
  moves: number;
  /** Searches in flight, and who waits for none to be. */
  searching: number;
  drained: (() => void) | null;
  /** Changed since it was last saved. */
  dirty: boolean;
  /** Slots written when every live row was last made reachable (`connected`), and the rows it linked since the build or load. */
  connectedAt: number;
  relinked: number;
}

/**
 * What an index (and its saved copy) is kept under: the table's data, not its name. A rename keeps
 * the data, and so the index, under the new name; a new table under the old name has data of its
 * own. A table made again at the same location is told apart by its versions (`changesSince`, and
 * the saved copy's commit time).
 */
export const dataOf = (entry: Pick<Entry, "location" | "objectId">) => entry.location ?? `\u0000${entry.objectId}`;

/** Slots one link task of a build takes: small enough that every thread stays busy to the end. */
const LINK_TASK = 2000;

/** An index that does not fit the memory it may take. */
export class TooBig extends Error {}

const ROW_ID = "_rowid";

/** The columns an index reads and caches, and the bytes a row's record takes. */
async function layoutOf(t: TableHandle, v: IndexedVectors, cache: boolean) {
  const schema = await schemaOf(t);
  const { columns, bytes } = cache ? columnLayout(schema.fields, v.column) : { columns: [] as CachedColumn[], bytes: 0 };
  return { columns, bytes, names: [v.column, ...columns.map((c) => c.name)] };
}

/** A rough size of an index of `rows` rows of `dim` floats and `columnBytes` (variable-width values aside). */
export const estimate = (rows: number, dim: number, columnBytes: number) => rows * ((Math.ceil(dim / 4) * 16 + (2 * GRAPH_M + 1) * 4 + 32 + columnBytes) * 1.1 + ROW_SLOT_BYTES) + (1 << 20);

/** Whether an index of `rows` rows of `dim` floats and `columnBytes` may fit `maxBytes` and the memory's own limits. */
const mayFit = (rows: number, dim: number, columnBytes: number, maxBytes: number) => rows <= MAX_SLOTS && estimate(rows, dim, columnBytes) <= Math.min(maxBytes, MAX_MEMORY_BYTES);

/** Why an index of `rows` rows of `dim` floats cannot be held in `maxBytes`, known before a row is read (null: it may be). */
export function wontFit(rows: number, dim: number, maxBytes: number): string | null {
  if (mayFit(rows, dim, 0, maxBytes)) return null;
  if (rows > MAX_SLOTS) return `${rows} rows, past the ${MAX_SLOTS} an index holds`;
  return `about ${Math.round(estimate(rows, dim, 0) / 2 ** 20)} MiB, past ${Math.round(Math.min(maxBytes, MAX_MEMORY_BYTES) / 2 ** 20)} MiB`;
}

/**
 * Build the index of column `v` from table handle `t` (its version): rows read from the engine in
 * batches and written by one pool thread, then linked by all of them at once. Cached columns are left out when the index would
 * not fit `maxBytes` with them (answers then take their columns from the engine); TooBig when it
 * does not fit without. Its memory may later grow to `ceiling` (the whole budget), by what syncs
 * are granted (`Claim`).
 */
export async function buildIndex(pool: ServingPool, entry: Entry, t: TableHandle, v: IndexedVectors, maxBytes: number, ceiling: number, key: string): Promise<ServingIndex> {
  const version = await tableVersion(t);
  const rows = await countRows(t);
  const refused = wontFit(rows, v.dim, maxBytes);
  if (refused) throw new TooBig(refused);
  let layout = await layoutOf(t, v, true);
  if (!mayFit(rows, v.dim, layout.bytes, maxBytes)) layout = await layoutOf(t, v, false);
  const memory = createGraphMemory({ dim: v.dim, metric: v.metric, m: GRAPH_M, efConstruction: EF_CONSTRUCTION, columnBytes: layout.bytes, maxBytes: Math.max(maxBytes, ceiling) });
  const ix = indexOf(entry, v.column, v.metric, { key, memory, columns: layout.columns }, layout.names, version);
  // The row-id map, made after (in a pool thread) and kept on this thread, takes its part of
  // `maxBytes` (a row without a vector takes no record, larger than its entry: the whole is checked after).
  setLimit(ix.graph, maxBytes - rowSlotsGrowth(null, rows, 0));
  ix.dirty = true;
  const none = { removed: new Int32Array(0), changedIds: new BigUint64Array(0), changedSlots: new Int32Array(0), link: false };
  const vectorless: bigint[] = [];
  try {
    // Rows written by one thread as the engine hands them out; then linked by all of them.
    for await (const batch of readRows(t, layout.names)) vectorless.push(...(await pool.apply({ index: ix.ref, vectorColumn: v.column, version, batches: [batch], ...none })).vectorless);
    const count = slotCount(ix.graph);
    if (count > 0) await pool.link(ix.ref, 0, 1);
    let next = 1;
    const linker = async () => {
      for (let from = next; from < count; from = next) {
        next = Math.min(count, from + LINK_TASK);
        await pool.link(ix.ref, from, next);
      }
    };
    await Promise.all(Array.from({ length: pool.size }, linker));
    await connected(pool, ix);
    await calibrate(pool, ix);
  } catch (err) {
    throw err instanceof RangeError || /memory|grow/i.test(String(err)) ? new TooBig(String(err)) : err;
  }
  indexRows(ix, await pool.rows(ix.ref, ix.version));
  for (const id of vectorless) mapRow(ix.rowSlots, Number(id), NO_VECTOR);
  if (figures(ix).bytes > maxBytes) throw new TooBig(`${figures(ix).bytes} bytes, past the ${maxBytes} granted`);
  return ix;
}

/** The main thread's record of an index memory answering at `version` (its row ids not mapped yet: `indexRows`). */
export function indexOf(entry: Entry, column: string, metric: IndexedVectors["metric"], ref: IndexRef, names: string[], version: number): ServingIndex {
  const graph = graphOf(ref.memory);
  return {
    entry,
    column,
    metric,
    ref,
    graph,
    names,
    version,
    slotsAtVersion: 0,
    rowSlots: newRowSlots(graph),
    valueIndexes: new Map(),
    filterBytes: 0,
    changedAt: 0,
    maxRowId: -1,
    remapped: null,
    moves: 0,
    searching: 0,
    drained: null,
    dirty: false,
    connectedAt: 0,
    relinked: 0,
  };
}

/** Fill `rowSlots` and `maxRowId` with `rows`, the map of the slots alive at the index's version (after a build or a load), made in a pool thread (`ServingPool.rows`). */
export function indexRows(ix: ServingIndex, rows: RowsAt): void {
  refresh(ix.graph);
  ix.slotsAtVersion = rows.slots;
  ix.maxRowId = Math.max(ix.maxRowId, rows.maxRowId);
  ix.rowSlots.buckets = rows.buckets;
  ix.rowSlots.slotted = rows.slotted;
  ix.rowSlots.vectorless.clear();
}

/**
 * Link the live rows no graph walk reaches (graph.ts, `connect`): after a build or a load,
 * and once the rows syncs linked one by one come to an eighth of the slots there were (a walk over
 * every link list: 31–41 ms of a pool thread at 100,000 rows, once in 12,500 rows).
 */
export async function connected(pool: ServingPool, ix: ServingIndex, sync = false): Promise<void> {
  refresh(ix.graph);
  const count = slotCount(ix.graph);
  if (sync && count - ix.connectedAt < Math.max(CONNECT_EVERY, ix.connectedAt >> 3)) return;
  const linked = await pool.connect(ix.ref);
  ix.relinked += linked;
  ix.connectedAt = count;
  if (linked > 0) ix.dirty = true;
}

const CONNECT_EVERY = 1024;

/** Rows held out as queries to calibrate an index's width, and the recall@10 its width must reach on them. */
const CALIBRATION_ROWS = 128;
const CALIBRATION_RECALL = 0.97;

/** The widths calibration tries, in two rounds: the wider ones only where none of the first reached the recall (each round's searches cost about the sum of its widths). */
const CALIBRATION_ROUNDS = [CALIBRATION_WIDTHS.filter((w) => w <= 128), CALIBRATION_WIDTHS.filter((w) => w > 128)];

/**
 * Choose the index's search width (`calibration` in graph.ts, kept in its memory and so in
 * its saved copy): the narrowest of CALIBRATION_WIDTHS whose searches found CALIBRATION_RECALL of
 * the ten nearest rows of rows held out as queries (the widest when none did), the sample's searches
 * spread over `threads` of the pool's. How hard an index is to walk depends on its data: on uniform random
 * vectors ef 64 found 0.77–0.82 of held-out queries' ten nearest, on the bench's low-rank and
 * clustered data 0.99 and more.
 */
export async function calibrate(pool: ServingPool, ix: ServingIndex, threads = pool.size): Promise<void> {
  refresh(ix.graph);
  const slots = slotCount(ix.graph);
  const version = ix.version;
  const sample = calibrationSample(ix.graph, CALIBRATION_ROWS, version);
  const parts = chunks(Array.from(sample), Math.ceil(sample.length / threads));
  for (const widths of CALIBRATION_ROUNDS) {
    const hits = new Int32Array(widths.length + 1);
    for (const part of await Promise.all(parts.map((p) => pool.calibrate(ix.ref, Int32Array.from(p), widths, version)))) part.forEach((h, i) => (hits[i] += h));
    const wanted = hits[widths.length];
    const recall = (w: number) => (wanted === 0 ? 1 : hits[w] / wanted);
    const reached = widths.findIndex((_, w) => recall(w) >= CALIBRATION_RECALL);
    const chosen = reached < 0 ? widths.length - 1 : reached;
    setCalibration(ix.graph, widths[chosen], recall(chosen), slots);
    if (reached >= 0) break;
  }
  ix.dirty = true;
}

/** Whether the index has no calibrated width, or has grown to twice the slots it had when it was calibrated (tables of fewer rows are measured whole). */
export const uncalibrated = (ix: ServingIndex) => calibration(ix.graph).ef === 0 || slotCount(ix.graph) >= Math.max(2 * calibration(ix.graph).slots, MEASURE_ALL_BELOW);

/** Rows at most this many are synced while the write waits for its answer; more sync after it. */
export const AWAITED_ROWS = 5000;

/** What a sync found it must do, before it reads any row (so a large one need not be waited for). */
export interface SyncPlan {
  rows: number;
  /** Applies it; says how the rows were found (`quiver_serving_sync_seconds`). */
  run(): Promise<SyncRead>;
}

/** How a sync found its rows: the new rows taken by row id, scanned for (`_rowid` above the highest), or every row id compared. */
export type SyncRead = "taken" | "scanned" | "compared";

/**
 * Asks the budget for `bytes` more, before a sync writes rows: TooBig when they cannot be had. What
 * was granted and not used goes back when the sync is done.
 */
export type Claim = (bytes: number) => void;

/** What made a version of the table (null: not known), as `versionOperation` reads it. */
export type OperationOf = (version: number) => Promise<VersionOperation | null>;

/**
 * How to bring `ix` to the version of handle `t` (`x`), which `changesSince` found a sync can
 * follow. When the versions since the index's only added rows (`onlyAdded`), rows with higher row
 * ids are read alone, and the row count confirms nothing else changed. Otherwise every row id is
 * read: ids gone are tombstoned (or, when a new row is the same row moved, remapped), new ids and
 * ids whose rows changed since (stable row ids keep their id across an update) are read and applied.
 */
export async function planSync(pool: ServingPool, ix: ServingIndex, t: TableHandle, x: number, onlyAdded: boolean, claim: Claim): Promise<SyncPlan> {
  if (onlyAdded) {
    const total = await countRows(t);
    const added = total - mappedRows(ix.rowSlots);
    if (added >= 0) {
      return {
        rows: added,
        run: async () => {
          const taken = await newRowsTaken(ix, t, added, x - ix.version);
          const r = await apply(pool, ix, x, added, taken ?? (await read(t, ix, `${ROW_ID} > ${ix.maxRowId}`)), [], [], [], claim);
          if (r.written + r.vectorless.length + mappedRows(ix.rowSlots) === total) {
            await publish(ix, x, r, [], []);
            return taken ? "taken" : "scanned";
          }
          // Something else happened in between (an insert that overwrote): the rows just written
          // are known, and every row id is compared.
          adopt(ix, r);
          return (await planSync(pool, ix, t, x, false, claim)).run();
        },
      };
    }
  }
  // Every row id compared with the index's, in slices with the event loop's turn between them
  // (src/util/turns.ts): at 100k rows each pass held the main thread for tens of milliseconds, and
  // every search in flight waited (the worst seconds of a write stream, after each compaction).
  // Syncs are one at a time: nothing changes the index meanwhile.
  // One pass over the table's row ids marks the index's slots they name and collects the ids it
  // lacks; one over the index's rows finds those unmarked. The ids are read as 32-bit halves, no
  // BigInt a row (a row id is below 2^53; typed arrays are little-endian where Node runs).
  let n = 0;
  const slice = slicer();
  const seen = new Uint8Array(slotCount(ix.graph));
  const seenVectorless = new Set<number>();
  const addedOld: number[] = [];
  let addedNew = 0;
  for (const chunk of await rowIdsOf(t)) {
    const halves = new Uint32Array(chunk.buffer, chunk.byteOffset, chunk.length * 2);
    for (let i = 0; i < chunk.length; i++) {
      const id = halves[2 * i + 1] * 2 ** 32 + halves[2 * i];
      const slot = slotOf(ix.rowSlots, id);
      if (slot === undefined) {
        if (id > ix.maxRowId) addedNew++;
        else addedOld.push(id);
      } else if (slot === NO_VECTOR) seenVectorless.add(id);
      else seen[slot] = 1;
      if (++n % CHECK_EVERY === 0) await slice.pause();
    }
  }
  const removed: number[] = [];
  const goneIds: number[] = [];
  for (const [id, slot] of rowsMapped(ix.rowSlots)) {
    if (slot === NO_VECTOR) {
      if (!seenVectorless.has(id)) goneIds.push(id);
    } else if (seen[slot] === 0) removed.push(slot);
    if (++n % CHECK_EVERY === 0) await slice.pause();
  }
  const changedIds: bigint[] = [];
  const changedSlots: number[] = [];
  for (const chunk of await rowIdsOf(t, `_row_last_updated_at_version > ${ix.version}`)) {
    for (const id of chunk) {
      const slot = slotOf(ix.rowSlots, Number(id));
      if (slot === undefined) continue;
      changedIds.push(id);
      changedSlots.push(slot);
    }
  }
  const reread = [...addedOld.map(String), ...changedIds.map(String)];
  return {
    rows: addedNew + reread.length,
    run: async () => {
      const where = [`${ROW_ID} > ${ix.maxRowId}`, ...chunks(reread, 1000).map((c) => `${ROW_ID} IN (${c.join(",")})`)].join(" OR ");
      const rows = addedNew + reread.length;
      const r = await apply(pool, ix, x, rows, rows > 0 ? await read(t, ix, where) : [], removed, changedIds, changedSlots, claim);
      if (changedIds.length > 0 || r.remapSlots.length > 0) ix.changedAt = x;
      const remapped = new Set(r.remapSlots);
      await publish(ix, x, r, removed.filter((s) => !remapped.has(s)), goneIds);
      return "compared";
    },
  };
}

/** Operations after which every row the index holds is still there, with its row id and values (a merge adds columns). */
const KEEPS_ROWS = new Set<LanceOperation>(["append", "create_index", "merge", "reserve_fragments", "update_config"]);
/** Operations whose rows a comparison of every row id finds (gone, new, moved, or changed since by `_row_last_updated_at_version`). */
const CHANGES_ROWS = new Set<LanceOperation>(["delete", "update", "rewrite"]);
/** Versions whose operations a sync reads at most; past that the index is built again. */
const READ_OPERATIONS = 256;

/**
 * What the versions after the index's up to x did, as each one's transaction says (this process's
 * too: an insert with mode overwrite is announced as an insert, and may keep the row count): `added`
 * (only rows added: appends, index commits and, with stable row ids, compactions, which keep every
 * row's id), `changed` (rows deleted, updated or moved: every row id
 * is compared), or `rebuild`: a version a comparison cannot follow exactly (a restore, whose rows
 * carry their old `_row_last_updated_at_version`; an overwrite; a column dropped, renamed or
 * replaced, whose name a later column may take; an operation not known; a version below the
 * index's, i.e. a table made again at its location). A version maintenance already removed is
 * compared (a rebuild after every cleanup behind a write stream cost more than the rare restore it
 * could hide). `reshaped`: one of them is an index commit, a column added or removed (the vector
 * index may have been replaced, the answers' columns changed).
 */
export async function changesSince(ix: ServingIndex, x: number, operationOf: OperationOf): Promise<{ kind: "added" | "changed" | "rebuild"; reshaped: boolean }> {
  if (x < ix.version || x - ix.version > READ_OPERATIONS) return { kind: "rebuild", reshaped: true };
  let kind: "added" | "changed" = "added";
  let reshaped = false;
  // Several at once: each read is a round trip to the store, and a sync behind other replicas' commits has a few.
  for (const versions of chunks([...range(ix.version + 1, x)], READ_AT_ONCE)) {
    for (const op of await Promise.all(versions.map(operationOf))) {
      if (!op) {
        kind = "changed";
        reshaped = true;
        continue;
      }
      reshaped ||= op.operation === "create_index" || op.operation === "merge";
      if (KEEPS_ROWS.has(op.operation) || (op.operation === "rewrite" && op.stableRowIds)) continue;
      if (!CHANGES_ROWS.has(op.operation)) return { kind: "rebuild", reshaped: true };
      kind = "changed";
    }
  }
  return { kind, reshaped };
}

/** Versions whose operations a sync reads at once. */
const READ_AT_ONCE = 8;

/** Rows compared between two looks at the clock (src/util/turns.ts). */
const CHECK_EVERY = 256;

function* range(from: number, to: number): Generator<number> {
  for (let v = from; v <= to; v++) yield v;
}

const chunks = <T>(xs: T[], n: number): T[][] => Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, (i + 1) * n));

/** What a pool thread applied, and the first slot it could have written (new slots follow it). */
interface Done extends Applied {
  firstNew: number;
}

/** The rows `where` selects at the handle's version, with the columns the index reads. */
async function read(t: TableHandle, ix: ServingIndex, where: string): Promise<Uint8Array[]> {
  const batches: Uint8Array[] = [];
  for await (const b of readRows(t, ix.names, where)) batches.push(b);
  return batches;
}

/** Rows added at most this many, over at most this many versions, are taken by the row ids they must have. */
const TAKEN_ROWS = 1000;
const TAKEN_VERSIONS = 16;
const SKIPPED_FRAGMENTS = 8;

/**
 * The `added` rows that appends added since the index's version (none: nothing read), taken by the row ids they can
 * have, or null when those are not all of them. A scan for `_rowid > maxRowId` reads every
 * fragment (10 ms at 60 fragments of a 100k-row table, idle, for one row); a take reads the new
 * rows alone. Appends give new rows ids above every earlier one: with stable row ids the next
 * integers, else offsets 0.. of fragments numbered after the newest one's (at most one fragment a
 * commit here, a few numbers skipped at most). Any id above maxRowId is a new row, so `added` of them are all of them.
 */
async function newRowsTaken(ix: ServingIndex, t: TableHandle, added: number, versions: number): Promise<Uint8Array[] | null> {
  if (added === 0) return [];
  if (added > TAKEN_ROWS || versions > TAKEN_VERSIONS || ix.maxRowId < 0) return null;
  const max = BigInt(ix.maxRowId);
  const ids = new Set<bigint>();
  for (let i = 1n; i <= BigInt(added); i++) ids.add(max + i);
  // Fragment numbers a compaction reserved and did not use are skipped by the next append's.
  for (let f = (max >> 32n) + 1n, last = f + BigInt(versions + SKIPPED_FRAGMENTS); f < last; f++) for (let i = 0n; i < BigInt(added); i++) ids.add((f << 32n) + i);
  const batches: Uint8Array[] = [];
  let found = 0;
  for await (const b of takeRows(t, [...ids], ix.names)) {
    batches.push(b);
    found += arrow.tableFromIPC(b).numRows;
  }
  return found === added ? batches : null;
}

/**
 * Apply `rows` rows read at version x (and the slots removed or changed) in a pool thread (the
 * index's one writer), within the bytes the budget grants them: the records, links and values they
 * may take (a cached value takes at most its bytes in the batch, 16-aligned) and their row-id map.
 */
async function apply(pool: ServingPool, ix: ServingIndex, x: number, rows: number, batches: Uint8Array[], removed: number[], changedIds: bigint[], changedSlots: number[], claim: Claim): Promise<Done> {
  refresh(ix.graph);
  const firstNew = slotCount(ix.graph);
  if (rows > 0) {
    const values = batches.reduce((n, b) => n + b.byteLength, 0) + 16 * rows * ix.ref.columns.filter((c) => c.kind === "var" || c.kind === "var64").length;
    const graphBytes = growthBound(ix.graph, rows, values);
    claim(graphBytes + rowSlotsGrowth(ix.rowSlots, rows));
    setLimit(ix.graph, usedBytes(ix.graph) + graphBytes);
  }
  const r = await pool.apply({
    index: ix.ref,
    vectorColumn: ix.column,
    version: x,
    batches,
    removed: Int32Array.from(removed),
    changedIds: BigUint64Array.from(changedIds),
    changedSlots: Int32Array.from(changedSlots),
    link: true,
  });
  return { ...r, firstNew };
}

/**
 * Make version x the index's: retire the rows gone and replaced, give moved rows their new ids
 * (only while no search runs: a search at the old version would read the new id; searches that
 * arrive meanwhile wait, a few milliseconds, rather than fall to LanceDB, whose answers took
 * hundreds of milliseconds under load), and map the new slots' row ids.
 */
async function publish(ix: ServingIndex, x: number, r: Done, gone: number[], goneIds: number[]): Promise<void> {
  const g = ix.graph;
  refresh(g);
  for (const s of [...gone, ...r.replaced]) {
    retire(g, s, x);
    unmapRow(ix.rowSlots, rowNumberOf(g, s));
  }
  for (const id of goneIds) unmapRow(ix.rowSlots, id);
  let release = () => {};
  if (r.remapSlots.length > 0) {
    ix.remapped = new Promise<void>((resolve) => (release = resolve));
    if (ix.searching > 0) await new Promise<void>((resolve) => (ix.drained = resolve));
    // Unmapped before their records get the new ids: the map finds a row by its record's id.
    for (const s of r.remapSlots) unmapRow(ix.rowSlots, rowNumberOf(g, s));
    ix.moves++;
    r.remapSlots.forEach((s, i) => {
      setRowId(g, s, r.remapIds[i]);
      mapRow(ix.rowSlots, Number(r.remapIds[i]), s);
      ix.maxRowId = Math.max(ix.maxRowId, Number(r.remapIds[i]));
    });
  }
  adopt(ix, r);
  ix.version = x;
  ix.slotsAtVersion = slotCount(g);
  ix.remapped = null;
  release();
  ix.dirty = true;
}

/** Map the row ids of the slots a pool thread just wrote (and of its rows without a vector). */
function adopt(ix: ServingIndex, r: Done): void {
  const known = (id: number, slot: number) => {
    mapRow(ix.rowSlots, id, slot);
    if (id > ix.maxRowId) ix.maxRowId = id;
  };
  // The pool thread may have grown the memory past the main thread's view.
  refresh(ix.graph);
  for (let s = r.firstNew, n = slotCount(ix.graph); s < n; s++) known(rowNumberOf(ix.graph, s), s);
  for (const id of r.vectorless) known(Number(id), NO_VECTOR);
  r.firstNew = slotCount(ix.graph);
  r.vectorless = [];
}

/**
 * What /metrics shows of an index: its memory is the shared memory, and on the main thread its
 * row-id map, value indexes and filter bitmaps; of it, what the cached columns hold and what the
 * filters hold (the rest is the index proper: vectors, links, row ids and versions); the rows it
 * linked again since it was built or loaded.
 */
export function figures(ix: ServingIndex) {
  const filterBytes = [...ix.valueIndexes.values()].reduce((n, v) => n + valueIndexBytes(v), 0) + ix.filterBytes;
  return {
    bytes: usedBytes(ix.graph) + rowSlotsBytes(ix.rowSlots) + filterBytes,
    columnBytes: columnBytes(ix.graph),
    filterBytes,
    rows: mappedRows(ix.rowSlots),
    tombstones: tombstones(ix.graph),
    relinked: ix.relinked,
    calibratedEf: calibration(ix.graph).ef,
    calibratedRecall: calibration(ix.graph).recall,
  };
}

/** Slots that are tombstones, as a share of all: past a third, a rebuild is due. */
export const wornOut = (ix: ServingIndex) => slotCount(ix.graph) > 4096 && tombstones(ix.graph) * 3 > slotCount(ix.graph);
