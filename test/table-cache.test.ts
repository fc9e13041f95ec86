// The cache of open table handles (src/engine/tables.ts) against real Lance tables: a write that
// went through a handle the cache has since replaced is still seen by the next read. A request
// opens its handle before it commits; if the handle is evicted in between (a maintenance job or an
// index build finishing), the replacement may have been opened before the commit landed.
import * as lancedb from "@lancedb/lancedb";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import type { Entry } from "../src/catalog/catalog.js";
import { openTables } from "../src/engine/tables.js";
import { abRows } from "./helpers/seed.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-table-cache-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("a commit through an evicted handle is read by the next request, within the consistency interval", async () => {
  await (await lancedb.connect(dir)).createTable("t", abRows(0, 3));
  // A minute: only the cache's own bookkeeping can make the next read see the commit.
  const tables = await openTables(dir, { intervalMs: 60_000, keepMs: 0 });
  const entry: Entry = { id: ["t"], objectId: "t", type: "table", location: "t.lance", properties: {} };
  const requestHandle = await tables.open(entry);
  tables.evict(entry.objectId);
  expect(await (await tables.open(entry)).countRows()).toBe(3);
  const r = await tables.write(entry, null, { change: "insert", rows: 2, work: null }, () => requestHandle.add(abRows(3, 2)));
  expect(r.version).toBe(2);
  expect(await (await tables.open(entry)).countRows()).toBe(5);
  tables.plain.close();
  tables.namespaced.close();
});

it("so is one whose engine call does not say the version it made (an index drop)", async () => {
  await (await lancedb.connect(dir)).createTable("u", abRows(0, 3));
  const tables = await openTables(dir, { intervalMs: 60_000, keepMs: 0 });
  const entry: Entry = { id: ["u"], objectId: "u", type: "table", location: "u.lance", properties: {} };
  const requestHandle = await tables.open(entry);
  await requestHandle.createIndex("a");
  tables.evict(entry.objectId);
  expect((await (await tables.open(entry)).listIndices()).map((i) => i.name)).toEqual(["a_idx"]);
  await tables.write(entry, null, { change: "index", work: null }, () => requestHandle.dropIndex("a_idx"));
  expect(await (await tables.open(entry)).listIndices()).toEqual([]);
  tables.plain.close();
  tables.namespaced.close();
});
