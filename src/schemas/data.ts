import { Type } from "@sinclair/typebox";
import { branch, common, Opt, UInt } from "./common.js";

export const UpdateTable = Type.Object({
  ...common,
  ...branch,
  predicate: Opt(Type.String()),
  /** [column, SQL expression] pairs. */
  updates: Type.Array(Type.Tuple([Type.String({ minLength: 1 }), Type.String()]), { minItems: 1 }),
});

export const DeleteFromTable = Type.Object({ ...common, ...branch, predicate: Type.String({ minLength: 1 }) });

export const CountTableRows = Type.Object({ ...common, ...branch, version: Opt(UInt()), predicate: Opt(Type.String()) });

export const GetTableStats = Type.Object({ ...common, ...branch });
