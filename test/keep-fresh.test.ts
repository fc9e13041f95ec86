// Re-checks ahead of need (src/util/keep-fresh.ts): while a table is being read, the catalog, the
// view definitions and its cached handle are re-checked in the background, so a read after a pause
// longer than the consistency interval finds them fresh (another process's commit included)
// without waiting for a storage check of its own; --keep-fresh-ms after the last read the
// background checks stop. With --keep-fresh-ms 0 the same read waits for its checks.
// `quiver_freshness_checks_total` counts the checks by cache, ahead of need or not.
import { describe, expect, it } from "vitest";
import { sample } from "./helpers/metrics.js";
import { serverForFile, type Quiver } from "./helpers/quiver.js";
import { abRows, openDirect, seedTable } from "./helpers/seed.js";

const INTERVAL_MS = 2000;
const KEEP_MS = 3000;
const args = (keep: number) => ({ args: ["--consistency-interval-ms", String(INTERVAL_MS), "--keep-fresh-ms", String(keep)] });
const kept = serverForFile(args(KEEP_MS));
const plain = serverForFile(args(0));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CACHES = ["table", "catalog", "views"] as const;
/** Checks so far of each cache, ahead of need or on a read's path. */
async function checks(q: Quiver, ahead: boolean): Promise<Record<string, number>> {
  const text = (await q.call("GET", "/metrics")).text;
  return Object.fromEntries(CACHES.map((cache) => [cache, sample(text, "quiver_freshness_checks_total", { cache, ahead: String(ahead) })!]));
}
const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);
/** count_rows, then describe (which reads the view definitions): the rows counted. */
async function read(q: Quiver) {
  const rows = (await q.call("POST", "/v1/table/kf/count_rows", {})).json;
  expect((await q.call("POST", "/v1/table/kf/describe", {})).status).toBe(200);
  return rows;
}

/** A read, another process's commit, a pause past the interval, and a read again: the checks that read waited for. */
async function pauseAndRead(q: Quiver) {
  await seedTable(q.dataDir, ["kf"], abRows(0, 3));
  expect(await read(q)).toBe(3);
  await (await openDirect(q.dataDir, "kf")).add(abRows(3, 2));
  await sleep(INTERVAL_MS + 500);
  const before = await checks(q, false);
  expect(await read(q)).toBe(5);
  const after = await checks(q, false);
  return Object.fromEntries(CACHES.map((c) => [c, after[c] - before[c]]));
}

describe("a read after a pause longer than the consistency interval", () => {
  it("finds the table, catalog and view definitions re-checked ahead (another process's commit seen) and waits for no check", async () => {
    expect(await pauseAndRead(kept)).toEqual({ table: 0, catalog: 0, views: 0 });
    const ahead = await checks(kept, true);
    for (const c of CACHES) expect(ahead[c], c).toBeGreaterThan(0);
  });

  it("with --keep-fresh-ms 0 waits for its own checks, and none runs ahead", async () => {
    expect(await pauseAndRead(plain)).toEqual({ table: 1, catalog: 1, views: 1 });
    expect(total(await checks(plain, true))).toBe(0);
  });

  it("background checks stop --keep-fresh-ms after the last read", async () => {
    expect(await read(kept)).toBe(5);
    await sleep(KEEP_MS + 500);
    const after = total(await checks(kept, true));
    await sleep(INTERVAL_MS);
    expect(total(await checks(kept, true))).toBe(after);
  });
});
