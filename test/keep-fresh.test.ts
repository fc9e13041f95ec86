// Re-checks ahead of need (src/util/keep-fresh.ts): while a table is being read, the catalog and its
// cached handle are re-checked in the background, so a read after a pause longer than the
// consistency interval finds them fresh (another process's commit included) without waiting for a
// storage check of its own; --keep-fresh-ms after the last read the background checks stop. With
// --keep-fresh-ms 0 the same read waits for its check. The debug log says which checks ran ahead.
import { describe, expect, it } from "vitest";
import { serverForFile, type Quiver } from "./helpers/quiver.js";
import { abRows, openDirect, seedTable } from "./helpers/seed.js";

const INTERVAL_MS = 2000;
const KEEP_MS = 3000;
const args = (keep: number) => ({ args: ["--consistency-interval-ms", String(INTERVAL_MS), "--keep-fresh-ms", String(keep)], env: { QUIVER_LOG_LEVEL: "debug" } });
const kept = serverForFile(args(KEEP_MS));
const plain = serverForFile(args(0));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Log lines of the checks of `what` ("table" or "catalog"), ahead of need or not. */
const checks = (q: Quiver, what: string, ahead: boolean) =>
  q.stderr().split("\n").filter((l) => l.includes(`"msg":"${what} check"`) && l.includes(`"ahead":${ahead}`)).length;
const count = async (q: Quiver) => (await q.call("POST", "/v1/table/kf/count_rows", {})).json;

/** A read, another process's commit, a pause past the interval, and a read again: what each check did. */
async function pauseAndRead(q: Quiver) {
  await seedTable(q.dataDir, ["kf"], abRows(0, 3));
  expect(await count(q)).toBe(3);
  await (await openDirect(q.dataDir, "kf")).add(abRows(3, 2));
  await sleep(INTERVAL_MS + 500);
  const before = { table: checks(q, "table", false), catalog: checks(q, "catalog", false) };
  expect(await count(q)).toBe(5);
  return { onPath: { table: checks(q, "table", false) - before.table, catalog: checks(q, "catalog", false) - before.catalog } };
}

describe("a read after a pause longer than the consistency interval", () => {
  it("finds the table and catalog re-checked ahead (another process's commit seen) and waits for no check", async () => {
    const r = await pauseAndRead(kept);
    expect(r.onPath).toEqual({ table: 0, catalog: 0 });
    expect(checks(kept, "table", true)).toBeGreaterThan(0);
    expect(checks(kept, "catalog", true)).toBeGreaterThan(0);
  });

  it("with --keep-fresh-ms 0 waits for its own checks, and none runs ahead", async () => {
    const r = await pauseAndRead(plain);
    expect(r.onPath).toEqual({ table: 1, catalog: 1 });
    expect(checks(plain, "table", true) + checks(plain, "catalog", true)).toBe(0);
  });

  it("background checks stop --keep-fresh-ms after the last read", async () => {
    expect(await count(kept)).toBe(5);
    await sleep(KEEP_MS + 500);
    const after = checks(kept, "table", true) + checks(kept, "catalog", true);
    await sleep(INTERVAL_MS);
    expect(checks(kept, "table", true) + checks(kept, "catalog", true)).toBe(after);
  });
});
