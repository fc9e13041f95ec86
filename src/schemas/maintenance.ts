// Quiver's own `POST /v1/table/{id}/optimize` (docs/maintenance.md).
import { Type } from "@sinclair/typebox";
import { branch, common, Opt } from "./common.js";

export const OptimizeTable = Type.Object({
  ...common,
  ...branch,
  /** false: compact and update indexes only, keep every version. */
  cleanup: Opt(Type.Boolean()),
});
