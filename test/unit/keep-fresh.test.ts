// keepFresh (src/util/keep-fresh.ts) on plain items: which it checks ahead, and how many at once.
import { expect, it, vi } from "vitest";
import { keepFresh, type Kept } from "../../src/util/keep-fresh.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("checks only items read within keepMs and three quarters of an interval old, at most 8 at once", async () => {
  const now = Date.now();
  // Each wait below is for a condition, not a time: a busy machine may run the ticks late.
  const INTERVAL_MS = 8_000;
  const TICK_MS = INTERVAL_MS / 8;
  const stale = (n: number): (Kept & { n: number })[] => Array.from({ length: n }, (_, i) => ({ n: i, usedAt: now, checkedAt: now - INTERVAL_MS }));
  const items = [...stale(20), { n: 98, usedAt: now - 60_000, checkedAt: now - INTERVAL_MS }, { n: 99, usedAt: now, checkedAt: now + 60_000 }];
  const started: number[] = [];
  const finish: (() => void)[] = [];
  const stop = keepFresh({ intervalMs: INTERVAL_MS, keepMs: 60_000 }, () => items, (it) => {
    started.push(it.n);
    // Checked "in the future": never due again during the test, however late its ticks run.
    return new Promise<void>((done) => finish.push(() => ((it.checkedAt = Date.now() + 600_000), done())));
  });
  /** Once `count` checks have started, and a tick more (which must start none while 8 run). */
  const startedAtLeast = async (count: number) => {
    await vi.waitFor(() => expect(started.length).toBeGreaterThanOrEqual(count), { timeout: 60_000, interval: 20 });
    await sleep(TICK_MS * 1.5);
  };
  try {
    await startedAtLeast(8);
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    finish.splice(0).forEach((f) => f());
    await startedAtLeast(16);
    expect(started.slice(8)).toEqual([8, 9, 10, 11, 12, 13, 14, 15]);
    finish.splice(0).forEach((f) => f());
    await startedAtLeast(20);
    // A check under way is not started again; the unread item (98) and the one checked a moment ago (99) never are.
    expect(started.slice(16)).toEqual([16, 17, 18, 19]);
  } finally {
    stop();
  }
}, 120_000);

it("is off when keepMs is 0 or the interval is under 200 ms", async () => {
  const item = { usedAt: Date.now(), checkedAt: 0 };
  let checks = 0;
  const stops = [keepFresh({ intervalMs: 1000, keepMs: 0 }, () => [item], async () => void checks++), keepFresh({ intervalMs: 199, keepMs: 10_000 }, () => [item], async () => void checks++)];
  await sleep(300);
  stops.forEach((s) => s());
  expect(checks).toBe(0);
});
