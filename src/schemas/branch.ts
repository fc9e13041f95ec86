import { Type } from "@sinclair/typebox";
import { common, Opt, RefName, UInt } from "./common.js";

const name = RefName;

export const CreateTableBranch = Type.Object({
  ...common,
  name,
  from_branch: Opt(RefName),
  from_version: Opt(UInt()),
});
export const DeleteTableBranch = Type.Object({ ...common, name });
