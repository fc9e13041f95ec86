// Table maintenance end to end: POST /v1/table/{id}/optimize queues a maintenance job that
// compacts small fragments, folds new rows into indexes and cleans up old versions; what the
// cleanup keeps (tags, the versions branches start from, the retention window, versions read
// explicitly); writes made while maintenance runs; versions a client commits through
// version/create; bad requests; the bound on versions kept. Beside views, backfills and a table's
// own triggers: maintenance-jobs.test.ts. Automatic maintenance (thresholds, pacing, after a
// backfill) and its metrics: maintenance-auto.test.ts; vector indexes under a stream of inserts and
// their segments: maintenance-indexes.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as lancedb from "@lancedb/lancedb";
import { ADMIN_KEY, removeDir, startQuiver, READ_KEY, type Quiver } from "./helpers/quiver.js";
import { askedServer, calls, rows } from "./helpers/maintenance.js";
import { settle } from "./helpers/transactions.js";
import { paced, SLOW_TEST_MS } from "./helpers/pace.js";

const { q, post, insert, versions, maintain, count, smallCommits } = askedServer();

describe("maintenance", () => {
  it("compacts small fragments and folds new rows into a scalar and an FTS index; every row stays", async () => {
    const t = await smallCommits(6);
    for (const [op, body] of [["create_scalar_index", { column: "id", index_type: "BTREE" }], ["create_index", { column: "s", index_type: "FTS" }]] as const) {
      const r = await post(t, op, body);
      expect(r.status, r.text).toBe(200);
      expect((await settle(q, r.json.transaction_id, 60_000)).status).toBe("Succeeded");
    }
    for (let i = 6; i < 12; i++) await insert(t, i * 10, 10);
    const before = (await post(t, "stats", {})).json;
    expect(before.fragment_stats.num_fragments).toBe(12);
    const ixs = (await post(t, "index/list", {})).json.indexes as { index_name: string }[];
    expect(ixs).toHaveLength(2);
    for (const ix of ixs) expect((await post(t, `index/${ix.index_name}/stats`, {})).json.num_unindexed_rows).toBeGreaterThan(0);

    const done = await maintain(t, { cleanup: false });
    // Lance compacts the fragments an index covers apart from the ones it does not: two at most.
    expect(done).toMatchObject({ operation: "maintenance", phase: "done", fragments_before: "12", unindexed_rows_after: "0" });
    expect(Number(done.fragments_after)).toBeLessThanOrEqual(2);
    expect(Number(done.unindexed_rows_before)).toBeGreaterThan(0);
    const after = (await post(t, "stats", {})).json;
    expect(after.fragment_stats.num_fragments).toBe(Number(done.fragments_after));
    expect(before.maintenance).toMatchObject({ small_fragments: 12, last_maintenance: null });
    expect(after.maintenance).toMatchObject({ small_fragments: Number(done.fragments_after), unindexed_rows: { id_idx: 0, s_idx: 0 } });
    expect(Date.parse(after.maintenance.last_maintenance)).toBeGreaterThan(Date.parse(done.created_at));
    expect(after.maintenance.versions_kept).toBeGreaterThan(12);
    expect(after.maintenance.bytes_on_disk).toBeGreaterThan(after.total_bytes);
    for (const ix of ixs) expect((await post(t, `index/${ix.index_name}/stats`, {})).json.num_unindexed_rows).toBe(0);
    expect(await count(t)).toBe(120);
    expect(await count(t, { predicate: "id = 115" })).toBe(1);
    const listed = (await q.call("POST", "/v1/jobs/list", {})).json;
    expect(JSON.stringify(listed)).toContain(done.operation);
  }, 240_000);

  it("cleanup: false keeps every version; a cleanup then removes the ones nothing keeps", async () => {
    const t = await smallCommits(5);
    await maintain(t, { cleanup: false });
    const all = await versions(t);
    expect(all.slice(0, 5)).toEqual([1, 2, 3, 4, 5]);
    const done = await maintain(t);
    const left = await versions(t);
    expect(left).toHaveLength(1);
    expect((await post(t, "stats", {})).json.maintenance.versions_kept).toBe(1);
    expect(Number(done.versions_removed)).toBe(all.length - 1);
    expect(await count(t)).toBe(50);
  });

  it("keeps tagged versions and the versions branches start from, and both stay readable", async () => {
    const t = await smallCommits(6);
    expect((await post(t, "tags/create", { tag: "two", version: 2 })).status).toBe(200);
    expect((await post(t, "branches/create", { name: "b4", from_version: 4 })).status).toBeLessThan(300);
    await maintain(t);
    const kept = await versions(t);
    expect(kept).toContain(2);
    expect(kept).toContain(4);
    expect(kept).not.toContain(1);
    expect(await count(t, { version: 2 })).toBe(20);
    expect(await count(t, { branch: "b4" })).toBe(40);
    expect(await count(t)).toBe(60);
  });

  it("maintains a branch on its own: its old versions go, main's stay", async () => {
    const t = await smallCommits(3);
    expect((await post(t, "branches/create", { name: "side" })).status).toBeLessThan(300);
    for (let i = 0; i < 3; i++) {
      const r = await post(t, "insert", rows(100 + i, 1), "?branch=side");
      expect(r.status, r.text).toBe(200);
    }
    const mainBefore = await versions(t);
    await maintain(t, { branch: "side" });
    expect(await versions(t)).toEqual(mainBefore);
    expect(await count(t, { branch: "side" })).toBe(33);
  });

  it("keeps a version read explicitly within the read lease", async () => {
    const t = await smallCommits(4);
    expect(await count(t, { version: 2 })).toBe(20);
    await maintain(t);
    const kept = await versions(t);
    expect(kept).toContain(2);
    expect(kept).not.toContain(1);
    expect(await count(t, { version: 2 })).toBe(20);
  });

  it("loses no write made while maintenance runs", async () => {
    const t = await smallCommits(20);
    let writing = true;
    let written = 200;
    // Paced: an unpaced stream on a loaded machine made each compaction retry against it for minutes.
    const pause = paced(100);
    const writer = (async () => {
      while (writing) {
        await insert(t, written, 1);
        written++;
        await new Promise((r) => setTimeout(r, pause));
      }
    })();
    await maintain(t);
    await maintain(t, { cleanup: false });
    writing = false;
    await writer;
    expect(written).toBeGreaterThan(200);
    expect(await count(t)).toBe(written);
    expect(await count(t, { predicate: `id = ${written - 1}` })).toBe(1);
  }, SLOW_TEST_MS);

  it.each([
    ["cleanup of the wrong type", "m1", { cleanup: "yes" }, 400, /cleanup/],
    ["an unknown branch", "m1", { branch: "nope" }, 404, /nope/],
    ["an unknown table", "nope", {}, 404, /nope/],
  ])("answers %s with the spec's error", async (_name, id, body, status, message) => {
    const r = await post(id, "optimize", body);
    expect(r.status, r.text).toBe(status);
    expect(r.json.error ?? r.text).toMatch(message);
  });

  it("needs the write role", async () => {
    const r = await q.call("POST", "/v1/table/m1/optimize", {}, { "x-api-key": READ_KEY });
    expect(r.status).toBe(403);
  });
});

describe("the retention window", () => {
  let w: Quiver;
  beforeAll(async () => {
    w = await startQuiver({ args: ["--workers", "1", "--auto-maintenance", "off"] });
  });
  afterAll(async () => {
    await w.stop();
    removeDir(w.dataDir);
  });

  it("by default (7 days) keeps every recent version, so time travel still works after maintenance", async () => {
    const c = calls(() => w);
    expect((await c.post("w", "create", rows(0, 10))).status).toBe(200);
    for (let i = 1; i < 5; i++) await c.insert("w", i * 10, 10);
    const done = await c.maintain("w");
    expect(done.versions_removed).toBe("0");
    expect(await c.versions("w")).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect((await c.post("w", "count_rows", { version: 1 })).json).toBe(10);
  });
});

describe("externally managed versions", () => {
  let m: Quiver;
  beforeAll(async () => {
    m = await startQuiver({ args: ["--managed-versioning", "--retain-versions-ms", "0", "--workers", "1", "--auto-maintenance", "off"] });
  });
  afterAll(async () => {
    await m.stop();
    removeDir(m.dataDir);
  });

  it("follow the same rules: a tagged one is kept, the others go, and the writer commits on after maintenance", async () => {
    const db = await lancedb.connectNamespace("rest", { uri: m.url, headers: { "x-api-key": ADMIN_KEY } });
    const t = await db.createTable("ext", [{ id: 1 }]);
    for (let i = 2; i <= 5; i++) await t.add([{ id: i }]);
    expect(await t.version()).toBe(5);
    const c = calls(() => m);
    expect((await c.post("ext", "tags/create", { tag: "three", version: 3 })).status).toBe(200);
    await c.maintain("ext");
    const kept = await c.versions("ext");
    expect(kept).toContain(3);
    expect(kept).not.toContain(2);
    expect((await c.post("ext", "count_rows", { version: 3 })).json).toBe(3);
    await t.add([{ id: 6 }]);
    expect(await (await db.openTable("ext")).countRows()).toBe(6);
    expect((await c.post("ext", "count_rows", {})).json).toBe(6);
  });
});

describe("the versions bound", () => {
  let v: Quiver;
  beforeAll(async () => {
    v = await startQuiver({ args: ["--workers", "1", "--auto-maintenance", "off", "--maintenance-max-versions", "5"] });
  });
  afterAll(async () => {
    await v.stop();
    removeDir(v.dataDir);
  });

  it("keeps the newest --maintenance-max-versions versions inside the retention window, and a tagged one", async () => {
    const c = calls(() => v);
    expect((await c.post("vb", "create", rows(0, 10))).status).toBe(200);
    for (let i = 1; i < 12; i++) await c.insert("vb", i * 10, 10);
    expect((await c.post("vb", "tags/create", { tag: "three", version: 3 })).status).toBe(200);
    const done = await c.maintain("vb");
    expect(done.cleanup).toMatch(/beyond the newest 5/);
    const kept = await c.versions("vb");
    // The tag pins version 3 and, as the cutoff cannot pass it, every later one: the bound then
    // holds once the tag is gone.
    expect(kept).toContain(3);
    expect((await c.post("vb", "tags/delete", { tag: "three" })).status).toBe(200);
    await c.maintain("vb");
    const left = await c.versions("vb");
    expect(left.length).toBeLessThanOrEqual(5);
    expect(left).not.toContain(3);
    expect((await c.post("vb", "count_rows", {})).json).toBe(120);
    expect((await c.post("vb", "count_rows", { version: left[0] })).status).toBe(200);
  }, 120_000);
});
