// LanceDB's REMOTE client writing through Quiver: each call is made twice, once through Quiver and
// once on an in-process LanceDB connection of a temp directory, and the answers (counts, versions,
// rows) must agree. Its uploads are Arrow IPC with LZ4-compressed record batches.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { compressIpc } from "./helpers/compressed-ipc.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";

const q = serverForFile({}, 60_000);
let remote: lancedb.Connection;
let local: lancedb.Connection;
let localDir: string;

beforeAll(async () => {
  remote = await lancedb.connect("db://quiver", { apiKey: ADMIN_KEY, hostOverride: q.url, clientConfig: { retryConfig: { retries: 0 } } });
  localDir = mkdtempSync(path.join(tmpdir(), "quiver-local-"));
  local = await lancedb.connect(localDir);
});
afterAll(() => rmSync(localDir, { recursive: true, force: true }));

const DIM = 4;
function rowsOf(ids: number[], text = "row") {
  const vec = ids.map((i) => Array.from({ length: DIM }, (_, d) => Math.sin(i * 7 + d)));
  return new arrow.Table({
    id: arrow.vectorFromArray(ids, new arrow.Int32()),
    text: arrow.vectorFromArray(ids.map((i) => `${text} ${i}`), new arrow.Utf8()),
    vector: arrow.vectorFromArray(vec, new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true))),
  });
}
const toStream = (t: ReturnType<typeof rowsOf>) => arrow.tableToIPC(t, "stream");
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

/** Rows as plain JSON, ordered by id, for exact comparison. */
async function content(t: lancedb.Table) {
  const rows = (await t.query().toArray()).map((r) => ({ id: Number(r.id), text: r.text, vector: Array.from(r.vector as Float32Array) }));
  return rows.sort((a, b) => a.id - b.id);
}

/** The same calls on a table through Quiver and on a local one; answers [through Quiver, in process]. */
async function both<T>(name: string, fn: (db: lancedb.Connection, name: string) => Promise<T>): Promise<[T, T]> {
  return [await fn(remote, name), await fn(local, name)];
}

describe("LanceDB remote client: writes", () => {
  it("createTable, add, update, mergeInsert, delete: the same counts, versions and rows as LanceDB in process", async () => {
    const run = async (db: lancedb.Connection, name: string) => {
      const t = await db.createTable(name, rowsOf(range(0, 50)));
      const added = await t.add(rowsOf(range(50, 80)));
      const updated = await t.update({ valuesSql: { text: "'changed'" }, where: "id < 7" });
      const merged = await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rowsOf(range(75, 90), "merged"));
      const deleted = await t.delete("id >= 85");
      return { added, updated, merged, deleted, count: await t.countRows(), filtered: await t.countRows("text = 'changed'"), version: await t.version(), rows: await content(t) };
    };
    const [got, want] = await both("writes", run);
    expect(got.updated.rowsUpdated).toBe(7);
    expect(got.merged.numInsertedRows).toBe(10);
    expect(got.merged.numUpdatedRows).toBe(5);
    expect(got.deleted.numDeletedRows).toBe(5);
    expect(got).toEqual(want);
    expect(got.count).toBe(85);
  });

  it("createEmptyTable then add: the schema LanceDB reports and the rows", async () => {
    const schema = rowsOf([0]).schema;
    const [got, want] = await both("empty", async (db, name) => {
      const t = await db.createEmptyTable(name, schema);
      const before = await t.countRows();
      await t.add(rowsOf(range(0, 3)));
      return { before, schema: (await t.schema()).toString(), rows: await content(t) };
    });
    expect(got.before).toBe(0);
    expect(got).toEqual(want);
  });

  it("overwrite, existOk and a second create: LanceDB's outcomes", async () => {
    const [got, want] = await both("modes", async (db, name) => {
      await db.createTable(name, rowsOf(range(0, 4)));
      const again = await db.createTable(name, rowsOf(range(0, 2)), { existOk: true }).then((t) => t.countRows());
      const over = await db.createTable(name, rowsOf(range(0, 2)), { mode: "overwrite" }).then((t) => t.countRows());
      const dup = await db.createTable(name, rowsOf([1])).then(() => "created", (e: Error) => (/already exists/.test(e.message) ? "already exists" : e.message));
      const addOver = await (await db.openTable(name)).add(rowsOf([9]), { mode: "overwrite" }).then(async () => (await db.openTable(name)).countRows());
      return { again, over, dup, addOver };
    });
    expect(got).toEqual({ again: 4, over: 2, dup: "already exists", addOver: 1 });
    expect(got).toEqual(want);
  });

  it("versions, schema changes, index admin and stats: the same answers as LanceDB in process", async () => {
    const [got, want] = await both("evolving", async (db, name) => {
      const t = await db.createTable(name, rowsOf(range(0, 40)));
      await t.add(rowsOf(range(40, 50)));
      const versions = (await t.listVersions()).map((v) => v.version);
      await t.checkout(1);
      const atOne = await t.countRows();
      await t.checkoutLatest();
      await t.checkout(1);
      await t.restore();
      const restored = { version: await t.version(), count: await t.countRows() };
      await t.addColumns([{ name: "twice", valueSql: "id * 2" }]);
      await t.alterColumns([{ path: "twice", rename: "double" }]);
      await t.updateFieldMetadata([{ path: "text", metadata: { note: "kept" } }]);
      const fields = (await t.schema()).fields.map((f) => [f.name, String(f.type), Object.fromEntries(f.metadata)]);
      await t.dropColumns(["double"]);
      await t.createIndex("id");
      await t.waitForIndex(["id_idx"], 60);
      const indexes = (await t.listIndices()).map((i) => [i.name, i.indexType, i.columns]);
      const idStats = await t.indexStats("id_idx");
      await t.dropIndex("id_idx");
      const stats = await t.stats();
      return {
        versions, atOne, restored, fields, indexes, afterDrop: (await t.listIndices()).length,
        idStats: { rows: idStats?.numIndexedRows, type: idStats?.indexType },
        stats: { rows: stats.numRows, fragments: stats.fragmentStats.numFragments },
        branches: Object.keys(await (await t.branches()).list()),
        columns: (await t.schema()).fields.map((f) => f.name),
      };
    });
    expect(got.atOne).toBe(40);
    expect(got.restored.count).toBe(40);
    expect(got).toEqual(want);
  });

  it("namespaces and renames as LanceDB's directory namespace would have them", async () => {
    await remote.createNamespace(["shelf"]);
    expect(await remote.describeNamespace(["shelf"])).toEqual({ properties: {} });
    expect((await remote.listNamespaces()).namespaces).toContain("shelf");
    await remote.createTable("box", rowsOf([1]), ["shelf"]);
    expect(await remote.tableNames(["shelf"])).toEqual(["box"]);
    await expect(remote.dropNamespace(["shelf"])).rejects.toThrow(/not empty/);
    await remote.renameTable("box", "crate", { namespacePath: ["shelf"], newNamespacePath: ["shelf"] });
    expect(await remote.tableNames(["shelf"])).toEqual(["crate"]);
    await remote.dropTableAsync("crate", ["shelf"]);
    await remote.dropNamespace(["shelf"]);
    expect((await remote.listNamespaces()).namespaces).not.toContain("shelf");
    const t = await remote.openTable("writes");
    expect([t.isOpen(), t.display()]).toEqual([true, "RemoteTable(writes)"]);
    t.close();
    expect(t.isOpen()).toBe(false);
  });

  it("tags: create, list, getVersion, update, delete as LanceDB in process", async () => {
    const [got, want] = await both("tagged", async (db, name) => {
      const t = await db.createTable(name, rowsOf(range(0, 3)));
      await t.add(rowsOf([3]));
      const tags = await t.tags();
      await tags.create("first", 1);
      await tags.create("second", 2);
      const listed = Object.fromEntries(Object.entries(await tags.list()).map(([k, v]) => [k, v.version]));
      const first = await tags.getVersion("first");
      await tags.update("first", 2);
      await tags.delete("second");
      const after = Object.fromEntries(Object.entries(await tags.list()).map(([k, v]) => [k, v.version]));
      return { listed, first, after };
    });
    expect(got).toEqual({ listed: { first: 1, second: 2 }, first: 1, after: { first: 2 } });
    expect(got).toEqual(want);
  });

  it("takeOffsets and takeRowIds return LanceDB's rows", async () => {
    const [got, want] = await both("take", async (db, name) => {
      const t = await db.createTable(name, rowsOf(range(0, 20)));
      const offsets = (await t.takeOffsets([3, 0, 17]).toArray()).map((r) => Number(r.id)).sort((a, b) => a - b);
      const ids = (await t.takeRowIds([5n, 6n]).toArray()).map((r) => Number(r.id)).sort((a, b) => a - b);
      return { offsets, ids };
    });
    expect(got).toEqual({ offsets: [0, 3, 17], ids: [5, 6] });
    expect(got).toEqual(want);
  });

  it("prewarmIndex succeeds and a missing index fails by name; prewarmData is 406 (the engine has none)", async () => {
    const t = await remote.createTable("warm", rowsOf(range(0, 30)));
    await t.createIndex("id");
    await t.waitForIndex(["id_idx"], 60);
    await expect(t.prewarmIndex("id_idx")).resolves.toBeUndefined();
    await expect(t.prewarmIndex("nope_idx")).rejects.toThrow(/nope_idx/);
    await expect(t.prewarmData(["text"])).rejects.toThrow(/not implemented/);
    const local = await (await lancedb.connect(q.dataDir)).openTable("warm");
    await expect(local.prewarmData(["text"])).rejects.toThrow(/only supported on remote tables/);
  });

  it("jobs: listJobs, openJob and cancelJob see Quiver's index builds", async () => {
    const t = await remote.createTable("jobs", rowsOf(range(0, 30)));
    await t.createIndex("text", { config: lancedb.Index.fts() });
    await t.waitForIndex(["text_idx"], 60);
    const jobs = (await remote.listJobs()).filter((j) => j.table === "jobs");
    expect(jobs.map((j) => j.jobType)).toEqual(["create_index"]);
    const job = await remote.openJob(jobs[0].jobId);
    expect(await job.status()).toBe("finished");
    // Cancelling what already ended changes nothing, as LanceDB documents.
    expect(await remote.cancelJob(jobs[0].jobId)).toBe(true);
    const r = await q.call("POST", "/v1/jobs/cancel", { job_id: jobs[0].jobId });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ cancelled: false, job_state: "DONE", status: "Succeeded" });
    await expect(remote.openJob("no-such-job")).rejects.toThrow(/not found/);
    // The asynchronous forms hand back a job handle that waits on Quiver's record.
    const building = await t.createIndexAsync("id");
    await building.wait();
    expect(await building.status()).toBe("finished");
    expect((await t.listIndices()).map((i) => i.name).sort()).toEqual(["id_idx", "text_idx"]);
    const [tokens, localTokens] = await both("tokens", async (db, name) => {
      const x = await db.createTable(name, rowsOf(range(0, 3)));
      await x.createIndex("text", { config: lancedb.Index.fts() });
      await x.waitForIndex(["text_idx"], 60);
      return x.tokenize("Rows of the Running", { column: "text" });
    });
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens).toEqual(localTokens);
    expect((await q.call("POST", "/v1/jobs/describe", { job_id: "no-such-job" })).status).toBe(404);
  });

  it("cloneTable is refused with 406 (not implemented), nothing is created", async () => {
    await remote.createTable("source", rowsOf(range(0, 3)));
    await expect(remote.cloneTable("copy", path.join(q.dataDir, "source.lance"))).rejects.toThrow(/not implemented/);
    expect(await remote.tableNames()).not.toContain("copy");
  });

  it("the calls the remote client refuses by itself fail with its own message, and docs/api.md lists each", async () => {
    const t = await remote.createTable("refused", rowsOf(range(0, 3)));
    const apiDoc = readFileSync(path.resolve(__dirname, "../docs/api.md"), "utf8");
    const refused: [string, () => Promise<unknown>][] = [
      ["optimize", () => t.optimize()],
      ["dropAllTables", () => remote.dropAllTables()],
      ["usesV2ManifestPaths", () => t.usesV2ManifestPaths()],
      ["migrateManifestPathsV2", () => t.migrateManifestPathsV2()],
      ["setUnenforcedPrimaryKey", () => t.setUnenforcedPrimaryKey(["id"])],
      ["listMaterializedViews", () => remote.listMaterializedViews()],
      ["refreshColumn", () => t.refreshColumn("text")],
      ["fetchBlobs", () => t.fetchBlobs("text", [0n])],
    ];
    for (const [name, call] of refused) {
      await expect(call(), name).rejects.toThrow(/not supported|cannot be run on a remote table/);
      expect(apiDoc, name).toContain(`\`${name}\``);
    }
  });
});

describe("compressed Arrow IPC request bodies", () => {
  it("insert accepts LZ4-frame and ZSTD compressed record batches", async () => {
    const created = await q.call("POST", "/v1/table/packed/create", toStream(rowsOf(range(0, 5))));
    expect(created.status, created.text).toBe(200);
    for (const [codec, ids] of [["lz4", range(100, 140)], ["zstd", range(200, 260)]] as const) {
      const body = compressIpc(toStream(rowsOf(ids)), codec);
      const r = await q.call("POST", "/v1/table/packed/insert", body);
      expect(r.status, codec).toBe(200);
      expect(r.json.num_inserted_rows, codec).toBe(ids.length);
    }
    const count = await q.call("POST", "/v1/table/packed/count_rows", {});
    expect(count.json).toBe(105);
  });

  it("a compressed body whose frames are corrupt is a 400 naming the body, and nothing is written", async () => {
    const body = Buffer.from(compressIpc(toStream(rowsOf(range(0, 40))), "lz4"));
    // Damage the magic number of the first LZ4 frame in the batch body.
    const frame = body.indexOf(Buffer.from([0x04, 0x22, 0x4d, 0x18]));
    expect(frame).toBeGreaterThan(0);
    body[frame + 1] ^= 0xff;
    expect((await q.call("POST", "/v1/table/damaged/create", toStream(rowsOf(range(0, 5))))).status).toBe(200);
    const r = await q.call("POST", "/v1/table/damaged/insert", body);
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^body: /);
    expect((await q.call("POST", "/v1/table/damaged/describe", {})).json.version).toBe(1);
    expect((await q.call("POST", "/v1/table/damaged/count_rows", {})).json).toBe(5);
  });
});

describe("request ids", () => {
  it("a client's x-request-id is answered back; an unusable one is replaced", async () => {
    const mine = await q.call("GET", "/v1/namespace/$/list", undefined, { "x-request-id": "client-id.42:a" });
    expect(mine.headers.get("x-request-id")).toBe("client-id.42:a");
    const err = await q.call("POST", "/v1/table/missing/describe", {}, { "x-request-id": "abc-123" });
    expect(err.status).toBe(404);
    expect(err.headers.get("x-request-id")).toBe("abc-123");
    const bad = await q.call("GET", "/v1/namespace/$/list", undefined, { "x-request-id": "x".repeat(200) });
    expect(bad.headers.get("x-request-id")).not.toBe("x".repeat(200));
  });
});

describe("versions answered to the remote client's concurrent writes", () => {
  it("12 concurrent adds and 6 concurrent updates: distinct versions (adds may share a commit), each write visible at its own version, nothing lost", async () => {
    const t = await remote.createTable("racing", rowsOf(range(0, 6)));
    const adds = range(1000, 1012).map((id) => t.add(rowsOf([id])).then((r) => ({ kind: "add" as const, id, version: r.version })));
    const updates = range(0, 6).map((id) => t.update({ values: { text: `marked ${id}` }, where: `id = ${id}` }).then((r) => ({ kind: "update" as const, id, version: r.version, n: r.rowsUpdated })));
    const writes = await Promise.all([...adds, ...updates]);
    // Adds that waited together share a commit (group commit); an update never shares one.
    const updated = writes.filter((w) => w.kind === "update").map((w) => w.version);
    const added = new Set(writes.filter((w) => w.kind === "add").map((w) => w.version));
    expect(new Set(updated).size).toBe(updated.length);
    for (const v of updated) expect(added.has(v)).toBe(false);
    for (const w of writes) if (w.kind === "update") expect(w.n).toBe(1);
    const inProcess = await (await lancedb.connect(q.dataDir)).openTable("racing");
    for (const w of writes) {
      await inProcess.checkout(w.version);
      const rows = await inProcess.query().where(`id = ${w.id}`).toArray();
      if (w.kind === "add") expect(rows.length, `add ${w.id} at v${w.version}`).toBe(1);
      else expect(rows[0].text, `update ${w.id} at v${w.version}`).toBe(`marked ${w.id}`);
    }
    await inProcess.checkoutLatest();
    expect(await inProcess.countRows()).toBe(18);
    expect(await inProcess.countRows("text LIKE 'marked %'")).toBe(6);
  });
});
