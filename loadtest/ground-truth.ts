// Exact nearest neighbours of each query vector among the dataset's rows, by brute force in the
// harness (independent of the server under test): the ground truth recall is measured against.
// Distances as LanceDB orders them: l2 (squared Euclidean), cosine (1 − cosine similarity), dot
// (negated inner product; smaller is nearer). Ties go to the lower row id. Large sets are split by
// query over worker threads that share the rows (a SharedArrayBuffer); docs/loadtest.md has timings.
import { availableParallelism } from "node:os";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { row, type Vectors } from "./vector-files.js";

export type Distance = "l2" | "cosine" | "dot";
export const DISTANCES: readonly Distance[] = ["l2", "cosine", "dot"];

/** Row ids of the `k` nearest rows for each query, nearest first: `count` rows of `k` ids. */
export interface Truth {
  k: number;
  count: number;
  ids: Int32Array;
}

/** Inner product of row `i` of `data` with `q` (both of `dim` values), four lanes at a time. */
function dot(data: Float32Array, at: number, q: Float32Array, dim: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let d = 0;
  for (; d + 3 < dim; d += 4) {
    s0 += data[at + d] * q[d];
    s1 += data[at + d + 1] * q[d + 1];
    s2 += data[at + d + 2] * q[d + 2];
    s3 += data[at + d + 3] * q[d + 3];
  }
  for (; d < dim; d++) s0 += data[at + d] * q[d];
  return s0 + s1 + s2 + s3;
}

const squaredNorms = (v: Vectors): Float64Array => Float64Array.from({ length: v.count }, (_, i) => dot(v.data, i * v.dim, row(v, i), v.dim));

/**
 * The exact top `k` of every query among `base` (rows numbered from 0). Every distance is one
 * inner product: l2 as |b|² − 2 b·q (+ |q|², the same for every row), cosine as 1 − b·q / (|b| |q|).
 */
function exactTopK(base: Vectors, queries: Vectors, k: number, distance: Distance): Truth {
  const kk = Math.min(k, base.count);
  const ids = new Int32Array(queries.count * kk);
  const { dim, data } = base;
  const baseSq = distance === "dot" ? null : squaredNorms(base);
  const baseNorm = distance === "cosine" ? baseSq!.map(Math.sqrt) : null;
  // The current top: distances and ids sorted ascending, replaced by insertion.
  const topD = new Float64Array(kk);
  const topI = new Int32Array(kk);
  for (let q = 0; q < queries.count; q++) {
    const v = row(queries, q);
    const qNorm = Math.sqrt(dot(v, 0, v, dim));
    topD.fill(Infinity);
    topI.fill(-1);
    for (let i = 0; i < base.count; i++) {
      const p = dot(data, i * dim, v, dim);
      const s = distance === "l2" ? baseSq![i] - 2 * p : distance === "dot" ? -p : 1 - p / (baseNorm![i] * qNorm || 1);
      if (s >= topD[kk - 1]) continue;
      let j = kk - 1;
      while (j > 0 && topD[j - 1] > s) {
        topD[j] = topD[j - 1];
        topI[j] = topI[j - 1];
        j--;
      }
      topD[j] = s;
      topI[j] = i;
    }
    ids.set(topI, q * kk);
  }
  return { k: kk, count: queries.count, ids };
}

/** Rows × queries from which the work is split over threads (below it, starting them costs more). */
const PARALLEL_FROM = 2e7;

/** Vectors whose data a worker thread can share. */
function shared(v: Vectors): Vectors {
  if (v.data.buffer instanceof SharedArrayBuffer) return v;
  const data = new Float32Array(new SharedArrayBuffer(v.data.byteLength));
  data.set(v.data);
  return { ...v, data };
}

/** The exact top `k` of every query among `base` (rows numbered from 0), on every core for large sets. */
export async function groundTruth(base: Vectors, queries: Vectors, k: number, distance: Distance): Promise<Truth> {
  const threads = Math.min(availableParallelism(), queries.count);
  // Worker threads run the built module; from sources (the tests' in-process runs) it runs here.
  if (threads < 2 || base.count * queries.count < PARALLEL_FROM || !import.meta.url.endsWith(".js")) return exactTopK(base, queries, k, distance);
  const rows = shared(base);
  const per = Math.ceil(queries.count / threads);
  const parts = await Promise.all(
    Array.from({ length: threads }, (_, t) => {
      const slice = queries.data.subarray(t * per * queries.dim, Math.min(queries.count, (t + 1) * per) * queries.dim);
      const qs: Vectors = { dim: queries.dim, count: slice.length / queries.dim, data: Float32Array.from(slice) };
      return new Promise<Truth>((resolve, reject) => {
        const w = new Worker(new URL(import.meta.url), { workerData: { base: rows, queries: qs, k, distance } });
        w.once("message", resolve);
        w.once("error", reject);
      });
    }),
  );
  const ids = new Int32Array(queries.count * parts[0].k);
  let at = 0;
  for (const p of parts) {
    ids.set(p.ids, at);
    at += p.ids.length;
  }
  return { k: parts[0].k, count: queries.count, ids };
}

if (!isMainThread && workerData?.base) {
  const { base, queries, k, distance } = workerData as { base: Vectors; queries: Vectors; k: number; distance: Distance };
  parentPort!.postMessage(exactTopK(base, queries, k, distance));
}

/** Recall@k of one answer: the share of the true top `k` (ids of `truth`'s row `q`) that `found` holds. */
export function recallAt(truth: Truth, q: number, found: ReadonlySet<number>, k: number): number {
  const n = Math.min(k, truth.k);
  let hit = 0;
  for (let j = 0; j < n; j++) if (found.has(truth.ids[q * truth.k + j])) hit++;
  return hit / n;
}
