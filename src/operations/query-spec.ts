// A validated query request (either wire shape) → one plain QuerySpec the engine executes.
// The "one of A or B, not both" and "exactly one key" rules live here so each 400 names its field.
import { compile } from "../schemas/validate.js";
import { SEARCH } from "../schemas/bounds.js";
import { invalid } from "../errors.js";
import { FtsQuery, type FtsNode, type QueryRequest } from "../schemas/query.js";
import type { FtsSpec, QuerySpec, QueryVector } from "../engine/query-spec.js";

const validateFts = compile(FtsQuery);
const FTS_KINDS = ["match", "phrase", "boost", "multi_match", "boolean"] as const;

const present = (v: unknown) => v !== undefined && v !== null;

/** `vector` as validated, or as read by a worker (src/schemas/query-body.ts): its number lists are Float32Arrays. */
type VectorField = QueryRequest["vector"] | QueryVector | QueryVector[] | { single_vector?: QueryVector | null; multi_vector?: QueryVector[] | null };

function vectors(v: VectorField): { vectors: QueryVector[] | null; multi: boolean } {
  if (!present(v)) return { vectors: null, multi: false };
  if (Array.isArray(v) || v instanceof Float32Array) {
    // LanceDB's client: a flat array (empty when there is no vector), or a list of vectors.
    if (v.length === 0) return { vectors: null, multi: false };
    if (typeof v[0] === "number") return { vectors: [v as QueryVector], multi: false };
    return { vectors: checkMulti(v as QueryVector[], "vector"), multi: true };
  }
  const o = v as { single_vector?: QueryVector | null; multi_vector?: QueryVector[] | null };
  if (present(o.single_vector) && present(o.multi_vector)) {
    throw invalid("vector: provide single_vector or multi_vector, not both");
  }
  if (present(o.single_vector)) {
    if (o.single_vector!.length === 0) throw invalid("vector.single_vector: must not be empty");
    return { vectors: [o.single_vector!], multi: false };
  }
  if (present(o.multi_vector)) return { vectors: checkMulti(o.multi_vector!, "vector.multi_vector"), multi: true };
  return { vectors: null, multi: false };
}

function checkMulti(vs: QueryVector[], field: string): QueryVector[] {
  const dim = vs[0].length;
  vs.forEach((x, i) => {
    if (x.length === 0) throw invalid(`${field}[${i}]: must not be empty`);
    if (x.length !== dim) throw invalid(`${field}[${i}]: has ${x.length} dimensions, ${field}[0] has ${dim}`);
  });
  return vs;
}

function columns(c: QueryRequest["columns"]): Pick<QuerySpec, "columns" | "columnPaths"> {
  if (!present(c)) return { columns: null, columnPaths: [] };
  if (Array.isArray(c)) return { columns: c, columnPaths: c };
  const o = c as Record<string, unknown>;
  const names = o.column_names as string[] | null | undefined;
  const aliases = o.column_aliases as Record<string, string> | null | undefined;
  if (present(names) && present(aliases)) throw invalid("columns: provide column_names or column_aliases, not both");
  if (present(names)) return { columns: names!, columnPaths: names! };
  if (present(aliases)) return { columns: aliases!, columnPaths: Object.values(aliases!) };
  // LanceDB's client: `{alias: SQL expression}`; expressions are checked by the engine.
  const exprs = Object.entries(o).filter(([k]) => k !== "column_names" && k !== "column_aliases");
  for (const [k, v] of exprs) if (typeof v !== "string") throw invalid(`columns.${k}: must be a string expression`);
  return { columns: exprs.length ? (Object.fromEntries(exprs) as Record<string, string>) : null, columnPaths: [] };
}

/** Check one FtsQuery node tree: schema, then exactly one kind per node, recursively. */
function ftsNode(node: unknown, field: string): FtsNode {
  try {
    validateFts(node);
  } catch (e) {
    throw invalid(`${field}.${(e as Error).message}`);
  }
  const n = node as FtsNode;
  const kinds = FTS_KINDS.filter((k) => present(n[k]));
  if (kinds.length !== 1) {
    throw invalid(`${field}: provide exactly one of ${FTS_KINDS.join(", ")} (got ${kinds.length ? kinds.join(", ") : "none"})`);
  }
  if (n.boost) {
    ftsNode(n.boost.positive, `${field}.boost.positive`);
    ftsNode(n.boost.negative, `${field}.boost.negative`);
  }
  if (n.boolean) {
    for (const occ of ["must", "should", "must_not"] as const) {
      n.boolean[occ].forEach((q, i) => ftsNode(q, `${field}.boolean.${occ}[${i}]`));
    }
  }
  return n;
}

function fullText(f: QueryRequest["full_text_query"]): FtsSpec | null {
  if (!present(f)) return null;
  const { string_query: sq, structured_query: st, query, columns } = f!;
  const given = [present(sq) && "string_query", present(st) && "structured_query", present(query) && "query"].filter(Boolean);
  if (given.length > 1) throw invalid(`full_text_query: provide string_query or structured_query, not both (got ${given.join(", ")})`);
  if (present(sq)) return { query: sq!.query, columns: sq!.columns ?? null };
  if (present(st)) return { query: ftsNode(st!.query, "full_text_query.structured_query.query"), columns: null };
  if (typeof query === "string") return { query, columns: columns ?? null };
  if (present(query)) return { query: ftsNode(query, "full_text_query.query"), columns: columns ?? null };
  throw invalid("full_text_query: provide string_query or structured_query");
}

/** LanceDB's remote client sends `k` = i64::MAX for a query without a limit; past 2^53 a JSON
 *  number is no longer exact, and the engine would take it as a zero limit. Either way: no limit. */
const limitOf = (k: number | null | undefined) => (k == null || k > Number.MAX_SAFE_INTEGER ? null : k);

/**
 * The sizes LanceDB allocates a search's heaps from, bounded (src/schemas/bounds.ts; the schema
 * bounds each field alone): k + offset, and the candidates over all query vectors. A scan's k is a
 * plain limit, which allocates nothing ahead.
 */
function checkSearchSizes(b: QueryRequest, queryVectors: number): void {
  const k = limitOf(b.k) ?? 10;
  const rows = k + (b.offset ?? 0);
  if (k > SEARCH.rows) throw invalid(`k: ${k} is more than ${SEARCH.rows}, the most rows a vector or full-text search answers`);
  if (rows > SEARCH.rows) throw invalid(`offset: k + offset (${rows}) is more than ${SEARCH.rows}, the most rows a vector or full-text search answers`);
  const refined = rows * Math.max(1, b.refine_factor ?? 0);
  const each = Math.max(refined, b.ef ?? 0);
  if (each * queryVectors <= SEARCH.candidates) return;
  const field = each === refined ? (refined > rows ? "refine_factor" : "k") : "ef";
  throw invalid(
    `${field}: ${queryVectors} query vector(s) × ${each} candidates each (the larger of (k + offset) × refine_factor and ef) is more than ${SEARCH.candidates}`,
  );
}

export function querySpec(b: QueryRequest): QuerySpec {
  const { vectors: vs, multi } = vectors(b.vector);
  const fts = fullText(b.full_text_query);
  if (vs !== null || fts !== null) checkSearchSizes(b, vs?.length ?? 1);
  if (present(b.lower_bound) && present(b.upper_bound) && b.lower_bound! > b.upper_bound!) {
    throw invalid(`lower_bound: ${b.lower_bound} is greater than upper_bound ${b.upper_bound}`);
  }
  const minP = b.minimum_nprobes ?? b.nprobes ?? null;
  const maxP = b.maximum_nprobes ?? b.nprobes ?? null;
  if (minP && maxP && maxP < minP) {
    throw invalid(`maximum_nprobes: ${maxP} is less than minimum_nprobes ${minP}`);
  }
  const orderBy = (b.order_by ?? []).map((o) => ({ column: o.column_name, ascending: o.ascending ?? true, nullsFirst: o.nulls_first ?? false }));
  // Upstream sorts before offset and k; a vector or full-text search takes its k best first, so
  // the engine could only reorder those: not the same query.
  if (orderBy.length > 0 && (vs !== null || fts !== null)) {
    throw invalid(`order_by: cannot be combined with a ${vs !== null ? "vector" : "full-text"} search (results would be sorted only after the k best were chosen); use it with a filtered scan`);
  }
  return {
    vectors: vs,
    multi,
    fts,
    k: limitOf(b.k),
    offset: b.offset ?? 0,
    filter: b.filter ?? null,
    prefilter: b.prefilter ?? true,
    ...columns(b.columns),
    distanceType: b.distance_type ?? null,
    // 0 means "the engine's default" for these knobs (SPEC allows >= 0; the engine would return
    // nothing for 0 probes, which is never what a caller means).
    minNprobes: minP || null,
    maxNprobes: maxP || null,
    ef: b.ef || null,
    refineFactor: b.refine_factor || null,
    lowerBound: b.lower_bound ?? null,
    upperBound: b.upper_bound ?? null,
    bypassVectorIndex: b.bypass_vector_index ?? false,
    fastSearch: b.fast_search ?? false,
    vectorColumn: b.vector_column ?? null,
    withRowId: b.with_row_id ?? false,
    orderBy,
  };
}
