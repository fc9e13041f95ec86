// Recall: each query vector searched as the workload searches it (index, nprobes, its filter and
// other --extra or sweep fields included), one at a time, and its answer compared with the exact top
// k. The exact answer is the dataset's stored ground truth (rows matched by their `id`), or else the
// same search with bypass_vector_index (rows matched by `_rowid`), asked once per query and filter
// and kept for the run. A filtered search is always held to the filtered exact search: a dataset's
// stored truth knows no filter.
// The path that served each answer (the serving index or the engine) is read from its header.
import { createHash } from "node:crypto";
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
  /** The filter every search (exact ones included) carried, or null. */
  filter: string | null;
  /** Median latency of the searches (one at a time) and of the exact ones (when asked), ms. */
  search_p50_ms: number;
  exact_p50_ms: number | null;
  /** A digest of every answer's rows in order: two settings with the same digest searched alike. */
  answers: string;
  /** Answers by the path the server said served them (SEARCH_PATH_HEADER); empty when it does not say. */
  paths: Record<string, number>;
  per_query: number[];
}

/** The exact answers recall is measured against: a dataset's ground truth, or exact searches through the server. */
export type TruthSource = ({ kind: "dataset"; truth: Truth } | { kind: "exact" }) & {
  /** Exact answers asked so far (row ids), by filter and query number. */
  cache: Map<string, string[]>;
};

export const exactSearch = (): TruthSource => ({ kind: "exact", cache: new Map() });
export const datasetTruth = (truth: Truth): TruthSource => ({ kind: "dataset", truth, cache: new Map() });

/** The filter a recall search carries: the sweep point's or --extra's, else that of a filtered_vector workload (unless plain vector searches are measured). */
function recallFilter(o: Options, extra: Record<string, unknown>): string | null {
  const given = extra.filter ?? o.extra.filter;
  if (typeof given === "string") return given;
  const filtered = o.workloads.find((w) => w.kind === "filtered_vector");
  return filtered && !o.workloads.some((w) => w.kind === "vector") ? (filtered.filter ?? o.filter ?? null) : null;
}

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
  const filter = recallFilter(o, extra);
  const digest = createHash("sha256");
  const fields = filter === null ? extra : { ...extra, filter };
  for (let q = 0; q < n; q++) {
    const v = queries[q];
    if (source.kind === "dataset" && filter === null) {
      const a = await search(c, headers, path, vectorQuery(o, v, { ...extra, columns: ["id"] }));
      searchTimes.push(a.ms);
      if (a.path) paths[a.path] = (paths[a.path] ?? 0) + 1;
      digest.update(`${a.rows.map((r) => r.id).join(",")}\n`);
      per.push(recallAt(source.truth, q, new Set(a.rows.map((r) => Number(r.id))), o.k));
      continue;
    }
    const a = await search(c, headers, path, vectorQuery(o, v, { ...fields, with_row_id: true }));
    searchTimes.push(a.ms);
    if (a.path) paths[a.path] = (paths[a.path] ?? 0) + 1;
    const key = `${filter ?? ""}\u0000${q}`;
    let exact = source.cache.get(key);
    if (!exact) {
      const e = await search(c, headers, path, vectorQuery(o, v, { ...(filter === null ? {} : { filter }), bypass_vector_index: true, with_row_id: true }));
      exactTimes.push(e.ms);
      exact = e.rows.map((r) => String(r._rowid));
      source.cache.set(key, exact);
    }
    digest.update(`${a.rows.map((r) => r._rowid).join(",")}\n`);
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
    truth: source.kind === "dataset" && filter === null ? "dataset" : "exact search",
    filter,
    search_p50_ms: median(searchTimes),
    exact_p50_ms: exactTimes.length ? median(exactTimes) : null,
    answers: digest.digest("hex"),
    paths,
    per_query: per,
  };
}
