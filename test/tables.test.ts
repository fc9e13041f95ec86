import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { Int32, Table, Utf8, vectorFromArray } from "apache-arrow";
import * as lancedb from "@lancedb/lancedb";
import { beforeAll, describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { seedTable } from "./helpers/seed.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { NS1_KEY, READ_KEY } from "./helpers/quiver.js";

const q = inProcessForFile();
beforeAll(async () => {
  for (const ns of ["ns1", "ns1$deep", "ns2", "lst", "la", "la$x", "ren", "ren2"]) {
    expect((await q.call("POST", `/v1/namespace/${ns}/create`, {})).status).toBe(200);
  }
});

const rows = (ids: number[], names = ids.map((i) => `n${i}`)) =>
  toStream(new Table({ id: vectorFromArray(ids, new Int32()), name: vectorFromArray(names, new Utf8()) }));
const create = (id: string, body: Uint8Array = rows([1, 2, 3]), qs = "") => q.call("POST", `/v1/table/${id}/create${qs}`, body);
const describeT = (id: string, body: unknown = {}, qs = "") => q.call("POST", `/v1/table/${id}/describe${qs}`, body);
const count = async (id: string, body: unknown = {}) => (await q.call("POST", `/v1/table/${id}/count_rows`, body)).json;
const listAll = (qs = "") => q.call("GET", `/v1/table${qs}`);
const list = (ns: string, qs = "") => q.call("GET", `/v1/namespace/${ns}/table/list${qs}`);

describe("create", () => {
  it("creates a table in a nested namespace and describes it", async () => {
    const r = await create("ns1$deep$t1", rows([1, 2, 3]), `?properties=${encodeURIComponent('{"owner":"a"}')}`);
    expect(r.status).toBe(200);
    expect(r.json.version).toBe(1);
    expect(r.json.properties).toEqual({ owner: "a" });
    expect(path.isAbsolute(r.json.location)).toBe(true);
    expect(r.json.location.startsWith(q.dataDir)).toBe(true);
    const d = await describeT("ns1$deep$t1", {}, "?with_table_uri=true&load_detailed_metadata=true");
    expect(d.status).toBe(200);
    expect(d.json).toMatchObject({
      table: "t1",
      namespace: ["ns1", "deep"],
      version: 1,
      location: r.json.location,
      table_uri: r.json.location,
      properties: { owner: "a" },
      is_only_declared: false,
      stats: { num_deleted_rows: 0, num_fragments: 1 },
    });
    expect(d.json.schema.fields).toEqual([
      { name: "id", type: { type: "int32" }, nullable: true },
      { name: "name", type: { type: "utf8" }, nullable: true },
    ]);
    expect(await count("ns1$deep$t1")).toBe(3);
  });

  it("mode create on an existing table is 409 code 5 and writes nothing", async () => {
    await create("ns1$dup");
    const r = await create("ns1$dup", rows([9]), "?mode=Create");
    expect(r.status).toBe(409);
    expect(r.json.code).toBe(5);
    expect(r.json.detail).toContain("ns1$dup");
    expect(await count("ns1$dup")).toBe(3);
  });

  it("mode ExistOk keeps the table; mode overwrite replaces its data with a new version", async () => {
    await create("ns1$eo");
    const ok = await create("ns1$eo", rows([9]), "?mode=ExistOk");
    expect(ok.status).toBe(200);
    expect(ok.json.version).toBe(1);
    expect(await count("ns1$eo")).toBe(3);
    const ow = await create("ns1$eo", rows([7, 8]), "?mode=overwrite");
    expect(ow.status).toBe(200);
    expect(ow.json.version).toBe(2);
    expect(await count("ns1$eo")).toBe(2);
    expect(await count("ns1$eo", { version: 1 })).toBe(3);
  });

  it("a missing parent namespace is 404 code 1 and nothing is stored", async () => {
    const before = readdirSync(q.dataDir).sort();
    const r = await create("nons$t");
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(1);
    expect(r.json.detail).toContain('"nons"');
    expect(readdirSync(q.dataDir).sort()).toEqual(before);
  });

  it("a body that is not Arrow IPC is 400 and nothing is stored", async () => {
    const r = await create("ns1$bad", new TextEncoder().encode("not arrow at all"));
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^body: /);
    const e = await create("ns1$bad", new Uint8Array(0));
    expect(e.status).toBe(400);
    expect((await q.call("POST", "/v1/table/ns1$bad/exists", {})).status).toBe(404);
  });

  it("bad mode and properties are 400 naming the parameter", async () => {
    expect((await create("ns1$bm", rows([1]), "?mode=sometimes")).json.detail).toMatch(/^mode: /);
    expect((await create("ns1$bm", rows([1]), "?properties=%7Bx")).json.detail).toMatch(/^properties: /);
    expect((await q.call("POST", "/v1/table/ns1$bm/exists", {})).status).toBe(404);
  });

  it("concurrent creates of one name: one winner, the others 409 code 5", async () => {
    const rs = await Promise.all([1, 2, 3, 4].map((i) => create("ns2$race", rows([i]))));
    expect(rs.map((r) => r.status).sort()).toEqual([200, 409, 409, 409]);
    for (const r of rs.filter((x) => x.status === 409)) expect(r.json.code).toBe(5);
    expect(await count("ns2$race")).toBe(1);
    const tables = (await list("ns2")).json.tables;
    expect(tables.filter((t: string) => t === "race")).toHaveLength(1);
  });

  it("concurrent creates of a root table name: one winner", async () => {
    const rs = await Promise.all([1, 2, 3].map((i) => create("rootrace", rows([i]))));
    expect(rs.map((r) => r.status).sort()).toEqual([200, 409, 409]);
    expect(await count("rootrace")).toBe(1);
  });
});

describe("declare", () => {
  it("reserves a location with a marker; create then fills it", async () => {
    const d = await q.call("POST", "/v1/table/ns1$decl/declare", { properties: { k: "v" } });
    expect(d.status).toBe(200);
    expect(path.isAbsolute(d.json.location)).toBe(true);
    expect(existsSync(path.join(d.json.location, ".svc-reserved"))).toBe(true);
    expect((await q.call("POST", "/v1/table/ns1$decl/exists", {})).status).toBe(200);
    const desc = await describeT("ns1$decl");
    expect(desc.json).toMatchObject({ table: "decl", is_only_declared: true, location: d.json.location, properties: { k: "v" } });
    expect(desc.json.version).toBeUndefined();
    expect(desc.json.schema).toBeUndefined();
    // listings: included by default, left out with include_declared=false
    expect((await list("ns1")).json.tables).toContain("decl");
    expect((await list("ns1", "?include_declared=false")).json.tables).not.toContain("decl");
    expect((await listAll("?include_declared=false")).json.tables).not.toContain("ns1$decl");

    const again = await q.call("POST", "/v1/table/ns1$decl/declare", {});
    expect(again.status).toBe(409);
    expect(again.json.code).toBe(5);

    const c = await create("ns1$decl", rows([1, 2]));
    expect(c.status).toBe(200);
    expect(c.json.location).toBe(d.json.location);
    expect(existsSync(path.join(d.json.location, ".svc-reserved"))).toBe(false);
    expect(await count("ns1$decl")).toBe(2);
    expect((await describeT("ns1$decl")).json.is_only_declared).toBe(false);
    expect((await list("ns1", "?include_declared=false")).json.tables).toContain("decl");
  });

  it("exists with a version on a declared-only table is 404 code 11", async () => {
    await q.call("POST", "/v1/table/ns1$decl2/declare", {});
    const r = await q.call("POST", "/v1/table/ns1$decl2/exists", { version: 1 });
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(11);
  });
});

describe("describe and exists", () => {
  it("unknown table is 404 code 4; unknown namespace 404 code 1", async () => {
    const r = await describeT("ns1$nosuch");
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(4);
    expect((await describeT("zzz$t")).json.code).toBe(1);
    expect((await q.call("POST", "/v1/table/ns1$nosuch/exists", {})).json.code).toBe(4);
  });

  it("describes an older version and rejects unknown ones with code 11", async () => {
    await create("ns1$vers", rows([1]));
    await q.call("POST", "/v1/table/ns1$vers/insert", rows([2]));
    expect((await describeT("ns1$vers")).json.version).toBe(2);
    expect((await describeT("ns1$vers", { version: 1 })).json.version).toBe(1);
    const bad = await describeT("ns1$vers", { version: 99 });
    expect(bad.status).toBe(404);
    expect(bad.json.code).toBe(11);
    const ex = await q.call("POST", "/v1/table/ns1$vers/exists", { version: 99 });
    expect(ex.status).toBe(404);
    expect(ex.json.code).toBe(11);
    const ok = await q.call("POST", "/v1/table/ns1$vers/exists", { version: 1 });
    expect(ok.status).toBe(200);
    expect(ok.text).toBe("");
  });

  it("describes a tag, and refuses a tag combined with version or branch", async () => {
    await create("ns1$tagged", rows([1]));
    await q.call("POST", "/v1/table/ns1$tagged/insert", rows([2]));
    const tagged = path.join((await describeT("ns1$tagged")).json.location);
    const db = await lancedb.connect(path.dirname(tagged));
    const t = await db.openTable(path.basename(tagged, ".lance"));
    await (await t.tags()).create("first", 1);
    const r = await describeT("ns1$tagged", { tag: "first" });
    expect(r.status).toBe(200);
    expect(r.json.version).toBe(1);
    expect((await describeT("ns1$tagged")).json.version).toBe(2);
    const both = await describeT("ns1$tagged", { tag: "first", version: 1 });
    expect(both.status).toBe(400);
    expect(both.json.detail).toMatch(/^tag: /);
    const unknown = await describeT("ns1$tagged", { tag: "nope" });
    expect(unknown.status).toBe(404);
    expect(unknown.json.code).toBe(8);
  });

  it("describes a branch", async () => {
    await create("ns1$br", rows([1]));
    const loc = (await describeT("ns1$br")).json.location;
    const db = await lancedb.connect(path.dirname(loc));
    const t = await db.openTable(path.basename(loc, ".lance"));
    const b = await (await t.branches()).create("dev");
    await b.add([{ id: 5, name: "x" }]);
    expect((await describeT("ns1$br", { branch: "dev" })).json.version).toBe(2);
    expect((await describeT("ns1$br")).json.version).toBe(1);
    const nb = await describeT("ns1$br", { branch: "nob" });
    expect(nb.status).toBe(404);
    expect(nb.json.code).toBe(22);
  });
});

describe("drop, deregister, register", () => {
  it("drop removes the entry and the data", async () => {
    const c = await create("ns1$gone");
    const r = await q.call("POST", "/v1/table/ns1$gone/drop", { id: ["ns1", "gone"] });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ id: ["ns1", "gone"], location: c.json.location, properties: {} });
    expect(existsSync(c.json.location)).toBe(false);
    expect((await q.call("POST", "/v1/table/ns1$gone/exists", {})).status).toBe(404);
    expect((await q.call("POST", "/v1/table/ns1$gone/drop", {})).json.code).toBe(4);
  });

  it("a deregistered root table stays out of the catalog though its <name>.lance data stays", async () => {
    const c = await create("rootdereg");
    expect((await q.call("POST", "/v1/table/rootdereg/deregister", {})).status).toBe(200);
    expect(existsSync(path.join(c.json.location, "_versions"))).toBe(true);
    expect((await q.call("POST", "/v1/table/rootdereg/exists", {})).status).toBe(404);
    expect((await q.call("GET", "/v1/table")).json.tables).not.toContain("rootdereg");
  });

  it("deregister keeps the data; register brings it back at that location", async () => {
    const c = await create("ns1$dereg", rows([1, 2, 3, 4]), `?properties=${encodeURIComponent('{"a":"b"}')}`);
    const r = await q.call("POST", "/v1/table/ns1$dereg/deregister", {});
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ id: ["ns1", "dereg"], location: c.json.location, properties: { a: "b" } });
    expect(existsSync(path.join(c.json.location, "_versions"))).toBe(true);
    expect((await describeT("ns1$dereg")).json.code).toBe(4);
    expect((await list("ns1")).json.tables).not.toContain("dereg");

    // A new table of the same name does not touch the kept data.
    const again = await create("ns1$dereg", rows([1]));
    expect(again.json.location).not.toBe(c.json.location);
    await q.call("POST", "/v1/table/ns1$dereg/drop", {});
    expect(existsSync(path.join(c.json.location, "_versions"))).toBe(true);

    const reg = await q.call("POST", "/v1/table/ns2$back/register", { location: c.json.location, properties: { x: "y" } });
    expect(reg.status).toBe(200);
    expect(reg.json.location).toBe(c.json.location);
    expect(await count("ns2$back")).toBe(4);
    expect((await describeT("ns2$back")).json.properties).toEqual({ x: "y" });
  });

  it("register accepts relative and file:// locations inside the data directory", async () => {
    const c = await create("ns1$rel", rows([1]));
    await q.call("POST", "/v1/table/ns1$rel/deregister", {});
    const rel = path.relative(q.dataDir, c.json.location);
    expect((await q.call("POST", "/v1/table/ns2$relreg/register", { location: rel })).status).toBe(200);
    await q.call("POST", "/v1/table/ns2$relreg/deregister", {});
    const r = await q.call("POST", "/v1/table/ns2$urireg/register", { location: `file://${c.json.location}` });
    expect(r.status).toBe(200);
    expect(await count("ns2$urireg")).toBe(1);
    // The same location cannot be registered twice.
    const twice = await q.call("POST", "/v1/table/ns2$twice/register", { location: rel });
    expect(twice.status).toBe(409);
    expect(twice.json.code).toBe(5);
  });

  it("register refuses locations outside the data dir, non-datasets, taken ids", async () => {
    const out = await q.call("POST", "/v1/table/ns2$x/register", { location: "/etc" });
    expect(out.status).toBe(400);
    const esc = await q.call("POST", "/v1/table/ns2$x/register", { location: "../../x" });
    expect(esc.status).toBe(400);
    const nods = await q.call("POST", "/v1/table/ns2$x/register", { location: "nothing-here.lance" });
    expect(nods.status).toBe(400);
    expect(nods.json.detail).toMatch(/^location: /);
    await create("ns2$taken", rows([1]));
    const c = await create("ns2$src", rows([1, 2]));
    await q.call("POST", "/v1/table/ns2$src/deregister", {});
    const taken = await q.call("POST", "/v1/table/ns2$taken/register", { location: c.json.location });
    expect(taken.status).toBe(409);
    expect(taken.json.code).toBe(5);
    expect(await count("ns2$taken")).toBe(1);
    expect((await q.call("POST", "/v1/table/ns2$x/exists", {})).status).toBe(404);
  });

  it("register needs the admin role", async () => {
    const r = await q.call("POST", "/v1/table/ns2$y/register", { location: "x.lance" }, { "x-api-key": READ_KEY });
    expect(r.status).toBe(403);
  });
});

describe("tables in LanceDB's own layout", () => {
  it("are described, renamed, deregistered and registered again", async () => {
    await seedTable(q.dataDir, ["ns1", "seeded"], [{ a: 1 }, { a: 2 }]);
    await new Promise((r) => setTimeout(r, 1100)); // Quiver re-reads the catalog once a second
    const d = await describeT("ns1$seeded");
    expect(d.status).toBe(200);
    expect(path.basename(d.json.location)).toMatch(/^[0-9a-f]{8}_ns1\$seeded$/);
    expect(await count("ns1$seeded")).toBe(2);
    expect((await q.call("POST", "/v1/table/ns1$seeded/rename", { new_table_name: "moved", new_namespace_id: ["ns2"] })).status).toBe(200);
    expect(await count("ns2$moved")).toBe(2);
    expect((await q.call("POST", "/v1/table/ns2$moved/insert", rows([1]).slice(0, 0))).status).toBe(400);
    const dr = await q.call("POST", "/v1/table/ns2$moved/deregister", {});
    expect(dr.json.location).toBe(d.json.location);
    const reg = await q.call("POST", "/v1/table/ns2$again/register", { location: dr.json.location });
    expect(reg.status).toBe(200);
    expect(await count("ns2$again")).toBe(2);
    const del = await q.call("POST", "/v1/table/ns2$again/delete", { predicate: "a = 1" });
    expect(del.status).toBe(200);
    expect(await count("ns2$again")).toBe(1);
  });
});

describe("rename", () => {
  it("renames within a namespace, keeping data and location", async () => {
    const c = await create("ren$a", rows([1, 2]));
    const r = await q.call("POST", "/v1/table/ren$a/rename", { new_table_name: "b" });
    expect(r.status).toBe(200);
    expect((await describeT("ren$a")).json.code).toBe(4);
    const d = await describeT("ren$b");
    expect(d.json.location).toBe(c.json.location);
    expect(await count("ren$b")).toBe(2);
    // writes after the rename land in the renamed table
    expect((await q.call("POST", "/v1/table/ren$b/insert", rows([3]))).status).toBe(200);
    expect(await count("ren$b")).toBe(3);
  });

  it("moves to another namespace; missing target ns is 404 code 1; taken name is 409 code 5", async () => {
    await create("ren$m", rows([1]));
    const r = await q.call("POST", "/v1/table/ren$m/rename", { new_table_name: "m2", new_namespace_id: ["ren2"] });
    expect(r.status).toBe(200);
    expect(await count("ren2$m2")).toBe(1);
    const nons = await q.call("POST", "/v1/table/ren2$m2/rename", { new_table_name: "m3", new_namespace_id: ["nope"] });
    expect(nons.status).toBe(404);
    expect(nons.json.code).toBe(1);
    await create("ren2$other", rows([1]));
    const taken = await q.call("POST", "/v1/table/ren2$m2/rename", { new_table_name: "other" });
    expect(taken.status).toBe(409);
    expect(taken.json.code).toBe(5);
    expect(await count("ren2$m2")).toBe(1);
    const bad = await q.call("POST", "/v1/table/ren2$m2/rename", { new_table_name: "a$b" });
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toMatch(/^new_table_name: /);
  });

  it("a prefix-limited key cannot move a table out of its prefix", async () => {
    await create("ns1$mine", rows([1]));
    const r = await q.call("POST", "/v1/table/ns1$mine/rename", { new_table_name: "x", new_namespace_id: ["ns2"] }, { "x-api-key": NS1_KEY });
    expect(r.status).toBe(403);
    expect(await count("ns1$mine")).toBe(1);
  });
});

describe("listing", () => {
  it("lists leaf names with pagination", async () => {
    for (const n of ["c", "a", "e", "b", "d"]) await create(`lst$${n}`, rows([1]));
    expect((await list("lst")).json).toEqual({ tables: ["a", "b", "c", "d", "e"], page_token: null });
    const p1 = await list("lst", "?limit=2");
    expect(p1.json).toEqual({ tables: ["a", "b"], page_token: "b" });
    const p2 = await list("lst", `?limit=2&page_token=${p1.json.page_token}`);
    expect(p2.json).toEqual({ tables: ["c", "d"], page_token: "d" });
    const p3 = await list("lst", `?limit=2&page_token=d`);
    expect(p3.json).toEqual({ tables: ["e"], page_token: null });
    expect((await list("nonexistent")).json.code).toBe(1);
    expect((await list("lst", "?limit=0")).status).toBe(400);
  });

  it("lists every table as full ids joined with the request's delimiter", async () => {
    await create("la$x$t1", rows([1]));
    await create("la$t0", rows([1]));
    const all = (await listAll()).json.tables as string[];
    expect(all).toContain("la$x$t1");
    expect(all).toContain("la$t0");
    const dotted = (await listAll("?delimiter=.")).json.tables as string[];
    expect(dotted).toContain("la.x.t1");
    expect(new Set(all).size).toBe(all.length);
  });

  it("a prefix-limited key lists only its tables", async () => {
    const all = (await listAll("", )).json.tables as string[];
    const mine = (await q.call("GET", "/v1/table", undefined, { "x-api-key": NS1_KEY })).json.tables as string[];
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((t) => t.startsWith("ns1$"))).toBe(true);
    expect(mine).toEqual(all.filter((t) => t.startsWith("ns1$")));
    const root = await q.call("GET", "/v1/namespace/%24/table/list", undefined, { "x-api-key": NS1_KEY });
    expect(root.json.tables).toEqual([]);
  });

  it("pages lose or repeat nothing while other tables are created and dropped", async () => {
    await q.call("POST", "/v1/namespace/churn/create", {});
    const stable = Array.from({ length: 12 }, (_, i) => `s${String(i).padStart(2, "0")}`);
    for (const n of stable) await create(`churn$${n}`, rows([1]));
    const seen: string[] = [];
    let token: string | null = null;
    let i = 0;
    do {
      const r: Awaited<ReturnType<typeof listAll>> = await listAll(`?limit=3${token ? `&page_token=${encodeURIComponent(token)}` : ""}`);
      seen.push(...r.json.tables);
      token = r.json.page_token;
      // churn between pages: new tables before and after the cursor, and drops of others
      await create(`churn$a${i}`, rows([1]));
      await create(`churn$z${i}`, rows([1]));
      if (i > 0) await q.call("POST", `/v1/table/churn$a${i - 1}/drop`, {});
      i++;
    } while (token);
    const churnStable = seen.filter((t) => /^churn\$s\d\d$/.test(t));
    expect(churnStable).toEqual(stable.map((s) => `churn$${s}`));
    expect(new Set(seen).size).toBe(seen.length);
  });
});
