// Engine failures caused by the request: SQL that fails as it is planned or evaluated, unknown
// columns in predicates, union-typed fields and declared tables without data. Each answer names the field at fault, and nothing stored changes.
import { Int32, Table, Utf8, vectorFromArray } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const q = inProcessForFile();
const T = "e$t";
const rows = (ids: number[]) =>
  toStream(new Table({ id: vectorFromArray(ids, new Int32()), name: vectorFromArray(ids.map((i) => `n${i}`), new Utf8()) }));
const post = (id: string, op: string, body?: unknown) => q.call("POST", `/v1/table/${id}/${op}`, body);

beforeAll(async () => {
  expect((await q.call("POST", "/v1/namespace/e/create", {})).status).toBe(200);
  expect((await post(T, "create", rows([1, 2, 3]))).status).toBe(200);
  expect((await post("e$decl", "declare", {})).status).toBe(200);
});

/** The table is still at version 1 with its three rows and two columns. */
async function unchanged(): Promise<void> {
  const d = await post(T, "describe", {});
  expect(d.json.version).toBe(1);
  expect(d.json.schema.fields.map((f: { name: string }) => f.name)).toEqual(["id", "name"]);
  expect((await post(T, "count_rows", {})).json).toBe(3);
}

async function expect400(op: string, body: unknown, detail: RegExp): Promise<void> {
  const r = await post(T, op, body);
  expect([r.status, r.json?.code], r.text).toEqual([400, 13]);
  expect(r.json.detail).toMatch(detail);
  expect(r.json.detail).not.toMatch(/\.rs:\d+|SELECT 1 FROM|Caused by/);
}

const mergeUrl = (params: string) => `/v1/table/${T}/merge_insert?on=id&${params}`;

describe("SQL failing as it runs is 400 naming the field", () => {
  const faults = [
    ["id.x = 1", /Cannot access field/],
    ["id / 0 = 1", /Divide by zero/],
  ] as const;

  it.each(faults)("query, count_rows, delete and update with %j", async (sql, reason) => {
    await expect400("query", { filter: sql }, new RegExp(`^filter: .*${reason.source}`));
    await expect400("count_rows", { predicate: sql }, new RegExp(`^predicate: .*${reason.source}`));
    await expect400("delete", { predicate: sql }, new RegExp(`^predicate: .*${reason.source}`));
    await expect400("update", { predicate: sql, updates: [["name", "'z'"]] }, new RegExp(`^predicate: .*${reason.source}`));
    await unchanged();
  });

  it("a failing cast in a query filter", async () => {
    await expect400("query", { filter: "cast(name as int) > 1" }, /^filter: .*Cast error/);
    await unchanged();
  });

  it.each([
    ["id.x", /Cannot access field/],
    ["id / 0", /Divide by zero/],
    ["cast(name as int)", /Cast error/],
  ])("add_columns expression %j", async (expression, reason) => {
    await expect400("add_columns", { new_columns: [{ name: "c", expression }] }, new RegExp(`^new_columns\\[0\\]\\.expression: .*${reason.source}`));
    await unchanged();
  });

  it("a cast the engine has no kernel for (a struct to a string) in a filter or predicate (a 500 before)", async () => {
    const st = "e$st";
    const made = await q.call("POST", `/v1/table/${st}/create`, JSON.stringify([{ id: 1, s: { a: 1, b: "x" } }]), { "content-type": "application/json" });
    expect(made.status, made.text).toBe(200);
    const sql = "arrow_cast(s, 'Utf8') = 'x'";
    const at = async (op: string, body: unknown, field: string) => {
      const r = await post(st, op, body);
      expect([r.status, r.json?.code], r.text).toEqual([400, 13]);
      expect(r.json.detail).toMatch(new RegExp(`^${field}: .*Unsupported CAST from Struct`));
    };
    await at("query", { filter: sql }, "filter");
    await at("count_rows", { predicate: sql }, "predicate");
    await at("delete", { predicate: sql }, "predicate");
    await at("update", { predicate: sql, updates: [["id", "2"]] }, "predicate");
    expect((await post(st, "describe", {})).json.version).toBe(1);
  });

  it("a failing value expression in update names updates", async () => {
    await expect400("update", { predicate: "id > 1", updates: [["id", "id / 0"]] }, /^updates: .*Divide by zero/);
    await unchanged();
  });
});

describe("errors name the parameter that holds the bad SQL", () => {
  it("update's predicate: parse errors and unknown functions", async () => {
    await expect400("update", { predicate: "id ==== 1", updates: [["name", "'z'"]] }, /^predicate: .*sql parser error/);
    await expect400("update", { predicate: "nofn(id) = 1", updates: [["name", "'z'"]] }, /^predicate: .*nofn/);
    await unchanged();
  });

  it.each([
    ["nofn(id) = 1", /nofn/],
    ["regexp_like(name, '(')", /regex parse error/],
    ["array_has(name, 'a')", /array_has/],
  ])("query filter %j", async (filter, reason) => {
    await expect400("query", { filter }, new RegExp(`^filter: .*${reason.source}`, "s"));
  });

  it.each([
    ["when_matched_update_all_filt", "id ="],
    ["when_not_matched_by_source_delete_filt", "id ="],
  ])("merge_insert %s", async (param, sql) => {
    const r = await q.call("POST", mergeUrl(`${param}=${encodeURIComponent(sql)}`), rows([2, 4]));
    expect([r.status, r.json.code], r.text).toEqual([400, 13]);
    expect(r.json.detail).toMatch(new RegExp(`^${param}: .*sql parser error`));
    expect(r.json.detail).not.toMatch(/SELECT|\.rs:\d+/);
    await unchanged();
  });

  it("merge_insert filter naming an unknown column is 404 code 12 naming filter and column", async () => {
    const r = await q.call("POST", mergeUrl("when_matched_update_all_filt=zzz%20%3D%201"), rows([2, 4]));
    expect([r.status, r.json.code]).toEqual([404, 12]);
    expect(r.json.detail).toBe('when_matched_update_all_filt: column "zzz" not found in table "e$t"');
    await unchanged();
  });
});

describe("an unknown column in a predicate is 404 code 12, as in a query", () => {
  it.each([
    ["count_rows", { predicate: "zzz = 1" }],
    ["delete", { predicate: "zzz = 1" }],
    ["update", { predicate: "zzz = 1", updates: [["name", "'z'"]] }],
  ])("%s", async (op, body) => {
    const r = await post(T, op, body);
    expect([r.status, r.json.code]).toEqual([404, 12]);
    expect(r.json.detail).toBe('predicate: column "zzz" not found in table "e$t"');
    await unchanged();
  });

  it("query agrees", async () => {
    const r = await post(T, "query", { filter: "zzz = 1" });
    expect([r.status, r.json.code]).toEqual([404, 12]);
    expect(r.json.detail).toContain('column "zzz"');
  });
});

describe("a union-typed field reports the error inside the branch of the value's type", () => {
  it.each([
    [{ vector: { multi_vector: [] } }, /^vector\.multi_vector: must NOT have fewer than 1 items/],
    [{ columns: { column_names: [""] } }, /^columns\.column_names\[0\]: must NOT have fewer than 1 characters/],
    [{ columns: [1] }, /^columns\[0\]: must be string/],
    [{ vector: "abc" }, /^vector: must be array or object$/],
    [{ k: "x" }, /^k: must be integer$/],
  ])("%j", async (body, detail) => {
    await expect400("query", body, detail);
  });
});

describe("a declared table without data", () => {
  const declared = /^table "e\$decl" is declared, no data yet/;
  it.each([
    ["count_rows", {}],
    ["query", {}],
    ["update", { updates: [["name", "'z'"]] }],
    ["delete", { predicate: "id = 1" }],
    ["stats", {}],
    ["create_index", { column: "id", index_type: "BTREE" }],
    ["insert", rows([1])],
  ])("%s is 404 code 4 saying so", async (op, body) => {
    const r = await post("e$decl", op, body);
    expect([r.status, r.json.code], r.text).toEqual([404, 4]);
    expect(r.json.detail).toMatch(declared);
    expect((await post("e$decl", "describe", {})).json.is_only_declared).toBe(true);
  });
});
