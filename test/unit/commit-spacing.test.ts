// Commit spacing: how long a table branch's next commit waits, from what automatic maintenance saw
// (its small fragments and threshold), the commits since, a running index rebuild and the commit's
// rows. The group commit that waits is driven end to end in test/maintenance-auto.test.ts.
import { describe, expect, it } from "vitest";
import { createCommitSpacing, spacingKey } from "../../src/engine/commit-spacing.js";

const K = spacingKey("t", null);

describe("commit spacing", () => {
  it("never waits before maintenance has seen the table branch, below its threshold, with no threshold, or with no base", () => {
    const s = createCommitSpacing(200);
    expect(s.wait(K, 1)).toBe(0);
    // 18 seen and one commit since: 19.
    s.seen(K, 18, 20);
    s.started(K);
    expect(s.wait(K, 1)).toBe(0);
    s.seen(K, 50, 0);
    s.started(K);
    expect(s.wait(K, 1)).toBe(0);
    const off = createCommitSpacing(0);
    off.seen(K, 50, 20);
    off.started(K);
    expect(off.wait(K, 1)).toBe(0);
  });

  it("at the threshold, the next commit starts the base interval after the last one; past it, longer, up to twice the base", () => {
    const s = createCommitSpacing(200);
    s.seen(K, 20, 20);
    // No commit started since: nothing to wait for.
    expect(s.wait(K, 1)).toBe(0);
    s.started(K);
    // One commit since the look: 21 small fragments.
    expect(s.wait(K, 1)).toBeGreaterThan(200 * 1.05 - 20);
    expect(s.wait(K, 1)).toBeLessThanOrEqual(200 * 1.05);
    s.seen(K, 30, 20);
    s.started(K);
    expect(s.wait(K, 1)).toBeGreaterThan(200 * 1.55 - 20);
    s.seen(K, 500, 20);
    s.started(K);
    expect(s.wait(K, 1)).toBeLessThanOrEqual(400);
    expect(s.wait(K, 1)).toBeGreaterThan(380);
  });

  it("counts the commits since the look: each may have added a small fragment", () => {
    const s = createCommitSpacing(200);
    s.seen(K, 18, 20);
    s.started(K);
    expect(s.wait(K, 1)).toBe(0);
    s.started(K);
    expect(s.wait(K, 1)).toBeGreaterThan(180);
  });

  it("waits five times the base while an index rebuild holds the maintenance slot, until the next look", () => {
    const s = createCommitSpacing(200);
    s.seen(K, 20, 20);
    s.rebuilding(K);
    s.started(K);
    expect(s.wait(K, 1)).toBeGreaterThan(980);
    expect(s.wait(K, 1)).toBeLessThanOrEqual(1000);
    s.seen(K, 20, 20);
    expect(s.wait(K, 1)).toBeLessThanOrEqual(200);
  });

  it("never holds back a bulk load's commit (1,000 rows or more), nor another table branch", () => {
    const s = createCommitSpacing(200);
    s.seen(K, 100, 20);
    s.started(K);
    expect(s.wait(K, 999)).toBeGreaterThan(0);
    expect(s.wait(K, 1000)).toBe(0);
    expect(s.wait(spacingKey("t", "side"), 1)).toBe(0);
    expect(s.wait(spacingKey("u", null), 1)).toBe(0);
  });
});
