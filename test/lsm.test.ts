// LanceDB's LSM write path through LanceDB's own remote client pointed at Quiver. LanceDB 0.39's
// local tables take a write spec and merge_insert rows into the MemWAL, but cannot flush, compact,
// checkpoint or report on it, so the rows never show: Quiver installs no spec (406, saying why),
// refuses merge_insert on a table that has one, reads and removes a spec, and answers the engine's
// 406 for the rest. Every call is made through the remote client.
import * as lancedb from "@lancedb/lancedb";
import { beforeAll, describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";

// Writes by another process are seen at once.
const q = serverForFile({ args: ["--consistency-interval-ms", "0"] });
let remote: lancedb.Connection;
const post = (id: string, op: string, body?: unknown) => q.call("POST", `/v1/table/${id}/${op}`, body);
const rows = (ids: number[], v: string) =>
  new arrow.Table({ id: arrow.vectorFromArray(ids.map(BigInt), new arrow.Int64()), v: arrow.vectorFromArray(ids.map(() => v), new arrow.Utf8()) });

/** A table whose `id` is its unenforced primary key (what a write spec needs). */
async function keyed(name: string, ids: number[]) {
  const schema = { fields: [{ name: "id", type: { type: "int64" }, nullable: false }, { name: "v", type: { type: "utf8" }, nullable: true }] };
  expect((await post(name, "create", { schema, rows: ids.map((id) => ({ id, v: "base" })) })).status).toBe(200);
  const pk = await post(name, "update_field_metadata", { updates: [{ path: "id", metadata: { "lance-schema:unenforced-primary-key": "true" } }] });
  expect(pk.status, pk.text).toBe(200);
}
const upsert = (t: lancedb.Table, ids: number[], v: string) => t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows(ids, v));

beforeAll(async () => {
  remote = await lancedb.connect("db://quiver", { apiKey: ADMIN_KEY, hostOverride: q.url, clientConfig: { retryConfig: { retries: 0 } } });
});

describe("LanceDB's LSM write path through its remote client", () => {
  it("setLsmWriteSpec is a 406 saying why, and installs nothing; merge_insert goes on as before", async () => {
    await keyed("lsm1", [1, 2, 3]);
    const t = await remote.openTable("lsm1");
    await expect(t.setLsmWriteSpec({ specType: "bucket", column: "id", numBuckets: 1 })).rejects.toThrow(/406.*cannot flush, compact or checkpoint its MemWAL/);
    expect(await t.getLsmWriteSpec()).toBeUndefined();
    await upsert(t, [3, 4], "new");
    expect(await t.countRows()).toBe(4);
    expect(await t.countRows("v = 'new'")).toBe(2);
  });

  it("a spec another client installed: read back, merge_insert refused, flush/compact/checkpoint/stats the engine's 406, unset restores merges", async () => {
    await keyed("lsm2", [1, 2]);
    const local = await (await lancedb.connect(q.dataDir)).openTable("lsm2");
    await local.setLsmWriteSpec({ specType: "unsharded" });
    const t = await remote.openTable("lsm2");
    expect(await t.getLsmWriteSpec()).toMatchObject({ specType: "unsharded" });
    await expect(upsert(t, [2, 3], "lost?")).rejects.toThrow(/406.*unset_lsm_write_spec/);
    await expect(t.flushLsm()).rejects.toThrow(/406.*flush_lsm is not supported/);
    await expect(t.compactLsm()).rejects.toThrow(/406.*compact_lsm is not supported/);
    await expect(t.checkpointLsm()).rejects.toThrow(/406/);
    await expect(t.getLsmStats()).rejects.toThrow(/406.*get_lsm_stats is not supported/);
    await t.unsetLsmWriteSpec();
    expect(await t.getLsmWriteSpec()).toBeUndefined();
    await upsert(t, [2, 3], "merged");
    expect(await t.countRows()).toBe(3);
    expect(await t.countRows("v = 'merged'")).toBe(2);
  });

  it("a malformed spec is a 400 naming the field", async () => {
    await keyed("lsm3", [1]);
    const bucket = await post("lsm3", "set_lsm_write_spec", { sharding: { mode: "bucket", column: "id" } });
    expect(bucket.status).toBe(400);
    expect(bucket.json.detail).toBe("sharding.num_buckets: is required for mode bucket");
    const mode = await post("lsm3", "set_lsm_write_spec", { sharding: { mode: "ring" } });
    expect(mode.status).toBe(400);
    expect(mode.json.detail).toMatch(/sharding\/mode|sharding.mode/);
  });
});
