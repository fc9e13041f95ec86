import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { inProcessForFile } from "./helpers/in-process.js";
import { abRows, openDirect, seedTable } from "./helpers/seed.js";

const rows = abRows;
const open = (name: string, ns: string[] = [], opts: { branch?: string; version?: number } = {}) => openDirect(q.dataDir, name, ns, opts);

const q = inProcessForFile({
  seed: async (dataDir) => {
    // tt: v1 2 rows, v2 3 rows, v3 4 rows.
    await seedTable(dataDir, ["tt"], rows(0, 2));
    const t = await openDirect(dataDir, "tt");
    await t.add(rows(2, 1));
    await t.add(rows(3, 1));
    await seedTable(dataDir, ["bt"], rows(0, 2));
    await (await openDirect(dataDir, "bt")).add(rows(2, 2));
    await seedTable(dataDir, ["ns1", "ns2", "nt"], rows(0, 2));
  },
});

const call = (id: string, op: string, body: unknown = {}, qs = "") => q.call("POST", `/v1/table/${id}/${op}${qs}`, body);

describe("tags", () => {
  it("create, read, list, update and delete a tag", async () => {
    const c = await call("tt", "tags/create", { tag: "v1", version: 1 });
    expect(c.status).toBe(200);
    expect(c.json).toEqual({});
    expect((await call("tt", "tags/version", { tag: "v1" })).json).toEqual({ version: 1 });
    const size = (await call("tt", "version/describe", { version: 1 })).json.version.manifest_size;
    const l = await call("tt", "tags/list", null);
    expect(l.status).toBe(200);
    expect(l.json).toEqual({ tags: { v1: { version: 1, manifestSize: size } }, page_token: null });
    const u = await call("tt", "tags/update", { tag: "v1", version: 2 });
    expect(u.status).toBe(200);
    expect((await call("tt", "tags/version", { tag: "v1" })).json).toEqual({ version: 2 });
    expect(await (await (await open("tt")).tags()).getVersion("v1")).toBe(2);
    const d = await call("tt", "tags/delete", { tag: "v1" });
    expect(d.status).toBe(200);
    expect((await call("tt", "tags/list", null)).json.tags).toEqual({});
  });

  it("a duplicate tag is 409 code 9 and keeps the original", async () => {
    await call("tt", "tags/create", { tag: "dup", version: 1 });
    const r = await call("tt", "tags/create", { tag: "dup", version: 2 });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe(9);
    expect(r.json.detail).toContain('"dup"');
    expect((await call("tt", "tags/version", { tag: "dup" })).json.version).toBe(1);
  });

  it("an unknown version is 404 code 11 and creates nothing", async () => {
    const r = await call("tt", "tags/create", { tag: "far", version: 99 });
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(11);
    expect(r.json.detail).toContain("99");
    expect((await call("tt", "tags/version", { tag: "far" })).status).toBe(404);
    const u = await call("tt", "tags/update", { tag: "dup", version: 99 });
    expect(u.json.code).toBe(11);
    expect((await call("tt", "tags/version", { tag: "dup" })).json.version).toBe(1);
  });

  it("an unknown tag is 404 code 8 for version, update and delete", async () => {
    for (const [op, body] of [
      ["tags/version", { tag: "zz" }],
      ["tags/update", { tag: "zz", version: 1 }],
      ["tags/delete", { tag: "zz" }],
    ] as const) {
      const r = await call("tt", op, body);
      expect(r.status).toBe(404);
      expect(r.json.code).toBe(8);
      expect(r.json.detail).toContain('"zz"');
    }
  });

  it("an invalid tag name or a missing field is 400 naming it", async () => {
    const r = await call("tt", "tags/create", { tag: "bad name/x", version: 1 });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^tag: /);
    const m = await call("tt", "tags/create", { tag: "ok" });
    expect(m.status).toBe(400);
    expect(m.json.detail).toMatch(/^version: /);
    expect(Object.keys((await call("tt", "tags/list", null)).json.tags)).not.toContain("ok");
  });

  it("tags a branch version and reports the branch", async () => {
    expect((await call("tt", "branches/create", { name: "tb" })).status).toBe(200);
    await (await open("tt", [], { branch: "tb" })).add(rows(50, 1));
    const r = await call("tt", "tags/create", { tag: "onb", version: 4, branch: "tb" });
    expect(r.status).toBe(200);
    expect((await call("tt", "tags/version", { tag: "onb" })).json).toEqual({ version: 4, branch: "tb" });
    expect((await call("tt", "tags/list", null)).json.tags.onb).toMatchObject({ branch: "tb", version: 4 });
    // v4 does not exist on main.
    expect((await call("tt", "tags/create", { tag: "onmain", version: 4 })).json.code).toBe(11);
    expect((await call("tt", "tags/create", { tag: "x", version: 1, branch: "nob" })).json.code).toBe(22);
  });

  it("pages the listing", async () => {
    for (const t of ["p1", "p2", "p3"]) await call("tt", "tags/create", { tag: t, version: 1 });
    const all = Object.keys((await call("tt", "tags/list", null)).json.tags);
    const p1 = await call("tt", "tags/list", null, "?limit=2");
    expect(Object.keys(p1.json.tags)).toEqual(all.slice(0, 2));
    const p2 = await call("tt", "tags/list", null, `?limit=100&page_token=${p1.json.page_token}`);
    expect(Object.keys(p2.json.tags)).toEqual(all.slice(2));
    expect(p2.json.page_token).toBeNull();
  });

  it("works in a nested namespace; an unknown table is 404 code 4", async () => {
    expect((await call("ns1$ns2$nt", "tags/create", { tag: "n1", version: 1 })).status).toBe(200);
    expect((await call("ns1$ns2$nt", "tags/list", null)).json.tags.n1.version).toBe(1);
    const r = await call("ns1$ns2$zz", "tags/list", null);
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(4);
  });
});

describe("branches", () => {
  const branches = async (id = "bt") => (await call(id, "branches/list", null)).json.branches;

  it("creates a branch from main's latest version and lists it", async () => {
    const before = Math.floor(Date.now() / 1000);
    const r = await call("bt", "branches/create", { name: "b1" });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({});
    const b1 = (await branches()).b1;
    expect(b1).toMatchObject({ parentVersion: 2, metadata: {} });
    expect(b1.parentBranch).toBeUndefined();
    expect(b1.createAt).toBeGreaterThanOrEqual(before - 1);
    expect(b1.manifestSize).toBeGreaterThan(0);
  });

  it("creates from another branch and version", async () => {
    await (await open("bt", [], { branch: "b1" })).add(rows(10, 1));
    expect((await call("bt", "branches/create", { name: "feat/x", from_branch: "b1", from_version: 3 })).status).toBe(200);
    expect((await branches())["feat/x"]).toMatchObject({ parentBranch: "b1", parentVersion: 3 });
    expect(await (await open("bt", [], { branch: "feat/x" })).countRows()).toBe(5);
    expect((await call("bt", "branches/create", { name: "old", from_version: 1 })).status).toBe(200);
    expect((await branches()).old.parentVersion).toBe(1);
  });

  it("an existing name is 409 code 23", async () => {
    const r = await call("bt", "branches/create", { name: "b1" });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe(23);
    expect(r.json.detail).toContain('"b1"');
    expect((await branches()).b1.parentVersion).toBe(2);
  });

  it("an invalid name or main is 400 and leaves no directory", async () => {
    for (const name of ["bad name", "a//b", "main", "x/"]) {
      const r = await call("bt", "branches/create", { name });
      expect(r.status).toBe(400);
      expect(r.json.detail).toMatch(/^name: /);
    }
    expect(existsSync(path.join(q.dataDir, "bt.lance", "tree", "bad name"))).toBe(false);
    expect(Object.keys(await branches()).sort()).toEqual(["b1", "feat/x", "old"]);
  });

  it("an unknown source branch or version is 404 and leaves nothing behind", async () => {
    const b = await call("bt", "branches/create", { name: "nb", from_branch: "nosuch" });
    expect(b.status).toBe(404);
    expect(b.json.code).toBe(22);
    expect(b.json.detail).toContain('"nosuch"');
    const v = await call("bt", "branches/create", { name: "nv", from_version: 99 });
    expect(v.status).toBe(404);
    expect(v.json.code).toBe(11);
    expect(Object.keys(await branches())).not.toContain("nv");
    expect(existsSync(path.join(q.dataDir, "bt.lance", "tree", "nv"))).toBe(false);
    expect((await call("bt", "branches/create", { name: "deep/nv", from_version: 99 })).json.code).toBe(11);
    expect(existsSync(path.join(q.dataDir, "bt.lance", "tree", "deep"))).toBe(false);
  });

  it("writes on a branch leave main untouched", async () => {
    const main = (await call("bt", "version/describe", {})).json.version;
    const r = await call("bt", "add_columns", { branch: "b1", new_columns: [{ name: "c", expression: "a * 10" }] });
    expect(r.status).toBe(200);
    expect(r.json.version).toBe(4);
    expect((await call("bt", "version/describe", {})).json.version).toEqual(main);
    expect((await (await open("bt")).schema()).fields.map((f) => f.name)).toEqual(["a", "b"]);
    expect((await (await open("bt", [], { branch: "b1" })).schema()).fields.map((f) => f.name)).toEqual(["a", "b", "c"]);
  });

  it("deletes a branch; unknown is 404 code 22, main is 400, a parent is 409", async () => {
    const parent = await call("bt", "branches/delete", { name: "b1" });
    expect(parent.status).toBe(409);
    expect(parent.json.detail).toContain('"b1"');
    expect((await call("bt", "branches/delete", { name: "main" })).status).toBe(400);
    const u = await call("bt", "branches/delete", { name: "zz" });
    expect(u.status).toBe(404);
    expect(u.json.code).toBe(22);
    expect((await call("bt", "branches/delete", { name: "feat/x" })).status).toBe(200);
    expect(Object.keys(await branches()).sort()).toEqual(["b1", "old"]);
    expect((await call("bt", "branches/delete", { name: "b1" })).status).toBe(200);
    expect(Object.keys(await branches())).toEqual(["old"]);
  });

  it("pages the listing", async () => {
    for (const n of ["p1", "p2"]) await call("bt", "branches/create", { name: n });
    const p1 = await call("bt", "branches/list", null, "?limit=2");
    expect(Object.keys(p1.json.branches)).toEqual(["old", "p1"]);
    const p2 = await call("bt", "branches/list", null, `?page_token=${p1.json.page_token}`);
    expect(Object.keys(p2.json.branches)).toEqual(["p2"]);
    expect(p2.json.page_token).toBeNull();
  });

  it("works in a nested namespace; an unknown table is 404 code 4", async () => {
    expect((await call("ns1$ns2$nt", "branches/create", { name: "nb" })).status).toBe(200);
    expect(Object.keys(await branches("ns1$ns2$nt"))).toEqual(["nb"]);
    expect((await call("ns1$ns2$nt", "branches/delete", { name: "nb" })).status).toBe(200);
    expect((await call("ns1$ns2$zz", "branches/create", { name: "x" })).json.code).toBe(4);
  });
});
