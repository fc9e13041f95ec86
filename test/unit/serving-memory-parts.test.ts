// /metrics splits a serving index's memory into the index proper, the cached columns and the
// filters (`quiver_serving_index_part_bytes`), so the index's own size can be told from what the
// columns add. The columns' share is their fields in every record and their variable-width values,
// which the memory's header counts; a save from before that count is built again.
import { expect, it } from "vitest";
// From dist/: the index's records live in a memory whose kernel is dist/native/vectors.wasm.
import { arrow } from "../../dist/src/engine/arrow.js";
import { checkSaved, createGraphMemory, graphOf, savedGraphMemory, usedBytes } from "../../dist/src/serving/graph.js";
import { rowsAt } from "../../dist/src/serving/row-slots.js";
import { applyBatch, columnLayout, knownOf } from "../../dist/src/serving/rows.js";
import { figures, indexOf, indexRows } from "../../dist/src/serving/table-index.js";

const ROWS = 2500;
const DIM = 8;
const vectorType = new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32()));
const names = Array.from({ length: ROWS }, (_, i) => "n".repeat(i % 40));

/** An index of the same ROWS rows, caching the `id` and `name` columns or none. */
function servingIndex(cached: boolean) {
  const fields = [
    ...(cached ? [new arrow.Field("id", new arrow.Int64()), new arrow.Field("name", new arrow.Utf8())] : []),
    new arrow.Field("vector", vectorType),
  ];
  const layout = columnLayout(fields, "vector");
  const memory = createGraphMemory({ dim: DIM, metric: "l2", m: 4, efConstruction: 8, columnBytes: layout.bytes, maxBytes: 64 << 20 });
  const ix = indexOf({} as never, "vector", "l2", { key: `parts-${cached}`, memory, columns: layout.columns }, fields.map((f) => f.name), 1);
  const at = Array.from({ length: ROWS }, (_, i) => i);
  const t = new arrow.Table({
    _rowid: arrow.vectorFromArray(at.map(BigInt), new arrow.Uint64()),
    ...(cached ? { id: arrow.vectorFromArray(at.map(BigInt), new arrow.Int64()), name: arrow.vectorFromArray(names, new arrow.Utf8()) } : {}),
    vector: arrow.vectorFromArray(at.map((i) => Array.from({ length: DIM }, (_, d) => Math.sin(i * (d + 1)))), vectorType),
  });
  for (const batch of t.batches) applyBatch(ix.graph, layout.columns, batch, "vector", 1, knownOf(ix.graph, [], [], []), { remapSlots: [], remapIds: [], replaced: [], written: 0, vectorless: [] }, false);
  indexRows(ix, rowsAt(ix.graph, ix.version));
  return ix;
}

it("counts the cached columns' fields and values apart from the index proper", () => {
  const [withColumns, without] = [servingIndex(true), servingIndex(false)];
  const [a, b] = [figures(withColumns), figures(without)];
  expect(b.columnBytes).toBe(0);
  expect(a.filterBytes).toBe(0);
  // The same rows make the same index; the columns are all that differs.
  expect(a.bytes - a.columnBytes).toBe(b.bytes);
  // Their values, each allocated in 16-byte steps, are part of it, beside the records' fields.
  const values = names.reduce((n, s) => n + Math.ceil(s.length / 16) * 16, 0);
  expect(a.columnBytes).toBeGreaterThan(values);
});

/** A memory holding saved bytes, as a load reads them into it (store.ts), checked. */
function loaded(saved: Uint8Array): WebAssembly.Memory {
  const memory = savedGraphMemory(saved.byteLength, 64 << 20);
  new Uint8Array(memory.buffer).set(saved);
  checkSaved(memory, saved.byteLength);
  return memory;
}

it("builds a save from before the columns were counted again", () => {
  const ix = servingIndex(true);
  const saved = new Uint8Array(ix.graph.memory.buffer, 0, usedBytes(ix.graph)).slice();
  const counted = figures(ix).columnBytes;
  expect(figures({ ...ix, graph: graphOf(loaded(saved)) }).columnBytes).toBe(counted);
  // Format 2 had no count of the columns' values.
  new Int32Array(saved.buffer)[1] = 2;
  expect(() => loaded(saved)).toThrow("not a serving index of this format");
});
