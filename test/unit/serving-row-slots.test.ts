// The serving index's row-id map answers as a Map would through every change a sync makes (rows
// added, deleted, moved to new row ids, without a vector and given one), in both of Lance's row-id
// schemes, and takes the bytes it says. After a build or a load, the map of every slot alive at the
// index's version is made whole in a pool thread (`rowsAt`).
import { expect, it } from "vitest";
// From dist/: the records live in a memory whose kernel is dist/native/vectors.wasm.
import { arrow } from "../../dist/src/engine/arrow.js";
import { createGraphMemory, graphOf, retire, setRowId } from "../../dist/src/serving/graph.js";
import { applyBatch, columnLayout, knownOf } from "../../dist/src/serving/rows.js";
import { mappedRows, mapRow, newRowSlots, NO_VECTOR, rowsAt, rowsMapped, rowSlotsBytes, slotOf, unmapRow } from "../../dist/src/serving/row-slots.js";

/** A graph of `n` slots (vectors of 2 floats, not linked). */
function slots(n: number) {
  const fields = [new arrow.Field("vector", new arrow.FixedSizeList(2, new arrow.Field("item", new arrow.Float32())))];
  const layout = columnLayout(fields, "vector");
  const g = graphOf(createGraphMemory({ dim: 2, metric: "l2", m: 4, efConstruction: 8, columnBytes: layout.bytes, maxBytes: 64 << 20 }));
  const at = Array.from({ length: n }, (_, i) => i);
  const t = new arrow.Table({ _rowid: arrow.vectorFromArray(at.map(BigInt), new arrow.Uint64()), vector: arrow.vectorFromArray(at.map((i) => [i, 1]), fields[0].type) });
  for (const batch of t.batches) applyBatch(g, layout.columns, batch, "vector", 1, knownOf(g, [], [], []), { remapSlots: [], remapIds: [], replaced: [], written: 0, vectorless: [] }, false);
  return g;
}

function random(seed: number) {
  return (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
}

const SCHEMES = {
  // Row addresses: fragment << 32 | offset, fragments past 2^21 (ids past 2^53 are not Lance's).
  addresses: (i: number) => Math.floor(i / 700) * 2 ** 32 + (i % 700) + (i % 3) * 2 ** 50,
  stable: (i: number) => i,
};

for (const [scheme, idOf] of Object.entries(SCHEMES)) {
  it(`answers as a Map through adds, deletes, moves and rows without a vector (${scheme} row ids)`, () => {
    const SLOTS = 30_000;
    const g = slots(SLOTS);
    const m = newRowSlots(g);
    const map = new Map<number, number>();
    const pick = random(scheme.length);
    let nextSlot = 0;
    let nextId = 0;
    const live = () => [...map.keys()];
    const check = () => {
      expect(mappedRows(m)).toBe(map.size);
      expect([...map.keys()].map((id) => slotOf(m, id))).toEqual([...map.values()]);
      expect(Array.from({ length: 200 }, (_, i) => slotOf(m, idOf(nextId + i))).filter((s) => s !== undefined)).toEqual([]);
      expect(new Map(rowsMapped(m))).toEqual(map);
    };
    for (let round = 0; round < 40; round++) {
      // Appends: new slots with new ids, and some rows without a vector.
      for (let i = 0, n = 200 + pick(400); i < n && nextSlot < SLOTS; i++) {
        const id = idOf(nextId++);
        if (pick(10) === 0) {
          map.set(id, NO_VECTOR);
          mapRow(m, id, NO_VECTOR);
          continue;
        }
        setRowId(g, nextSlot, BigInt(id));
        map.set(id, nextSlot);
        mapRow(m, id, nextSlot++);
      }
      const ids = live();
      // Deletes.
      for (let i = 0, n = pick(150); i < n; i++) {
        const id = ids[pick(ids.length)];
        map.delete(id);
        unmapRow(m, id);
      }
      // Moves (a compaction's new row ids): unmapped before the record gets its new id.
      for (const id of live().slice(0, pick(100))) {
        const slot = map.get(id)!;
        if (slot === NO_VECTOR) continue;
        const to = idOf(nextId++);
        unmapRow(m, id);
        setRowId(g, slot, BigInt(to));
        mapRow(m, to, slot);
        map.delete(id);
        map.set(to, slot);
      }
      // A row without a vector given one (stable ids keep theirs across an update), and the reverse.
      for (const id of live().filter((x) => map.get(x) === NO_VECTOR).slice(0, 5)) {
        if (nextSlot === SLOTS) break;
        setRowId(g, nextSlot, BigInt(id));
        map.set(id, nextSlot);
        mapRow(m, id, nextSlot++);
      }
      for (const id of live().filter((x) => map.get(x) !== NO_VECTOR).slice(0, 3)) {
        map.set(id, NO_VECTOR);
        mapRow(m, id, NO_VECTOR);
      }
      check();
    }
    expect(map.size).toBeGreaterThan(10_000);
  });
}

it("takes 4 bytes a bucket, at least a quarter of them empty, and 45 bytes a row without a vector", () => {
  const ROWS = 100_000;
  const g = slots(ROWS);
  const m = newRowSlots(g);
  for (let s = 0; s < ROWS; s++) mapRow(m, s, s);
  for (let i = 0; i < 10; i++) mapRow(m, ROWS + i, NO_VECTOR);
  // 100,000 rows: 2^18 buckets (2^17 would be past three quarters full).
  expect(rowSlotsBytes(m)).toBe(2 ** 18 * 4 + 10 * 45);
  expect(mappedRows(m)).toBe(ROWS + 10);
  expect(rowSlotsBytes(newRowSlots(g, ROWS))).toBe(2 ** 18 * 4);
});

it("made whole after a build or a load, maps every slot alive at the version, and knows the highest row id of all", () => {
  const ROWS = 20_000;
  const g = slots(ROWS);
  for (let s = 0; s < ROWS; s += 7) retire(g, s, 2);
  const [at1, at2] = [rowsAt(g, 1), rowsAt(g, 2)];
  const mapOf = (r: typeof at1) => Object.assign(newRowSlots(g), { buckets: r.buckets, slotted: r.slotted });
  expect([at1.slots, at1.maxRowId, at2.slots, at2.maxRowId]).toEqual([ROWS, ROWS - 1, ROWS, ROWS - 1]);
  expect(new Map(rowsMapped(mapOf(at1)))).toEqual(new Map(Array.from({ length: ROWS }, (_, s) => [s, s])));
  const m = mapOf(at2);
  const live = Array.from({ length: ROWS }, (_, s) => s).filter((s) => s % 7 !== 0);
  expect(mappedRows(m)).toBe(live.length);
  expect(live.every((s) => slotOf(m, s) === s)).toBe(true);
  expect(slotOf(m, 7)).toBeUndefined();
  // Room for the slots, as the map made row by row takes.
  expect(rowSlotsBytes(m)).toBe(rowSlotsBytes(newRowSlots(g, ROWS)));
});
