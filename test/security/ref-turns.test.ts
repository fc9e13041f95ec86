// Branches cost more than tags: a branch create lists every branch of its table (12 ms at 100
// branches, 94 ms at 1,000 measured here), so a table holds at most 100 by default
// (--max-branches-per-table), and branch creates take turns per table, not per server: another
// tenant's create waited 1.3 s behind five creates on a table of 1,000 branches.
import { expect, it } from "vitest";
import { serverForFile } from "../helpers/quiver.js";

const q = serverForFile();
const post = (p: string, body: unknown) => q.call("POST", p, body);
const create = async (table: string, name: string) => {
  const r = await post(`/v1/table/${table}/branches/create`, { name });
  expect(r.status, r.text).toBe(200);
};

it("a branch create on another table does not wait for the creates queued on a busy one; the default bound is 100 branches", async () => {
  for (const table of ["busy", "other"]) {
    const r = await q.call("POST", `/v1/table/${table}/create`, JSON.stringify([{ id: 1 }]), { "content-type": "application/json" });
    expect(r.status, r.text).toBe(200);
  }
  await create("other", "warm");
  for (let i = 0; i < 70; i++) await create("busy", `b${i}`);

  // 30 creates on the busy table at once; once 3 have answered the rest are queued, and then
  // one create on the other table is sent.
  const done: string[] = [];
  const queued = Array.from({ length: 30 }, (_, i) => create("busy", `r${i}`).then(() => done.push("busy")));
  while (done.length < 3) await new Promise((r) => setTimeout(r, 5));
  await create("other", "quick");
  done.push("other");
  await Promise.all(queued);
  // With one queue for the server it answered after every busy create; now most answer after it.
  expect(done.length - 1 - done.indexOf("other")).toBeGreaterThanOrEqual(5);

  // 100 branches now: the next is refused by the default bound, and nothing is made.
  const over = await post("/v1/table/busy/branches/create", { name: "past" });
  expect(over.status, over.text).toBe(403);
  expect(over.json.detail).toMatch(/^table "busy" already holds 100 branches \(max-branches-per-table\)/);
  expect(Object.keys((await post("/v1/table/busy/branches/list", {})).json.branches)).toHaveLength(100);
}, 180_000);
