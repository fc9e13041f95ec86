// Building blocks shared by every request schema (docs/contract.md, "Common request fields").
import { Type, type TSchema } from "@sinclair/typebox";
import type { RefKind } from "../util/ref-names.js";
import { MAX_EXACT } from "./bounds.js";

/** Optional and nullable: clients send `null` for fields they leave unset. */
export const Opt = <T extends TSchema>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));

/** A mode string, matched case-insensitively in PascalCase or snake_case; yields the snake_case value. */
/** A SQL expression the engine parses: length and complexity are bounded (src/schemas/expression.ts). */
export const Expression = (opts: { minLength?: number } = {}) => Type.String({ ...opts, "x-expression": true });

export const Mode = <const V extends readonly string[]>(...values: V) =>
  Type.Unsafe<V[number]>({ type: "string", "x-mode": values });

/** A count, version or size: at most MAX_EXACT unless the field names a smaller bound (src/schemas/bounds.ts). */
export const UInt = (extra: object = {}) => Type.Integer({ minimum: 0, maximum: MAX_EXACT, ...extra });
export const FieldPath = Type.String({ minLength: 1 });
export const StringMap = Type.Record(Type.String(), Type.String());

export const common = {
  identity: Opt(Type.Object({ api_key: Opt(Type.String()), auth_token: Opt(Type.String()) })),
  context: Opt(StringMap),
  id: Opt(Type.Array(Type.String())),
};

/**
 * A branch or tag name: it becomes a path in the table's directory, so it follows the rule of
 * src/util/ref-names.ts (the `x-ref` keyword), which bounds its bytes on disk too.
 */
const RefName = (kind: RefKind) => Type.String({ minLength: 1, maxLength: 200, "x-ref": kind });
export const BranchName = RefName("branch");
export const TagName = RefName("tag");
export const branch = { branch: Opt(BranchName) };

/** A body with only the common fields. */
export const CommonBody = Type.Object({ ...common });

/** Per-row error policy of backfills and view refreshes (src/compute/error-handling.ts); Geneva's ErrorHandlingConfig keys where they map. */
export const ErrorHandling = Type.Object(
  {
    mode: Type.Optional(Type.Union([Type.Literal("fail"), Type.Literal("retry"), Type.Literal("skip")])),
    max_attempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 })),
    max_skip_count: Type.Optional(UInt()),
    max_skip_fraction: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    fault_isolation: Type.Optional(Type.Union([Type.Literal("fail_batch"), Type.Literal("skip_rows")])),
    log_errors: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
