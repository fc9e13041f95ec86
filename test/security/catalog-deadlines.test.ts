// Issue 52: a write answered at its deadline must never commit after its client got the error.
// Table writes were held to it (test/security/call-deadlines.test.ts), but the catalog's own writes
// (a namespace or table create, a drop, a rename) and a tag's went on after the 503 and committed:
// a client that retried met a 409, or a table it was told was not made. Now the first commit of
// such a write begins only while the request is still awaited; one past its deadline (here a
// deadline of 1 ms, through x-request-timeout-ms) is answered 503 and leaves everything as it was.
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { serverForFile } from "../helpers/quiver.js";

const q = serverForFile();
const late = { "x-request-timeout-ms": "1" };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ id: i, name: `n${i}` }));

/** The answer of a write given 1 ms: its deadline's 503, saying none of its commits began. */
async function tooLate(path: string, body: unknown) {
  const r = await q.call("POST", path, body, late);
  expect(r.status, r.text).toBe(503);
  expect(r.json.detail).toMatch(/deadline of 1 ms .*none of its table commits had begun, and none begins after this answer/);
  // Long enough for a write that went on to have committed.
  await sleep(1_500);
}

const exists = async (path: string) => (await q.call("POST", path, {})).status;

describe("catalog and tag writes past their deadline", () => {
  it("a namespace create is not made", async () => {
    await tooLate("/v1/namespace/late_ns/create", {});
    expect(await exists("/v1/namespace/late_ns/exists")).toBe(404);
    expect((await q.call("POST", "/v1/namespace/late_ns/create", {})).status).toBe(200);
  });

  it("a table create is not made, and leaves no directory behind", async () => {
    await tooLate("/v1/table/late_t/create", rows(3));
    expect(await exists("/v1/table/late_t/exists")).toBe(404);
    expect(readdirSync(q.dataDir).filter((n) => n.includes("late_t"))).toEqual([]);
    expect((await q.call("POST", "/v1/table/late_t/create", rows(3))).status).toBe(200);
  });

  it("a rename, a drop and a tag create leave the table as it was", async () => {
    expect((await q.call("POST", "/v1/table/kept/create", rows(5))).status).toBe(200);
    await tooLate("/v1/table/kept/rename", { new_table_name: "renamed" });
    expect(await exists("/v1/table/renamed/exists")).toBe(404);
    await tooLate("/v1/table/kept/drop", {});
    expect(await exists("/v1/table/kept/exists")).toBe(200);
    expect((await q.call("POST", "/v1/table/kept/count_rows", {})).json).toBe(5);
    await tooLate("/v1/table/kept/tags/create", { tag: "late", version: 1 });
    expect(Object.keys((await q.call("POST", "/v1/table/kept/tags/list", {})).json.tags)).not.toContain("late");
  });
});
