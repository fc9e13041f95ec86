// How much a figure moves between runs: the median and range of repeated runs, and a bootstrap
// interval of a mean over samples (recall over queries). With a handful of runs the range is the
// honest spread; two figures whose ranges overlap are not told apart by the runs.
import { rng } from "../bench/dataset.js";

/** A figure over repeated runs: its median, lowest and highest, and how many runs. */
export interface Interval {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function median(xs: readonly number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function interval(xs: readonly number[]): Interval {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length };
}

/** True when the two ranges overlap: the runs do not tell the figures apart. */
export const overlaps = (a: Interval, b: Interval): boolean => a.min <= b.max && b.min <= a.max;

/** A 95% percentile-bootstrap interval of the mean of `xs` (seeded: the same samples give the same interval). */
export function bootstrapMean(xs: readonly number[], rounds = 2000, seed = 1): [number, number] {
  if (xs.length < 2) return [xs[0] ?? NaN, xs[0] ?? NaN];
  const r = rng(seed);
  const means = new Float64Array(rounds);
  for (let b = 0; b < rounds; b++) {
    let s = 0;
    for (let i = 0; i < xs.length; i++) s += xs[Math.floor(r() * xs.length)];
    means[b] = s / xs.length;
  }
  means.sort();
  return [means[Math.floor(0.025 * rounds)], means[Math.min(rounds - 1, Math.floor(0.975 * rounds))]];
}
