// The data directory is a Lance directory catalog: LanceDB's own `connectNamespace("dir")`
// sees what Quiver made, and Quiver serves what LanceDB made.
import * as lancedb from "@lancedb/lancedb";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";
import { seedTable } from "./helpers/seed.js";
import { toStream } from "./helpers/arrow.js";
import { tableFromArrays } from "apache-arrow";

const servers: Quiver[] = [];
afterAll(async () => {
  for (const s of servers) {
    await s.stop();
    removeDir(s.dataDir);
  }
});

describe("directory catalog interop", () => {
  it("LanceDB sees the namespaces (with properties) that Quiver made", async () => {
    const q = await startQuiver();
    servers.push(q);
    await q.call("POST", "/v1/namespace/team/create", { properties: { owner: "a" } });
    await q.call("POST", "/v1/namespace/team$sub/create", {});
    const db = await lancedb.connectNamespace("dir", { root: q.dataDir });
    expect((await db.listNamespaces([])).namespaces).toEqual(["team"]);
    expect((await db.listNamespaces(["team"])).namespaces).toEqual(["sub"]);
    expect((await db.describeNamespace(["team"])).properties).toEqual({ owner: "a" });
  });

  it("LanceDB opens and reads the tables Quiver made, nested ones included", async () => {
    const q = await startQuiver();
    servers.push(q);
    await q.call("POST", "/v1/namespace/qns/create", {});
    const body = toStream(tableFromArrays({ id: Int32Array.from([1, 2, 3]) }));
    expect((await q.call("POST", "/v1/table/qns$made/create", body)).status).toBe(200);
    expect((await q.call("POST", "/v1/table/rooted/create", body)).status).toBe(200);
    const db = await lancedb.connectNamespace("dir", { root: q.dataDir });
    expect((await db.listTables(["qns"])).tables).toEqual(["made"]);
    expect(await (await db.openTable("made", ["qns"])).countRows()).toBe(3);
    expect(await (await db.openTable("rooted")).countRows()).toBe(3);
  });

  it("Quiver serves the namespaces and tables LanceDB made before it started", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "quiver-interop-"));
    const db = await lancedb.connectNamespace("dir", { root: dir });
    await db.createNamespace(["lns"], { properties: { made: "by-lancedb" } });
    await seedTable(dir, ["lns", "things"], [{ id: 1 }, { id: 2 }]);
    const q = await startQuiver({ dataDir: dir });
    servers.push(q);
    expect((await q.call("GET", "/v1/namespace/%24/list")).json.namespaces).toEqual(["lns"]);
    expect((await q.call("POST", "/v1/namespace/lns/describe", {})).json).toEqual({ properties: { made: "by-lancedb" } });
    expect((await q.call("GET", "/v1/namespace/lns/table/list")).json.tables).toEqual(["things"]);
    expect((await q.call("POST", "/v1/table/lns$things/count_rows", {})).json).toBe(2);
    const drop = await q.call("POST", "/v1/namespace/lns/drop", {});
    expect(drop.status).toBe(409);
    expect(drop.json.detail).toContain("lns$things");
  });

  it("sees namespaces LanceDB creates while it runs, within the consistency interval", async () => {
    const q = await startQuiver({ args: ["--consistency-interval-ms", "0"] });
    servers.push(q);
    const db = await lancedb.connectNamespace("dir", { root: q.dataDir });
    await q.call("POST", "/v1/namespace/first/create", {});
    await db.createNamespace(["later"], { properties: { p: "1" } });
    expect((await q.call("POST", "/v1/namespace/later/describe", {})).json).toEqual({ properties: { p: "1" } });
    expect((await q.call("POST", "/v1/namespace/later/create", {})).status).toBe(409);
  });

  it("root compatibility: serves `<name>.lance` datasets that no manifest row names", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "quiver-v1-"));
    // LanceDB's plain connection writes root tables without touching __manifest.
    const plain = await lancedb.connect(dir);
    await plain.createTable("before", [{ id: 1 }, { id: 2 }]);
    const q = await startQuiver({ dataDir: dir, args: ["--consistency-interval-ms", "0"] });
    servers.push(q);
    await plain.createTable("during", [{ id: 1 }]);
    expect((await q.call("GET", "/v1/namespace/%24/table/list")).json.tables).toEqual(["before", "during"]);
    expect((await q.call("GET", "/v1/table")).json.tables).toEqual(["before", "during"]);
    expect((await q.call("POST", "/v1/table/before/count_rows", {})).json).toBe(2);
    expect((await q.call("POST", "/v1/table/before/exists", {})).status).toBe(200);
    // A name taken by such a table is taken for Quiver too.
    const body = toStream(tableFromArrays({ id: Int32Array.from([9]) }));
    expect((await q.call("POST", "/v1/table/before/create", body)).status).toBe(409);

    // Deregister keeps the data and keeps it out of listings; register brings it back.
    const dereg = await q.call("POST", "/v1/table/during/deregister", {});
    expect(dereg.status).toBe(200);
    expect((await q.call("GET", "/v1/namespace/%24/table/list")).json.tables).toEqual(["before"]);
    expect((await q.call("POST", "/v1/table/during/exists", {})).status).toBe(404);
    expect((await q.call("POST", "/v1/table/during2/register", { location: dereg.json.location })).status).toBe(200);
    expect((await q.call("POST", "/v1/table/during2/count_rows", {})).json).toBe(1);

    // Drop removes the data, so it does not come back on the next listing.
    expect((await q.call("POST", "/v1/table/before/drop", {})).status).toBe(200);
    expect((await q.call("GET", "/v1/namespace/%24/table/list")).json.tables).toEqual(["during2"]);
    expect(await plain.tableNames()).toEqual(["during"]);
  });
});
