// Tag and branch names become path components in a table's directory, and a component has at most
// 255 bytes, where Lance writes each UTF-8 byte of a non-ASCII letter as "%25XX". Names were bounded
// in characters (200), so 100 Hangul letters (1,500 bytes on disk) made ENAMETOOLONG: a 500, with
// the table's absolute path in the log. A ref name is now bounded in bytes on disk (200) on every
// route, a 400 naming the field; object names, which never become paths (a table's directory is
// derived), keep their bound in characters.
import { expect, it } from "vitest";
import { serverForFile } from "../helpers/quiver.js";

const q = serverForFile();
const post = (p: string, body: unknown) => q.call("POST", p, body);
const jsonRows = (p: string, rows: object[]) => q.call("POST", p, JSON.stringify(rows), { "content-type": "application/json" });

const HANGUL_100 = "한".repeat(100); // 300 bytes of UTF-8, 1,500 on disk
const HANGUL_14 = "한".repeat(14); // 210 bytes on disk
const ACCENT_192 = `${"é".repeat(19)}ab`; // 192 bytes on disk
const TWO_SEGMENTS = `${"é".repeat(10)}/${"é".repeat(11)}`; // 211 bytes on disk in all

const expect400 = (r: { status: number; text: string; json: any }, field: RegExp, why: RegExp) => {
  expect(r.status, r.text).toBe(400);
  expect(r.json.detail).toMatch(field);
  expect(r.json.detail).toMatch(why);
  expect(r.text).not.toContain(q.dataDir);
};

it("a branch of multibyte letters past 200 bytes on disk is 400 naming the field on create, delete and reads; nothing is made", async () => {
  expect((await jsonRows("/v1/table/t/create", [{ id: 1 }])).status).toBe(200);
  for (const name of [HANGUL_100, HANGUL_14, "é".repeat(21), TWO_SEGMENTS]) {
    expect400(await post("/v1/table/t/branches/create", { name }), /^name: /, /bytes on disk/);
    expect400(await post("/v1/table/t/branches/delete", { name }), /^name: /, /bytes on disk/);
    expect400(await post("/v1/table/t/count_rows", { branch: name }), /^branch: /, /bytes on disk/);
    expect400(await post("/v1/table/t/branches/create", { name: "ok", from_branch: name }), /^from_branch: /, /bytes on disk/);
  }
  expect((await post("/v1/table/t/branches/list", {})).json.branches).toEqual({});
});

it("a tag with a letter outside ASCII is 400 naming the field on every tag route (Lance could not list the table's tags after one); tags/list still answers", async () => {
  for (const tag of [HANGUL_100, "é", `v1-${"é".repeat(3)}`]) {
    expect400(await post("/v1/table/t/tags/create", { tag, version: 1 }), /^tag: /, /ASCII/);
    expect400(await post("/v1/table/t/tags/update", { tag, version: 1 }), /^tag: /, /ASCII/);
    expect400(await post("/v1/table/t/tags/delete", { tag }), /^tag: /, /ASCII/);
    expect400(await post("/v1/table/t/tags/version", { tag }), /^tag: /, /ASCII/);
  }
  const list = await post("/v1/table/t/tags/list", {});
  expect(list.status, list.text).toBe(200);
  expect(list.json.tags).toEqual({});
});

it("a branch of up to 200 bytes on disk and a tag of 200 ASCII characters work; the table's tags and branches list and delete", async () => {
  const tag = "v".repeat(200);
  expect((await post("/v1/table/t/tags/create", { tag, version: 1 })).status).toBe(200);
  expect((await post("/v1/table/t/tags/version", { tag })).json.version).toBe(1);
  const b = await post("/v1/table/t/branches/create", { name: ACCENT_192 });
  expect(b.status, b.text).toBe(200);
  expect((await post("/v1/table/t/count_rows", { branch: ACCENT_192 })).json).toBe(1);
  expect(Object.keys((await post("/v1/table/t/tags/list", {})).json.tags)).toEqual([tag]);
  expect(Object.keys((await post("/v1/table/t/branches/list", {})).json.branches)).toEqual([ACCENT_192]);
  const d = await post("/v1/table/t/branches/delete", { name: ACCENT_192 });
  expect(d.status, d.text).toBe(200);
});

it("namespace and table names of 100 multibyte letters (300 bytes) are no path: created, counted and dropped", async () => {
  const ns = "한".repeat(100);
  expect((await post(`/v1/namespace/${encodeURIComponent(ns)}/create`, {})).status).toBe(200);
  const id = `${ns}$${"한".repeat(100)}`;
  const c = await jsonRows(`/v1/table/${encodeURIComponent(id)}/create`, [{ id: 1 }]);
  expect(c.status, c.text).toBe(200);
  expect((await post(`/v1/table/${encodeURIComponent(id)}/count_rows`, {})).json).toBe(1);
  expect((await post(`/v1/table/${encodeURIComponent(id)}/drop`, {})).status).toBe(200);
});
