// Quotas for tags and branches (issue 50: "tables (and namespaces, tags, branches) per tenant").
// Counting a tenant's refs would read every table, so a table holds at most --max-tags-per-table
// tags and --max-branches-per-table branches (a tenant: that times its tables). A create past the
// bound is a 403 naming the quota and stores nothing; creates sent at once cannot pass it together.
// The bounds are given as environment variables so the same test runs against a server without them.
import * as lancedb from "@lancedb/lancedb";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { serverForFile } from "../helpers/quiver.js";

const q = serverForFile({ env: { QUIVER_MAX_TAGS_PER_TABLE: "3", QUIVER_MAX_BRANCHES_PER_TABLE: "2" } });
const post = (p: string, body: unknown) => q.call("POST", p, body);
const jsonRows = (p: string, rows: object[]) => q.call("POST", p, JSON.stringify(rows), { "content-type": "application/json" });

const expectQuota = (r: { status: number; text: string; json: any }, what: RegExp) => {
  expect(r.status, r.text).toBe(403);
  expect(r.json.detail).toMatch(what);
};
/** The table's directory (the only table directory in the data directory). */
const tableDir = () => {
  const dirs = readdirSync(q.dataDir).filter((n) => n.endsWith(".lance"));
  expect(dirs).toHaveLength(1);
  return path.join(q.dataDir, dirs[0]);
};
const tagFiles = () => {
  const dir = path.join(tableDir(), "_refs", "tags");
  return existsSync(dir) ? readdirSync(dir).sort() : [];
};
const tags = async () => Object.keys((await post("/v1/table/t/tags/list", {})).json.tags).sort();
const branches = async () => Object.keys((await post("/v1/table/t/branches/list", {})).json.branches).sort();

it("a table's fourth tag is refused with 403 naming the quota and is not stored; an update still moves a tag; a delete makes room", async () => {
  expect((await jsonRows("/v1/table/t/create", [{ id: 1 }])).status).toBe(200);
  for (const tag of ["a", "b", "c"]) expect((await post("/v1/table/t/tags/create", { tag, version: 1 })).status).toBe(200);

  expectQuota(await post("/v1/table/t/tags/create", { tag: "d", version: 1 }), /table "t" already holds 3 tags \(max-tags-per-table\)/);
  expect(await tags()).toEqual(["a", "b", "c"]);
  expect(tagFiles()).toEqual(["a.json", "b.json", "c.json"]);
  expect((await post("/v1/table/t/tags/version", { tag: "d" })).status).toBe(404);

  expect((await post("/v1/table/t/tags/update", { tag: "a", version: 1 })).status).toBe(200);
  expect((await post("/v1/table/t/tags/delete", { tag: "c" })).status).toBe(200);
  expect((await post("/v1/table/t/tags/create", { tag: "d", version: 1 })).status).toBe(200);
  expect(await tags()).toEqual(["a", "b", "d"]);
});

it("tag creates sent at once cannot pass the bound together: one takes the free place, the rest are 403", async () => {
  expect((await post("/v1/table/t/tags/delete", { tag: "d" })).status).toBe(200);
  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => post("/v1/table/t/tags/create", { tag: `race${i}`, version: 1 })));
  expect(answers.map((a) => a.status).sort()).toEqual([200, 403, 403, 403, 403, 403, 403, 403]);
  expect(await tags()).toHaveLength(3);
  expect(tagFiles()).toHaveLength(3);
});

it("a table's third branch is refused with 403 naming the quota, and no branch data is made; creates sent at once pass it no more", async () => {
  for (const name of ["b1", "b2"]) expect((await post("/v1/table/t/branches/create", { name })).status).toBe(200);
  expectQuota(await post("/v1/table/t/branches/create", { name: "b3" }), /table "t" already holds 2 branches \(max-branches-per-table\)/);
  expectQuota(await post("/v1/table/t/branches/create", { name: "b3", from_branch: "b1" }), /max-branches-per-table/);
  expect(await branches()).toEqual(["b1", "b2"]);
  expect(existsSync(path.join(tableDir(), "tree", "b3"))).toBe(false);
  expect((await post("/v1/table/t/count_rows", { branch: "b3" })).status).toBe(404);

  expect((await post("/v1/table/t/branches/delete", { name: "b2" })).status).toBe(200);
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post("/v1/table/t/branches/create", { name: `race${i}` })));
  expect(answers.map((a) => a.status).sort()).toEqual([200, 403, 403, 403, 403, 403]);
  expect(await branches()).toHaveLength(2);
});

it("a replica's serving pin counts toward no quota, and a client can read it but not create, move or delete one (400 naming the tag)", async () => {
  const held = await tags();
  expect(held).toHaveLength(3);
  // A pin as a replica leaves it at a shutdown (src/serving/store.ts), made here through LanceDB.
  const pin = "quiver-serving-r1";
  const db = await lancedb.connect(q.dataDir);
  await (await (await db.openTable(path.basename(tableDir(), ".lance"))).tags()).create(pin, 1);
  expect(tagFiles()).toContain(`${pin}.json`);

  expect((await post("/v1/table/t/tags/delete", { tag: held[0] })).status).toBe(200);
  expect((await post("/v1/table/t/tags/create", { tag: "after-pin", version: 1 })).status).toBe(200);
  expectQuota(await post("/v1/table/t/tags/create", { tag: "one-more", version: 1 }), /already holds 3 tags/);

  for (const [op, body] of [["create", { tag: "quiver-serving-mine", version: 1 }], ["update", { tag: pin, version: 1 }], ["delete", { tag: pin }]] as const) {
    const r = await post(`/v1/table/t/tags/${op}`, body);
    expect(r.status, `${op}: ${r.text}`).toBe(400);
    expect(r.json.detail).toMatch(/^tag: .*quiver-serving-/);
  }
  expect(tagFiles()).toContain(`${pin}.json`);
  expect(tagFiles()).not.toContain("quiver-serving-mine.json");
  const read = await post("/v1/table/t/tags/version", { tag: pin });
  expect(read.status, read.text).toBe(200);
  expect(read.json.version).toBe(1);
});
