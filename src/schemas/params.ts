// Query parameters of the operations that read them (for the OpenAPI document; the handlers parse
// them with src/operations/pagination.ts and table-params.ts, which give the errors).
import { Type } from "@sinclair/typebox";

const flag = (description: string) => Type.Optional(Type.Boolean({ description }));

const page = {
  page_token: Type.Optional(Type.String({ description: "where the previous page ended (its page_token)" })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: "most items in the page" })),
};

export const PageQuery = Type.Object(page);
export const ListTablesQuery = Type.Object({ ...page, include_declared: flag("list declared tables without data too (default true)") });
export const VersionListQuery = Type.Object({
  ...page,
  branch: Type.Optional(Type.String({ description: "a branch instead of main" })),
  descending: flag("newest first"),
});
export const BranchQuery = Type.Object({ branch: Type.Optional(Type.String({ description: "a branch instead of main" })) });
export const DescribeTableQuery = Type.Object({
  with_table_uri: flag("include table_uri"),
  load_detailed_metadata: flag("include stats"),
});
export const CreateTableQuery = Type.Object({
  mode: Type.Optional(Type.Union([Type.Literal("create"), Type.Literal("exist_ok"), Type.Literal("overwrite")], { description: "what to do when the table exists (default create: 409)" })),
  properties: Type.Optional(Type.String({ description: "the table's properties, a JSON object of strings" })),
});
export const InsertQuery = Type.Object({
  mode: Type.Optional(Type.Union([Type.Literal("append"), Type.Literal("overwrite")], { description: "default append" })),
});
