// The load phase of a dataset run: the table made through the server's own API (create with the
// first batch, the rest inserted `concurrency` batches at a time as Arrow IPC), then its vector
// index built and waited for; each phase timed. A table that already holds the dataset's rows and
// an index on its vector column is used as it is (unless --reload), so repeated runs measure
// searches without rebuilding.
import { Field, FixedSizeList, Float32, Int32, makeData, makeVector, RecordBatchStreamWriter, Table } from "apache-arrow";
import type { Dataset } from "./datasets.js";
import { callJson, type Client } from "./http.js";
import { badInput } from "./input-error.js";
import { SEARCH_PATH_HEADER } from "./recall.js";
import { tablePath } from "./sources.js";

export interface LoadOptions {
  table: string;
  /** Rows an insert request carries. */
  batch: number;
  /** Insert requests in flight at once. */
  concurrency: number;
  /** `IVF_PQ`, `IVF_HNSW_SQ`, … or `none`. */
  index: string;
  /** More create_index fields (num_partitions, num_sub_vectors, m, ef_construction, …). */
  indexParams: Record<string, unknown>;
  distance: string;
  reload: boolean;
}

export interface LoadFigures {
  table: string;
  rows: number;
  dim: number;
  /** Why the phase was skipped (the table already held the dataset), or null when it ran. */
  skipped: string | null;
  batch_size: number;
  concurrency: number;
  create_s: number;
  insert_s: number;
  /** Rows written a second, create and inserts together. */
  rows_per_s: number;
  index: { type: string; params: Record<string, unknown>; build_s: number } | null;
  /** The table after the load: fragments, version count, bytes (from its stats). */
  after: { fragments: number | null; rows: number | null; bytes: number | null };
  /** Seconds until the server's own search index (Quiver's serving index) answered, null when it says of none. */
  serving_ready_s: number | null;
}

const ARROW_STREAM = "application/vnd.apache.arrow.stream";

/** Rows [start, start + count) of the dataset as an Arrow IPC stream: `id` (the row number) and `vector`. */
function batchBody(d: Dataset, start: number, count: number): Buffer {
  const dim = d.base.dim;
  const ids = Int32Array.from({ length: count }, (_, i) => start + i);
  const vecType = new FixedSizeList(dim, new Field("item", new Float32(), true));
  const values = d.base.data.slice(start * dim, (start + count) * dim);
  const vectors = makeVector(makeData({ type: vecType, length: count, nullCount: 0, child: makeData({ type: new Float32(), length: count * dim, data: values }) }));
  const t = new Table({ id: makeVector(makeData({ type: new Int32(), length: count, data: ids })), vector: vectors });
  return Buffer.from(RecordBatchStreamWriter.writeAll(t).toUint8Array(true));
}

const seconds = (t0: number) => Number(((performance.now() - t0) / 1000).toFixed(3));

/** The default index settings: the bench's (partitions ≈ √rows, sub-vectors of 8 dimensions). */
export function defaultIndexParams(kind: string, rows: number, dim: number): Record<string, unknown> {
  if (!/^IVF_/i.test(kind)) return {};
  const p: Record<string, unknown> = { num_partitions: Math.max(1, Math.round(Math.sqrt(rows))) };
  if (/PQ/i.test(kind)) p.num_sub_vectors = Math.max(1, Math.floor(dim / 8));
  return p;
}

async function status(c: Client, headers: Record<string, string>, method: string, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const a = await c.send({ method, path, headers: { ...headers, "content-type": "application/json", accept: "application/json" }, body: Buffer.from(JSON.stringify(body)) });
  return { status: a.status, text: a.body.toString() };
}

/** Rows in the table, or null when there is no such table. */
async function rowCount(c: Client, headers: Record<string, string>, table: string): Promise<number | null> {
  const r = await status(c, headers, "POST", tablePath(table, "count_rows"), {});
  if (r.status === 404) return null;
  if (r.status !== 200) throw new Error(`count_rows ${table}: ${r.status} ${r.text.slice(0, 300)}`);
  return Number(JSON.parse(r.text));
}

async function hasVectorIndex(c: Client, headers: Record<string, string>, table: string): Promise<boolean> {
  const r = (await callJson(c, headers, "POST", tablePath(table, "index/list"), {})) as { indexes?: { columns: string[] }[] };
  return (r.indexes ?? []).some((ix) => ix.columns.includes("vector"));
}

/** Waits for a background job (an index build) to end; throws unless it succeeded. */
async function settle(c: Client, headers: Record<string, string>, tx: string): Promise<void> {
  for (;;) {
    const r = (await callJson(c, headers, "POST", `/v1/transaction/${encodeURIComponent(tx)}/describe`, {})) as { status: string; properties?: Record<string, string> };
    if (r.status === "Succeeded") return;
    if (r.status === "Failed" || r.status === "Canceled") throw new Error(`index build ${tx}: ${r.status} ${JSON.stringify(r.properties ?? {})}`);
    await new Promise((res) => setTimeout(res, 250));
  }
}

async function tableAfter(c: Client, headers: Record<string, string>, table: string): Promise<LoadFigures["after"]> {
  try {
    const s = (await callJson(c, headers, "POST", tablePath(table, "stats"), {})) as { num_rows?: number; total_bytes?: number; fragment_stats?: { num_fragments?: number } };
    return { fragments: s.fragment_stats?.num_fragments ?? null, rows: s.num_rows ?? null, bytes: s.total_bytes ?? null };
  } catch {
    return { fragments: null, rows: null, bytes: null };
  }
}

/** Makes the dataset's table (unless it is there already) and its index; `log` gets a line a phase. */
export async function loadPhase(c: Client, headers: Record<string, string>, d: Dataset, o: LoadOptions, log: (line: string) => void): Promise<LoadFigures> {
  const rows = d.base.count;
  const index = o.index.toLowerCase() === "none" ? null : o.index.toUpperCase();
  const params = index ? { ...defaultIndexParams(index, rows, d.base.dim), ...o.indexParams } : {};
  const figures: LoadFigures = {
    table: o.table,
    rows,
    dim: d.base.dim,
    skipped: null,
    batch_size: o.batch,
    concurrency: o.concurrency,
    create_s: 0,
    insert_s: 0,
    rows_per_s: 0,
    index: null,
    after: { fragments: null, rows: null, bytes: null },
    serving_ready_s: null,
  };
  const existing = await rowCount(c, headers, o.table);
  if (existing !== null && !o.reload) {
    if (existing !== rows) throw badInput(`table ${o.table} exists with ${existing} rows, not the dataset's ${rows}: give --reload to replace it, or another --table`);
    if (!index || (await hasVectorIndex(c, headers, o.table))) {
      figures.skipped = `table ${o.table} already held the dataset's ${rows} rows${index ? " and a vector index" : ""} (--reload to load it again)`;
      figures.after = await tableAfter(c, headers, o.table);
      log(`load phase skipped: ${figures.skipped}`);
      figures.serving_ready_s = await servingReady(c, headers, d, o.table, log);
      return figures;
    }
  } else {
    if (existing !== null) await callJson(c, headers, "POST", tablePath(o.table, "drop"), {});
    const ns = o.table.split("$").slice(0, -1);
    if (ns.length) {
      const r = await status(c, headers, "POST", `/v1/namespace/${encodeURIComponent(ns.join("$")).replace(/%24/g, "$")}/create`, {});
      if (r.status !== 200 && r.status !== 409) throw new Error(`creating namespace ${ns.join("$")}: ${r.status} ${r.text.slice(0, 300)}`);
    }
    const post = async (op: string, start: number) => {
      const body = batchBody(d, start, Math.min(o.batch, rows - start));
      const a = await c.send({ method: "POST", path: tablePath(o.table, op), headers: { ...headers, "content-type": ARROW_STREAM, accept: "application/json" }, body });
      if (a.status !== 200) throw new Error(`${op} of rows from ${start} into ${o.table}: ${a.status || a.error} ${a.body.toString().slice(0, 300)}`);
    };
    const t0 = performance.now();
    await post("create", 0);
    figures.create_s = seconds(t0);
    const t1 = performance.now();
    let next = o.batch;
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        while (next < rows) {
          const start = next;
          next += o.batch;
          await post("insert?mode=append", start);
        }
      }),
    );
    figures.insert_s = seconds(t1);
    figures.rows_per_s = Math.round(rows / Math.max(1e-3, figures.create_s + figures.insert_s));
    log(`loaded ${rows} rows into ${o.table} in ${(figures.create_s + figures.insert_s).toFixed(1)} s (${figures.rows_per_s} rows/s, batches of ${o.batch}, ${o.concurrency} at a time)`);
  }
  if (index) {
    const t2 = performance.now();
    const r = (await callJson(c, headers, "POST", tablePath(o.table, "create_index"), { column: "vector", index_type: index, distance_type: o.distance, ...params })) as { transaction_id?: string };
    if (r?.transaction_id) await settle(c, headers, r.transaction_id);
    figures.index = { type: index, params, build_s: seconds(t2) };
    log(`built ${index} ${JSON.stringify(params)} in ${figures.index.build_s.toFixed(1)} s`);
  }
  figures.after = await tableAfter(c, headers, o.table);
  if (index) figures.serving_ready_s = await servingReady(c, headers, d, o.table, log);
  return figures;
}

const SERVING_WAIT_S = 600;

/**
 * A server that builds a search index of its own after the table's (Quiver's serving index, built
 * on a table's first search) says so in each answer's path header: searches measured while it is
 * building would be the engine's, so wait until it answers (at most SERVING_WAIT_S). Seconds it
 * took; null for a server whose answers do not say.
 */
async function servingReady(c: Client, headers: Record<string, string>, d: Dataset, table: string, log: (line: string) => void): Promise<number | null> {
  const body = Buffer.from(JSON.stringify({ vector: { single_vector: Array.from(d.queries.data.subarray(0, d.queries.dim)) }, k: 1, columns: ["id"] }));
  const t0 = performance.now();
  for (;;) {
    const a = await c.send({ method: "POST", path: tablePath(table, "query"), headers: { ...headers, "content-type": "application/json" }, body });
    const path = a.headers[SEARCH_PATH_HEADER];
    if (a.status !== 200 || typeof path !== "string" || !/reason=not_built/.test(path)) {
      if (typeof path !== "string" || path !== "serving") return null;
      const s = seconds(t0);
      log(`the server's serving index answered after ${s.toFixed(1)} s`);
      return s;
    }
    if (seconds(t0) > SERVING_WAIT_S) throw new Error(`the server's serving index of ${table} was still building after ${SERVING_WAIT_S} s`);
    await new Promise((res) => setTimeout(res, 250));
  }
}
