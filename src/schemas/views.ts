// Request bodies of the materialized-view operations (lance-namespace `CreateMaterializedViewRequest`,
// `MaterializedViewUdtfEntry`, `RefreshMaterializedViewRequest`).
import { Type, type Static } from "@sinclair/typebox";
import { JOB } from "./bounds.js";
import { common, ErrorHandling, Mode, Opt, UInt } from "./common.js";

const Count = (maximum: number) => Opt(Type.Integer({ minimum: 1, maximum }));

export const UdtfSpec = Type.Object({
  kind: Opt(Mode("udtf", "chunker", "scalar_udtf")),
  udtf: Type.String({ minLength: 1 }),
  udtf_sha: Opt(Type.String()),
  udtf_name: Opt(Type.String()),
  udtf_version: Opt(Type.String()),
  input_columns: Opt(Type.Array(Type.String({ minLength: 1 }))),
  partition_by: Opt(Type.String({ minLength: 1 })),
  partition_by_indexed_column: Opt(Type.String({ minLength: 1 })),
  num_cpus: Opt(Type.Number({ minimum: 0, maximum: JOB.cpus })),
  num_gpus: Opt(Type.Number({ minimum: 0, maximum: JOB.cpus })),
  memory: Opt(Type.Number({ minimum: 0, maximum: JOB.memoryBytes })),
  error_handling: Opt(ErrorHandling),
  batch: Opt(Type.Boolean()),
  manifest: Opt(Type.String()),
  manifest_checksum: Opt(Type.String()),
});
export type UdtfSpec = Static<typeof UdtfSpec>;

export const CreateMaterializedView = Type.Object({
  ...common,
  kind: Mode("query", "udtf", "chunker", "scalar_udtf"),
  source_query: Type.String({ minLength: 1 }),
  output_schema: Type.String({ minLength: 1 }),
  udtf_spec: Opt(UdtfSpec),
  with_no_data: Opt(Type.Boolean()),
  auto_refresh: Opt(Type.Boolean()),
});
export type CreateMaterializedView = Static<typeof CreateMaterializedView>;

export const RefreshMaterializedView = Type.Object({
  ...common,
  src_version: Opt(UInt()),
  max_rows_per_fragment: Count(JOB.rows),
  concurrency: Count(JOB.concurrency),
  intra_applier_concurrency: Count(JOB.concurrency),
  source_task_size: Count(JOB.rows),
  cluster: Opt(Type.String()),
  output_limit: Opt(UInt()),
  manifest: Opt(Type.String()),
});
export type RefreshMaterializedView = Static<typeof RefreshMaterializedView>;
