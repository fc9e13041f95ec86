import { existsSync } from "node:fs";
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const q = inProcessForFile();

const create = (id: string, body: unknown = {}) => q.call("POST", `/v1/namespace/${id}/create`, body);
/** A table holding one row, and a declared-only table, under namespace `ns`; their data directories. */
async function tablesIn(ns: string): Promise<string[]> {
  const body = toStream(new Table({ id: vectorFromArray([1], new Int32()) }));
  const t = await q.call("POST", `/v1/table/${ns}$t/create`, body);
  expect(t.status, t.text).toBe(200);
  const d = await q.call("POST", `/v1/table/${ns}$decl/declare`, {});
  expect(d.status, d.text).toBe(200);
  const locs = [t.json.location, d.json.location] as string[];
  for (const l of locs) expect(existsSync(l)).toBe(true);
  return locs;
}
/** Neither table is there any more: not listed, not found, no data left. */
async function tablesGone(ns: string, locs: string[]) {
  for (const l of locs) expect(existsSync(l), l).toBe(false);
  for (const t of ["t", "decl"]) expect((await q.call("POST", `/v1/table/${ns}$${t}/exists`, {})).status).toBe(404);
  const all = (await q.call("GET", "/v1/table")).json.tables as string[];
  expect(all.filter((x) => x.startsWith(`${ns}$`))).toEqual([]);
}

describe("namespace create", () => {
  it("stores and returns properties", async () => {
    const r = await create("props", { properties: { owner: "a" } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ properties: { owner: "a" } });
    const d = await q.call("POST", "/v1/namespace/props/describe", {});
    expect(d.json).toEqual({ properties: { owner: "a" } });
  });

  it("mode Create on an existing namespace is 409 with code 2", async () => {
    await create("dup");
    const r = await create("dup", { mode: "Create" });
    expect(r.status).toBe(409);
    expect(r.json).toMatchObject({ type: "/errors/conflict", status: 409, code: 2, instance: "/v1/namespace/dup/create" });
  });

  it("mode ExistOk keeps the existing namespace and its properties", async () => {
    await create("keep", { properties: { v: "1" } });
    for (const mode of ["ExistOk", "exist_ok", "EXISTOK"]) {
      const r = await create("keep", { mode, properties: { v: "2" } });
      expect(r.status).toBe(200);
      expect(r.json.properties).toEqual({ v: "1" });
    }
  });

  it("mode Overwrite replaces the namespace with an empty one", async () => {
    await create("over", { properties: { v: "1" } });
    await create("over$child");
    const r = await create("over", { mode: "overwrite", properties: { v: "2" } });
    expect(r.json.properties).toEqual({ v: "2" });
    const list = await q.call("GET", "/v1/namespace/over/list");
    expect(list.json.namespaces).toEqual([]);
  });

  it("mode Overwrite drops the tables inside, data and all", async () => {
    await create("overt");
    const locs = await tablesIn("overt");
    const r = await create("overt", { mode: "Overwrite" });
    expect(r.status, r.text).toBe(200);
    await tablesGone("overt", locs);
    expect((await q.call("GET", "/v1/namespace/overt/table/list")).json.tables).toEqual([]);
  });

  it("a missing parent is 404 naming it", async () => {
    const r = await create("nope$child");
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(1);
    expect(r.json.detail).toContain('"nope"');
  });

  it("a bad mode is 400 naming the field", async () => {
    const r = await create("badmode", { mode: "sometimes" });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^mode: /);
    expect((await q.call("POST", "/v1/namespace/badmode/exists", {})).status).toBe(404);
  });

  it("20 concurrent creates of one name: one success, 19 conflicts, one catalog entry", async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => create("race")));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(19);
    const list = await q.call("GET", "/v1/namespace/%24/list");
    expect(list.json.namespaces.filter((n: string) => n === "race")).toHaveLength(1);
  });
});

describe("namespace drop", () => {
  it("mode Fail (default) on a missing namespace is 400 with code 1", async () => {
    const r = await q.call("POST", "/v1/namespace/ghost/drop", {});
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ type: "/errors/bad-request", code: 1 });
  });

  it("mode Skip on a missing namespace is 204", async () => {
    const r = await q.call("POST", "/v1/namespace/ghost/drop", { mode: "Skip" });
    expect(r.status).toBe(204);
    expect(r.text).toBe("");
  });

  it("behavior Restrict refuses a namespace with children (409, code 3) and drops nothing", async () => {
    await create("full");
    await create("full$kid");
    const r = await q.call("POST", "/v1/namespace/full/drop", { behavior: "Restrict" });
    expect(r.status).toBe(409);
    expect(r.json.code).toBe(3);
    expect((await q.call("POST", "/v1/namespace/full$kid/exists", {})).status).toBe(200);
  });

  it("behavior Cascade drops child namespaces", async () => {
    await create("casc");
    await create("casc$a");
    await create("casc$a$b");
    const r = await q.call("POST", "/v1/namespace/casc/drop", { behavior: "cascade" });
    expect(r.status).toBe(200);
    for (const id of ["casc", "casc$a", "casc$a$b"]) {
      expect((await q.call("POST", `/v1/namespace/${id}/exists`, {})).status).toBe(404);
    }
  });

  it("behavior Cascade drops tables and declared tables, data directories included", async () => {
    await create("casct");
    await create("casct$in");
    const locs = [...(await tablesIn("casct")), ...(await tablesIn("casct$in"))];
    const r = await q.call("POST", "/v1/namespace/casct/drop", { behavior: "Cascade" });
    expect(r.status, r.text).toBe(200);
    await tablesGone("casct", locs.slice(0, 2));
    await tablesGone("casct$in", locs.slice(2));
    expect((await q.call("POST", "/v1/namespace/casct/exists", {})).status).toBe(404);
  });

  it("the root namespace cannot be dropped", async () => {
    const r = await q.call("POST", "/v1/namespace/%24/drop", {});
    expect(r.status).toBe(400);
  });
});

describe("namespace list, describe, exists", () => {
  it("paginates with an inclusive limit and an opaque token", async () => {
    await create("pages");
    const names = Array.from({ length: 7 }, (_, i) => `n${i}`);
    for (const n of names) await create(`pages$${n}`);
    const seen: string[] = [];
    let token: string | null = null;
    let pages = 0;
    do {
      const qs: string = token ? `?limit=3&page_token=${encodeURIComponent(token)}` : "?limit=3";
      const r = await q.call("GET", `/v1/namespace/pages/list${qs}`);
      expect(r.status).toBe(200);
      expect(r.json.namespaces.length).toBeLessThanOrEqual(3);
      seen.push(...r.json.namespaces);
      token = r.json.page_token;
      pages++;
    } while (token);
    expect(seen).toEqual(names);
    expect(pages).toBe(3);
  });

  it("loses and repeats nothing while other clients create and drop", async () => {
    await create("churn");
    const stable = Array.from({ length: 12 }, (_, i) => `s${String(i).padStart(2, "0")}`);
    for (const n of stable) await create(`churn$${n}`);
    const seen: string[] = [];
    let token: string | null = null;
    let i = 0;
    do {
      const qs: string = token ? `?limit=4&page_token=${encodeURIComponent(token)}` : "?limit=4";
      const r = await q.call("GET", `/v1/namespace/churn/list${qs}`);
      seen.push(...r.json.namespaces);
      token = r.json.page_token;
      // Between pages: create names before and after the cursor, drop a transient one.
      await create(`churn$a${i}`);
      await create(`churn$z${i}`);
      await q.call("POST", `/v1/namespace/churn$a${i}/drop`, {});
      i++;
    } while (token);
    const stableSeen = seen.filter((n) => n.startsWith("s"));
    expect(stableSeen).toEqual(stable);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it("limit below 1 is 400 naming limit", async () => {
    const r = await q.call("GET", "/v1/namespace/%24/list?limit=0");
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^limit/);
  });

  it("listing a missing namespace is 404", async () => {
    expect((await q.call("GET", "/v1/namespace/missing/list")).status).toBe(404);
  });

  it("exists is 200 without a body, 404 when missing", async () => {
    await create("here");
    const r = await q.call("POST", "/v1/namespace/here/exists", {});
    expect(r.status).toBe(200);
    expect(r.text).toBe("");
    expect((await q.call("POST", "/v1/namespace/nothere/exists", {})).status).toBe(404);
  });

  it("describes the root namespace", async () => {
    const r = await q.call("POST", "/v1/namespace/%24/describe", {});
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ properties: {} });
  });
});
