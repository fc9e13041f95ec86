// keepFresh (src/util/keep-fresh.ts) on plain items: which it checks ahead, and how many at once.
import { expect, it } from "vitest";
import { keepFresh, type Kept } from "../../src/util/keep-fresh.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("checks only items read within keepMs and three quarters of an interval old, at most 8 at once", async () => {
  const now = Date.now();
  const stale = (n: number): (Kept & { n: number })[] => Array.from({ length: n }, (_, i) => ({ n: i, usedAt: now, checkedAt: now - 1_000 }));
  const items = [...stale(20), { n: 98, usedAt: now - 60_000, checkedAt: now - 1_000 }, { n: 99, usedAt: now, checkedAt: now + 60_000 }];
  const started: number[] = [];
  const finish: (() => void)[] = [];
  const stop = keepFresh({ intervalMs: 800, keepMs: 10_000 }, () => items, (it) => {
    started.push(it.n);
    return new Promise<void>((done) => finish.push(() => ((it.checkedAt = Date.now()), done())));
  });
  try {
    await sleep(250);
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    finish.splice(0).forEach((f) => f());
    await sleep(250);
    expect(started.slice(8)).toEqual([8, 9, 10, 11, 12, 13, 14, 15]);
    finish.splice(0).forEach((f) => f());
    await sleep(250);
    // A check under way is not started again; the unread item (98) and the one checked a moment ago (99) never are.
    expect(started.slice(16)).toEqual([16, 17, 18, 19]);
  } finally {
    stop();
  }
});

it("is off when keepMs is 0 or the interval is under 200 ms", async () => {
  const item = { usedAt: Date.now(), checkedAt: 0 };
  let checks = 0;
  const stops = [keepFresh({ intervalMs: 1000, keepMs: 0 }, () => [item], async () => void checks++), keepFresh({ intervalMs: 199, keepMs: 10_000 }, () => [item], async () => void checks++)];
  await sleep(300);
  stops.forEach((s) => s());
  expect(checks).toBe(0);
});
