// Re-checks ahead of need (src/util/keep-fresh.ts): while a table is being read, the catalog, the
// view definitions and its cached handle are re-checked in the background, so a read after a pause longer than the
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
/** Log lines of the checks of `what` ("table", "catalog" or "views"), ahead of need or not. */
const checks = (q: Quiver, what: string, ahead: boolean) =>
  q.stderr().split("\n").filter((l) => l.includes(`"msg":"${what} check"`) && l.includes(`"ahead":${ahead}`)).length;
const count = async (q: Quiver) => (await q.call("POST", "/v1/table/kf/count_rows", {})).json;
/** count_rows, then describe (which reads the view definitions): the rows counted. */
async function read(q: Quiver) {
  const rows = await count(q);
  expect((await q.call("POST", "/v1/table/kf/describe", {})).status).toBe(200);
  return rows;
}
const WHAT = ["table", "catalog", "views"] as const;
const onPath = (q: Quiver) => Object.fromEntries(WHAT.map((w) => [w, checks(q, w, false)]));
const ahead = (q: Quiver) => WHAT.reduce((n, w) => n + checks(q, w, true), 0);

/** A read, another process's commit, a pause past the interval, and a read again: what each check did. */
async function pauseAndRead(q: Quiver) {
  await seedTable(q.dataDir, ["kf"], abRows(0, 3));
  expect(await read(q)).toBe(3);
  await (await openDirect(q.dataDir, "kf")).add(abRows(3, 2));
  await sleep(INTERVAL_MS + 500);
  const before = onPath(q);
  expect(await read(q)).toBe(5);
  const after = onPath(q);
  return { onPath: Object.fromEntries(WHAT.map((w) => [w, after[w] - before[w]])) };
}

describe("a read after a pause longer than the consistency interval", () => {
  it("finds the table and catalog re-checked ahead (another process's commit seen) and waits for no check", async () => {
    const r = await pauseAndRead(kept);
    expect(r.onPath).toEqual({ table: 0, catalog: 0, views: 0 });
    for (const w of WHAT) expect(checks(kept, w, true), w).toBeGreaterThan(0);
  });

  it("with --keep-fresh-ms 0 waits for its own checks, and none runs ahead", async () => {
    const r = await pauseAndRead(plain);
    expect(r.onPath).toEqual({ table: 1, catalog: 1, views: 1 });
    expect(ahead(plain)).toBe(0);
  });

  it("background checks stop --keep-fresh-ms after the last read", async () => {
    expect(await read(kept)).toBe(5);
    await sleep(KEEP_MS + 500);
    const after = ahead(kept);
    await sleep(INTERVAL_MS);
    expect(ahead(kept)).toBe(after);
  });
});
