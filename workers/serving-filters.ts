// Filters of searches answered by the serving index, as a bit per slot in a SharedArrayBuffer the
// workers read, once per filter and index version. The simple comparisons whose answer is certain
// to be the engine's (src/engine/serving-predicate.ts) are evaluated over the cached column values
// of the slots; LanceDB evaluates every other filter (so its semantics and its errors are the
// engine's own), as the row ids it selects. A later version needs only the rows added since
// evaluated (`_rowid IN (…)`); rows gone are tombstones the search skips anyway.
import { rowIdOf, slotCount } from "../src/engine/serving-graph.js";
import { NO_VECTOR, slotOf } from "../src/engine/serving-row-slots.js";
import { compileFilter, evaluateSlots, extendValueIndex, lookupSlots, newValueIndex, valueIndexGrowth, type Compiled } from "../src/engine/serving-predicate.js";
import type { Schema } from "apache-arrow";
import { rowIdsOf } from "../src/engine/serving-source.js";
import type { TableHandle } from "../src/engine/tables.js";
import { slicer } from "../src/util/turns.js";
import { TooBig, type ServingIndex } from "./serving-index.js";

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
/** Slots added to a value index between two looks at the clock (src/util/turns.ts). */
const SLICE = 256;
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

/** `room`: the bytes the serving indexes may still take (`--serving-memory-mb` less what they hold). */
export function createFilters(room: () => number): Filters {
  const byIndex = new WeakMap<ServingIndex, Map<string, Held>>();

  /** A bitmap for `slots` (room for a quarter more to come), within the memory left. */
  function words(slots: number): Uint32Array {
    const bytes = Math.ceil(Math.max(slots, 1) * 1.25 / 32) * 4 + 4;
    if (bytes > room()) throw new TooBig(`a filter's bitmap of ${bytes} bytes does not fit --serving-memory-mb`);
    return new Uint32Array(new SharedArrayBuffer(bytes));
  }

  function setBits(ix: ServingIndex, e: Evaluated, ids: BigUint64Array[]): void {
    for (const chunk of ids) {
      for (const id of chunk) {
        const slot = slotOf(ix.rowSlots, Number(id));
        if (slot === undefined || slot === NO_VECTOR) continue;
        e.bits[slot >> 5] |= 1 << (slot & 31);
        e.passing++;
      }
    }
  }

  async function whole(ix: ServingIndex, filter: string, t: TableHandle, version: number, covered: number): Promise<Evaluated> {
    const e: Evaluated = { bits: words(slotCount(ix.graph)), passing: 0, version, covered };
    setBits(ix, e, await rowIdsOf(t, filter));
    return e;
  }

  /**
   * One column equal to some values (a unique key's, one filter per search): the slots from `from`
   * to `to` found in the column's value index; null when the index would not fit the memory left
   * (it goes, and the records are read instead).
   */
  async function lookup(ix: ServingIndex, point: NonNullable<Compiled["point"]>, bits: Uint32Array, from: number, to: number): Promise<number | null> {
    const name = point.column.name;
    const index = ix.valueIndexes.get(name) ?? newValueIndex(point.column, point.type);
    // Summing every index's bytes is only needed when this one grows.
    const growth = valueIndexGrowth(index, to);
    if (growth > 0 && growth > room()) {
      ix.valueIndexes.delete(name);
      return null;
    }
    ix.valueIndexes.set(name, index);
    // Built in slices with the event loop's turn between them.
    index.growing = index.growing.then(async () => {
      const slice = slicer();
      while (index.upTo < to) {
        extendValueIndex(ix.graph, index, to, SLICE);
        if (index.upTo < to) await slice.pause();
      }
    });
    await index.growing;
    return lookupSlots(ix.graph, index, point.keys, bits, from, to);
  }

  async function evaluate(ix: ServingIndex, filter: string, at: AtVersion, before: Evaluated | null): Promise<Evaluated> {
    const version = ix.version;
    const covered = ix.slotsAtVersion;
    const compiled = compileFilter(filter, (await at.schema(version)).fields, ix.ref.columns);
    if (compiled) {
      // Slots below the last evaluation's keep their bits (a slot's values never change; rows gone are tombstones).
      const bits = before && covered <= before.bits.length * 32 ? before.bits : words(covered);
      if (before && bits !== before.bits) bits.set(before.bits);
      const from = before?.covered ?? 0;
      const added = (compiled.point && (await lookup(ix, compiled.point, bits, from, covered))) ?? evaluateSlots(ix.graph, compiled.test, bits, from, covered);
      return { bits, passing: (before?.passing ?? 0) + added, version, covered };
    }
    const t = await at.table(version);
    if (!before || covered - before.covered > MOST_NEW) return whole(ix, filter, t, version, covered);
    const fresh = Array.from({ length: covered - before.covered }, (_, i) => rowIdOf(ix.graph, before.covered + i));
    let bits = before.bits;
    if (covered > bits.length * 32) {
      bits = words(covered);
      bits.set(before.bits);
    }
    const e: Evaluated = { bits, passing: before.passing, version, covered };
    if (fresh.length > 0) setBits(ix, e, await rowIdsOf(t, `(${filter}) AND _rowid IN (${fresh.join(",")})`));
    return e;
  }

  /** Drop `filter`'s bitmap from `ix`'s count and its filters. */
  function forget(ix: ServingIndex, held: Map<string, Held>, filter: string): void {
    ix.filterBytes -= held.get(filter)?.bytes ?? 0;
    held.delete(filter);
  }

  return {
    async bitsFor(ix, filter, at) {
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
