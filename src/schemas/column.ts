import { Type, type Static } from "@sinclair/typebox";
import { JOB } from "./bounds.js";
import { branch, common, ErrorHandling, Expression, FieldPath, Opt, StringMap, UInt } from "./common.js";

/** JsonArrowDataType (lance-namespace `JsonArrowDataType`); its vocabulary is checked when converted. */
export const JsonDataType = Type.Object({ type: Type.String({ minLength: 1 }) }, { additionalProperties: true });

/** One physical column a virtual column's UDF produces (lance-namespace `AddVirtualColumnOutputEntry`). */
const VirtualOutput = Type.Object({
  column: Type.String({ minLength: 1 }),
  /** The field of the UDF's result this column takes; "" (or absent) for the whole result. */
  struct_field: Opt(Type.String()),
  data_type: Opt(JsonDataType),
  nullable: Opt(Type.Boolean()),
  metadata: Opt(StringMap),
});

/** A UDF-backed column (lance-namespace `AddVirtualColumnEntry`; `outputs` on add only). */
const virtualFields = {
  input_columns: Opt(Type.Array(FieldPath)),
  image: Opt(Type.String()),
  udf: Opt(Type.String()),
  udf_name: Opt(Type.String()),
  udf_version: Opt(Type.String()),
  udf_backend: Opt(Type.String()),
  auto_backfill: Opt(Type.Boolean()),
  manifest: Opt(Type.String()),
  manifest_checksum: Opt(Type.String()),
  field_metadata: Opt(StringMap),
};
export const AddVirtualColumn = Type.Object({ ...virtualFields, outputs: Opt(Type.Array(VirtualOutput, { minItems: 1 })) });
export type AddVirtualColumn = Static<typeof AddVirtualColumn>;
export const AlterVirtualColumn = Type.Object(virtualFields);
export type AlterVirtualColumn = Static<typeof AlterVirtualColumn>;

export const AddColumnsEntry = Type.Object({
  name: Type.String({ minLength: 1 }),
  /** SQL evaluated over the existing rows. */
  expression: Opt(Expression({ minLength: 1 })),
  /** An all-null (nullable) column of this type. */
  data_type: Opt(JsonDataType),
  computed: Opt(Type.String()),
  virtual_column: Opt(AddVirtualColumn),
});
export type AddColumnsEntry = Static<typeof AddColumnsEntry>;

export const AddColumns = Type.Object({ ...common, ...branch, new_columns: Type.Array(AddColumnsEntry, { minItems: 1 }) });

export const AlterColumnsEntry = Type.Object({
  path: FieldPath,
  rename: Opt(Type.String({ minLength: 1 })),
  data_type: Opt(JsonDataType),
  nullable: Opt(Type.Boolean()),
  virtual_column: Opt(AlterVirtualColumn),
});

export const AlterColumns = Type.Object({ ...common, ...branch, alterations: Type.Array(AlterColumnsEntry, { minItems: 1 }) });

export const DropColumns = Type.Object({ ...common, ...branch, columns: Type.Array(FieldPath, { minItems: 1 }) });

export const UpdateFieldMetadata = Type.Object({
  ...common,
  ...branch,
  updates: Type.Array(
    Type.Object({
      path: FieldPath,
      /** A null value deletes the key. */
      metadata: Type.Record(Type.String(), Type.Union([Type.String(), Type.Null()])),
      replace: Opt(Type.Boolean()),
    }),
    { minItems: 1 },
  ),
});

/** The body is the bare metadata map; the common fields may ride along and are not metadata. */
export const SchemaMetadataUpdate = Type.Object({ ...common }, { additionalProperties: Type.String() });

const Count = (maximum: number) => Opt(Type.Integer({ minimum: 1, maximum }));

/** lance-namespace `AlterTableBackfillColumnsRequest`; docs/compute.md says which fields have effect. */
export const BackfillColumn = Type.Object({
  ...common,
  ...branch,
  column: FieldPath,
  where: Opt(Expression({ minLength: 1 })),
  concurrency: Count(JOB.concurrency),
  intra_applier_concurrency: Count(JOB.concurrency),
  min_checkpoint_size: Count(JOB.rows),
  max_checkpoint_size: Count(JOB.rows),
  batch_checkpoint_flush_interval_seconds: Opt(Type.Number({ minimum: 0, maximum: JOB.seconds })),
  read_version: Opt(UInt()),
  task_size: Count(JOB.rows),
  num_frags: Count(JOB.rows),
  checkpoint_size: Count(JOB.rows),
  commit_granularity: Count(JOB.rows),
  cluster: Opt(Type.String()),
  manifest: Opt(Type.String()),
  error_handling: Opt(ErrorHandling),
});
export type BackfillColumn = Static<typeof BackfillColumn>;
