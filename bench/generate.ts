// Deterministic bench dataset: N rows x dimension vectors (low-rank, or with --dataset gaussian
// clustered Gaussian around --clusters centres), text and category columns, with IVF_PQ (vector),
// FTS (text) and bitmap (category) indexes, written with LanceDB's own directory namespace so
// Quiver serves it as table `bench` in the root namespace. Its row ids are stable, as in the tables
// Quiver creates (`--row-ids addresses`: LanceDB's default, row addresses that compaction moves).
//   node dist/bench/generate.js [--data-dir ./bench-data] [--dataset lowrank|gaussian] [--rows 100000]
//        [--dim 128] [--rank 16] [--clusters 1000] [--seed 42] [--row-ids stable|addresses]
import * as lancedb from "@lancedb/lancedb";
import { parseArgs } from "node:util";
import { batches, type Spec } from "./dataset.js";

export const BENCH_TABLE = "bench";

export function datasetArgs(argv = process.argv.slice(2)) {
  const { values } = parseArgs({
    args: argv,
    strict: false,
    options: {
      "data-dir": { type: "string", default: "./bench-data" },
      rows: { type: "string", default: "100000" },
      dim: { type: "string", default: "128" },
      rank: { type: "string", default: "16" },
      seed: { type: "string", default: "42" },
      dataset: { type: "string", default: "lowrank" },
      clusters: { type: "string", default: "1000" },
      "row-ids": { type: "string", default: "stable" },
    },
  });
  const spec: Spec = { rows: Number(values.rows), dim: Number(values.dim), rank: Number(values.rank), seed: Number(values.seed) };
  if (values.dataset === "gaussian") spec.clusters = Number(values.clusters);
  else if (values.dataset !== "lowrank") throw new Error(`--dataset: lowrank or gaussian, not ${values.dataset}`);
  if (values["row-ids"] !== "stable" && values["row-ids"] !== "addresses") throw new Error(`--row-ids: stable or addresses, not ${values["row-ids"]}`);
  return { dataDir: String(values["data-dir"]), spec, rowIds: values["row-ids"] as RowIds };
}

/** The dataset's name as the benches print it. */
export const datasetName = (spec: Spec) => (spec.clusters ? `clustered Gaussian, ${spec.clusters} clusters` : `low-rank (rank ${spec.rank})`);

export type RowIds = "stable" | "addresses";

export async function generate(dataDir: string, spec: Spec, rowIds: RowIds = "stable"): Promise<void> {
  const storageOptions: Record<string, string> = rowIds === "stable" ? { new_table_enable_stable_row_ids: "true" } : {};
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  const t0 = performance.now();
  let table: lancedb.Table | null = null;
  for (const b of batches(spec)) {
    // At the table's creation: the namespace connection's own storage options do not reach it.
    if (!table) table = await db.createTable(BENCH_TABLE, b, [], { mode: "overwrite", storageOptions });
    else await table.add(b);
  }
  const t1 = performance.now();
  const partitions = Math.max(1, Math.round(Math.sqrt(spec.rows)));
  await table!.createIndex("vector", {
    config: lancedb.Index.ivfPq({ numPartitions: partitions, numSubVectors: Math.max(1, spec.dim / 8) }),
  });
  const t2 = performance.now();
  await table!.createIndex("text", { config: lancedb.Index.fts() });
  await table!.createIndex("category", { config: lancedb.Index.bitmap() });
  const t3 = performance.now();
  const s = (a: number, b: number) => ((b - a) / 1000).toFixed(1) + " s";
  console.log(
    `generated ${spec.rows} x ${spec.dim} (${datasetName(spec)}, seed ${spec.seed}) in ${dataDir}: ` +
      `write ${s(t0, t1)}, IVF_PQ ${partitions} partitions ${s(t1, t2)}, FTS + bitmap ${s(t2, t3)}`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { dataDir, spec, rowIds } = datasetArgs();
  await generate(dataDir, spec, rowIds);
}
