// Recall: each query vector searched as the workload searches it (index, nprobes and other --extra
// or sweep fields included), one at a time, and its answer compared with the exact top k. The exact
// answer is the dataset's stored ground truth (rows matched by their `id`), or else the same search
// with bypass_vector_index (rows matched by `_rowid`), asked once per query and kept for the run.
// The path that served each answer (the serving index or the engine) is read from its header.
import type { Truth } from "./ground-truth.js";
import { recallAt } from "./ground-truth.js";
import type { Client } from "./http.js";
import { bootstrapMean, interval, median } from "./noise.js";
import type { Options } from "./options.js";
import { tablePath } from "./sources.js";
import { vectorQuery } from "./workload.js";

/** The answer header naming the path that served a vector search (Quiver's serving index or the engine). */
export const SEARCH_PATH_HEADER = "x-quiver-search-path";

export interface RecallFigures {
  k: number;
  queries: number;
  mean: number;
  min: number;
  /** 95% bootstrap interval of the mean over the queries. */
  ci95: [number, number];
  /** Where the exact answers came from. */
  truth: "dataset" | "exact search";
  /** Median latency of the searches (one at a time) and of the exact ones (when asked), ms. */
  search_p50_ms: number;
  exact_p50_ms: number | null;
  /** Answers by the path the server said served them (SEARCH_PATH_HEADER); empty when it does not say. */
  paths: Record<string, number>;
  per_query: number[];
}

/** The exact answers recall is measured against: a dataset's ground truth, or exact searches through the server. */
export type TruthSource = { kind: "dataset"; truth: Truth } | { kind: "exact"; cache: Map<number, string[]> };

export const exactSearch = (): TruthSource => ({ kind: "exact", cache: new Map() });

async function search(c: Client, headers: Record<string, string>, path: string, body: Record<string, unknown>) {
  const t = performance.now();
  const a = await c.send({ method: "POST", path, headers: { ...headers, accept: "application/json", "content-type": "application/json" }, body: Buffer.from(JSON.stringify(body)) });
  const ms = performance.now() - t;
  if (a.status !== 200) throw new Error(`recall search: ${a.status || a.error} ${a.body.toString().slice(0, 300)}`);
  const via = a.headers[SEARCH_PATH_HEADER];
  return { rows: JSON.parse(a.body.toString()) as Record<string, unknown>[], ms, path: typeof via === "string" ? via : null };
}

/** Recall@k of `queries` searched with `extra` (sweep fields) over the workload's own query fields. */
export async function measureRecall(
  o: Options,
  c: Client,
  headers: Record<string, string>,
  queries: number[][],
  source: TruthSource,
  extra: Record<string, unknown> = {},
): Promise<RecallFigures> {
  const path = tablePath(o.table, "query");
  const searchTimes: number[] = [];
  const exactTimes: number[] = [];
  const per: number[] = [];
  const paths: Record<string, number> = {};
  const n = Math.min(o.recallQueries, queries.length);
  for (let q = 0; q < n; q++) {
    const v = queries[q];
    if (source.kind === "dataset") {
      const a = await search(c, headers, path, vectorQuery(o, v, { ...extra, columns: ["id"] }));
      searchTimes.push(a.ms);
      if (a.path) paths[a.path] = (paths[a.path] ?? 0) + 1;
      per.push(recallAt(source.truth, q, new Set(a.rows.map((r) => Number(r.id))), o.k));
      continue;
    }
    const a = await search(c, headers, path, vectorQuery(o, v, { ...extra, with_row_id: true }));
    searchTimes.push(a.ms);
    if (a.path) paths[a.path] = (paths[a.path] ?? 0) + 1;
    let exact = source.cache.get(q);
    if (!exact) {
      const e = await search(c, headers, path, vectorQuery(o, v, { bypass_vector_index: true, with_row_id: true }));
      exactTimes.push(e.ms);
      exact = e.rows.map((r) => String(r._rowid));
      source.cache.set(q, exact);
    }
    const found = new Set(a.rows.map((r) => String(r._rowid)));
    if (exact.length) per.push(exact.filter((id) => found.has(id)).length / exact.length);
  }
  if (!per.length) throw new Error(`recall: exact search of ${o.table} found no rows`);
  return {
    k: o.k,
    queries: per.length,
    mean: per.reduce((a, b) => a + b, 0) / per.length,
    min: interval(per).min,
    ci95: bootstrapMean(per),
    truth: source.kind === "dataset" ? "dataset" : "exact search",
    search_p50_ms: median(searchTimes),
    exact_p50_ms: exactTimes.length ? median(exactTimes) : null,
    paths,
    per_query: per,
  };
}
