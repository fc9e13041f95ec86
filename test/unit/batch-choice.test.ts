// Whether searches are batched (src/engine/batch-choice.ts): kept only where measurement says
// batched searches take measurably less time each, measured again every so often.
import { describe, expect, it } from "vitest";
import { createBatchChoice } from "../../src/engine/batch-choice.js";

const O = { everyMs: 1000, windowMs: 100, samples: 5, gain: 0.95 };

/** Run one measurement from `t`: each window's searches take `batchedMs` or `aloneMs`. Returns the time after it. */
function measure(c: ReturnType<typeof createBatchChoice>, t: number, batchedMs: number, aloneMs: number, searches = 10): number {
  for (let w = 0; w < 2; w++) {
    const end = t + O.windowMs;
    for (let i = 0; i < searches; i++, t += O.windowMs / (searches + 1)) {
      const b = c.batching(t);
      c.done(b, b ? batchedMs : aloneMs, t + 1);
    }
    t = end;
  }
  c.batching(t);
  return t;
}

describe("batch choice", () => {
  it("batches until it has measured, and keeps batching where batched searches are faster", () => {
    const c = createBatchChoice(O, 0);
    expect(c.batching(10)).toBe(true);
    const t = measure(c, 1000, 5, 10);
    expect(c.batching(t + 1)).toBe(true);
  });

  it("stops batching where batched searches take as long or longer, and takes it up again when they are faster", () => {
    const c = createBatchChoice(O, 0);
    let t = measure(c, 1000, 10, 7);
    expect(c.batching(t + 1)).toBe(false);
    // Within 5%: not measurably better, so not batched.
    t = measure(c, t + 1000, 9.8, 10);
    expect(c.batching(t + 1)).toBe(false);
    t = measure(c, t + 1000, 5, 10);
    expect(c.batching(t + 1)).toBe(true);
  });

  it("measures both ways, each first in turn, and leaves the choice alone under too light a load", () => {
    const c = createBatchChoice(O, 0);
    expect(c.batching(1000)).toBe(true);
    expect(c.batching(1101)).toBe(false);
    c.batching(1202);
    // The next measurement starts with searches sent alone.
    expect(c.batching(2300)).toBe(false);
    expect(c.batching(2401)).toBe(true);
    const t = measure(c, 4000, 20, 5, 3);
    expect(c.batching(t + 1)).toBe(true);
  });
});
