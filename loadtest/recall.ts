// Recall mode: each sampled query vector searched as the workload searches it (index, nprobes and
// other --extra fields included) and again with bypass_vector_index (exact search); recall@k is the
// share of the exact answer's rows the workload's answer found, rows matched by their _rowid.
import { callJson, type Client } from "./http.js";
import type { Options } from "./options.js";
import { tablePath } from "./sources.js";
import { vectorQuery } from "./workload.js";

export interface RecallFigures {
  k: number;
  queries: number;
  mean: number;
  min: number;
  /** Median latency of the workload's searches and of the exact ones, ms. */
  search_p50_ms: number;
  exact_p50_ms: number;
  per_query: number[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

export async function measureRecall(o: Options, c: Client, headers: Record<string, string>, vectors: number[][]): Promise<RecallFigures> {
  const path = tablePath(o.table, "query");
  const ids = async (body: Record<string, unknown>, times: number[]) => {
    const t = performance.now();
    const rows = (await callJson(c, headers, "POST", path, { ...body, with_row_id: true })) as { _rowid: number | string }[];
    times.push(performance.now() - t);
    return rows.map((r) => String(r._rowid));
  };
  const searchTimes: number[] = [];
  const exactTimes: number[] = [];
  const per: number[] = [];
  for (const v of vectors.slice(0, o.recallQueries)) {
    const found = new Set(await ids(vectorQuery(o, v), searchTimes));
    const exact = await ids(vectorQuery(o, v, { bypass_vector_index: true }), exactTimes);
    if (exact.length) per.push(exact.filter((id) => found.has(id)).length / exact.length);
  }
  if (!per.length) throw new Error(`recall: exact search of ${o.table} found no rows`);
  return {
    k: o.k,
    queries: per.length,
    mean: per.reduce((a, b) => a + b, 0) / per.length,
    min: Math.min(...per),
    search_p50_ms: median(searchTimes),
    exact_p50_ms: median(exactTimes),
    per_query: per,
  };
}
