// Quiver's shared system tables (src/engine/system-tables.ts) opened by replicas that start at
// once, on a local directory and on Azurite: one replica creates a table, and no replica's open or
// first write fails for the race (an open failed so, and the replica's Idempotency-Key answered 500).
import { mkdirSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openClaims } from "../src/catalog/claims.js";
import { openSystemTables } from "../src/engine/system-tables.js";
import { useStorageOptions } from "../src/util/store-files.js";
import { startAzurite, type Azurite } from "./helpers/azurite.js";
import { removeDir, tempDataDir } from "./helpers/quiver.js";

const COLUMNS = [{ name: "state", type: "string" as const }];
const REPLICAS = 4;
const ROUNDS = 10;

let az: Azurite;
const dirs: string[] = [];
beforeAll(async () => {
  az = await startAzurite();
  await az.createContainer("sys");
}, 60_000);
afterAll(async () => {
  useStorageOptions({});
  await az?.stop();
  for (const d of dirs) removeDir(d);
});

const stores: [string, () => { root: string; options: Record<string, string> }][] = [
  ["a local directory", () => {
    const root = tempDataDir();
    dirs.push(root);
    return { root, options: {} };
  }],
  ["Azurite", () => ({ root: `az://sys/round-${Math.random().toString(36).slice(2)}`, options: az.storageOptions() })],
];

describe.each(stores)("system tables on %s", (_, where) => {
  it(`${REPLICAS} replicas opening a new table at once, ${ROUNDS} times: every open and every first write succeeds, and every row is kept`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { root, options } = where();
      useStorageOptions(options);
      const settled = await Promise.allSettled(
        Array.from({ length: REPLICAS }, async (_, r) => {
          const table = await openSystemTables(root, options).open("t", COLUMNS);
          await table.upsert([{ key: `k${r}`, state: "new", doc: "{}" }]);
        }),
      );
      expect(settled.filter((s) => s.status === "rejected").map((s) => String((s as PromiseRejectedResult).reason))).toEqual([]);
      const rows = await (await openSystemTables(root, options).open("t", COLUMNS)).select();
      expect(rows.map((r) => r.key).sort()).toEqual(Array.from({ length: REPLICAS }, (_, r) => `k${r}`));
    }
  }, 120_000);
});

describe("a replica that died while it created a system table", () => {
  it("leaves a marker older than the wait: the next replica takes the creation over", async () => {
    const root = tempDataDir();
    dirs.push(root);
    useStorageOptions({});
    const marker = path.join(root, ".system", "t.creator");
    mkdirSync(path.dirname(marker), { recursive: true });
    writeFileSync(marker, "crashed");
    const minuteAgo = new Date(Date.now() - 60_000);
    utimesSync(marker, minuteAgo, minuteAgo);
    const table = await openSystemTables(root, {}).open("t", COLUMNS);
    await table.upsert([{ key: "k", state: "new", doc: "{}" }]);
    expect((await table.select()).map((r) => r.key)).toEqual(["k"]);
  });
});

describe("claims of table directories being created", () => {
  it("a release under way when the server closes is finished before close returns (nothing of ours writes the store after)", async () => {
    const root = tempDataDir();
    dirs.push(root);
    useStorageOptions({});
    const claims = await openClaims(openSystemTables(root, {}));
    const release = await claims.hold("t.lance");
    expect(await claims.held()).toEqual(new Set(["t.lance"]));
    release();
    await claims.close();
    expect(await claims.held()).toEqual(new Set());
  });
});

describe("a repeated select", () => {
  it("sees rows another process committed since (a second LanceDB connection on the same directory), and this one's own commits", async () => {
    const root = tempDataDir();
    dirs.push(root);
    useStorageOptions({});
    const table = await openSystemTables(root, {}).open("t", COLUMNS);
    await table.upsert([{ key: "a", state: "new", doc: "{}" }]);
    expect((await table.select("state = 'new'")).map((r) => r.key)).toEqual(["a"]);
    expect((await table.select()).map((r) => r.key)).toEqual(["a"]);
    const other = await (await lancedb.connect(path.join(root, ".system"))).openTable("t");
    await other.add([{ key: "b", state: "new", doc: "{}" }]);
    expect((await table.select("state = 'new'")).map((r) => r.key).sort()).toEqual(["a", "b"]);
    await other.update({ where: "key = 'a'", values: { state: "done" } });
    expect((await table.select("state = 'new'")).map((r) => r.key)).toEqual(["b"]);
    await table.upsert([{ key: "c", state: "new", doc: "{}" }]);
    expect((await table.select("state = 'new'")).map((r) => r.key).sort()).toEqual(["b", "c"]);
    expect((await table.select()).map((r) => r.key).sort()).toEqual(["a", "b", "c"]);
    other.close();
  });

  it("on an unchanged version answers with copies of its last answer: no caller's change reaches the next", async () => {
    const root = tempDataDir();
    dirs.push(root);
    useStorageOptions({});
    const table = await openSystemTables(root, {}).open("t", COLUMNS);
    await table.upsert([{ key: "a", state: "new", doc: "{}" }]);
    const first = await table.select("state = 'new'");
    first[0].state = "changed by a caller";
    first.push({ key: "b", state: "new", doc: null });
    expect(await table.select("state = 'new'")).toEqual([{ key: "a", state: "new", doc: "{}" }]);
  });

  it("with a changing literal in its where text (a claim's expiry) keeps answering what the table holds", async () => {
    const root = tempDataDir();
    dirs.push(root);
    useStorageOptions({});
    const table = await openSystemTables(root, {}).open("t", [{ name: "expires", type: "number" as const }]);
    await table.upsert([{ key: "a", expires: 100, doc: null }, { key: "b", expires: 200, doc: null }]);
    for (let now = 0; now < 40; now++) expect((await table.select(`expires > ${now * 10}`)).map((r) => r.key).sort()).toEqual(["a", "b"].filter((k) => (k === "a" ? 100 : 200) > now * 10));
    expect((await table.select("expires > 0")).map((r) => r.key).sort()).toEqual(["a", "b"]);
  });
});

describe("closing the system tables", () => {
  it("waits for a background compaction its commits started: nothing writes the table after close returns, and no compaction starts after", async () => {
    const root = tempDataDir();
    dirs.push(root);
    useStorageOptions({});
    const system = openSystemTables(root, {});
    const table = await system.open("t", COLUMNS);
    // The 50th commit here starts a compaction in the background (COMPACT_EVERY).
    for (let i = 0; i < 50; i++) await table.upsert([{ key: `k${i}`, state: "new", doc: "{}" }]);
    await system.close();
    const versions = () => readdirSync(path.join(root, ".system", "t.lance", "_versions")).sort();
    const atClose = versions();
    // The compaction's commit, had it been left running, lands within this wait.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(versions()).toEqual(atClose);
    // A compacted table's fragments were rewritten: the compaction ended before close returned.
    const fragments = readdirSync(path.join(root, ".system", "t.lance", "data")).length;
    expect(fragments).toBeGreaterThan(50);
    for (let i = 50; i < 100; i++) await table.upsert([{ key: `k${i}`, state: "new", doc: "{}" }]);
    const afterMore = versions().length;
    await new Promise((r) => setTimeout(r, 2_000));
    expect(versions().length).toBe(afterMore);
    expect((await table.select()).length).toBe(100);
  }, 60_000);
});
