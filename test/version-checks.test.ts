// A read naming a version checks that a cleanup has not removed its files (test/cleaned-versions.test.ts):
// it read the version's manifest and listed the table's data, deletion and index directories on
// every request, one GET and three LISTs on an object store. The answer is kept for the consistency
// interval (src/engine/version-checks.ts); a file another process removes meanwhile is met by the
// read, answered with the same 404. On Azurite, counted by the server's metrics of its own
// object-store requests.
import * as lancedb from "@lancedb/lancedb";
import { BlobServiceClient, StorageSharedKeyCredential } from "@azure/storage-blob";
import { expect, it } from "vitest";
import { AZURITE_ACCOUNT, AZURITE_KEY, serverOnAzurite } from "./helpers/azurite.js";
import { sample } from "./helpers/metrics.js";

const CONTAINER = "vchecks";
const TABLE = "t";
const asJson = { "content-type": "application/json" };
const wantJson = { accept: "application/json" };

// An interval no test outlasts: an answer kept is not checked again within it.
const s = serverOnAzurite(CONTAINER, ["--workers", "1", "--auto-maintenance", "off", "--consistency-interval-ms", "600000"]);

const post = (op: string, body?: unknown, headers?: Record<string, string>) => s.q.call("POST", `/v1/table/${TABLE}/${op}`, body, headers);
const rows = (from: number, n: number) => Array.from({ length: n }, (_, k) => ({ id: from + k }));

/** The server's own object-store GETs and listings so far. */
async function requests() {
  const text = (await s.q.call("GET", "/metrics")).text;
  const n = (operation: string) => sample(text, "quiver_object_store_request_duration_seconds_count", { store: "az", operation }) ?? 0;
  return { get: n("get"), list: n("list_children") };
}

/** Ids read at `version`, in JSON. */
async function idsAt(version: number) {
  const r = await post("query", { k: 100, columns: ["id"], version }, wantJson);
  expect(r.status, r.text).toBe(200);
  return (r.json as { id: number }[]).map((x) => x.id).sort((a, b) => a - b);
}

/** The table's directory inside the container, and its data files there now. */
async function dataFiles() {
  const location = (await post("describe", {})).json.location as string;
  const prefix = `${location.replace(`az://${CONTAINER}/`, "")}/data/`;
  const container = new BlobServiceClient(s.az.endpoint, new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY)).getContainerClient(CONTAINER);
  const names: string[] = [];
  for await (const b of container.listBlobsFlat({ prefix })) names.push(b.name);
  return { location, container, names };
}

it("a version read again is not checked against the store again", async () => {
  expect((await post("create", JSON.stringify(rows(0, 2)), asJson)).status).toBe(200);
  for (const from of [2, 4]) expect((await post("insert", JSON.stringify(rows(from, 2)), asJson)).status).toBe(200);
  // The first read of version 2 checks it.
  let before = await requests();
  expect(await idsAt(2)).toEqual([0, 1, 2, 3]);
  const first = await requests();
  expect(first.get - before.get).toBeGreaterThanOrEqual(1);
  expect(first.list - before.list).toBeGreaterThanOrEqual(3);
  // Later ones, of any operation naming it, take that answer.
  before = first;
  for (let i = 0; i < 3; i++) expect(await idsAt(2)).toEqual([0, 1, 2, 3]);
  const count = await post("count_rows", { version: 2 });
  expect(count.status, count.text).toBe(200);
  expect(count.json).toBe(4);
  expect(await requests()).toEqual(before);
  // A restore checks its version whatever is kept: a latest version nothing reads must not be made.
  const restore = await post("restore", { version: 2 });
  expect(restore.status, restore.text).toBe(200);
  const after = await requests();
  expect(after.list - before.list).toBeGreaterThanOrEqual(3);
}, 120_000);

it("a version whose files another process removed after its check answers 404 naming the file, not a 500", async () => {
  expect(await idsAt(1)).toEqual([0, 1]);
  // Another process compacts the table, and a cleanup of its stops after removing the files only
  // the versions before the compaction read (their manifests stay: the versions are still listed).
  const { location, container, names: old } = await dataFiles();
  const db = await lancedb.connect(location.slice(0, location.lastIndexOf("/")), { storageOptions: s.az.storageOptions() });
  const other = await db.openTable(location.slice(location.lastIndexOf("/") + 1).replace(/\.lance$/, ""));
  await other.optimize({ cleanupOlderThan: new Date(0) });
  for (const name of old) await container.deleteBlob(name);
  // Answered from the kept check, the read itself meets the missing file.
  const before = await requests();
  for (const [op, body] of [["query", { k: 10, version: 1 }], ["count_rows", { version: 1, predicate: "id >= 0" }]] as const) {
    const r = await post(op, body);
    expect(r.status, `${op}: ${r.text}`).toBe(404);
    expect(r.json.error).toMatch(/^version 1 not found in table "t": a cleanup removed its files \(data\/.+\.lance\)$/);
  }
  expect(await requests()).toEqual(before);
  // A restore checks, and refuses it.
  const restore = await post("restore", { version: 1 });
  expect(restore.status, restore.text).toBe(404);
  expect(restore.json.error).toMatch(/^version 1 not found in table "t": a cleanup removed its files/);
}, 120_000);
