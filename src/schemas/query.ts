// QueryTable / ExplainTableQueryPlan / AnalyzeTableQueryPlan request bodies (docs/contract.md; lance-namespace
// §2.1). Both wire shapes are accepted: the spec's (`vector.single_vector`, `columns.column_names`,
// `full_text_query.string_query`) and the one LanceDB's own client sends (flat `vector` array,
// `columns` as a list or `{alias: expression}` map, `full_text_query: {query, columns}`).
// "Provide one of A or B, not both" and "exactly one key" rules are checked in
// src/operations/query-spec.ts, where the message can name the field.
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { SEARCH } from "./bounds.js";
import { branch, common, Expression, FieldPath, Mode, Opt, UInt } from "./common.js";

const Num = Type.Number();
const Vec = Type.Array(Num);
const NonEmpty = { minLength: 1 };
// maxItems is checked before any item is: a list past the bound is refused without a walk over it.
const Vecs = (extra: object = {}) => Type.Array(Vec, { maxItems: SEARCH.queryVectors, ...extra });

/** One FtsQuery node: exactly one of its keys (checked in code); recursive through boost/boolean. */
export const FtsQuery = Type.Recursive(
  (Self) =>
    Type.Object({
      match: Opt(MatchQuery()),
      phrase: Opt(
        Type.Object({ terms: Type.String(), column: Opt(FieldPath), slop: Opt(UInt({ maximum: SEARCH.slop })) }),
      ),
      boost: Opt(Type.Object({ positive: Self, negative: Self, negative_boost: Opt(Num) })),
      multi_match: Opt(Type.Object({ match_queries: Type.Array(MatchQuery(), { minItems: 1 }) })),
      boolean: Opt(
        Type.Object({ must: Type.Array(Self), should: Type.Array(Self), must_not: Type.Array(Self) }),
      ),
    }),
  { $id: "FtsQuery" },
);

function MatchQuery(): TSchema {
  return Type.Object({
    terms: Type.String(),
    column: Opt(FieldPath),
    boost: Opt(Num),
    fuzziness: Opt(UInt({ maximum: SEARCH.fuzziness })),
    max_expansions: Opt(UInt({ maximum: SEARCH.maxExpansions })),
    operator: Opt(Mode("and", "or")),
    prefix_length: Opt(UInt({ maximum: SEARCH.prefixLength })),
  });
}

/** One FtsQuery node (the recursive TypeBox type is too deep for Static<>). */
export interface FtsNode {
  match?: MatchNode | null;
  phrase?: { terms: string; column?: string | null; slop?: number | null } | null;
  boost?: { positive: FtsNode; negative: FtsNode; negative_boost?: number | null } | null;
  multi_match?: { match_queries: MatchNode[] } | null;
  boolean?: { must: FtsNode[]; should: FtsNode[]; must_not: FtsNode[] } | null;
}
export type MatchNode = {
  terms: string;
  column?: string | null;
  boost?: number | null;
  fuzziness?: number | null;
  max_expansions?: number | null;
  operator?: "and" | "or" | null;
  prefix_length?: number | null;
};

const FtsColumns = Opt(Type.Array(FieldPath));

/** `columns`: a list of field paths, `{column_names | column_aliases}`, or the LanceDB client's
 *  `{alias: expression}` map. One schema rather than a union: `items` constrains only arrays and
 *  `properties`/`propertyNames` only objects, so an error names the exact field (e.g. an empty
 *  alias → `columns.column_aliases`) instead of "columns: must be array". A Record's key schema
 *  does not constrain names in JSON Schema; propertyNames does. */
const Columns = Type.Unsafe<
  string[] | { column_names?: string[] | null; column_aliases?: Record<string, string> | null; [alias: string]: unknown }
>({
  type: ["array", "object"],
  items: FieldPath,
  properties: {
    column_names: Opt(Type.Array(FieldPath)),
    column_aliases: Opt(Type.Record(Type.String(), FieldPath, { propertyNames: NonEmpty })),
  },
  // LanceDB's client: `{alias: SQL expression}`.
  additionalProperties: Expression(),
  propertyNames: NonEmpty,
});

export const QueryFields = {
  ...common,
  ...branch,
  // LanceDB's client sends i64::MAX (2^63 once parsed) for a query without a limit; a search's k is
  // bounded in src/operations/query-spec.ts, where it is known to be one.
  k: Opt(UInt({ maximum: 2 ** 63 })),
  vector: Opt(
    Type.Union([
      Vec,
      Vecs(),
      Type.Object({ single_vector: Opt(Vec), multi_vector: Opt(Vecs({ minItems: 1 })) }),
    ]),
  ),
  offset: Opt(UInt()),
  filter: Opt(Expression()),
  prefilter: Opt(Type.Boolean()),
  columns: Opt(Columns),
  distance_type: Opt(Mode("l2", "cosine", "dot", "hamming")),
  nprobes: Opt(UInt({ maximum: SEARCH.nprobes })),
  minimum_nprobes: Opt(UInt({ maximum: SEARCH.nprobes })),
  maximum_nprobes: Opt(UInt({ maximum: SEARCH.nprobes })),
  ef: Opt(UInt({ maximum: SEARCH.ef })),
  refine_factor: Opt(UInt({ maximum: SEARCH.refineFactor })),
  lower_bound: Opt(Num),
  upper_bound: Opt(Num),
  bypass_vector_index: Opt(Type.Boolean()),
  fast_search: Opt(Type.Boolean()),
  vector_column: Opt(FieldPath),
  with_row_id: Opt(Type.Boolean()),
  version: Opt(UInt()),
  // Applied before offset and k; ascending, nulls last unless told otherwise.
  order_by: Opt(
    Type.Array(Type.Object({ column_name: FieldPath, ascending: Opt(Type.Boolean()), nulls_first: Opt(Type.Boolean()) })),
  ),
  full_text_query: Opt(
    Type.Object({
      string_query: Opt(Type.Object({ query: Type.String(), columns: FtsColumns })),
      // FtsQuery nodes are recursive: validated on their own with FtsQuery (see query-spec.ts).
      structured_query: Opt(Type.Object({ query: Type.Object({}) })),
      // LanceDB client shape: a string, or an FtsQuery node.
      query: Opt(Type.Union([Type.String(), Type.Object({})])),
      columns: FtsColumns,
    }),
  ),
};

export const QueryRequest = Type.Object(QueryFields);
export type QueryRequest = Static<typeof QueryRequest>;

export const ExplainRequest = Type.Object({
  ...common,
  ...branch,
  query: Type.Object(QueryFields),
  verbose: Opt(Type.Boolean()),
});
export type ExplainRequest = Static<typeof ExplainRequest>;

/** analyze_plan takes the query fields at the top level (upstream's AnalyzeTableQueryPlanRequest). */
export const AnalyzeRequest = QueryRequest;
