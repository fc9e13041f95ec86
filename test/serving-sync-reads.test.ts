// What a serving index's sync reads from the object store before a write is answered (issue 52: the
// sync was the slowest step of a single-row insert on object storage), on Azurite: after this
// replica's own append it reads nothing of the commit (the writer knows it is an append); another
// process's commits are read, one GET each (no HEAD before it), and the index then answers what
// LanceDB answers. Counted by the server's own metrics of its object-store requests.
import * as lancedb from "@lancedb/lancedb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAzurite, type Azurite } from "./helpers/azurite.js";
import { sample } from "./helpers/metrics.js";
import { removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";
import { startStoreProxy, type StoreProxy } from "./helpers/store-proxy.js";
import { settle } from "./helpers/transactions.js";
import { probeUntil } from "./helpers/pace.js";

const CONTAINER = "syncreads";
const TABLE = "t";
const PATH = "x-quiver-search-path";
const asJson = { "content-type": "application/json" };
const wantJson = { accept: "application/json" };
/** A manifest read by the server's own Azure client (a sync's first read), not by LanceDB's (object_store). */
const MANIFEST_READ = /^GET [^ ]*\/_versions\/[^ ]*\.manifest[\s\S]*user-agent: azsdk-js/i;

let az: Azurite;
let proxy: StoreProxy;
let q: Quiver;

beforeAll(async () => {
  az = await startAzurite();
  await az.createContainer(CONTAINER);
  // The server reaches the store through a relay that can hold one request (the last test's).
  proxy = await startStoreProxy(az.url);
  const options = Object.entries({ ...az.storageOptions(), azure_storage_endpoint: `${proxy.url}/devstoreaccount1` }).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
  q = await startQuiver({ dataUri: `az://${CONTAINER}/quiver`, args: [...options, "--workers", "1", "--auto-maintenance", "off"] });
}, 120_000);

afterAll(async () => {
  proxy?.resume();
  await q?.stop();
  if (q?.dataDir) removeDir(q.dataDir);
  await proxy?.close();
  await az?.stop();
});

const post = (op: string, body?: unknown, headers?: Record<string, string>) => q.call("POST", `/v1/table/${TABLE}/${op}`, body, headers);
const row = (i: number) => ({ id: i, vector: [Math.sin(i), Math.cos(i), Math.sin(i / 2), Math.cos(i / 3)] });
const rows = (from: number, n: number) => Array.from({ length: n }, (_, k) => row(from + k));

/** The server's object-store requests of its own by operation, and the versions its syncs followed by how. */
async function counts() {
  const text = (await q.call("GET", "/metrics")).text;
  const requests = (operation: string) => sample(text, "quiver_object_store_request_duration_seconds_count", { store: "az", operation }) ?? 0;
  const versions = (how: string) => sample(text, "quiver_serving_sync_versions_total", { how }) ?? 0;
  return { get: requests("get"), head: requests("head"), known: versions("known"), read: versions("read") };
}
const delta = (a: Awaited<ReturnType<typeof counts>>, b: typeof a) => ({ get: b.get - a.get, head: b.head - a.head, known: b.known - a.known, read: b.read - a.read });

/** The nearest rows' ids to `v` and the path that answered, at the table's version `version` or later. */
async function nearest(v: number[], version: number) {
  const r = await post("query", { vector: { single_vector: v }, k: 5, columns: ["id"] }, { ...wantJson, "x-quiver-min-version": String(version) });
  expect(r.status, r.text).toBe(200);
  return { ids: (r.json as { id: number }[]).map((x) => x.id), path: r.headers.get(PATH) };
}

/** `nearest`, asked every 100 ms until the serving index answers it (a sync still running, or just ended). */
const servedNearest = (v: number[], version: number) =>
  probeUntil(`the serving index answers at version ${version}`, async () => {
    const near = await nearest(v, version);
    return near.path === "serving" ? near : null;
  });

/** The table opened by LanceDB in this process (another writer than the server), straight on Azurite. */
async function otherWriter(): Promise<lancedb.Table> {
  const location = (await post("describe", {})).json.location as string;
  const db = await lancedb.connect(location.slice(0, location.lastIndexOf("/")), { storageOptions: az.storageOptions() });
  return db.openTable(location.slice(location.lastIndexOf("/") + 1).replace(/\.lance$/, ""));
}

describe("a serving index's sync on Azurite", () => {
  it("the table gets a vector index and its serving index answers", async () => {
    expect((await post("create", JSON.stringify(rows(0, 300)), asJson)).status).toBe(200);
    const ix = await post("create_index", { column: "vector", index_type: "IVF_PQ", num_partitions: 2, num_sub_vectors: 2 });
    expect(ix.status, ix.text).toBe(200);
    expect((await settle(q, ix.json.transaction_id, 120_000)).status).toBe("Succeeded");
    const version = (await post("describe", {})).json.version as number;
    expect((await servedNearest(row(7).vector, version)).ids[0]).toBe(7);
  }, 180_000);

  it("after this replica's own single-row insert, the sync reads nothing of the commit from the store", async () => {
    for (const i of [1000, 1001, 1002]) {
      const before = await counts();
      const ins = await post("insert", JSON.stringify([row(i)]), asJson);
      expect(ins.status, ins.text).toBe(200);
      expect(delta(before, await counts())).toEqual({ get: 0, head: 0, known: 1, read: 0 });
      // Answered by the index, which holds the new row.
      const near = await nearest(row(i).vector, ins.json.version);
      expect(near).toMatchObject({ path: "serving" });
      expect(near.ids[0]).toBe(i);
    }
  }, 60_000);

  it("another process's commits are read, one GET each, and the index answers what LanceDB answers", async () => {
    const other = await otherWriter();
    // Counted from before the commits: a background re-check of the table may sync some of them
    // ahead of the insert (Tables.beforeMove), each still read once.
    const before = await counts();
    for (const i of [2000, 2001, 2002]) await other.add([row(i)]);
    const ins = await post("insert", JSON.stringify([row(2003)]), asJson);
    expect(ins.status, ins.text).toBe(200);
    // The three versions the other writer made, read; this replica's own, known.
    expect(delta(before, await counts())).toEqual({ get: 3, head: 0, known: 1, read: 3 });
    await other.checkoutLatest();
    for (const i of [2000, 2001, 2002, 2003]) {
      const want = ((await other.vectorSearch(row(i).vector).bypassVectorIndex().select(["id"]).limit(5).toArray()) as { id: bigint }[]).map((x) => Number(x.id));
      const got = await nearest(row(i).vector, ins.json.version);
      expect(got.path).toBe("serving");
      expect(got.ids).toEqual(want);
    }
  }, 60_000);

  it("a sync the store holds up keeps a search, and its explain, waiting half its deadline, no more: LanceDB answers it, with the other process's commit", async () => {
    const other = await otherWriter();
    // The server's own read of the commit's manifest (what the sync reads first); LanceDB's pass.
    proxy.holdAt(MANIFEST_READ);
    await other.add([row(3000)]);
    // Past the consistency interval: the next search finds the commit.
    await new Promise((r) => setTimeout(r, 1_500));
    const r = await post("query", { vector: { single_vector: row(3000).vector }, k: 5, columns: ["id"] }, { ...wantJson, "x-request-timeout-ms": "10000" });
    expect(proxy.holding()).toBe(true);
    // Unbounded, the search waited for the held sync: 503 at its deadline.
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get(PATH)).toBe("engine; reason=stale");
    expect((r.json as { id: number }[])[0].id).toBe(3000);
    // Its plan says so, in the same bound (unbounded, explain waited for the sync: 503).
    const plan = await post("explain_plan", { query: { vector: { single_vector: row(3000).vector }, k: 5 } }, { ...wantJson, "x-request-timeout-ms": "10000" });
    expect(plan.status, plan.text).toBe(200);
    expect(plan.json).toMatch(/^QuiverSearchPath: engine \(reason: stale\)/);
    // Once the store answers, the sync ends and the index answers again.
    proxy.resume();
    const version = (await post("describe", {})).json.version as number;
    expect((await servedNearest(row(3000).vector, version)).ids[0]).toBe(3000);
  }, 120_000);

  it("a sync the store holds up after this replica's own update: the committed write is answered, and the next search has its change", async () => {
    // An update is no append: its sync reads the commit's manifest, which the relay holds.
    proxy.holdAt(MANIFEST_READ);
    const moved = row(4000).vector;
    const w = await post("update", { predicate: "id = 3000", updates: [["vector", `[${moved.join(",")}]`]] }, { "x-request-timeout-ms": "10000" });
    expect(proxy.holding()).toBe(true);
    // Unbounded, the write waited for the held sync: 503 at its deadline though committed.
    expect(w.status, w.text).toBe(200);
    const r = await post("query", { vector: { single_vector: moved }, k: 1, columns: ["id"] }, { ...wantJson, "x-request-timeout-ms": "10000" });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get(PATH)).toBe("engine; reason=stale");
    expect(r.json).toEqual([expect.objectContaining({ id: 3000 })]);
    proxy.resume();
    const version = (await post("describe", {})).json.version as number;
    expect((await servedNearest(moved, version)).ids[0]).toBe(3000);
  }, 120_000);
});
