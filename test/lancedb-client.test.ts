// LanceDB's own REST namespace client, pointed at Quiver: the end-to-end check that Quiver speaks
// the protocol as LanceDB's authors implemented it.
import { existsSync } from "node:fs";
import * as lancedb from "@lancedb/lancedb";
import { tableFromArrays, tableToIPC } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";

// The client writes table data itself; with a 0 ms consistency interval Quiver's cached handles
// see those writes on the very next request (the default re-checks once a second).
const q = serverForFile({ args: ["--consistency-interval-ms", "0"] });
let db: lancedb.Connection;
beforeAll(async () => {
  db = await lancedb.connectNamespace("rest", { uri: q.url, headers: { "x-api-key": ADMIN_KEY } });
});

describe("LanceDB REST namespace client", () => {
  it("creates and lists namespaces, nested ones included", async () => {
    await db.createNamespace(["app"]);
    await db.createNamespace(["app", "sub space"]);
    expect((await db.listNamespaces()).namespaces).toContain("app");
    expect((await db.listNamespaces(["app"])).namespaces).toEqual(["sub space"]);
    // Quiver sees the same namespaces.
    expect((await q.call("GET", "/v1/namespace/app/list")).json.namespaces).toEqual(["sub space"]);
  });

  it("creates a table with data, opens it, adds rows, counts, lists and drops it", async () => {
    const ns = ["app", "sub space"];
    const t = await db.createTable("items", [{ id: 1, name: "a" }, { id: 2, name: "b" }], ns);
    expect(await t.countRows()).toBe(2);
    expect(await db.tableNames(ns)).toEqual(["items"]);

    // Quiver's own view of the table the client wrote.
    const d = await q.call("POST", "/v1/table/app$sub+space$items/describe", {});
    expect(d.status).toBe(200);
    expect(d.json.is_only_declared).toBe(false);
    expect(d.json.version).toBe(1);
    expect(d.json.schema.fields.map((f: { name: string }) => f.name)).toEqual(["id", "name"]);

    const opened = await db.openTable("items", ns);
    await opened.add([{ id: 3, name: "c" }]);
    expect(await opened.countRows()).toBe(3);
    expect(await opened.countRows("id > 1")).toBe(2);
    expect((await q.call("POST", "/v1/table/app$sub+space$items/count_rows", {})).json).toBe(3);

    const ins = await q.call("GET", "/v1/table?limit=10");
    expect(ins.json.tables).toContain("app$sub space$items");

    await db.dropTable("items", ns);
    expect(await db.tableNames(ns)).toEqual([]);
    expect((await q.call("POST", "/v1/table/app$sub+space$items/exists", {})).status).toBe(404);
    expect(existsSync(d.json.location)).toBe(false);
  });

  it("a second create of an existing name reports that it exists and leaves the data alone", async () => {
    await db.createTable("once", [{ id: 1 }], ["app"]);
    await expect(db.createTable("once", [{ id: 2 }, { id: 3 }], ["app"])).rejects.toThrow(/exist/i);
    expect(await (await db.openTable("once", ["app"])).countRows()).toBe(1);
  });

  it("sees tables Quiver created", async () => {
    const body = tableToIPC(tableFromArrays({ x: Int32Array.from([1, 2, 3, 4]) }), "stream");
    expect((await q.call("POST", "/v1/table/app$fromquiver/create", body)).status).toBe(200);
    expect(await db.tableNames(["app"])).toContain("fromquiver");
    const t = await db.openTable("fromquiver", ["app"]);
    expect(await t.countRows()).toBe(4);
    await t.add([{ x: 5 }]);
    expect((await q.call("POST", "/v1/table/app$fromquiver/count_rows", {})).json).toBe(5);
  });

  it("renames a table (Quiver remaps the id; the data stays put)", async () => {
    await db.createTable("before", [{ id: 1 }, { id: 2 }], ["app"]);
    await db.renameTable("before", "after", { namespacePath: ["app"], newNamespacePath: ["app", "sub space"] });
    expect(await db.tableNames(["app"])).not.toContain("before");
    expect(await db.tableNames(["app", "sub space"])).toContain("after");
    expect(await (await db.openTable("after", ["app", "sub space"])).countRows()).toBe(2);
  });

  it("an unknown table is reported as not found", async () => {
    await expect(db.openTable("nope", ["app"])).rejects.toThrow(/not found|does not exist/i);
  });
});
