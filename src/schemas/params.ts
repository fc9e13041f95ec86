// Query parameters of the operations that read them: validated and coerced from these schemas in
// the pipeline (src/schemas/validate.ts compileParams) and described by the same schemas in the
// OpenAPI document. Handlers read the result as `ctx.args`.
import { Type } from "@sinclair/typebox";
import { MAX_INT32 } from "./bounds.js";
import { BranchName, Expression, Mode } from "./common.js";

const flag = (description: string) => Type.Optional(Type.Boolean({ description }));
const branch = { branch: Type.Optional({ ...BranchName, description: "a branch instead of main" }) };

const page = {
  page_token: Type.Optional(Type.String({ description: "where the previous page ended (its page_token)" })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT32, description: "most items in the page (more than 1000 is served as 1000)" })),
};

export const PageQuery = Type.Object(page);
export const ListTablesQuery = Type.Object({ ...page, include_declared: flag("list declared tables without data too (default true)") });
export const VersionListQuery = Type.Object({ ...page, ...branch, descending: flag("newest first") });
export const BranchQuery = Type.Object(branch);
export const DescribeTableQuery = Type.Object({
  with_table_uri: flag("include table_uri"),
  load_detailed_metadata: flag("include stats"),
});
export const CreateTableQuery = Type.Object({
  mode: Type.Optional({ ...Mode("create", "exist_ok", "overwrite"), description: "what to do when the table exists (default create: 409)" }),
  properties: Type.Optional(Type.String({ description: "the table's properties, a JSON object of strings" })),
});
export const InsertQuery = Type.Object({
  ...branch,
  mode: Type.Optional({ ...Mode("append", "overwrite"), description: "default append" }),
});
export const MergeInsertQuery = Type.Object({
  ...branch,
  on: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: "key columns (repeated or comma-separated); required" })),
  when_matched_update_all: flag("update matched target rows with the source row"),
  when_matched_update_all_filt: Type.Optional({ ...Expression(), description: "only where this SQL condition holds" }),
  when_not_matched_insert_all: flag("insert source rows without a match"),
  when_not_matched_by_source_delete: flag("delete target rows without a source match"),
  when_not_matched_by_source_delete_filt: Type.Optional({ ...Expression(), description: "only where this SQL condition holds" }),
  use_index: flag("use a scalar index on the key (default true)"),
});
