// Every table operation on a table two namespaces deep (`a$b$t`): the id is resolved through
// nested namespaces everywhere, not only in create and describe.
import { existsSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { fromIPC } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { settle } from "./helpers/transactions.js";
import { idNameRows, tableCalls } from "./helpers/tables.js";

const q = inProcessForFile();
const T = "a$b$t";
let location: string;

beforeAll(async () => {
  for (const ns of ["a", "a$b", "c"]) expect((await q.call("POST", `/v1/namespace/${ns}/create`, {})).status).toBe(200);
});

const rows = idNameRows;
const { post, count } = tableCalls(q);
const version = async (id: string) => (await post(id, "describe")).json.version as number;
const fields = async (id: string) => (await post(id, "describe")).json.schema.fields as { name: string; nullable: boolean; metadata?: Record<string, string> }[];
/** Rows as {id: name}, read through the query endpoint. */
async function read(id: string, body: Record<string, unknown> = {}): Promise<Record<number, string>> {
  const r = await post(id, "query", { k: 1000, columns: ["id", "name"], ...body });
  expect(r.status, r.text).toBe(200);
  const t = fromIPC(r.bytes);
  const ids = Array.from(t.getChild("id")!.toArray() as Int32Array);
  const names = Array.from({ length: t.numRows }, (_, i) => t.getChild("name")!.get(i) as string);
  return Object.fromEntries(ids.map((v, i) => [v, names[i]]));
}

describe("a table in a two-level namespace", () => {
  it("create, describe, exists", async () => {
    const c = await post(T, "create", rows([1, 2, 3]));
    expect(c.status, c.text).toBe(200);
    expect(c.json.version).toBe(1);
    location = c.json.location;
    expect(existsSync(location)).toBe(true);
    const d = await post(T, "describe");
    expect(d.json).toMatchObject({ table: "t", namespace: ["a", "b"], version: 1, location });
    expect((await post(T, "exists")).status).toBe(200);
    expect((await post("a$b$nope", "exists")).status).toBe(404);
    expect((await q.call("GET", "/v1/namespace/a$b/table/list")).json.tables).toEqual(["t"]);
  });

  it("count_rows and stats", async () => {
    expect(await count(T)).toBe(3);
    expect(await count(T, { predicate: "id > 1" })).toBe(2);
    const s = await post(T, "stats");
    expect(s.status).toBe(200);
    expect(s.json).toMatchObject({ num_rows: 3, num_indices: 0, fragment_stats: { num_fragments: 1 } });
  });

  it("insert, merge_insert, update, delete", async () => {
    const i = await post(T, "insert", rows([4]));
    expect(i.json).toEqual({ version: 2, num_inserted_rows: 1 });
    const m = await post(T, "merge_insert", rows([4, 5], ["four", "five"]), "?on=id&when_matched_update_all=true&when_not_matched_insert_all=true");
    expect(m.status, m.text).toBe(200);
    expect(m.json).toMatchObject({ version: 3, num_inserted_rows: 1, num_updated_rows: 1, num_deleted_rows: 0 });
    const u = await post(T, "update", { predicate: "id = 1", updates: [["name", "'one'"]] });
    expect(u.status, u.text).toBe(200);
    expect(u.json).toMatchObject({ version: 4, updated_rows: 1 });
    const d = await post(T, "delete", { predicate: "id = 2" });
    expect(d.status, d.text).toBe(200);
    expect(d.json).toMatchObject({ version: 5 });
    expect(await read(T)).toEqual({ 1: "one", 3: "n3", 4: "four", 5: "five" });
  });

  it("query and explain_plan", async () => {
    expect(await read(T, { filter: "id >= 4" })).toEqual({ 4: "four", 5: "five" });
    const e = await post(T, "explain_plan", { query: { filter: "id >= 4", k: 10 } });
    expect(e.status, e.text).toBe(200);
    expect(e.json).toMatch(/LanceRead|LanceScan/);
    expect(e.json).toContain("id >= ");
  });

  it("version list and describe, restore", async () => {
    const l = await post(T, "version/list");
    expect(l.status).toBe(200);
    expect(l.json.versions.map((v: any) => v.version)).toEqual([1, 2, 3, 4, 5]);
    const d = await post(T, "version/describe", { version: 2 });
    expect(d.json.version).toMatchObject({ version: 2, metadata: { total_rows: "4" } });
    expect((await post(T, "restore", { version: 2 })).status).toBe(200);
    expect(await version(T)).toBe(6);
    expect(await read(T)).toEqual({ 1: "n1", 2: "n2", 3: "n3", 4: "n4" });
  });

  it("tags and branches", async () => {
    expect((await post(T, "tags/create", { tag: "first", version: 1 })).status).toBe(200);
    expect(Object.keys((await post(T, "tags/list", null)).json.tags)).toEqual(["first"]);
    expect((await post(T, "tags/version", { tag: "first" })).json).toEqual({ version: 1 });
    expect((await post(T, "branches/create", { name: "dev" })).status).toBe(200);
    expect(Object.keys((await post(T, "branches/list", null)).json.branches)).toContain("dev");
    expect((await post(T, "insert", rows([9]), "?branch=dev")).status).toBe(200);
    expect(await count(T, { branch: "dev" })).toBe(5);
    expect(await count(T)).toBe(4);
  });

  it("add, alter and drop columns", async () => {
    const a = await post(T, "add_columns", { new_columns: [{ name: "twice", expression: "id * 2" }] });
    expect(a.status, a.text).toBe(200);
    expect((await fields(T)).map((f) => f.name)).toEqual(["id", "name", "twice"]);
    const al = await post(T, "alter_columns", { alterations: [{ path: "twice", rename: "double" }] });
    expect(al.status, al.text).toBe(200);
    expect((await fields(T)).map((f) => f.name)).toEqual(["id", "name", "double"]);
    const dr = await post(T, "drop_columns", { columns: ["double"] });
    expect(dr.status, dr.text).toBe(200);
    expect((await fields(T)).map((f) => f.name)).toEqual(["id", "name"]);
  });

  it("update_field_metadata and schema_metadata/update", async () => {
    const f = await post(T, "update_field_metadata", { updates: [{ path: "name", metadata: { unit: "none" } }] });
    expect(f.status, f.text).toBe(200);
    expect(f.json.fields).toEqual({ name: { unit: "none" } });
    expect((await fields(T)).find((x) => x.name === "name")!.metadata).toEqual({ unit: "none" });
    const s = await post(T, "schema_metadata/update", { owner: "ab" });
    expect(s.status, s.text).toBe(200);
    expect(s.json).toEqual({ owner: "ab" });
    expect((await post(T, "describe")).json.schema.metadata).toMatchObject({ owner: "ab" });
  });

  it("create_index (BTREE), index list, stats and drop", async () => {
    const c = await post(T, "create_index", { column: "id", index_type: "BTREE" });
    expect(c.status, c.text).toBe(200);
    expect((await settle(q, c.json.transaction_id)).status).toBe("Succeeded");
    const l = await post(T, "index/list");
    expect(l.json.indexes.map((i: any) => [i.index_name, i.index_type, i.status])).toEqual([["id_idx", "BTREE", "Active"]]);
    const s = await post(T, "index/id_idx/stats");
    expect(s.json).toMatchObject({ index_type: "BTREE", num_indexed_rows: 4, num_unindexed_rows: 0 });
    expect((await post(T, "stats")).json.num_indices).toBe(1);
    expect((await post(T, "index/id_idx/drop")).status).toBe(200);
    expect((await post(T, "index/list")).json.indexes).toEqual([]);
  });

  it("deregister keeps the data; register brings it back", async () => {
    const d = await post(T, "deregister");
    expect(d.status).toBe(200);
    expect(d.json).toMatchObject({ id: ["a", "b", "t"], location });
    expect((await post(T, "exists")).status).toBe(404);
    expect(existsSync(path.join(location, "_versions"))).toBe(true);
    const r = await post(T, "register", { location });
    expect(r.status, r.text).toBe(200);
    expect(await read(T)).toEqual({ 1: "n1", 2: "n2", 3: "n3", 4: "n4" });
  });

  it("rename within a$b, then into another namespace", async () => {
    expect((await post(T, "rename", { new_table_name: "t2" })).status).toBe(200);
    expect((await q.call("GET", "/v1/namespace/a$b/table/list")).json.tables).toEqual(["t2"]);
    expect(await count("a$b$t2")).toBe(4);
    const r = await post("a$b$t2", "rename", { new_table_name: "t3", new_namespace_id: ["c"] });
    expect(r.status, r.text).toBe(200);
    expect((await q.call("GET", "/v1/namespace/a$b/table/list")).json.tables).toEqual([]);
    expect(await read("c$t3")).toEqual({ 1: "n1", 2: "n2", 3: "n3", 4: "n4" });
    expect((await post("c$t3", "describe")).json.location).toBe(location);
  });

  it("declare, then drop removes entry and data", async () => {
    const d = await post("a$b$decl", "declare", {});
    expect(d.status, d.text).toBe(200);
    expect(existsSync(d.json.location)).toBe(true);
    expect((await post("a$b$decl", "describe")).json.is_only_declared).toBe(true);
    const dr = await post("a$b$decl", "drop");
    expect(dr.status).toBe(200);
    expect(existsSync(d.json.location)).toBe(false);
    // A full table too.
    expect((await post("a$b$full", "create", rows([1]))).status).toBe(200);
    const loc = (await post("a$b$full", "describe")).json.location;
    expect((await post("a$b$full", "drop")).json).toMatchObject({ id: ["a", "b", "full"], location: loc });
    expect(existsSync(loc)).toBe(false);
    expect((await post("a$b$full", "exists")).status).toBe(404);
    expect((await q.call("GET", "/v1/namespace/a$b/table/list")).json.tables).toEqual([]);
  });
});
