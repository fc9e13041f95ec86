import { Type } from "@sinclair/typebox";
import { branch, common, Mode, Opt, StringMap, TagName, UInt } from "./common.js";

export const DeclareTable = Type.Object({
  ...common,
  location: Opt(Type.String({ minLength: 1 })),
  vend_credentials: Opt(Type.Boolean()),
  properties: Opt(StringMap),
});

export const RegisterTable = Type.Object({
  ...common,
  location: Type.String({ minLength: 1 }),
  mode: Opt(Mode("create", "overwrite")),
  properties: Opt(StringMap),
});

export const DescribeTable = Type.Object({
  ...common,
  ...branch,
  version: Opt(UInt()),
  tag: Opt(TagName),
  with_table_uri: Opt(Type.Boolean()),
  load_detailed_metadata: Opt(Type.Boolean()),
  check_declared: Opt(Type.Boolean()),
  vend_credentials: Opt(Type.Boolean()),
});

export const TableExists = Type.Object({ ...common, version: Opt(UInt()) });

export const RenameTable = Type.Object({
  ...common,
  new_table_name: Type.String({ minLength: 1 }),
  new_namespace_id: Opt(Type.Array(Type.String())),
  /** LanceDB's remote client's name for new_namespace_id. */
  new_namespace: Opt(Type.Array(Type.String())),
});
