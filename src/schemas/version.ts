import { Type } from "@sinclair/typebox";
import { branch, common, Opt, UInt } from "./common.js";

export const DescribeTableVersion = Type.Object({ ...common, ...branch, version: Opt(UInt()) });
export const RestoreTable = Type.Object({ ...common, ...branch, version: UInt() });
