// `branch` on the operations that take it: the named branch changes, main does not, and an
// unknown branch is 404 code 22 with nothing changed anywhere.
import { describe, expect, it } from "vitest";
import { inProcessForFile } from "./helpers/in-process.js";
import { settle } from "./helpers/transactions.js";
import { idNameRows, tableCalls } from "./helpers/tables.js";

const q = inProcessForFile();


const rows = idNameRows;
const { post, count } = tableCalls(q);
/** Version and schema of `id` on `branch` (main when absent). */
async function state(id: string, branch?: string) {
  const d = await post(id, "describe", branch ? { branch } : {});
  expect(d.status, d.text).toBe(200);
  return { version: d.json.version as number, fields: d.json.schema.fields as { name: string; type: { type: string }; metadata?: Record<string, string> }[] };
}
let n = 0;
/** A fresh table with 3 rows on main and a branch `dev` holding 2 more. */
async function fresh(): Promise<string> {
  const id = `t${++n}`;
  expect((await post(id, "create", rows([1, 2, 3]))).status).toBe(200);
  expect((await post(id, "branches/create", { name: "dev" })).status).toBe(200);
  expect((await post(id, "insert", rows([4, 5]), "?branch=dev")).status).toBe(200);
  return id;
}
async function unknownBranch(r: Awaited<ReturnType<typeof post>>) {
  expect(r.status, r.text).toBe(404);
  expect(r.json.code).toBe(22);
  expect(r.json.detail).toContain('"nob"');
}

describe("branch scope", () => {
  it("stats reads the branch", async () => {
    const t = await fresh();
    expect((await post(t, "stats", { branch: "dev" })).json.num_rows).toBe(5);
    expect((await post(t, "stats")).json.num_rows).toBe(3);
    await unknownBranch(await post(t, "stats", { branch: "nob" }));
  });

  it("merge_insert writes the branch only", async () => {
    const t = await fresh();
    const main = await state(t);
    const r = await post(t, "merge_insert", rows([5, 6], ["five", "six"]), "?on=id&branch=dev&when_matched_update_all=true&when_not_matched_insert_all=true");
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ num_inserted_rows: 1, num_updated_rows: 1 });
    expect(await count(t, { branch: "dev" })).toBe(6);
    expect(await count(t, { branch: "dev", predicate: "name = 'five'" })).toBe(1);
    expect(await count(t)).toBe(3);
    expect(await state(t)).toEqual(main);
    await unknownBranch(await post(t, "merge_insert", rows([7]), "?on=id&branch=nob&when_not_matched_insert_all=true"));
    expect(await count(t)).toBe(3);
    expect(await count(t, { branch: "dev" })).toBe(6);
  });

  it("alter_columns changes the branch's schema only", async () => {
    const t = await fresh();
    const main = await state(t);
    const dev = await state(t, "dev");
    const r = await post(t, "alter_columns", { branch: "dev", alterations: [{ path: "name", rename: "title" }] });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ version: dev.version + 1 });
    expect((await state(t, "dev")).fields.map((f) => f.name)).toEqual(["id", "title"]);
    expect(await state(t)).toEqual(main);
    await unknownBranch(await post(t, "alter_columns", { branch: "nob", alterations: [{ path: "name", rename: "x" }] }));
    expect(await state(t)).toEqual(main);
  });

  it("drop_columns drops on the branch only", async () => {
    const t = await fresh();
    const main = await state(t);
    const r = await post(t, "drop_columns", { branch: "dev", columns: ["name"] });
    expect(r.status, r.text).toBe(200);
    expect((await state(t, "dev")).fields.map((f) => f.name)).toEqual(["id"]);
    expect(await state(t)).toEqual(main);
    await unknownBranch(await post(t, "drop_columns", { branch: "nob", columns: ["name"] }));
    expect(await state(t)).toEqual(main);
  });

  it("update_field_metadata writes the branch only", async () => {
    const t = await fresh();
    const main = await state(t);
    const r = await post(t, "update_field_metadata", { branch: "dev", updates: [{ path: "name", metadata: { k: "v" } }] });
    expect(r.status, r.text).toBe(200);
    expect((await state(t, "dev")).fields.find((f) => f.name === "name")!.metadata).toEqual({ k: "v" });
    expect(await state(t)).toEqual(main);
    await unknownBranch(await post(t, "update_field_metadata", { branch: "nob", updates: [{ path: "name", metadata: { k: "v" } }] }));
    expect(await state(t)).toEqual(main);
  });

  it("create_index builds on the branch: listed, described and used there, not on main", async () => {
    const t = await fresh();
    const main = await state(t);
    const c = await post(t, "create_index", { branch: "dev", column: "id", index_type: "BTREE" });
    expect(c.status, c.text).toBe(200);
    expect((await settle(q, c.json.transaction_id)).status).toBe("Succeeded");
    const dev = await post(t, "index/list", { branch: "dev" });
    expect(dev.json.indexes.map((i: any) => i.index_name)).toEqual(["id_idx"]);
    expect((await post(t, "index/list")).json.indexes).toEqual([]);
    const s = await post(t, "index/id_idx/stats", { branch: "dev" });
    expect(s.json).toMatchObject({ index_type: "BTREE", num_indexed_rows: 5 });
    const sm = await post(t, "index/id_idx/stats");
    expect(sm.status).toBe(404);
    expect(sm.json.code).toBe(6);
    expect((await post(t, "stats", { branch: "dev" })).json.num_indices).toBe(1);
    expect((await post(t, "stats")).json.num_indices).toBe(0);
    expect(await state(t)).toEqual(main);
    // explain_plan follows the branch: the index is used on dev only.
    const query = { filter: "id = 4", k: 10 };
    const pd = await post(t, "explain_plan", { branch: "dev", query });
    expect(pd.status, pd.text).toBe(200);
    expect(pd.json).toContain("ScalarIndexQuery");
    const pm = await post(t, "explain_plan", { query });
    expect(pm.status, pm.text).toBe(200);
    expect(pm.json).not.toContain("ScalarIndexQuery");
    // ...whether the branch rides on the request or inside the query.
    expect((await post(t, "explain_plan", { query: { ...query, branch: "dev" } })).json).toContain("ScalarIndexQuery");
  });

  it("index operations and explain_plan on an unknown branch are 404 code 22, building nothing", async () => {
    const t = await fresh();
    await unknownBranch(await post(t, "create_index", { branch: "nob", column: "id", index_type: "BTREE" }));
    await unknownBranch(await post(t, "index/list", { branch: "nob" }));
    await unknownBranch(await post(t, "index/id_idx/stats", { branch: "nob" }));
    await unknownBranch(await post(t, "explain_plan", { branch: "nob", query: { k: 1 } }));
    await unknownBranch(await post(t, "explain_plan", { query: { k: 1, branch: "nob" } }));
    expect((await post(t, "index/list")).json.indexes).toEqual([]);
    expect((await post(t, "index/list", { branch: "dev" })).json.indexes).toEqual([]);
  });
});
