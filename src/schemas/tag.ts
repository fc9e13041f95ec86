import { Type } from "@sinclair/typebox";
import { branch, common, TagName, UInt } from "./common.js";

const tag = TagName;

export const TagRef = Type.Object({ ...common, tag });
export const SetTag = Type.Object({ ...common, ...branch, tag, version: UInt() });
