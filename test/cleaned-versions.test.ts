// Versions whose files a cleanup removed. Lance's cleanup removes the files only old versions read
// before it removes their manifests, so a cleanup stopped in between (a maintenance job that failed
// in its cleanup, issue 52) or still running leaves versions listed that cannot be read. The
// differential test's long run (seed 2028, docs/design.md) died on such a table: a restore to a
// version a running cleanup was removing made a latest version nothing could read.
import * as lancedb from "@lancedb/lancedb";
import { readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { fromIPC } from "./helpers/arrow.js";
import { abRows, openDirect, seedTable } from "./helpers/seed.js";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

/** Versions of ct from the compaction on: their files are all there (those before read 1–3's). */
let kept: number[] = [];
const q = serverForFile({
  args: ["--auto-maintenance", "off", "--maintenance-max-versions", "2"],
  seed: async (dir) => {
    // ct: versions 1–3 of one fragment each, then a compaction into one new fragment; the files of
    // 1–3 removed as a cleanup stopped between its data files and its manifests leaves them. The
    // versions after read a deletion file and an index too.
    await seedTable(dir, ["ct"], abRows(0, 2));
    const ct = await openDirect(dir, "ct");
    await ct.add(abRows(2, 2));
    await ct.add(abRows(4, 2));
    const data = path.join(dir, "ct.lance", "data");
    const old = readdirSync(data);
    await ct.optimize({ cleanupOlderThan: new Date(0) });
    const compacted = await ct.version();
    for (const f of old) rmSync(path.join(data, f));
    await ct.delete("a = 0");
    await ct.createIndex("a", { config: lancedb.Index.btree() });
    kept = (await ct.listVersions()).map((v) => v.version).filter((v) => v >= compacted);
    // mt: many small fragments, so that a maintenance job (its compaction and cleanup) takes a while.
    await seedTable(dir, ["mt"], abRows(0, 50));
    const mt = await openDirect(dir, "mt");
    for (let i = 1; i < 40; i++) await mt.add(abRows(i * 50, 50));
  },
});

const post = (id: string, op: string, body: unknown = {}) => q.call("POST", `/v1/table/${id}/${op}`, body);
const rowCount = async (id: string, at: Record<string, unknown> = {}) => {
  const r = await post(id, "query", { k: 100_000, columns: ["a"], ...at });
  expect(r.status, r.text).toBe(200);
  return fromIPC(r.bytes).numRows;
};

it("lists only the versions that can still be read", async () => {
  const r = await post("ct", "version/list");
  expect(r.status, r.text).toBe(200);
  expect((r.json.versions as { version: number }[]).map((v) => v.version)).toEqual(kept);
  expect(kept.length).toBeGreaterThanOrEqual(3);
  expect((await post("ct", "version/describe", { version: 2 })).status).toBe(404);
});

it("answers a read at such a version with 404 naming it, not a 500", async () => {
  for (const [op, body] of [["query", { k: 10, version: 2 }], ["count_rows", { version: 2 }]] as const) {
    const r = await post("ct", op, body);
    expect(r.status, `${op}: ${r.text}`).toBe(404);
    expect(r.json.error).toMatch(/^version 2 not found in table "ct": a cleanup removed its files \(data\/.+\.lance\)$/);
  }
  expect(await rowCount("ct")).toBe(5);
});

it("refuses to restore such a version, so the latest stays readable", async () => {
  const before = (await post("ct", "describe")).json.version as number;
  const r = await post("ct", "restore", { version: 2 });
  expect(r.status, r.text).toBe(404);
  expect(r.json.error).toMatch(/^version 2 not found in table "ct"/);
  expect((await post("ct", "describe")).json.version).toBe(before);
  expect(await rowCount("ct")).toBe(5);
});

it("refuses to restore a version a running maintenance job's cleanup may remove, until the job ends", async () => {
  const job = await post("mt", "optimize", {});
  expect(job.status, job.text).toBe(202);
  // Version 1 is past the newest 2 (--maintenance-max-versions): the job's cleanup removes it.
  const r = await post("mt", "restore", { version: 1 });
  expect(r.status, r.text).toBe(409);
  expect(r.json.error).toContain(`is being maintained (job ${job.json.job_id}), whose cleanup may remove version 1`);
  const done = await settle(q, job.json.job_id, 120_000);
  expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
  expect(await rowCount("mt")).toBe(2000);
  // Once it has ended, version 1 is restored (the refused restore's read lease kept it from a
  // cleanup that started after it) or not found (the cleanup started before and removed it); the
  // table reads either way.
  const again = await post("mt", "restore", { version: 1 });
  expect([200, 404], again.text).toContain(again.status);
  expect(await rowCount("mt")).toBe(again.status === 200 ? 50 : 2000);
}, 180_000);
