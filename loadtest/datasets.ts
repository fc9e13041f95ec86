// Datasets for a vector-search benchmark: generated (the bench's low-rank or clustered Gaussian
// vectors, bench/dataset.ts) or read from a file (.fvecs/.bvecs as the SIFT and GIST sets ship,
// .npy, Arrow IPC), each with held-out query vectors (never inserted) and their ground truth: the
// exact top 100 of each query, computed once by the harness and stored with the dataset (or read
// from the set's own .ivecs file).
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { vectorSource, type Spec } from "../bench/dataset.js";
import { groundTruth, type Distance, type Truth } from "./ground-truth.js";
import { badInput } from "./input-error.js";
import { readIvecs, readVectorFile, writeFvecs, writeIvecs, type Vectors } from "./vector-files.js";

/** Neighbours kept per query in the stored ground truth (recall@k for any k up to it). */
export const TRUTH_K = 100;

export interface DatasetOptions {
  /** `lowrank-100k`, `gaussian-20k` (rows with k or m), or a vector file. */
  dataset: string;
  /** Dimension of generated vectors. */
  dim: number;
  /** Held-out query vectors: generated, or the file's last rows (when no `queries` file is given). */
  queryCount: number;
  /** A file of query vectors for a file dataset (e.g. sift_query.fvecs). */
  queries?: string;
  /** The set's own ground truth (.ivecs, row ids of the dataset file). */
  groundTruth?: string;
  vectorColumn?: string;
  distance: Distance;
  /** Where ground truth and query vectors are stored. */
  datasetDir: string;
}

export interface Dataset {
  name: string;
  /** What the rows are, for the report. */
  description: string;
  base: Vectors;
  queries: Vectors;
  truth: Truth;
  /** Where the ground truth came from, and how long computing it took (0 when read). */
  truth_source: "computed" | "stored" | "file";
  truth_seconds: number;
  /** The folder holding the stored query vectors and ground truth. */
  dir: string;
}

const GENERATED = /^(lowrank|gaussian)-(\d+(?:\.\d+)?)([km]?)$/i;

/** The bench's generator settings for a generated dataset name (null for a file). */
export function generatedSpec(name: string, dim: number): (Spec & { kind: string }) | null {
  const m = GENERATED.exec(name);
  if (!m) return null;
  const rows = Math.round(Number(m[2]) * ({ k: 1e3, m: 1e6 } as Record<string, number>)[m[3].toLowerCase()] || Number(m[2]));
  if (!(rows >= 1)) throw badInput(`--dataset ${name}: no rows`);
  const kind = m[1].toLowerCase();
  // The bench's seed and rank; clusters as the bench's 1,000 for 100k rows, fewer for small sets.
  const spec: Spec & { kind: string } = { kind, rows, dim, rank: 16, seed: 42 };
  if (kind === "gaussian") spec.clusters = Math.min(1000, Math.ceil(rows / 100));
  return spec;
}

/** Rows and held-out queries drawn from one generator: the first `rows` are the bench's table's vectors. */
function generate(spec: Spec, queryCount: number): { base: Vectors; queries: Vectors } {
  const next = vectorSource(spec);
  const draw = (count: number): Vectors => {
    const data = new Float32Array(count * spec.dim);
    for (let i = 0; i < count; i++) data.set(next(), i * spec.dim);
    return { dim: spec.dim, count, data };
  };
  const base = draw(spec.rows);
  return { base, queries: draw(queryCount) };
}

const split = (v: Vectors, at: number): [Vectors, Vectors] => [
  { dim: v.dim, count: at, data: v.data.subarray(0, at * v.dim) },
  { dim: v.dim, count: v.count - at, data: v.data.subarray(at * v.dim) },
];

interface StoredMeta {
  name: string;
  rows: number;
  dim: number;
  queries: number;
  k: number;
  distance: Distance;
  /** For file datasets: the file's size and modification time, so a changed file is noticed. */
  file?: { size: number; mtime_ms: number };
  truth_seconds: number;
}

/** The dataset's vectors, queries and ground truth; computes and stores the truth on first use. */
export async function loadDataset(o: DatasetOptions, log: (line: string) => void): Promise<Dataset> {
  const spec = generatedSpec(o.dataset, o.dim);
  let base: Vectors;
  let queries: Vectors;
  let name: string;
  let description: string;
  let file: StoredMeta["file"];
  if (spec) {
    if (o.queries || o.groundTruth) throw badInput("--queries and --ground-truth go with a dataset file; a generated dataset holds out its own queries");
    ({ base, queries } = generate(spec, o.queryCount));
    name = `${o.dataset.toLowerCase()}-d${spec.dim}`;
    description = spec.clusters
      ? `clustered Gaussian, ${spec.clusters} clusters, ${spec.rows} × ${spec.dim}, seed ${spec.seed}`
      : `low-rank (rank ${spec.rank}) plus noise, ${spec.rows} × ${spec.dim}, seed ${spec.seed}`;
  } else {
    if (!existsSync(o.dataset)) throw badInput(`--dataset: expected lowrank-<rows>, gaussian-<rows> (e.g. lowrank-100k) or a .fvecs, .bvecs, .npy or Arrow IPC file; ${o.dataset}: no such file`);
    const all = readVectorFile(o.dataset, o.vectorColumn);
    if (o.queries) {
      base = all;
      queries = readVectorFile(o.queries, o.vectorColumn);
      if (queries.dim !== base.dim) throw badInput(`${o.queries}: vectors of ${queries.dim} values, the dataset's have ${base.dim}`);
    } else {
      if (all.count <= o.queryCount) throw badInput(`${o.dataset}: ${all.count} vectors, not more than the ${o.queryCount} held out as queries (--query-count)`);
      [base, queries] = split(all, all.count - o.queryCount);
    }
    const st = statSync(o.dataset);
    file = { size: st.size, mtime_ms: Math.floor(st.mtimeMs) };
    name = `${path.basename(o.dataset).replace(/\.[^.]*$/, "")}-${queries.count}q`;
    description = `${o.dataset}: ${base.count} × ${base.dim}${o.queries ? `, queries ${o.queries}` : `, its last ${queries.count} held out as queries`}`;
  }
  const dir = path.join(o.datasetDir, name);
  const meta: StoredMeta = { name, rows: base.count, dim: base.dim, queries: queries.count, k: TRUTH_K, distance: o.distance, file, truth_seconds: 0 };
  if (o.groundTruth) {
    const t = readIvecs(o.groundTruth);
    if (t.count < queries.count) throw badInput(`${o.groundTruth}: ground truth of ${t.count} queries, there are ${queries.count}`);
    if (t.ids.some((id) => id < 0 || id >= base.count)) throw badInput(`${o.groundTruth}: a row id outside the dataset's ${base.count} rows`);
    return { name, description, base, queries, truth: { k: t.k, count: queries.count, ids: t.ids.subarray(0, queries.count * t.k) }, truth_source: "file", truth_seconds: 0, dir };
  }
  const stored = readStored(dir, meta);
  if (stored) return { name, description, base, queries, truth: stored.truth, truth_source: "stored", truth_seconds: stored.seconds, dir };
  log(`computing the ground truth of ${queries.count} queries over ${base.count} rows (once; stored in ${dir})`);
  const t0 = performance.now();
  const truth = await groundTruth(base, queries, TRUTH_K, o.distance);
  meta.truth_seconds = Number(((performance.now() - t0) / 1000).toFixed(2));
  mkdirSync(dir, { recursive: true });
  writeFvecs(path.join(dir, "queries.fvecs"), queries);
  writeIvecs(path.join(dir, "groundtruth.ivecs"), truth.k, truth.count, truth.ids);
  writeFileSync(path.join(dir, "dataset.json"), JSON.stringify(meta, null, 1));
  return { name, description, base, queries, truth, truth_source: "computed", truth_seconds: meta.truth_seconds, dir };
}

/** The stored ground truth, when it was computed for these very rows, queries and distance. */
function readStored(dir: string, want: StoredMeta): { truth: Truth; seconds: number } | null {
  const metaFile = path.join(dir, "dataset.json");
  if (!existsSync(metaFile)) return null;
  const had = JSON.parse(readFileSync(metaFile, "utf8")) as StoredMeta;
  const same = had.rows === want.rows && had.dim === want.dim && had.queries === want.queries && had.distance === want.distance && had.k >= want.k &&
    JSON.stringify(had.file ?? null) === JSON.stringify(want.file ?? null);
  if (!same) return null;
  const t = readIvecs(path.join(dir, "groundtruth.ivecs"));
  return { truth: { k: t.k, count: t.count, ids: t.ids }, seconds: had.truth_seconds };
}
