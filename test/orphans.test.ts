// Orphan table directories (a crash between writing a table's data and its catalog row) are
// reclaimed on start and by POST /v1/admin/reclaim: only unreferenced table-like directories older
// than --orphan-min-age-ms, each logged and counted; never a referenced, deregistered-with-data or
// young one, not even while LanceDB's own directory namespace writes tables beside Quiver.
import { existsSync, mkdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { expect, it } from "vitest";
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { toStream } from "./helpers/arrow.js";
import { logLine, serverForFile, WRITE_KEY } from "./helpers/quiver.js";

const q = serverForFile({ args: ["--orphan-min-age-ms", "1000"] });

/** A directory shaped like a table's, last changed two hours ago. */
function plantOld(name: string, parts = ["_versions", "data"]): string {
  const dir = path.join(q.dataDir, name);
  mkdirSync(dir);
  const old = new Date(Date.now() - 2 * 3600_000);
  for (const p of parts) {
    mkdirSync(path.join(dir, p));
    utimesSync(path.join(dir, p), old, old);
  }
  utimesSync(dir, old, old);
  return dir;
}
const age = (dir: string) => {
  const old = new Date(Date.now() - 2 * 3600_000);
  utimesSync(dir, old, old);
};
const rows = (ids: number[]) => toStream(new Table({ a: vectorFromArray(ids, new Int32()) }));
const reclaim = () => q.call("POST", "/v1/admin/reclaim");

it("on start, an old orphan is removed and logged; referenced, deregistered and non-table directories stay", async () => {
  expect((await q.call("POST", "/v1/namespace/o/create", {})).status).toBe(200);
  for (const t of ["kept", "gone"]) expect((await q.call("POST", `/v1/table/o$${t}/create`, rows([1]))).status).toBe(200);
  const gone = (await q.call("POST", "/v1/table/o$gone/describe", {})).json.location as string;
  expect((await q.call("POST", "/v1/table/o$gone/deregister", {})).status).toBe(200);
  const kept = (await q.call("POST", "/v1/table/o$kept/describe", {})).json.location as string;
  const orphan = plantOld("1a2b3c4d_o$crashed");
  const notes = path.join(q.dataDir, "notes");
  mkdirSync(notes);
  writeFileSync(path.join(notes, "readme.txt"), "mine");
  for (const d of [notes, kept, gone]) age(d);

  await q.restart();
  await logLine(q, (l) => l.includes("reclaimed orphan table directory") && l.includes("1a2b3c4d_o$crashed"));
  expect(existsSync(orphan)).toBe(false);
  expect(existsSync(kept)).toBe(true);
  expect(existsSync(notes)).toBe(true);
  expect(existsSync(gone)).toBe(true);
  expect((await q.call("POST", "/v1/table/o$kept/count_rows", {})).json).toBe(1);
  expect((await reclaim()).json.removed).toEqual([]);
});

it("POST /v1/admin/reclaim removes and counts old orphans, reports young ones, and needs the admin role", async () => {
  plantOld("feedbeef_x");
  plantOld("cafef00d_y", [".svc-reserved"]);
  mkdirSync(path.join(q.dataDir, "fresh_z"));
  expect((await q.call("POST", "/v1/admin/reclaim", undefined, { "x-api-key": WRITE_KEY })).status).toBe(403);
  const r = await reclaim();
  expect(r.status).toBe(200);
  expect(r.json.removed.sort()).toEqual(["cafef00d_y", "feedbeef_x"]);
  expect(r.json.removed_count).toBe(2);
  expect(r.json.too_young).toContain("fresh_z");
  expect(existsSync(path.join(q.dataDir, "fresh_z"))).toBe(true);
  rmSync(path.join(q.dataDir, "fresh_z"), { recursive: true });
});

it("while LanceDB's directory namespace creates 12 nested tables, reclaiming every 50 ms removes none of them", async () => {
  const db = await lancedb.connectNamespace("dir", { root: q.dataDir });
  await db.createNamespace(["busy"]);
  let writing = true;
  const removed: string[] = [];
  const reclaimer = (async () => {
    while (writing) {
      const r = await reclaim();
      expect(r.status).toBe(200);
      removed.push(...r.json.removed);
      await new Promise((res) => setTimeout(res, 50));
    }
  })();
  for (let i = 0; i < 12; i++) {
    const t = await db.createTable(`t${i}`, [{ a: i }], ["busy"]);
    await t.add([{ a: i + 100 }]);
  }
  // Wait past the safety age so the last tables' directories are old enough to be candidates.
  await new Promise((res) => setTimeout(res, 1200));
  writing = false;
  await reclaimer;
  await reclaim();
  expect(removed).toEqual([]);
  for (let i = 0; i < 12; i++) {
    expect(await (await db.openTable(`t${i}`, ["busy"])).countRows()).toBe(2);
    expect((await q.call("POST", `/v1/table/busy$t${i}/count_rows`, {})).json).toBe(2);
  }
}, 60_000);
