import { Type } from "@sinclair/typebox";
import { branch, common, UInt } from "./common.js";

const tag = Type.String({ minLength: 1 });

export const TagRef = Type.Object({ ...common, tag });
export const SetTag = Type.Object({ ...common, ...branch, tag, version: UInt() });
