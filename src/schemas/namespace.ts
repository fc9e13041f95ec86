import { Type } from "@sinclair/typebox";
import { common, Mode, Opt, StringMap } from "./common.js";

export const CreateNamespace = Type.Object({
  ...common,
  mode: Opt(Mode("create", "exist_ok", "overwrite")),
  properties: Opt(StringMap),
});

export const DropNamespace = Type.Object({
  ...common,
  mode: Opt(Mode("fail", "skip")),
  behavior: Opt(Mode("restrict", "cascade")),
});
