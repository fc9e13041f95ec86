// Deterministic synthetic rows: low-rank vectors (like real embeddings, unlike isotropic noise) or
// clustered Gaussian ones, a text column drawn from a small vocabulary, and a category. Same seed →
// same bytes.
import { arrow } from "../src/engine/arrow.js";

/** mulberry32: a tiny seeded PRNG. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function gauss(r: () => number): number {
  return Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
}

export const WORDS = [
  "apple", "banana", "cherry", "delta", "echo", "falcon", "garden", "harbor", "island", "jungle",
  "kernel", "lantern", "meadow", "nebula", "orbit", "piano", "quartz", "river", "summit", "tundra",
  "umbrella", "violet", "willow", "xenon", "yellow", "zephyr", "quick", "brown", "fox", "lazy",
];
export const CATEGORIES = ["alpha", "beta", "gamma", "delta", "epsilon"];

export interface Spec {
  rows: number;
  dim: number;
  rank: number;
  seed: number;
  /** Above 0: Gaussian clusters around this many random centres instead of low-rank vectors. */
  clusters?: number;
}

type VectorSpec = Pick<Spec, "dim" | "rank" | "seed" | "clusters">;

/** Spread of a cluster around its centre, against centres of unit variance per dimension. */
const CLUSTER_SPREAD = 0.25;

/** Vectors around `clusters` centres (drawn from `seed`), each centre and offset drawn from `draws`. */
function clusteredSource(spec: VectorSpec, draws: () => number): () => Float32Array {
  const r = rng(spec.seed);
  const centres = Array.from({ length: spec.clusters! }, () => Float32Array.from({ length: spec.dim }, () => gauss(r)));
  return () => {
    const c = centres[Math.floor(draws() * centres.length)];
    return Float32Array.from(c, (x) => x + CLUSTER_SPREAD * gauss(draws));
  };
}

/** A vector generator: `rank` random basis vectors mixed with gaussian weights, plus small noise. */
export function vectorSource(spec: VectorSpec): () => Float32Array {
  if (spec.clusters) return clusteredSource(spec, rng(spec.seed + 7));
  const r = rng(spec.seed);
  const basis = Array.from({ length: spec.rank }, () => Float32Array.from({ length: spec.dim }, () => gauss(r)));
  return () => {
    const v = new Float32Array(spec.dim);
    for (const b of basis) {
      const w = gauss(r);
      for (let d = 0; d < spec.dim; d++) v[d] += w * b[d];
    }
    for (let d = 0; d < spec.dim; d++) v[d] += 0.05 * gauss(r);
    return v;
  };
}

export function textOf(i: number, r: () => number): string {
  const n = 4 + (i % 5);
  const words: string[] = [];
  for (let w = 0; w < n; w++) words.push(WORDS[Math.floor(r() * WORDS.length)]);
  return words.join(" ");
}

/** Rows [start, start+count) as one Arrow record batch table (CJS arrow copy, for LanceDB). */
export function batch(spec: Spec, start: number, count: number, vec: () => Float32Array, textRng: () => number) {
  const vecType = new arrow.FixedSizeList(spec.dim, new arrow.Field("item", new arrow.Float32(), true));
  const flat = new Float32Array(count * spec.dim);
  const ids = new Int32Array(count);
  const texts: string[] = [];
  const cats: string[] = [];
  for (let i = 0; i < count; i++) {
    flat.set(vec(), i * spec.dim);
    ids[i] = start + i;
    texts.push(textOf(start + i, textRng));
    cats.push(CATEGORIES[(start + i) % CATEGORIES.length]);
  }
  const vecData = arrow.makeData({
    type: vecType,
    length: count,
    nullCount: 0,
    child: arrow.makeData({ type: new arrow.Float32(), length: count * spec.dim, data: flat }),
  });
  // Explicit Utf8: apache-arrow would otherwise dictionary-encode string arrays.
  return new arrow.Table({
    id: arrow.makeVector(ids),
    text: arrow.vectorFromArray(texts, new arrow.Utf8()),
    category: arrow.vectorFromArray(cats, new arrow.Utf8()),
    vector: arrow.makeVector(vecData),
  });
}

/** All rows of a dataset, in batches of `chunk` rows. */
export function* batches(spec: Spec, chunk = 10_000) {
  const vec = vectorSource(spec);
  const textRng = rng(spec.seed + 1);
  for (let start = 0; start < spec.rows; start += chunk) yield batch(spec, start, Math.min(chunk, spec.rows - start), vec, textRng);
}

/** Query vectors from the same distribution (a different seed offset for the weights). */
export function queryVectors(spec: VectorSpec, n: number): Float32Array[] {
  if (spec.clusters) return Array.from({ length: n }, clusteredSource(spec, rng(spec.seed + 99)));
  // Same basis (same seed), fresh draws: skip ahead past the basis with a second source.
  const src = vectorSource(spec);
  const skip = rng(spec.seed + 99);
  const out: Float32Array[] = [];
  for (let i = 0; i < n; i++) {
    const v = src();
    for (let d = 0; d < v.length; d++) v[d] += 0.05 * gauss(skip);
    out.push(v);
  }
  return out;
}
