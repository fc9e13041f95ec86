import { Type, type Static } from "@sinclair/typebox";
import { branch, common, FieldPath, Opt } from "./common.js";

/** JsonArrowDataType (lance-namespace `JsonArrowDataType`); its vocabulary is checked when converted. */
export const JsonDataType = Type.Object({ type: Type.String({ minLength: 1 }) }, { additionalProperties: true });
const AnyObject = Type.Object({}, { additionalProperties: true });

export const AddColumnsEntry = Type.Object({
  name: Type.String({ minLength: 1 }),
  /** SQL evaluated over the existing rows. */
  expression: Opt(Type.String({ minLength: 1 })),
  /** An all-null (nullable) column of this type. */
  data_type: Opt(JsonDataType),
  computed: Opt(Type.String()),
  virtual_column: Opt(AnyObject),
});
export type AddColumnsEntry = Static<typeof AddColumnsEntry>;

export const AddColumns = Type.Object({ ...common, ...branch, new_columns: Type.Array(AddColumnsEntry, { minItems: 1 }) });

export const AlterColumnsEntry = Type.Object({
  path: FieldPath,
  rename: Opt(Type.String({ minLength: 1 })),
  data_type: Opt(JsonDataType),
  nullable: Opt(Type.Boolean()),
  virtual_column: Opt(AnyObject),
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
