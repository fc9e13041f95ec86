// Branch, tag and manifest names a client sends become paths in a table's directory
// (`tree/<branch>/_versions/…`, `_refs/tags/<tag>.json`, a staged manifest). A write key limited to
// ns1 once deleted the catalog with `version/delete {"branch":"../../__manifest"}`, deleted ns2's
// versions through `../../<ns2's directory>`, and had batch-commit republish a version it had just
// set aside (`…manifest-deleted`). Every spelling here is 400 naming the field, the catalog and
// ns2's versions survive (also a restart), and no directory is left behind.
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, serverForFile } from "../helpers/quiver.js";

const W1 = "k-w1";
const W2 = "k-w2";
const R1 = "k-r1";
const A1 = "k-a1";
const q = serverForFile({ env: { QUIVER_API_KEYS: `${ADMIN_KEY}:admin,${W1}:write:ns1,${W2}:write:ns2,${R1}:read:ns1,${A1}:admin:ns1` } });

const post = (p: string, body: unknown, key = W1) => q.call("POST", p, body, { "x-api-key": key });
const rows = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ id: from + i, s: `v${from + i}` }));
const jsonRows = (p: string, r: object[], key: string) => q.call("POST", p, JSON.stringify(r), { "x-api-key": key, "content-type": "application/json" });
const versionsOf = async (id: string) => (await post(`/v1/table/${id}/version/list`, {}, ADMIN_KEY)).json.versions.map((v: { version: number }) => v.version);
/** Lance's default (V2) manifest name of `version`. */
const manifestName = (version: number) => `${(18446744073709551615n - BigInt(version)).toString().padStart(20, "0")}.manifest`;

/** Every directory under `dir`, relative. */
function dirsUnder(dir: string, rel = ""): string[] {
  return readdirSync(path.join(dir, rel)).flatMap((n) => {
    const r = path.join(rel, n);
    return statSync(path.join(dir, r)).isDirectory() ? [r, ...dirsUnder(dir, r)] : [];
  });
}

let ns1Dir: string;
let ns2Dir: string;
/** What must survive: every table, ns2's versions and rows. */
const state = async () => ({
  tables: (await q.call("GET", "/v1/table", undefined, { "x-api-key": ADMIN_KEY })).json,
  ns2Versions: await versionsOf("ns2$secret"),
  ns2Rows: (await post("/v1/table/ns2$secret/count_rows", {}, W2)).json,
  ns1Versions: await versionsOf("ns1$t"),
});
let before: Awaited<ReturnType<typeof state>>;

beforeAll(async () => {
  for (const ns of ["ns1", "ns2"]) expect((await post(`/v1/namespace/${ns}/create`, {}, ADMIN_KEY)).status).toBe(200);
  expect((await jsonRows("/v1/table/ns1$t/create", rows(0, 3), W1)).status).toBe(200);
  for (const n of [3, 4, 5]) expect((await jsonRows("/v1/table/ns1$t/insert", rows(n, 1), W1)).status).toBe(200);
  expect((await jsonRows("/v1/table/ns2$secret/create", rows(100, 5), W2)).status).toBe(200);
  expect((await jsonRows("/v1/table/ns2$secret/insert", rows(105, 1), W2)).status).toBe(200);
  ns1Dir = (await post("/v1/table/ns1$t/describe", {}, ADMIN_KEY)).json.location;
  ns2Dir = (await post("/v1/table/ns2$secret/describe", {}, ADMIN_KEY)).json.location;
  before = await state();
  expect(before.ns2Versions).toEqual([1, 2]);
}, 60_000);

const expect400 = (r: { status: number; text: string; json: any }, field: RegExp) => {
  expect(r.status, r.text).toBe(400);
  expect(r.json.detail).toMatch(field);
};

describe("branch names that leave the table's tree/ directory", () => {
  const ns2Name = () => path.basename(ns2Dir);

  it("version/delete of ../../__manifest (the catalog) and of ../../<ns2's table> is 400; the catalog and ns2 survive a restart", async () => {
    const all = [{ start_version: 0, end_version: -1 }];
    for (const branch of ["../../__manifest", `../../${ns2Name()}`, "../..", "..", "a/../../..", "a/b/../../../.."]) {
      expect400(await post("/v1/table/ns1$t/version/delete", { branch, ranges: all }), /^branch: /);
    }
    expect(await state()).toEqual(before);
    await q.restart();
    expect(await state()).toEqual(before);
  }, 60_000);

  it("batch-commit with a traversing branch in any operation is 400 and changes nothing", async () => {
    const ns2Deleted = path.join(ns2Dir, "_versions", `${manifestName(1)}-deleted`).slice(1);
    const branch = `../../${ns2Name()}`;
    const attempts = [
      [{ delete_table_versions: { id: ["ns1", "t"], branch, ranges: [{ start_version: 1, end_version: 2 }] } }],
      [
        { delete_table_versions: { id: ["ns1", "t"], branch, ranges: [{ start_version: 1, end_version: 2 }] } },
        { create_table_version: { id: ["ns1", "t"], branch, version: 3, manifest_path: ns2Deleted } },
      ],
      [{ create_table_version: { id: ["ns1", "t"], branch: "..", version: 5, manifest_path: "x.manifest-1" } }],
    ];
    for (const operations of attempts) expect400(await post("/v1/table/batch-commit", { operations }), /^operations\[\d\]\.\w+\.branch: /);
    expect400(await post("/v1/table/ns1$t/version/create", { branch, version: 3, manifest_path: ns2Deleted }), /^branch: /);
    expect(await state()).toEqual(before);
  });

  it("branches/create with a dot segment is 400 and leaves no directory anywhere", async () => {
    const dirs = dirsUnder(q.dataDir).sort();
    for (const name of ["a/..", ".", "a/.", "../x", "a/../../b", "..", "./a", "a/./b", "", "/abs", "a//b", "a\\b", "a\u0000b", "a/"]) {
      const r = await post("/v1/table/ns1$t/branches/create", { name });
      expect(r.status, `${JSON.stringify(name)}: ${r.text}`).toBe(400);
      expect(r.json.detail).toMatch(/^name: /);
    }
    for (const from_branch of ["..", ".", "../../__manifest"]) {
      expect400(await post("/v1/table/ns1$t/branches/create", { name: "ok", from_branch }), /^from_branch: /);
    }
    expect400(await post("/v1/table/ns1$t/branches/delete", { name: "../../__manifest" }), /^name: /);
    expect(dirsUnder(q.dataDir).sort()).toEqual(dirs);
    expect(await state()).toEqual(before);
  });

  it("a branch of `.`, `..` or other unsafe spellings is 400 naming `branch` on every route taking one", async () => {
    const reads: [string, object][] = [
      ["query", { k: 1 }],
      ["count_rows", {}],
      ["describe", {}],
      ["stats", {}],
      ["index/list", {}],
      ["version/describe", { version: 1 }],
      ["explain_plan", { query: { k: 1 } }],
    ];
    const writes: [string, object][] = [
      ["tags/create", { tag: "x", version: 1 }],
      ["tags/update", { tag: "x", version: 1 }],
      ["optimize", {}],
      ["restore", { version: 1 }],
      ["delete", { predicate: "id < 0" }],
      ["update", { updates: [["s", "'x'"]] }],
      ["create_scalar_index", { column: "id", index_type: "BTREE" }],
      ["add_columns", { new_columns: [{ name: "z", expression: "id" }] }],
      ["drop_columns", { columns: ["s"] }],
      ["version/create", { version: 9, manifest_path: "x.manifest-1" }],
      ["version/delete", { ranges: [{ start_version: 0, end_version: -1 }] }],
    ];
    for (const branch of [".", "..", "a/.", "./a", "", "/tmp", "a//b", "a\\b", "a\u0000b", `../../${path.basename(ns2Dir)}`]) {
      for (const [route, body] of reads) expect400(await post(`/v1/table/ns1$t/${route}`, { ...body, branch }, R1), /branch: /);
      for (const [route, body] of writes) expect400(await post(`/v1/table/ns1$t/${route}`, { ...body, branch }), /branch: /);
      // An empty query parameter is no parameter (the main branch).
      if (branch === "") continue;
      const enc = encodeURIComponent(branch);
      expect400(await q.call("POST", `/v1/table/ns1$t/version/list?branch=${enc}`, {}, { "x-api-key": R1 }), /^branch: /);
      expect400(await jsonRows(`/v1/table/ns1$t/insert?branch=${enc}`, rows(50, 1), W1), /^branch: /);
    }
    expect(dirsUnder(ns1Dir).filter((d) => d.startsWith("tree"))).toEqual([]);
    expect(await state()).toEqual(before);
  });

  it("legal hierarchical branch names still work", async () => {
    for (const name of ["feature/login", "release/v1.2.3", "with.dot", "u_1-2"]) {
      const r = await post("/v1/table/ns1$t/branches/create", { name });
      expect(r.status, `${name}: ${r.text}`).toBe(200);
      expect((await post("/v1/table/ns1$t/count_rows", { branch: name }, R1)).json).toBe(6);
    }
    expect((await post("/v1/table/ns1$t/branches/delete", { name: "feature/login" })).status).toBe(200);
  });
});

describe("branch names that are a path inside another branch", () => {
  // Branch `x` lives in `tree/x/`, so `x/data` named x's data directory and `x/_versions` its
  // versions: deleting either removed them, and x, still listed, answered 500 on every query.
  it("creating or deleting a branch with a segment Lance uses in a branch's directory is 400 naming `name`; branch x keeps its rows", async () => {
    expect((await post("/v1/table/ns1$t/branches/create", { name: "x" })).status).toBe(200);
    const xDirs = dirsUnder(path.join(ns1Dir, "tree", "x")).sort();
    const names = ["x/data", "x/_versions", "x/_indices", "x/_deletions", "x/_transactions", "x/_refs", "x/tree", "x/data/y", "data", "_versions", "y/_anything"];
    for (const name of names) {
      expect400(await post("/v1/table/ns1$t/branches/delete", { name }), /^name: /);
      expect400(await post("/v1/table/ns1$t/branches/create", { name }), /^name: /);
      expect400(await post("/v1/table/ns1$t/count_rows", { branch: name }, R1), /^branch: /);
    }
    expect(dirsUnder(path.join(ns1Dir, "tree", "x")).sort()).toEqual(xDirs);
    expect(Object.keys((await post("/v1/table/ns1$t/branches/list", {}, R1)).json.branches)).toContain("x");
    const n = await post("/v1/table/ns1$t/count_rows", { branch: "x" }, R1);
    expect(n.status, n.text).toBe(200);
    expect(n.json).toBe(6);
    expect((await post("/v1/table/ns1$t/query", { branch: "x", k: 10 }, R1)).status).toBe(200);
    expect((await post("/v1/table/ns1$t/branches/delete", { name: "x" })).status).toBe(200);
  });
});

describe("tag names", () => {
  it("a tag that is a path (../, /, a dot at either end) is 400 on every tag route", async () => {
    for (const tag of ["../../__manifest", "..", ".", "a/b", "/x", ".x", "x.", "a..b", ""]) {
      expect400(await post("/v1/table/ns1$t/tags/create", { tag, version: 1 }), /^tag: /);
      expect400(await post("/v1/table/ns1$t/tags/update", { tag, version: 1 }), /^tag: /);
      expect400(await post("/v1/table/ns1$t/tags/delete", { tag }), /^tag: /);
      expect400(await post("/v1/table/ns1$t/tags/version", { tag }, R1), /^tag: /);
    }
    expect((await post("/v1/table/ns1$t/tags/create", { tag: "v1.0-rc_1", version: 1 })).status).toBe(200);
    expect((await post("/v1/table/ns1$t/tags/version", { tag: "v1.0-rc_1" }, R1)).json.version).toBe(1);
  });
});

describe("staged manifests", () => {
  it("a batch that sets a version aside and names its `-deleted` file as a staged manifest is 400; the version stays", async () => {
    expect((await jsonRows("/v1/table/ns1$m/create", rows(0, 2), W1)).status).toBe(200);
    expect((await jsonRows("/v1/table/ns1$m/insert", rows(2, 1), W1)).status).toBe(200);
    const dir = (await post("/v1/table/ns1$m/describe", {}, ADMIN_KEY)).json.location;
    const operations = [
      { delete_table_versions: { id: ["ns1", "m"], ranges: [{ start_version: 1, end_version: 2 }] } },
      { create_table_version: { id: ["ns1", "m"], version: 3, manifest_path: path.join(dir, "_versions", `${manifestName(1)}-deleted`).slice(1) } },
    ];
    expect400(await post("/v1/table/batch-commit", { operations }), /^operations\[1\]: manifest_path: /);
    expect(await versionsOf("ns1$m")).toEqual([1, 2]);
    expect((await post("/v1/table/ns1$m/count_rows", {}, R1)).json).toBe(3);
    expect(readdirSync(path.join(dir, "_versions")).filter((n) => n.includes("deleted"))).toEqual([]);
  });
});

describe("registered locations", () => {
  it("the catalog's own directory, or one inside it, cannot be registered as a table, whatever the key", async () => {
    const was = await state();
    for (const key of [A1, ADMIN_KEY]) {
      for (const location of ["__manifest", "./__manifest", `${q.dataDir}/__manifest`, "__manifest/data", "__manifest.lance"]) {
        const r = await post("/v1/table/ns1$cat/register", { location }, key);
        expect([400, 403], `${location}: ${r.text}`).toContain(r.status);
        expect(r.json.detail).toMatch(/^location\b/);
      }
    }
    expect((await post("/v1/table/ns1$cat/exists", {}, ADMIN_KEY)).status).toBe(404);
    expect(await state()).toEqual(was);
  });
});
