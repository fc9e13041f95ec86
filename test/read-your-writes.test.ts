// Read-your-writes across processes: what LanceDB itself creates or commits in Quiver's data
// directory is visible through Quiver at once, though the consistency interval here is a minute.
// A miss re-checks storage before it is a 404; a version newer than a cached handle knows is
// read from storage.
import * as lancedb from "@lancedb/lancedb";
import { describe, expect, it } from "vitest";
import { MISS_RECHECK_MS } from "../src/catalog/catalog.js";
import { serverForFile } from "./helpers/quiver.js";
import { abRows, openDirect, seedTable } from "./helpers/seed.js";

const q = serverForFile({ args: ["--consistency-interval-ms", "60000"], env: { QUIVER_LOG_LEVEL: "debug" } });
const post = (p: string, body: unknown = {}) => q.call("POST", p, body);
const checks = () => q.stderr().split("\n").filter((l) => l.includes('"msg":"catalog check"')).length;

describe("objects another process created a moment ago", () => {
  it("a namespace and a table in it are found at once", async () => {
    expect((await post("/v1/namespace/other/describe")).status).toBe(404);
    await seedTable(q.dataDir, ["other", "t1"], abRows(0, 3));
    expect((await post("/v1/namespace/other/describe")).status).toBe(200);
    expect((await q.call("GET", "/v1/namespace/other/table/list")).json.tables).toEqual(["t1"]);
    expect((await post("/v1/table/other$t1/count_rows")).json).toBe(3);
  });

  it("a root table made by a plain LanceDB connection is found at once", async () => {
    expect((await post("/v1/table/plainroot/exists")).status).toBe(404);
    await (await lancedb.connect(q.dataDir)).createTable("plainroot", abRows(0, 2));
    expect((await post("/v1/table/plainroot/count_rows")).json).toBe(2);
  });

  it("a flood of misses costs a few storage checks, not one each", async () => {
    const before = checks();
    const started = Date.now();
    const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => post(`/v1/table/missing${i % 7}/describe`)));
    const elapsed = Date.now() - started;
    expect(replies.every((r) => r.status === 404 && r.json.code === 4)).toBe(true);
    const n = checks() - before;
    expect(n).toBeGreaterThan(0);
    // Misses share checks, which start at most once per MISS_RECHECK_MS.
    expect(n).toBeLessThanOrEqual(Math.ceil(elapsed / MISS_RECHECK_MS) + 1);
    expect(n).toBeLessThan(replies.length / 4);
  });
});

describe("a version newer than the cached handle knows", () => {
  it("is read from storage by count_rows, query, describe and version/describe", async () => {
    await seedTable(q.dataDir, ["vt"], abRows(0, 3));
    expect((await post("/v1/table/vt/count_rows")).json).toBe(3); // caches the handle at version 1
    await (await openDirect(q.dataDir, "vt")).add(abRows(3, 2));
    expect((await post("/v1/table/vt/count_rows", { version: 2 })).json).toBe(5);
    expect((await post("/v1/table/vt/describe", { version: 2 })).json.version).toBe(2);
    const v = await post("/v1/table/vt/version/describe", { version: 2 });
    expect(v.status, v.text).toBe(200);
    expect(v.json.version.version).toBe(2);
    expect((await post("/v1/table/vt/version/list")).json.versions.map((x: { version: number }) => x.version)).toEqual([1, 2]);
    const r = await post("/v1/table/vt/query", { version: 2, k: 10 });
    expect(r.status).toBe(200);
  });
});

describe("a write carrying a version token", () => {
  it("is checked at that version: an insert naming a column another process added a moment ago; a create ignores it", async () => {
    await seedTable(q.dataDir, ["wt"], abRows(0, 3));
    expect((await post("/v1/table/wt/count_rows")).json).toBe(3); // caches the handle at version 1
    const t = await openDirect(q.dataDir, "wt");
    await t.addColumns([{ name: "c", valueSql: "a * 10" }]);
    const token = { "x-quiver-min-version": String(await t.version()) };
    const row = [{ a: 9, b: "r9", c: 90 }];
    // Without the token the rows are checked against the cached handle (a minute's interval here).
    const stale = await q.call("POST", "/v1/table/wt/insert", row);
    expect(stale.status).toBe(400);
    expect(stale.json.detail).toContain('"c"');
    const r = await q.call("POST", "/v1/table/wt/insert", row, token);
    expect(r.status, r.text).toBe(200);
    const rows = (await (await openDirect(q.dataDir, "wt")).query().where("a = 9").toArray()) as { c: bigint | number }[];
    expect(rows.map((x) => Number(x.c))).toEqual([90]);
    // A version the table does not have is 400 naming the header, and nothing is written.
    const ahead = await q.call("POST", "/v1/table/wt/insert", [{ a: 10, b: "r10", c: 100 }], { "x-quiver-min-version": "999" });
    expect(ahead.status).toBe(400);
    expect(ahead.json.detail).toContain("x-quiver-min-version");
    expect((await post("/v1/table/wt/count_rows", { predicate: "a = 10" })).json).toBe(0);
    const created = await q.call("POST", "/v1/table/wt2/create", [{ a: 1, b: "x" }], token);
    expect(created.status, created.text).toBe(200);
  });
});
