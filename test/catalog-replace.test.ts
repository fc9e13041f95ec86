// A catalog row is replaced (an overwrite's properties, a register with mode=overwrite) only while
// it is as the request read it: two replicas replacing one row from the same read end with one
// winner and a 409 ConcurrentModification, never the last writer winning silently, and a row
// another replica removed is not brought back. Two catalogs over one manifest stand for two replicas.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openCatalog, type Catalog, type Entry, type ManifestStore } from "../src/catalog/catalog.js";
import { openManifestTable } from "../src/engine/manifest-table.js";
import { Code } from "../src/errors.js";
import { CHECK_EVERY_READ } from "../src/util/keep-fresh.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { removeDir, tempDataDir } from "./helpers/quiver.js";
import { toStream } from "./helpers/arrow.js";

describe("two replicas replacing one catalog row", () => {
  const root = tempDataDir();
  const state = mkdtempSync(path.join(tmpdir(), "quiver-state-"));
  let storeA: ManifestStore;
  let a: Catalog;
  let b: Catalog;
  beforeAll(async () => {
    storeA = await openManifestTable(root, path.join(state, "a"));
    a = await openCatalog(storeA, CHECK_EVERY_READ, root);
    b = await openCatalog(await openManifestTable(root, path.join(state, "b")), CHECK_EVERY_READ, root);
  });
  afterAll(() => {
    a?.close();
    b?.close();
    removeDir(root);
    removeDir(state);
  });

  const table = (name: string, properties: Record<string, string> = {}): Entry => ({ id: [name], objectId: name, type: "table", location: `${name}.lance`, properties });
  /** The entry as each replica reads it now. */
  const readBoth = async (name: string) => {
    await Promise.all([a.refresh(true), b.refresh(true)]);
    return [a.get([name])!, b.get([name])!];
  };
  const stored = async (name: string) => (await storeA.readAll()).rows.filter((r) => r.object_id === name);

  it("from the same read: the first wins, the second answers 409 ConcurrentModification and sees the winner's row", async () => {
    await a.insert(table("t", { v: "0" }), Code.TableAlreadyExists);
    const [ea, eb] = await readBoth("t");
    await a.replace(ea, { ...ea, properties: { v: "a" } });
    await expect(b.replace(eb, { ...eb, properties: { v: "b" } })).rejects.toMatchObject({ code: Code.ConcurrentModification, status: 409 });
    expect(b.get(["t"])!.properties).toEqual({ v: "a" });
    expect((await stored("t")).map((r) => r.metadata)).toEqual([JSON.stringify({ v: "a" })]);
    // Read again, it replaces.
    await b.replace(b.get(["t"])!, { ...eb, properties: { v: "b" } });
    expect((await readBoth("t")).map((e) => e.properties)).toEqual([{ v: "b" }, { v: "b" }]);
  });

  it("a row another replica removed is not brought back", async () => {
    await a.insert(table("gone"), Code.TableAlreadyExists);
    const [ea, eb] = await readBoth("gone");
    await a.remove([ea]);
    await expect(b.replace(eb, { ...eb, properties: { v: "b" } })).rejects.toMatchObject({ code: Code.ConcurrentModification });
    expect(b.get(["gone"])).toBeUndefined();
    expect(await stored("gone")).toEqual([]);
  });

  it("a row another writer stored, its JSON spaced its own way, is replaced", async () => {
    await storeA.insertIfAbsent({ object_id: "spaced", object_type: "table", location: "spaced.lance", metadata: '{"k": "v"}' });
    const [ea] = await readBoth("spaced");
    expect(ea.properties).toEqual({ k: "v" });
    await a.replace(ea, { ...ea, properties: { k: "w" } });
    expect((await stored("spaced")).map((r) => r.metadata)).toEqual([JSON.stringify({ k: "w" })]);
  });
});

describe("replacing rows over HTTP", () => {
  const q = inProcessForFile();
  const rows = (ids: number[]) => toStream(new Table({ id: vectorFromArray(ids, new Int32()) }));

  it("create with mode=overwrite sets the properties it is given", async () => {
    const first = await q.call("POST", `/v1/table/props/create?properties=${encodeURIComponent(JSON.stringify({ v: "1" }))}`, rows([1, 2]));
    expect(first.status, first.text).toBe(200);
    const again = await q.call("POST", `/v1/table/props/create?mode=overwrite&properties=${encodeURIComponent(JSON.stringify({ v: "2" }))}`, rows([3]));
    expect(again.status, again.text).toBe(200);
    expect(again.json.properties).toEqual({ v: "2" });
    expect((await q.call("POST", "/v1/table/props/describe", {})).json.properties).toEqual({ v: "2" });
  });

  it("register with mode=overwrite points the table at the location given", async () => {
    const kept = await q.call("POST", "/v1/table/kept/create", rows([1, 2, 3, 4]));
    expect(kept.status, kept.text).toBe(200);
    expect((await q.call("POST", "/v1/table/kept/deregister", {})).status).toBe(200);
    expect((await q.call("POST", "/v1/table/target/create", rows([1]))).status).toBe(200);
    const reg = await q.call("POST", "/v1/table/target/register", { location: kept.json.location, mode: "overwrite", properties: { from: "kept" } });
    expect(reg.status, reg.text).toBe(200);
    const count = await q.call("POST", "/v1/table/target/count_rows", {});
    expect(count.json).toBe(4);
    expect((await q.call("POST", "/v1/table/target/describe", {})).json.properties).toEqual({ from: "kept" });
  });
});
