import { Type } from "@sinclair/typebox";
import { branch, common, Expression, Opt, StringMap, UInt } from "./common.js";

export const UpdateTable = Type.Object({
  ...common,
  ...branch,
  predicate: Opt(Expression()),
  /** [column, SQL expression] pairs. */
  updates: Type.Array(Type.Tuple([Type.String({ minLength: 1 }), Expression()]), { minItems: 1 }),
  /** The spec's; not kept (an update's answer carries none). */
  properties: Opt(StringMap),
});

export const DeleteFromTable = Type.Object({ ...common, ...branch, predicate: Expression({ minLength: 1 }) });

export const CountTableRows = Type.Object({ ...common, ...branch, version: Opt(UInt()), predicate: Opt(Expression()) });

export const GetTableStats = Type.Object({ ...common, ...branch });
