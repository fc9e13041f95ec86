import { Type } from "@sinclair/typebox";
import { common, Opt, UInt } from "./common.js";

const name = Type.String({ minLength: 1 });

export const CreateTableBranch = Type.Object({
  ...common,
  name,
  from_branch: Opt(Type.String({ minLength: 1 })),
  from_version: Opt(UInt()),
});
export const DeleteTableBranch = Type.Object({ ...common, name });
