// The plain description of one query, as the engine executes it (built by operations/query-spec.ts).
import type { FtsNode } from "../schemas/query.js";

export interface FtsSpec {
  /** A query string (engine syntax), or an upstream FtsQuery tree. */
  query: string | FtsNode;
  /** Field paths to search; null = every FTS-indexed column. */
  columns: string[] | null;
}

/** One query vector: parsed JSON numbers, or float32s a worker read them into (a large body). */
export type QueryVector = number[] | Float32Array;

export interface QuerySpec {
  /** Query vectors; null for full-text search or a filtered scan. */
  vectors: QueryVector[] | null;
  /** Sent as a list of vectors (multi_vector), even when it holds one. */
  multi: boolean;
  fts: FtsSpec | null;
  /** null: 10 for vector/full-text/hybrid search, no limit for a scan. */
  k: number | null;
  offset: number;
  filter: string | null;
  /** Vector search only (like the distance knobs below); ignored otherwise. */
  prefilter: boolean;
  /** Field paths, or output name → field path / expression; null = all columns. */
  columns: string[] | Record<string, string> | null;
  /** The field paths among `columns` that must exist in the table. */
  columnPaths: string[];
  distanceType: "l2" | "cosine" | "dot" | "hamming" | null;
  minNprobes: number | null;
  maxNprobes: number | null;
  ef: number | null;
  refineFactor: number | null;
  lowerBound: number | null;
  upperBound: number | null;
  bypassVectorIndex: boolean;
  fastSearch: boolean;
  vectorColumn: string | null;
  withRowId: boolean;
  /** Sort keys of a scan, applied before offset and k; empty = the engine's order. */
  orderBy: { column: string; ascending: boolean; nullsFirst: boolean }[];
}

/** Rows a search may answer and still count as small (each row at most a vector and its fields). */
const TOP_K_ROWS = 1_000;

/** A vector or full-text search of at most TOP_K_ROWS rows in all: its answer is small whatever the table's size. */
export function topK(spec: QuerySpec): boolean {
  if (spec.vectors === null && spec.fts === null) return false;
  return ((spec.k ?? 10) + spec.offset) * Math.max(1, spec.vectors?.length ?? 1) <= TOP_K_ROWS;
}

/**
 * The most rows the engine can answer for `spec` by its limit: k for each query vector of a vector
 * search, k for a full-text search or a scan. null when k is not given, or for hybrid search
 * (whose fused answer is the reranker's).
 */
export function mostRows(spec: QuerySpec): number | null {
  if (spec.k === null || spec.k <= 0 || (spec.vectors !== null && spec.fts !== null)) return null;
  return spec.k * (spec.vectors !== null && spec.multi ? spec.vectors.length : 1);
}
