// The value index an equality filter builds, and each filter's bitmap, are the serving index's
// memory too: counted in its bytes (and so in `--serving-memory-mb`). A value index that would not
// fit is not built, the records then read instead, with the same answer; a bitmap that would not
// fit is refused (LanceDB then answers the search, reason `memory`).
import { expect, it } from "vitest";
// From dist/: the index's records live in a memory whose kernel is dist/native/vectors.wasm.
import { arrow } from "../../dist/src/engine/arrow.js";
import { createGraphMemory, usedBytes } from "../../dist/src/serving/graph.js";
import { valueIndexBytes } from "../../dist/src/serving/predicate.js";
import { rowsAt, rowSlotsBytes } from "../../dist/src/serving/row-slots.js";
import { applyBatch, columnLayout, knownOf } from "../../dist/src/serving/rows.js";
import { createFilters } from "../../dist/src/serving/filters.js";
import { figures, indexOf, indexRows, TooBig } from "../../dist/src/serving/table-index.js";
import { servingFilter, servingFilterPlan } from "../../dist/src/serving/thread.js";

const ROWS = 300;

function servingIndex() {
  const fields = [new arrow.Field("id", new arrow.Int64()), new arrow.Field("vector", new arrow.FixedSizeList(2, new arrow.Field("item", new arrow.Float32())))];
  const layout = columnLayout(fields, "vector");
  const memory = createGraphMemory({ dim: 2, metric: "l2", m: 4, efConstruction: 8, columnBytes: layout.bytes, maxBytes: 16 << 20 });
  const ix = indexOf({} as never, "vector", "l2", { key: "filters-test", memory, columns: layout.columns }, ["vector", "id"], 1);
  const at = Array.from({ length: ROWS }, (_, i) => i);
  const t = new arrow.Table({
    _rowid: arrow.vectorFromArray(at.map(BigInt), new arrow.Uint64()),
    id: arrow.vectorFromArray(at.map((i) => BigInt(i * 3)), new arrow.Int64()),
    vector: arrow.vectorFromArray(at.map((i) => [i, -i]), fields[1].type),
  });
  for (const batch of t.batches) applyBatch(ix.graph, layout.columns, batch, "vector", 1, knownOf(ix.graph, [], [], []), { remapSlots: [], remapIds: [], replaced: [], written: 0, vectorless: [] }, false);
  indexRows(ix, rowsAt(ix.graph, ix.version));
  // Only filters the index evaluates itself are asked for: the engine is never reached.
  const versionAt = { table: () => Promise.reject(new Error("not the engine's")), schema: async () => new arrow.Schema(fields) };
  return { ix, versionAt };
}

/** A bitmap's bytes for the ROWS slots: a bit and a quarter a slot, in words, and one word more. */
const BITMAP = Math.ceil((ROWS * 1.25) / 32) * 4 + 4;

/** The pool thread's tasks, run here. */
const threads = { filterPlan: async (s: Parameters<typeof servingFilterPlan>[0]) => servingFilterPlan(s), filter: async (t: Parameters<typeof servingFilter>[0]) => servingFilter(t) };

const slotsOf = (bits: Uint32Array) => Array.from({ length: ROWS }, (_, s) => s).filter((s) => (bits[s >> 5] >>> (s & 31)) & 1);

it("counts the row-id map and the value indexes in the index's bytes, and builds no value index that would not fit", async () => {
  const { ix, versionAt } = servingIndex();
  const base = usedBytes(ix.graph) + rowSlotsBytes(ix.rowSlots);
  expect(figures(ix).bytes).toBe(base);

  // Room for the filter's bitmap, not for a value index.
  let room = BITMAP;
  const filters = createFilters(() => room, threads);
  const scanned = await filters.bitsFor(ix, "id = 42", versionAt);
  expect([scanned.passing, slotsOf(scanned.bits)]).toEqual([1, [14]]);
  expect(ix.valueIndexes.size).toBe(0);
  expect(scanned.bits.byteLength).toBe(BITMAP);
  expect(figures(ix).bytes).toBe(base + BITMAP);

  room = 1 << 20;
  const looked = await filters.bitsFor(ix, "id IN (3, 897, 7)", versionAt);
  expect([looked.passing, slotsOf(looked.bits)]).toEqual([2, [1, 299]]);
  const index = ix.valueIndexes.get("id")!;
  expect(valueIndexBytes(index)).toBeGreaterThan(0);
  expect(figures(ix).bytes).toBe(base + valueIndexBytes(index) + 2 * BITMAP);
});

it("counts each remembered filter's bitmap in the index's bytes, forgets past 64 filters, and refuses a bitmap that would not fit", async () => {
  const { ix, versionAt } = servingIndex();
  const base = figures(ix).bytes;
  let room = 1 << 20;
  const filters = createFilters(() => room, threads);
  for (let k = 0; k < 10; k++) await filters.bitsFor(ix, `id > ${k}`, versionAt);
  expect(figures(ix).bytes).toBe(base + 10 * BITMAP);
  // The same filter at the same version is the bitmap already held.
  await filters.bitsFor(ix, "id > 3", versionAt);
  expect(figures(ix).bytes).toBe(base + 10 * BITMAP);
  // Two searches asking for one new filter at once: one bitmap held, counted once.
  await Promise.all([filters.bitsFor(ix, "id > 10", versionAt), filters.bitsFor(ix, "id > 10", versionAt)]);
  expect(figures(ix).bytes).toBe(base + 11 * BITMAP);
  for (let k = 11; k < 70; k++) await filters.bitsFor(ix, `id > ${k}`, versionAt);
  expect(figures(ix).bytes).toBe(base + 64 * BITMAP);

  room = BITMAP - 1;
  await expect(filters.bitsFor(ix, "id < 100", versionAt)).rejects.toBeInstanceOf(TooBig);
  expect(figures(ix).bytes).toBe(base + 64 * BITMAP);
  // One already evaluated at this version needs no memory more.
  const held = await filters.bitsFor(ix, "id > 69", versionAt);
  expect([held.passing, slotsOf(held.bits).slice(0, 2)]).toEqual([ROWS - 24, [24, 25]]);
});
