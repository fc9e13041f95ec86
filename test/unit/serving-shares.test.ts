// The share rule of --serving-memory-mb (src/serving/shares.ts): a tenant asking for room
// that is not free takes it back from the least recently searched tables of tenants above their
// fair share (the budget over the tenants holding an index and the one asking), never from itself
// and never past its own share. And the bound itself: an index memory grows only by what it was
// granted, which the room a sync asks for covers.
import { expect, it } from "vitest";
import { assignLevel, createGraphMemory, graphOf, growthBound, newSlot, PAST_GRANT, setLimit, usedBytes } from "../../dist/src/serving/graph.js";
import { reclaim, type Held } from "../../dist/src/serving/shares.js";

const MB = 2 ** 20;
const held = (table: string, bytes: number, searched: number): Held => ({ table, tenant: table.split("$")[0], bytes: bytes * MB, searched });

it("takes what is free, handing nothing back", () => {
  expect(reclaim([held("a$t1", 2, 1)], "b", 1 * MB, 4 * MB)).toEqual([]);
  expect(reclaim([held("a$t1", 2, 1)], "a", 2 * MB, 4 * MB)).toEqual([]);
});

it("hands back the least recently searched tables of a tenant above its share, until the room suffices", () => {
  const a = [held("a$t1", 1, 5), held("a$t2", 1, 1), held("a$t3", 1.5, 3)];
  expect(reclaim(a, "b", 1.5 * MB, 4 * MB)).toEqual(["a$t2"]);
  expect(reclaim(a, "b", 2 * MB, 4 * MB)).toEqual(["a$t2", "a$t3"]);
});

it("never hands back the asking tenant's own tables: alone, it has what is free", () => {
  expect(reclaim([held("a$t1", 3, 1), held("a$t2", 0.5, 2)], "a", 1 * MB, 4 * MB)).toBeNull();
});

it("reclaims nothing for a tenant that would hold more than its share", () => {
  // Two tenants: shares of 2 MB; b holds 1.5 and asks for 1 more.
  expect(reclaim([held("a$t1", 2.4, 1), held("b$t1", 1.5, 2)], "b", 1 * MB, 4 * MB)).toBeNull();
});

it("leaves tenants at or below their share alone", () => {
  // Three tenants: shares of 4/3 MB. c is within its share; a is above it.
  const tables = [held("a$t1", 1.25, 1), held("c$t1", 1.2, 2), held("a$t2", 1.25, 4)];
  expect(reclaim(tables, "b", 1 * MB, 4 * MB)).toEqual(["a$t1"]);
  expect(reclaim(tables, "b", 1.3 * MB, 4 * MB)).toEqual(["a$t1"]);
});

it("never hands back an index still being built, and hands back nothing when the room cannot be had", () => {
  expect(reclaim([held("a$t1", 3.5, Infinity)], "b", 1 * MB, 4 * MB)).toBeNull();
  const tables = [held("a$t1", 0.5, 1), held("a$t2", 3, Infinity)];
  expect(reclaim(tables, "b", 1 * MB, 4 * MB)).toEqual(["a$t1"]);
  expect(reclaim(tables, "b", 1.5 * MB, 4 * MB)).toBeNull();
});

it("grows an index memory only by what it was granted, which growthBound covers", () => {
  const g = graphOf(createGraphMemory({ dim: 8, metric: "l2", m: 16, efConstruction: 32, columnBytes: 0, maxBytes: 64 << 20 }));
  const write = (from: number, rows: number) => {
    for (let i = from; i < from + rows; i++) assignLevel(g, newSlot(g, new Float32Array(8).fill(i), 0, BigInt(i), 1));
  };
  for (const [from, rows] of [[0, 1], [1, 1500], [1501, 3000]]) {
    const before = usedBytes(g);
    const bound = growthBound(g, rows, 0);
    setLimit(g, before + bound);
    write(from, rows);
    expect(usedBytes(g) - before).toBeLessThanOrEqual(bound);
  }
  setLimit(g, usedBytes(g));
  expect(() => write(4501, 1024)).toThrow(PAST_GRANT);
});
