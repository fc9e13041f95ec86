// Executing a QuerySpec with LanceDB: the builder, column checks, raw IPC results, plans.
import * as lancedb from "@lancedb/lancedb";
import { resolveFieldPath, type FieldLike } from "../schemas/field-path.js";
import type { FtsNode, MatchNode } from "../schemas/query.js";
import { invalid } from "../errors.js";
import { emptyIpcFile, ipcFile } from "./ipc-out.js";
import { arrow } from "./arrow.js";
import { rowEncoder } from "./json-rows.js";
import { translateQueryError } from "./query-errors.js";
import { readSchema } from "./schema-ipc.js";
import { slicer } from "../util/turns.js";
import { counted, msLeft, within, type Bound } from "./deadline.js";
import { mostRows, type FtsSpec, type QuerySpec, type QueryVector } from "./query-spec.js";

type Builder = lancedb.Query | lancedb.VectorQuery;
/** A query's answer: the chunks of one Arrow IPC file. */
export type QueryResult = Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
/** Each next() is one record batch as a complete little Arrow IPC file; null at the end. */
export interface NativeIterator {
  next(): Promise<Buffer | null>;
}
/** nativeExecute is protected in the typings but public at runtime (checked against 0.39.0). */
export const nativeExecute = (q: Builder | lancedb.TakeQuery, options?: lancedb.QueryExecutionOptions): Promise<NativeIterator> =>
  (q as unknown as { nativeExecute(o?: object): Promise<NativeIterator> }).nativeExecute(options);

/**
 * Execute `q` under `b`: LanceDB is given the time left as its own timeout, and each pull is
 * raced against the deadline and the client's leaving (deadline.ts).
 */
export async function boundedExecute(q: Builder, b: Bound): Promise<() => Promise<Buffer | null>> {
  const it = await within(nativeExecute(q, { timeoutMs: msLeft(b) }), b);
  return () => within(counted(it.next()), b);
}

/** Columns every result may name besides the table's own. */
const META = new Set(["_distance", "_score", "_relevance_score", "_rowid", "_rowaddr", "_rowoffset"]);

function matchQuery(m: MatchNode, column: string): lancedb.MatchQuery {
  return new lancedb.MatchQuery(m.terms, column, {
    boost: m.boost ?? undefined,
    fuzziness: m.fuzziness ?? undefined,
    maxExpansions: m.max_expansions ?? undefined,
    operator: m.operator === "and" ? lancedb.Operator.And : lancedb.Operator.Or,
    prefixLength: m.prefix_length ?? undefined,
  });
}

/** Upstream FtsQuery tree → LanceDB's classes. A match without a column searches `defaultColumn`. */
function ftsQuery(n: FtsNode, defaultColumn: () => string): lancedb.FullTextQuery {
  const col = (c: string | null | undefined) => c ?? defaultColumn();
  if (n.match) return matchQuery(n.match, col(n.match.column));
  if (n.phrase) return new lancedb.PhraseQuery(n.phrase.terms, col(n.phrase.column), { slop: n.phrase.slop ?? undefined });
  if (n.boost) {
    return new lancedb.BoostQuery(ftsQuery(n.boost.positive, defaultColumn), ftsQuery(n.boost.negative, defaultColumn), {
      negativeBoost: n.boost.negative_boost ?? undefined,
    });
  }
  if (n.multi_match) {
    const ms = n.multi_match.match_queries;
    // One query text over several columns is LanceDB's MultiMatchQuery; differing texts are
    // the same as a boolean "should" of the single matches.
    if (ms.every((m) => m.terms === ms[0].terms && (m.operator ?? "or") === (ms[0].operator ?? "or"))) {
      return new lancedb.MultiMatchQuery(ms[0].terms, ms.map((m) => col(m.column)), {
        boosts: ms.map((m) => m.boost ?? 1),
        operator: ms[0].operator === "and" ? lancedb.Operator.And : lancedb.Operator.Or,
      });
    }
    return new lancedb.BooleanQuery(ms.map((m) => [lancedb.Occur.Should, matchQuery(m, col(m.column))]));
  }
  const b = n.boolean!;
  const clauses: [lancedb.Occur, lancedb.FullTextQuery][] = [];
  for (const q of b.must) clauses.push([lancedb.Occur.Must, ftsQuery(q, defaultColumn)]);
  for (const q of b.should) clauses.push([lancedb.Occur.Should, ftsQuery(q, defaultColumn)]);
  for (const q of b.must_not) clauses.push([lancedb.Occur.MustNot, ftsQuery(q, defaultColumn)]);
  return new lancedb.BooleanQuery(clauses);
}

/** Field paths named anywhere in an FtsQuery tree (to check they exist). */
function ftsColumns(n: FtsNode, out: string[] = []): string[] {
  if (n.match?.column) out.push(n.match.column);
  if (n.phrase?.column) out.push(n.phrase.column);
  if (n.boost) {
    ftsColumns(n.boost.positive, out);
    ftsColumns(n.boost.negative, out);
  }
  for (const m of n.multi_match?.match_queries ?? []) if (m.column) out.push(m.column);
  for (const q of [...(n.boolean?.must ?? []), ...(n.boolean?.should ?? []), ...(n.boolean?.must_not ?? [])]) ftsColumns(q, out);
  return out;
}

const needsSchema = (s: QuerySpec) =>
  s.columnPaths.length > 0 ||
  s.orderBy.length > 0 || s.vectorColumn !== null || (s.fts !== null && (s.fts.columns !== null || typeof s.fts.query !== "string"));

const isVectorType = (t: FieldLike["type"]): boolean => {
  const id = t.typeId;
  // FixedSizeList (16) of numbers, or a List (12) / LargeList of FixedSizeList (multivector).
  if (id === 16) return true;
  const child = t.children?.[0]?.type;
  return (id === 12 || id === 17) && child?.typeId === 16;
};

/**
 * Check the field paths a query names against the table schema: an unknown one is 404
 * TableColumnNotFound naming it. Returns the FTS-indexed default column resolver.
 */
async function checkFields(table: lancedb.Table, s: QuerySpec, name: string): Promise<() => string> {
  const fields = (await readSchema(table)).fields as unknown as FieldLike[];
  for (const p of s.columnPaths) if (!META.has(p)) resolveFieldPath(fields, p, name, "column");
  for (const o of s.orderBy) resolveFieldPath(fields, o.column, name, "order_by column");
  if (s.vectorColumn !== null) {
    const { field } = resolveFieldPath(fields, s.vectorColumn, name, "vector_column");
    if (!isVectorType(field.type)) throw invalid(`vector_column: ${JSON.stringify(s.vectorColumn)} is not a vector column`);
  }
  const fts = s.fts;
  if (!fts) return () => "";
  for (const c of fts.columns ?? []) resolveFieldPath(fields, c, name, "full-text column");
  if (typeof fts.query !== "string") for (const c of ftsColumns(fts.query)) resolveFieldPath(fields, c, name, "full-text column");
  const indexed = (await table.listIndices()).filter((i) => i.indexType === "FTS").flatMap((i) => i.columns);
  return () => {
    if (indexed.length === 1) return indexed[0];
    throw invalid(
      indexed.length === 0
        ? `full_text_query: a query without a column needs an FTS index on table ${JSON.stringify(name)}`
        : `full_text_query: name the column to search, one of ${JSON.stringify(indexed)}`,
    );
  };
}

function applyFts(q: Builder, fts: FtsSpec, defaultColumn: () => string): void {
  const query = typeof fts.query === "string" ? fts.query : ftsQuery(fts.query, defaultColumn);
  q.fullTextSearch(query, fts.columns ? { columns: fts.columns } : undefined);
}

function applyVector(q: lancedb.VectorQuery, s: QuerySpec): void {
  if (s.vectorColumn !== null) q.column(s.vectorColumn);
  if (s.distanceType !== null) q.distanceType(s.distanceType as "l2");
  // The engine checks each bound against the other one it holds (both 20 by default) as it is
  // set, so a minimum above 20 set before its maximum was refused: both are set at once, then the
  // maximum widened.
  if (s.minNprobes !== null && s.maxNprobes !== null) {
    q.nprobes(s.minNprobes);
    if (s.maxNprobes !== s.minNprobes) q.maximumNprobes(s.maxNprobes);
  } else if (s.minNprobes !== null) q.minimumNprobes(s.minNprobes);
  else if (s.maxNprobes !== null) q.maximumNprobes(s.maxNprobes);
  if (s.ef !== null) q.ef(s.ef);
  if (s.refineFactor !== null) q.refineFactor(s.refineFactor);
  if (s.lowerBound !== null || s.upperBound !== null) q.distanceRange(s.lowerBound ?? undefined, s.upperBound ?? undefined);
  if (s.bypassVectorIndex) q.bypassVectorIndex();
  if (!s.prefilter) q.postfilter();
}

/**
 * The projection. The engine always appends its score column (`_distance` for a vector search,
 * `_score` for a full-text one) and warns on every query when the select list omits it; naming it
 * gives the same output without the noise.
 */
function applySelect(q: Builder, s: QuerySpec): void {
  if (s.columns === null) return;
  const auto = s.vectors !== null && s.fts === null ? "_distance" : s.vectors === null && s.fts !== null ? "_score" : null;
  if (Array.isArray(s.columns)) {
    q.select(auto && !s.columns.includes(auto) ? [...s.columns, auto] : s.columns);
  } else {
    const m = new Map(Object.entries(s.columns));
    if (auto && !m.has(auto)) m.set(auto, auto);
    q.select(m);
  }
}

/** The request field(s) holding the SQL the engine evaluates, to name in its errors. */
function expressionField(s: QuerySpec): string {
  const computed = s.columns !== null && !Array.isArray(s.columns);
  if (s.filter === null) return computed ? "columns" : "query";
  return computed ? "filter or columns" : "filter";
}

/**
 * `table.vectorSearch`, in turns: LanceDB copies its list of query vectors each time it adds one
 * (quadratic in their count: 55,000 short vectors held the event loop about two minutes, 1,024 of
 * 512 dimensions ~70 ms), so the list is added a slice of the event loop at a time.
 */
async function vectorQuery(table: lancedb.Table, vectors: QueryVector[]): Promise<lancedb.VectorQuery> {
  const q = table.query().nearestTo(vectors[0]);
  const turns = slicer();
  for (let i = 1; i < vectors.length; i++) {
    q.addQueryVector(vectors[i]);
    await turns.pause();
  }
  return q;
}

async function build(table: lancedb.Table, s: QuerySpec, name: string): Promise<Builder> {
  const defaultColumn = needsSchema(s) ? await checkFields(table, s, name) : () => "";
  let q: Builder;
  if (s.vectors !== null) {
    const vq = await vectorQuery(table, s.vectors);
    applyVector(vq, s);
    q = vq;
  } else {
    q = table.query();
  }
  if (s.fts) applyFts(q, s.fts, defaultColumn);
  if (s.filter !== null) q.where(s.filter);
  if (s.fastSearch) q.fastSearch();
  if (s.withRowId) q.withRowId();
  if (s.orderBy.length > 0) q.orderBy(s.orderBy.map((o) => ({ columnName: o.column, ascending: o.ascending, nullsFirst: o.nullsFirst })));
  applySelect(q, s);
  if (s.k !== null && s.k > 0) q.limit(s.k);
  if (s.offset > 0) q.offset(s.offset);
  return q;
}

/** Schema of an empty result; hybrid plans have none in this engine, so an empty schema then. */
async function emptyResult(q: Builder): Promise<Uint8Array> {
  const schema = await q.outputSchema().catch(() => null);
  return emptyIpcFile(schema as never);
}

/** The schema of the engine's answer to `spec` (its plan's output, nothing run). */
export async function searchSchema(table: lancedb.Table, s: QuerySpec, name: string): Promise<unknown> {
  try {
    return await (await build(table, s, name)).outputSchema();
  } catch (err) {
    translateQueryError(err, table, name, expressionField(s));
  }
}

/** Start a query: the engine's first result buffer (null when there is none) and a pull for the next. */
async function start(table: lancedb.Table, s: QuerySpec, name: string, b: Bound) {
  // Building reads the schema (a store call when the handle re-checks): bounded like the run.
  const q = await within(build(table, s, name), b);
  // k = 0 asks for no rows; the engine refuses a zero limit on vector search, so plan only.
  if (s.k === 0) return { q, first: null, next: async () => null };
  const next = await boundedExecute(q, b);
  return { q, first: await next(), next };
}

/**
 * Run a query; resolves once the first result batch exists, so engine errors surface before any
 * byte is sent. The chunks form one Arrow IPC file, pulled from the engine batch by batch.
 */
export async function runQuery(table: lancedb.Table, s: QuerySpec, name: string, b: Bound): Promise<QueryResult> {
  try {
    const r = await start(table, s, name, b);
    if (!r.first) return [await emptyResult(r.q)];
    return ipcFile(r.first, r.next, mostRows(s));
  } catch (err) {
    translateQueryError(err, table, name, expressionField(s));
  }
}

/**
 * The same answer as JSON rows (see json-rows.ts): one array, or one object per line (`lines`),
 * written as the engine hands out its batches, so a large answer is never held whole.
 */
export async function runQueryJson(table: lancedb.Table, s: QuerySpec, name: string, lines: boolean, b: Bound): Promise<AsyncIterable<Uint8Array>> {
  try {
    const r = await start(table, s, name, b);
    return jsonRows(r.first, r.next, lines);
  } catch (err) {
    translateQueryError(err, table, name, expressionField(s));
  }
}

/** An answer already made as one Arrow IPC file (the serving index's), as JSON rows. */
export const jsonAnswer = (ipc: Uint8Array, lines: boolean): AsyncIterable<Uint8Array> =>
  jsonRows(Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength), async () => null, lines);

/**
 * An answer already in Arrow IPC (one file, in chunks: the search batcher's) as JSON rows; read
 * whole first, so only for answers of a bounded size (a top-k search's).
 */
export async function* jsonOfIpc(result: QueryResult, lines: boolean): AsyncGenerator<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of result) parts.push(c);
  yield* jsonRows(Buffer.concat(parts), async () => null, lines);
}

async function* jsonRows(first: Buffer | null, next: () => Promise<Buffer | null>, lines: boolean): AsyncGenerator<Uint8Array> {
  let encode: ReturnType<typeof rowEncoder> | null = null;
  let rows = 0;
  if (!lines) yield Buffer.from("[");
  for (let b = first; b; b = await next()) {
    const t = arrow.tableFromIPC(b);
    encode ??= rowEncoder(t.schema);
    for (const batch of t.batches) {
      let text = "";
      for (const row of encode(batch)) text += lines ? JSON.stringify(row) + "\n" : (rows++ ? "," : "") + JSON.stringify(row);
      if (text) yield Buffer.from(text);
    }
  }
  if (!lines) yield Buffer.from("]");
}

export async function explainQuery(table: lancedb.Table, s: QuerySpec, name: string, verbose: boolean): Promise<string> {
  try {
    return await (await build(table, s, name)).explainPlan(verbose);
  } catch (err) {
    translateQueryError(err, table, name, expressionField(s));
  }
}

/**
 * Runs the query to measure it. LanceDB's analyze takes no timeout: the answer comes at the
 * deadline, while the engine finishes the run it started (docs/security.md, Query deadlines).
 */
export async function analyzeQuery(table: lancedb.Table, s: QuerySpec, name: string, b: Bound): Promise<string> {
  try {
    return await within(counted((await build(table, s, name)).analyzePlan()), b);
  } catch (err) {
    translateQueryError(err, table, name, expressionField(s));
  }
}
