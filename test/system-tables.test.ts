// Quiver's shared system tables (src/engine/system-tables.ts) opened by replicas that start at
// once, on a local directory and on Azurite: one replica creates a table, and no replica's open or
// first write fails for the race (an open failed so, and the replica's Idempotency-Key answered 500).
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
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
