import { Type } from "@sinclair/typebox";
import { branch, common, RefName, UInt } from "./common.js";

const tag = RefName;

export const TagRef = Type.Object({ ...common, tag });
export const SetTag = Type.Object({ ...common, ...branch, tag, version: UInt() });
