import { Type } from "@sinclair/typebox";
import { BranchName, common, Opt, UInt } from "./common.js";

const name = BranchName;

export const CreateTableBranch = Type.Object({
  ...common,
  name,
  from_branch: Opt(BranchName),
  from_version: Opt(UInt()),
});
export const DeleteTableBranch = Type.Object({ ...common, name });
