import * as lancedb from "@lancedb/lancedb";
import { describe, expect, it } from "vitest";
import { A } from "./helpers/index-data.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { seedTable } from "./helpers/seed.js";

const rows = [
  { id: 1, x: 1.5, name: "a", s: { a: 1, b: "p" } },
  { id: 2, x: 2.5, name: "b", s: { a: 2, b: "q" } },
];

const open = async (name: string, ns: string[] = [], opts: { branch?: string } = {}) =>
  (await lancedb.connectNamespace("dir", { root: q.dataDir })).openTable(name, ns, opts);
const fieldsOf = async (name: string, ns: string[] = []) => (await (await open(name, ns)).schema()).fields;
const versionOf = async (name: string) => (await open(name)).version();
const call = (id: string, op: string, body: unknown, qs = "") => q.call("POST", `/v1/table/${id}/${op}${qs}`, body);

const q = inProcessForFile({
  seed: async (dataDir) => {
    for (const t of ["ac", "al", "dc", "fm", "sm", "ws"]) await seedTable(dataDir, [t], rows);
    await seedTable(dataDir, ["ns1", "ns2", "nt"], rows);
  },
});

/** Asserts a request fails with `status`/`code` and leaves the table at its version. */
async function rejects(id: string, op: string, body: unknown, status: number, code: number, detail?: RegExp | string) {
  const before = await versionOf(id);
  const r = await call(id, op, body);
  expect(r.status).toBe(status);
  expect(r.json.code).toBe(code);
  if (detail instanceof RegExp) expect(r.json.detail).toMatch(detail);
  else if (detail) expect(r.json.detail).toContain(detail);
  expect(await versionOf(id)).toBe(before);
  return r;
}

describe("add_columns", () => {
  it("adds columns computed by SQL expressions in one commit", async () => {
    const before = await versionOf("ac");
    const r = await call("ac", "add_columns", {
      new_columns: [
        { name: "x2", expression: "x * 2" },
        { name: "lbl", expression: "concat(name, '-', cast(cast(id as bigint) as string))" },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: before + 1 });
    const got = await (await open("ac")).query().select(["x2", "lbl"]).toArray();
    expect(got.map((g) => ({ ...g }))).toEqual([
      { x2: 3, lbl: "a-1" },
      { x2: 5, lbl: "b-2" },
    ]);
  });

  it("adds all-null columns of a JSON data_type", async () => {
    const r = await call("ac", "add_columns", {
      new_columns: [
        { name: "note", data_type: { type: "utf8" } },
        { name: "v", data_type: { type: "fixed_size_list", fields: [{ name: "item", type: { type: "float32" }, nullable: true }], length: 4 } },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.json.version).toBe(await versionOf("ac"));
    const f = await fieldsOf("ac");
    const note = f.find((x) => x.name === "note")!;
    expect(String(note.type)).toBe("Utf8");
    expect(note.nullable).toBe(true);
    expect(String(f.find((x) => x.name === "v")!.type)).toBe("FixedSizeList[4]<Float32>");
    expect((await (await open("ac")).query().select(["note"]).toArray()).map((g) => g.note)).toEqual([null, null]);
  });

  it("rejects bad entries naming them, changing nothing", async () => {
    await rejects("ac", "add_columns", { new_columns: [{ name: "x", expression: "1" }] }, 400, 13, /^new_columns\[0\]\.name: column "x" already exists/);
    await rejects("ac", "add_columns", { new_columns: [{ name: "q", expression: "nosuch + 1" }] }, 400, 13, "nosuch");
    await rejects("ac", "add_columns", { new_columns: [{ name: "q", expression: "id +" }] }, 400, 13, "id +");
    await rejects("ac", "add_columns", { new_columns: [{ name: "q", expression: "sum(id)" }] }, 400, 13, "not supported");
    await rejects("ac", "add_columns", { new_columns: [{ name: "a.b", expression: "1" }] }, 400, 13, '"a.b"');
    await rejects("ac", "add_columns", { new_columns: [{ name: "q" }] }, 400, 13, /^new_columns\[0\]: needs exactly one/);
    await rejects("ac", "add_columns", { new_columns: [{ name: "q", expression: "1", data_type: { type: "int32" } }] }, 400, 13, "new_columns[0]");
    await rejects("ac", "add_columns", { new_columns: [{ name: "q", data_type: { type: "nosuchtype" } }] }, 400, 13, "nosuchtype");
    await rejects("ac", "add_columns", { new_columns: [{ name: "q", expression: "1" }, { name: "q", expression: "2" }] }, 400, 13, '"q"');
    await rejects("ac", "add_columns", { new_columns: [{ name: "q", expression: "1" }, { name: "r", data_type: { type: "int32" } }] }, 400, 13, "mixed");
    await rejects("ac", "add_columns", { new_columns: [] }, 400, 13, /^new_columns: /);
    await rejects("ac", "add_columns", {}, 400, 13, /^new_columns: /);
    expect((await fieldsOf("ac")).map((f) => f.name)).not.toContain("q");
  });

  it("honours branch and nested namespaces; an unknown table is 404 code 4", async () => {
    const r = await call("ns1$ns2$nt", "add_columns", { new_columns: [{ name: "y", expression: "id + 1" }] });
    expect(r.status).toBe(200);
    expect((await fieldsOf("nt", ["ns1", "ns2"])).map((f) => f.name)).toContain("y");
    const u = await call("ns1$ns2$zz", "add_columns", { new_columns: [{ name: "y", expression: "1" }] });
    expect(u.status).toBe(404);
    expect(u.json.code).toBe(4);
    const b = await call("ac", "add_columns", { branch: "nob", new_columns: [{ name: "y", expression: "1" }] });
    expect(b.json.code).toBe(22);
  });
});

describe("alter_columns", () => {
  it("renames, casts and relaxes nullability in one commit", async () => {
    const before = await versionOf("al");
    const r = await call("al", "alter_columns", {
      alterations: [
        { path: "name", rename: "title" },
        { path: "x", data_type: { type: "float32" } },
        { path: "s.a", rename: "a.b" },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: before + 1 });
    const f = await fieldsOf("al");
    expect(f.map((x) => x.name)).toEqual(["id", "x", "title", "s"]);
    expect(String(f[1].type)).toBe("Float32");
    expect(String(f[3].type)).toContain("a.b:");
  });

  it("nullable: true relaxes a non-nullable field, as describe's schema shows", async () => {
    const schema = new A.Schema([new A.Field("id", new A.Int32(), false), new A.Field("name", new A.Utf8(), false)]);
    const data = lancedb.makeArrowTable([{ id: 1, name: "a" }, { id: 2, name: "b" }], { schema });
    expect((await call("nl", "create", A.tableToIPC(data, "stream"))).status).toBe(200);
    const nullability = async () =>
      Object.fromEntries(((await call("nl", "describe", {})).json.schema.fields as any[]).map((f) => [f.name, f.nullable]));
    expect(await nullability()).toEqual({ id: false, name: false });
    const r = await call("nl", "alter_columns", { alterations: [{ path: "name", nullable: true }] });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ version: 2 });
    expect(await nullability()).toEqual({ id: false, name: true });
    expect((await fieldsOf("nl")).map((f) => [f.name, f.nullable])).toEqual([["id", false], ["name", true]]);
  });

  it("addresses a dotted nested name with backticks", async () => {
    const r = await call("al", "alter_columns", { alterations: [{ path: "s.`a.b`", data_type: { type: "float" }, nullable: true }] });
    expect(r.json).toEqual({ version: await versionOf("al") });
    const s = (await fieldsOf("al")).find((x) => x.name === "s")!;
    expect(String(s.type.children[0].type)).toBe("Float32");
  });

  it("casts to the large variable-width types (a 500 before: LanceDB's JS type check lacks them), the values kept", async () => {
    await seedTable(q.dataDir, ["lg"], [{ id: 1, t: "abc", b: Buffer.from("xyz") }]);
    const r = await call("lg", "alter_columns", { alterations: [{ path: "t", data_type: { type: "large_utf8" } }, { path: "b", data_type: { type: "large_binary" } }] });
    expect(r.status, r.text).toBe(200);
    expect((await fieldsOf("lg")).map((f) => [f.name, String(f.type)])).toEqual([["id", "Float64"], ["t", "LargeUtf8"], ["b", "LargeBinary"]]);
    const got = await (await open("lg")).query().toArray();
    expect([got[0].t, Buffer.from(got[0].b).toString()]).toEqual(["abc", "xyz"]);
  });

  it("an unresolved path is 404 code 12 naming the canonical path; an invalid one is 400", async () => {
    await rejects("al", "alter_columns", { alterations: [{ path: "nosuch", rename: "z" }] }, 404, 12, '"nosuch"');
    // A leaf name alone is a top-level field only.
    await rejects("al", "alter_columns", { alterations: [{ path: "b", rename: "z" }] }, 404, 12, '"b"');
    await rejects("al", "alter_columns", { alterations: [{ path: "s.a.b", rename: "z" }] }, 404, 12, '"s.a.b"');
    await rejects("al", "alter_columns", { alterations: [{ path: "s..b", rename: "z" }] }, 400, 13, '"s..b"');
    await rejects("al", "alter_columns", { alterations: [{ path: "s.`a.b", rename: "z" }] }, 400, 13, "backtick");
  });

  it("rejects impossible changes without committing", async () => {
    await rejects("al", "alter_columns", { alterations: [{ path: "title", data_type: { type: "int32" } }] }, 400, 13, "title");
    await rejects("al", "alter_columns", { alterations: [{ path: "title", rename: "id" }] }, 400, 13, "id");
    await rejects("al", "alter_columns", { alterations: [{ path: "title" }] }, 400, 13, /^alterations\[0\]: /);
    await rejects("al", "alter_columns", { alterations: [{ path: "title", rename: "t.u" }] }, 400, 13, "t.u");
    await rejects("al", "alter_columns", { alterations: [{ path: "title", data_type: { type: "zzz" } }] }, 400, 13, "zzz");
    await rejects("al", "alter_columns", { alterations: [{ path: "title", rename: "a" }, { path: "title", rename: "b" }] }, 400, 13, '"title"');
    await rejects("al", "alter_columns", { alterations: [{ path: "title", virtual_column: {} }] }, 400, 13, 'alterations[0].path: column "title" is not a virtual column');
    expect((await fieldsOf("al")).map((x) => x.name)).toEqual(["id", "x", "title", "s"]);
  });
});

describe("drop_columns", () => {
  it("drops top-level and nested columns in one commit", async () => {
    const before = await versionOf("dc");
    const r = await call("dc", "drop_columns", { columns: ["x", "s.b"] });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: before + 1 });
    const f = await fieldsOf("dc");
    expect(f.map((x) => x.name)).toEqual(["id", "name", "s"]);
    expect(f[2].type.children.map((c: any) => c.name)).toEqual(["a"]);
  });

  it("rejects unknown, invalid and repeated paths, changing nothing", async () => {
    await rejects("dc", "drop_columns", { columns: ["name", "zz"] }, 404, 12, /^columns\[1\]: column "zz" not found in table "dc"/);
    await rejects("dc", "drop_columns", { columns: ["`name"] }, 400, 13, "columns[0]");
    await rejects("dc", "drop_columns", { columns: ["name", "name"] }, 400, 13, '"name"');
    await rejects("dc", "drop_columns", { columns: [] }, 400, 13, /^columns: /);
    await rejects("dc", "drop_columns", { columns: ["id", "name", "s"] }, 400, 13, "all columns");
    expect((await fieldsOf("dc")).map((x) => x.name)).toEqual(["id", "name", "s"]);
  });
});

describe("update_field_metadata", () => {
  const metaOf = async (p: string[]) => {
    let f: any = (await fieldsOf("fm")).find((x) => x.name === p[0]);
    for (const s of p.slice(1)) f = f.type.children.find((c: any) => c.name === s);
    return Object.fromEntries(f.metadata);
  };

  it("merges, deletes keys with null, replaces, and returns the fields' metadata", async () => {
    const before = await versionOf("fm");
    const r = await call("fm", "update_field_metadata", {
      updates: [
        { path: "name", metadata: { k: "v", j: "1" } },
        { path: "s.a", metadata: { unit: "m" } },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: before + 1, fields: { name: { k: "v", j: "1" }, "s.a": { unit: "m" } } });
    expect(await metaOf(["s", "a"])).toEqual({ unit: "m" });
    const d = await call("fm", "update_field_metadata", { updates: [{ path: "name", metadata: { j: null, k2: "w" } }] });
    expect(d.json.fields).toEqual({ name: { k: "v", k2: "w" } });
    const rep = await call("fm", "update_field_metadata", { updates: [{ path: "name", metadata: { only: "x" }, replace: true }] });
    expect(rep.json.fields).toEqual({ name: { only: "x" } });
    expect(await metaOf(["name"])).toEqual({ only: "x" });
  });

  it("an unknown path is 404 code 12 and changes nothing", async () => {
    await rejects("fm", "update_field_metadata", { updates: [{ path: "s.zz", metadata: { a: "b" } }] }, 404, 12, '"s.zz"');
    await rejects("fm", "update_field_metadata", { updates: [{ path: "id", metadata: { a: 1 } }] }, 400, 13, "updates[0].metadata");
  });
});

describe("schema_metadata/update", () => {
  const schemaMeta = async () => Object.fromEntries((await (await open("sm")).schema()).metadata);

  it("adds keys and answers the resulting bare map", async () => {
    const before = await versionOf("sm");
    const r = await call("sm", "schema_metadata/update", { app: "quiver", owner: "me" });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ app: "quiver", owner: "me" });
    expect(await versionOf("sm")).toBe(before + 1);
    expect(await schemaMeta()).toEqual({ app: "quiver", owner: "me" });
    const again = await call("sm", "schema_metadata/update", { app: "quiver", team: "t" });
    expect(again.json).toEqual({ app: "quiver", owner: "me", team: "t" });
  });

  it("common request fields in the body are not metadata", async () => {
    const r = await call("sm", "schema_metadata/update", { id: ["sm"], context: { a: "b" }, extra: "1" });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ app: "quiver", owner: "me", team: "t", extra: "1" });
  });

  it("changing an existing key is 406 naming it and changes nothing", async () => {
    const r = await rejects("sm", "schema_metadata/update", { app: "other", new: "x" }, 406, 0, '"app"');
    expect(r.json.detail).not.toContain('"new"');
    expect(await schemaMeta()).toEqual({ app: "quiver", owner: "me", team: "t", extra: "1" });
  });

  it("a non-string value is 400", async () => {
    await rejects("sm", "schema_metadata/update", { n: 1 }, 400, 13, "n");
  });

  it("honours the branch query parameter", async () => {
    expect((await call("sm", "branches/create", { name: "mb" })).status).toBe(200);
    const r = await call("sm", "schema_metadata/update", { onb: "1" }, "?branch=mb");
    expect(r.status).toBe(200);
    expect(r.json.onb).toBe("1");
    expect(await schemaMeta()).not.toHaveProperty("onb");
    const b = await (await open("sm", [], { branch: "mb" })).schema();
    expect(b.metadata.get("onb")).toBe("1");
  });
});

describe("writes after a schema change", () => {
  // A write reads its table's schema once per version (src/engine/tables.ts, schemaOf): each
  // insert here follows a change of it, by this server or by another writer.
  const insert = (row: Record<string, unknown>) => q.call("POST", "/v1/table/ws/insert", [row]);
  it("an insert after each change of the schema is checked against the schema it changed to", async () => {
    expect((await insert({ id: 3, x: 3.5, name: "c", s: { a: 3, b: "r" } })).status).toBe(200);
    expect((await call("ws", "add_columns", { new_columns: [{ name: "y", expression: "x * 2" }] })).status).toBe(200);
    const withY = await insert({ id: 4, x: 4.5, name: "d", s: { a: 4, b: "s" }, y: 9 });
    expect(withY.status, withY.text).toBe(200);
    expect((await call("ws", "alter_columns", { alterations: [{ path: "y", rename: "z" }] })).status).toBe(200);
    const withZ = await insert({ id: 5, x: 5.5, name: "e", s: { a: 5, b: "t" }, z: 11 });
    expect(withZ.status, withZ.text).toBe(200);
    expect((await call("ws", "drop_columns", { columns: ["z"] })).status).toBe(200);
    const before = await versionOf("ws");
    const stale = await insert({ id: 6, x: 6.5, name: "f", s: { a: 6, b: "u" }, z: 13 });
    expect(stale.status).toBe(400);
    expect(stale.json.detail).toContain("z");
    expect(await versionOf("ws")).toBe(before);
    expect((await fieldsOf("ws")).map((f) => f.name)).toEqual(["id", "x", "name", "s"]);
  });

  it("a column another writer added is accepted once a read carrying that writer's version saw it", async () => {
    const t = await open("ws");
    await t.addColumns([{ name: "w", valueSql: "id + 100" }]);
    const token = { "x-quiver-min-version": String(await t.version()) };
    expect((await q.call("POST", "/v1/table/ws/count_rows", {}, token)).status).toBe(200);
    const r = await insert({ id: 7, x: 7.5, name: "g", s: { a: 7, b: "v" }, w: 107 });
    expect(r.status, r.text).toBe(200);
    const rows = (await (await open("ws")).query().where("id = 7").toArray()) as { w: bigint | number }[];
    expect(Number(rows[0].w)).toBe(107);
  });
});
