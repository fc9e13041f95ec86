// Filters of searches answered by the serving index, as a bit per slot in a SharedArrayBuffer the
// workers read, once per filter and index version. The simple comparisons whose answer is certain
// to be the engine's (src/serving/predicate.ts) are evaluated over the cached column values
// of the slots, in a serving pool thread (its cost grows with the rows: never on the event loop);
// LanceDB evaluates every other filter (so its semantics and its errors are the engine's own), as
// the row ids it selects, which are set in slices. A later version needs only the rows added since
// evaluated (`_rowid IN (…)`); rows gone are tombstones the search skips anyway.
import { rowIdOf, slotCount } from "./graph.js";
import { NO_VECTOR, slotOf } from "./row-slots.js";
import { filterTypes, newValueIndex, valueIndexGrowth, type FilterSource, type Operand, type ValueIndex } from "./predicate.js";
import type { Schema } from "apache-arrow";
import { rowIdsOf } from "../engine/serving-source.js";
import type { TableHandle } from "../engine/tables.js";
import { slicer } from "../util/turns.js";
import { TooBig, type ServingIndex } from "./table-index.js";
import type { ServingPool } from "./pool.js";

export interface FilterBits {
  bits: Uint32Array;
  /** Slots whose bit is set (rows later deleted included): how selective the filter is. */
  passing: number;
}

/** A filter remembered for an index, and the bytes of its bitmap counted in the index's. */
interface Held {
  value: Promise<Evaluated>;
  bytes: number;
}

interface Evaluated extends FilterBits {
  version: number;
  /** Slots evaluated: those written when `version` was the index's. */
  covered: number;
}

/** Filters remembered per index; the least recently used go past this. */
const MOST_FILTERS = 64;
/** Names of the engine's functions whose value changes between calls (DataFusion's volatile and stable ones): a filter naming one is never cached. */
const VOLATILE = /\b(now|random|uuid|current_date|current_time|current_timestamp|localtime|localtimestamp|today)\b/i;
/** New slots evaluated by row id at most; more and the filter is evaluated again whole. */
const MOST_NEW = 2000;

/** The table at a version, and its schema (read without a handle of its own where the caller has one). */
export interface AtVersion {
  table(version: number): Promise<TableHandle>;
  schema(version: number): Promise<Schema>;
}

export interface Filters {
  /** The rows `filter` selects at the index's version. Throws what the engine throws. */
  bitsFor(ix: ServingIndex, filter: string, at: AtVersion): Promise<FilterBits>;
}

/** The pool's filter tasks (src/serving/pool.ts). */
export type FilterThreads = Pick<ServingPool, "filterPlan" | "filter">;

/** `room`: the bytes the serving indexes may still take (`--serving-memory-mb` less what they hold). */
export function createFilters(room: () => number, threads: FilterThreads): Filters {
  const byIndex = new WeakMap<ServingIndex, Map<string, Held>>();
  /** Each value index's tasks, one after another (a task extends it). */
  const growing = new WeakMap<ValueIndex, Promise<unknown>>();

  /** A bitmap for `slots` (room for a quarter more to come), within the memory left. */
  function words(slots: number): Uint32Array {
    const bytes = Math.ceil(Math.max(slots, 1) * 1.25 / 32) * 4 + 4;
    if (bytes > room()) throw new TooBig(`a filter's bitmap of ${bytes} bytes does not fit --serving-memory-mb`);
    return new Uint32Array(new SharedArrayBuffer(bytes));
  }

  /** Set the slots of the row ids LanceDB selected: as many as the table's rows, so in slices of the event loop. */
  async function setBits(ix: ServingIndex, e: Evaluated, ids: BigUint64Array[]): Promise<void> {
    const slice = slicer();
    for (const chunk of ids) {
      for (const id of chunk) {
        // A turn only once a slice's time is up: awaiting nothing would still cost a microtask a row.
        const turn = slice.pause();
        if (turn) await turn;
        const slot = slotOf(ix.rowSlots, Number(id));
        if (slot === undefined || slot === NO_VECTOR) continue;
        e.bits[slot >> 5] |= 1 << (slot & 31);
        e.passing++;
      }
    }
  }

  async function whole(ix: ServingIndex, filter: string, t: TableHandle, version: number, covered: number): Promise<Evaluated> {
    const e: Evaluated = { bits: words(slotCount(ix.graph)), passing: 0, version, covered };
    await setBits(ix, e, await rowIdsOf(t, filter));
    return e;
  }

  /**
   * One column equal to some values (a unique key's, one filter per search): the slots from `from`
   * to `to` found in the column's value index; null when the index would not fit the memory left
   * (it goes, and the records are read instead).
   */
  async function lookup(ix: ServingIndex, source: FilterSource, on: Operand, bits: Uint32Array, from: number, to: number): Promise<number | null> {
    const name = on.column.name;
    const index = ix.valueIndexes.get(name) ?? newValueIndex(on);
    // Summing every index's bytes is only needed when this one grows.
    const growth = valueIndexGrowth(index, to);
    if (growth > 0 && growth > room()) {
      ix.valueIndexes.delete(name);
      return null;
    }
    ix.valueIndexes.set(name, index);
    // Extended and looked up in a thread, one task at a time: each may replace the index's arrays.
    const task = (growing.get(index) ?? Promise.resolve()).then(async () => {
      const r = await threads.filter({ index: ix.ref, ...source, bits, from, to, values: index });
      const { upTo, heads, next, hashes } = r.values!;
      Object.assign(index, { upTo, heads, next, hashes });
      return r.passing;
    });
    growing.set(index, task.catch(() => undefined));
    return task;
  }

  async function evaluate(ix: ServingIndex, filter: string, at: AtVersion, before: Evaluated | null): Promise<Evaluated> {
    const { version, changedAt } = ix;
    const covered = ix.slotsAtVersion;
    const source: FilterSource = { filter, types: filterTypes((await at.schema(version)).fields), columns: ix.ref.columns };
    const plan = await threads.filterPlan(source);
    if (plan) {
      // Slots below the last evaluation's keep their bits (a slot's values never change; rows gone are tombstones).
      const bits = before && covered <= before.bits.length * 32 ? before.bits : words(covered);
      if (before && bits !== before.bits) bits.set(before.bits);
      const from = before?.covered ?? 0;
      const added = (plan.point && (await lookup(ix, source, plan.point, bits, from, covered))) ?? (await threads.filter({ index: ix.ref, ...source, bits, from, to: covered, values: null })).passing;
      return { bits, passing: (before?.passing ?? 0) + added, version, covered };
    }
    const t = await at.table(version);
    // Rows whose slots stayed may have changed in columns LanceDB read for the bitmap.
    if (!before || covered - before.covered > MOST_NEW || before.version < changedAt) return whole(ix, filter, t, version, covered);
    const fresh = Array.from({ length: covered - before.covered }, (_, i) => rowIdOf(ix.graph, before.covered + i));
    let bits = before.bits;
    if (covered > bits.length * 32) {
      bits = words(covered);
      bits.set(before.bits);
    }
    const e: Evaluated = { bits, passing: before.passing, version, covered };
    if (fresh.length > 0) await setBits(ix, e, await rowIdsOf(t, `(${filter}) AND _rowid IN (${fresh.join(",")})`));
    return e;
  }

  /** Drop `filter`'s bitmap from `ix`'s count and its filters. */
  function forget(ix: ServingIndex, held: Map<string, Held>, filter: string): void {
    ix.filterBytes -= held.get(filter)?.bytes ?? 0;
    held.delete(filter);
  }

  return {
    async bitsFor(ix, filter, at) {
      // Its answer changes with no commit: evaluated for each search, never remembered.
      if (VOLATILE.test(filter)) return evaluate(ix, filter, at, null);
      let held = byIndex.get(ix);
      if (!held) byIndex.set(ix, (held = new Map()));
      const known = held.get(filter);
      const before = known ? await known.value.catch(() => null) : null;
      // The entry held now may not be `known` any more (another search's, meanwhile): the count
      // is of the entries held, so the one replaced hands its bytes on.
      if (before && before.version === ix.version) {
        if (held.get(filter) === known) {
          held.delete(filter);
          held.set(filter, known!);
        }
        return before;
      }
      const next: Held = { value: evaluate(ix, filter, at, before), bytes: held.get(filter)?.bytes ?? 0 };
      held.delete(filter);
      held.set(filter, next);
      // Counted once evaluated (a bitmap extended in place is still one buffer), and while
      // remembered; the least recently used goes only for one that was evaluated.
      next.value.then(
        (e) => {
          if (held!.get(filter) !== next) return;
          ix.filterBytes += e.bits.byteLength - next.bytes;
          next.bytes = e.bits.byteLength;
          if (held!.size > MOST_FILTERS) forget(ix, held!, held!.keys().next().value!);
        },
        () => held!.get(filter) === next && forget(ix, held!, filter),
      );
      return next.value;
    },
  };
}
