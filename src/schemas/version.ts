import { Type } from "@sinclair/typebox";
import { MAX_EXACT } from "./bounds.js";
import { branch, common, CommonBody, Opt, StringMap, UInt } from "./common.js";
import { DeclareTable } from "./table.js";

export const DescribeTableVersion = Type.Object({ ...common, ...branch, version: Opt(UInt()) });
export const RestoreTable = Type.Object({ ...common, ...branch, version: UInt() });

// Externally managed versions (upstream's CreateTableVersionRequest and friends).
const versionFields = {
  ...branch,
  version: UInt(),
  manifest_path: Type.String({ minLength: 1 }),
  manifest_size: Opt(UInt()),
  e_tag: Opt(Type.String()),
  metadata: Opt(StringMap),
  naming_scheme: Opt(Type.Union([Type.Literal("V1"), Type.Literal("V2")])),
};

export const CreateTableVersion = Type.Object({ ...common, ...versionFields });

const VersionRange = Type.Object({ start_version: UInt(), end_version: Type.Integer({ minimum: -1, maximum: MAX_EXACT }) });
export const BatchDeleteTableVersions = Type.Object({ ...common, ...branch, ranges: Type.Array(VersionRange, { minItems: 1 }) });

export const BatchCreateTableVersions = Type.Object({
  ...common,
  entries: Type.Array(Type.Object({ id: Type.Array(Type.String(), { minItems: 1 }), ...versionFields }), { minItems: 1 }),
});

/** Exactly one of the fields per operation (checked in code, where the message can name it). */
export const CommitTableOperation = Type.Object({
  declare_table: Opt(DeclareTable),
  create_table_version: Opt(CreateTableVersion),
  delete_table_versions: Opt(BatchDeleteTableVersions),
  deregister_table: Opt(CommonBody),
});
export const BatchCommitTables = Type.Object({ ...common, operations: Type.Array(CommitTableOperation, { minItems: 1 }) });
