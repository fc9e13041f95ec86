import * as lancedb from "@lancedb/lancedb";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { fromIPC } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { abRows, openDirect, seedTable } from "./helpers/seed.js";
import { versionOperation } from "../src/engine/versions.js";

const rows = abRows;
const open = (name: string, ns: string[] = [], opts: { branch?: string; version?: number } = {}) => openDirect(q.dataDir, name, ns, opts);

const q = inProcessForFile({
  seed: async (dataDir) => {
    // vt: v1 3 rows, v2 5 rows, v3 6 rows; a branch "b1" forked at v2 with one write (b1 v3).
    await seedTable(dataDir, ["vt"], rows(0, 3));
    const t = await openDirect(dataDir, "vt");
    await t.add(rows(3, 2));
    await t.add(rows(5, 1));
    const b1 = await (await t.branches()).create("b1", undefined, 2);
    await b1.add(rows(100, 4));
    await seedTable(dataDir, ["ns1", "ns2", "nt"], rows(0, 2));
    await (await openDirect(dataDir, "nt", ["ns1", "ns2"])).add(rows(2, 2));
    await seedTable(dataDir, ["rt"], rows(0, 3));
    await (await openDirect(dataDir, "rt")).add(rows(3, 3));
  },
});

const list = (id: string, qs = "", body: unknown = null) => q.call("POST", `/v1/table/${id}/version/list${qs}`, body);
const describeV = (id: string, body: unknown = {}) => q.call("POST", `/v1/table/${id}/version/describe`, body);
/** Rows (a, b) of a table read through the server's query endpoint, sorted by a. */
async function rowsOf(id: string, at: { version?: number; branch?: string } = {}): Promise<[number, string][]> {
  const r = await q.call("POST", `/v1/table/${id}/query`, { k: 1000, columns: ["a", "b"], ...at });
  expect(r.status, r.text).toBe(200);
  const t = fromIPC(r.bytes);
  const out = Array.from({ length: t.numRows }, (_, i) => [Number(t.getChild("a")!.get(i)), t.getChild("b")!.get(i) as string] as [number, string]);
  return out.sort((x, y) => x[0] - y[0]);
}

describe("version list", () => {
  it("lists every version with its manifest file, time and metadata", async () => {
    const r = await list("vt");
    expect(r.status).toBe(200);
    expect(r.json.page_token).toBeNull();
    expect(r.json.versions.map((v: any) => v.version)).toEqual([1, 2, 3]);
    const stamps = (await (await open("vt")).listVersions()).map((v) => v.timestamp.getTime());
    for (const [i, v] of r.json.versions.entries()) {
      expect(v.manifest_path).toMatch(/^_versions\/\d{20}\.manifest$/);
      expect(BigInt(v.manifest_path.slice(10, 30))).toBe(18446744073709551615n - BigInt(v.version));
      const st = statSync(path.join(q.dataDir, "vt.lance", v.manifest_path));
      expect(v.manifest_size).toBe(st.size);
      expect(v.e_tag).toMatch(/^[0-9a-f]+-[0-9a-f]+-[0-9a-f]+$/);
      expect(v.e_tag.endsWith(`-${st.size.toString(16)}`)).toBe(true);
      expect(v.timestamp_millis).toBe(Math.round(stamps[i]));
    }
    expect(r.json.versions.map((v: any) => v.metadata.total_rows)).toEqual(["3", "5", "6"]);
  });

  it("pages with limit and page_token, ascending or descending", async () => {
    const p1 = await list("vt", "?limit=2");
    expect(p1.json.versions.map((v: any) => v.version)).toEqual([1, 2]);
    expect(p1.json.page_token).toBe("2");
    const p2 = await list("vt", `?limit=2&page_token=${p1.json.page_token}`);
    expect(p2.json.versions.map((v: any) => v.version)).toEqual([3]);
    expect(p2.json.page_token).toBeNull();
    const d1 = await list("vt", "?descending=true&limit=2");
    expect(d1.json.versions.map((v: any) => v.version)).toEqual([3, 2]);
    const d2 = await list("vt", `?descending=true&limit=2&page_token=${d1.json.page_token}`);
    expect(d2.json.versions.map((v: any) => v.version)).toEqual([1]);
  });

  it("accepts an empty body as well as JSON null", async () => {
    const r = await q.call("POST", "/v1/table/vt/version/list");
    expect(r.status).toBe(200);
    expect(r.json.versions).toHaveLength(3);
  });

  it("lists a branch's versions from its own manifests", async () => {
    const r = await list("vt", "?branch=b1");
    expect(r.status).toBe(200);
    expect(r.json.versions.map((v: any) => v.version)).toEqual([2, 3]);
    for (const v of r.json.versions) {
      expect(v.manifest_path).toMatch(/^tree\/b1\/_versions\/\d{20}\.manifest$/);
      expect(v.manifest_size).toBe(statSync(path.join(q.dataDir, "vt.lance", v.manifest_path)).size);
    }
    expect(r.json.versions[1].metadata.total_rows).toBe("9");
  });

  it("bad paging parameters are 400 naming them", async () => {
    const a = await list("vt", "?limit=0");
    expect(a.status).toBe(400);
    expect(a.json.detail).toMatch(/^limit: /);
    const b = await list("vt", "?page_token=abc");
    expect(b.status).toBe(400);
    expect(b.json.detail).toMatch(/^page_token: /);
    const c = await list("vt", "?descending=maybe");
    expect(c.status).toBe(400);
    expect(c.json.detail).toMatch(/^descending: /);
  });

  it("works on a table in a nested namespace", async () => {
    const r = await list("ns1$ns2$nt");
    expect(r.status).toBe(200);
    expect(r.json.versions.map((v: any) => v.version)).toEqual([1, 2]);
    expect(r.json.versions[1].manifest_size).toBeGreaterThan(0);
  });

  it("an unknown table, namespace or branch is 404 with its code", async () => {
    const t = await list("nosuch");
    expect(t.status).toBe(404);
    expect(t.json.code).toBe(4);
    const n = await list("nons$nt");
    expect(n.json.code).toBe(1);
    const b = await list("vt", "?branch=nob");
    expect(b.status).toBe(404);
    expect(b.json.code).toBe(22);
    expect(b.json.detail).toContain('"nob"');
  });
});

describe("version describe", () => {
  it("describes a given version exactly as the list does", async () => {
    const all = (await list("vt")).json.versions;
    const r = await describeV("vt", { version: 2 });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: all[1] });
  });

  it("describes the latest version when none is given", async () => {
    const r = await describeV("vt", {});
    expect(r.json.version.version).toBe(3);
    const n = await describeV("ns1$ns2$nt", { version: null });
    expect(n.json.version.version).toBe(2);
  });

  it("honours branch", async () => {
    const r = await describeV("vt", { branch: "b1" });
    expect(r.json.version.version).toBe(3);
    expect(r.json.version.manifest_path).toMatch(/^tree\/b1\//);
    expect(r.json.version.metadata.total_rows).toBe("9");
  });

  it("an unknown version is 404 with code 11 naming it", async () => {
    const r = await describeV("vt", { version: 99 });
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(11);
    expect(r.json.detail).toContain("99");
    expect((await describeV("vt", { version: 1, branch: "b1" })).json.code).toBe(11);
  });

  it("a bad version is 400 naming the field", async () => {
    const r = await describeV("vt", { version: -1 });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^version: /);
  });
});

describe("restore", () => {
  const restore = (id: string, body: unknown) => q.call("POST", `/v1/table/${id}/restore`, body);

  it("commits a new version with the old content; the server's own view follows", async () => {
    // Read through the server first so its cached handle exists before the restore.
    expect((await describeV("rt")).json.version.metadata.total_rows).toBe("6");
    const old = await rowsOf("rt", { version: 1 });
    expect(old).toEqual(rows(0, 3).map((x) => [x.a, x.b]));
    const r = await restore("rt", { version: 1 });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({});
    const t = await open("rt");
    expect(await t.version()).toBe(3);
    expect(await t.countRows()).toBe(3);
    const d = await describeV("rt");
    expect(d.json.version.version).toBe(3);
    expect(d.json.version.metadata.total_rows).toBe("3");
    expect((await list("rt")).json.versions.map((v: any) => v.version)).toEqual([1, 2, 3]);
    // The very rows of version 1, read through the server and by LanceDB itself.
    expect(await rowsOf("rt")).toEqual(old);
    const own = (await t.query().select(["a", "b"]).toArray()).map((x) => [Number(x.a), x.b]).sort((x, y) => x[0] - y[0]);
    expect(own).toEqual(old);
  });

  it("restores on a branch and leaves main untouched", async () => {
    const mainBefore = (await describeV("vt")).json.version;
    const mainRows = await rowsOf("vt");
    const v2 = await rowsOf("vt", { version: 2 });
    const r = await restore("vt", { version: 2, branch: "b1" });
    expect(r.status).toBe(200);
    const b = await open("vt", [], { branch: "b1" });
    expect(await b.version()).toBe(4);
    expect(await b.countRows()).toBe(5);
    expect(await rowsOf("vt", { branch: "b1" })).toEqual(v2);
    expect(await rowsOf("vt")).toEqual(mainRows);
    expect((await describeV("vt")).json.version).toEqual(mainBefore);
    expect(await (await open("vt")).countRows()).toBe(6);
  });

  it("an unknown version is 404 code 11 and changes nothing", async () => {
    const r = await restore("rt", { version: 42 });
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(11);
    expect(await (await open("rt")).version()).toBe(3);
  });

  it("version is required", async () => {
    const r = await restore("rt", {});
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^version: /);
    expect(await (await open("rt")).version()).toBe(3);
  });

  it("works in a nested namespace and 404s for an unknown table", async () => {
    expect((await restore("ns1$ns2$nt", { version: 1 })).status).toBe(200);
    expect(await (await open("nt", ["ns1", "ns2"])).countRows()).toBe(2);
    const r = await restore("ns1$ns2$zz", { version: 1 });
    expect(r.status).toBe(404);
    expect(r.json.code).toBe(4);
  });
});

describe("what made a version", () => {
  it("is read from the version's transaction, with whether the table has stable row ids", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "quiver-txn-"));
    try {
      const made = async (t: lancedb.Table, from: number) => {
        const out: string[] = [];
        for (let v = from + 1; v <= (await t.version()); v++) out.push((await versionOperation(path.join(dir, `${t.name}.lance`), v))!.operation);
        return out;
      };
      const db = await lancedb.connect(dir);
      const stable = await db.createTable("s", rows(0, 3), { storageOptions: { new_table_enable_stable_row_ids: "true" } });
      expect(await versionOperation(path.join(dir, "s.lance"), 1)).toEqual({ operation: "overwrite", stableRowIds: true });
      await stable.add(rows(3, 2));
      await stable.add(rows(5, 2));
      let v = await stable.version();
      await stable.optimize();
      expect(await made(stable, v)).toContain("rewrite");
      v = await stable.version();
      await stable.createIndex("a", { config: lancedb.Index.btree() });
      await stable.delete("a = 1");
      expect(await made(stable, v)).toEqual(["create_index", "delete"]);
      v = await stable.version();
      await stable.checkout(2);
      await stable.restore();
      expect(await made(stable, v)).toEqual(["restore"]);
      // The serving index builds again after the column changes; an update is compared row by row.
      v = await stable.version();
      await stable.update({ where: "a = 2", valuesSql: { a: "20" } });
      await stable.addColumns([{ name: "twice", valueSql: "a * 2" }]);
      await stable.dropColumns(["twice"]);
      expect(await made(stable, v)).toEqual(["update", "merge", "project"]);
      const addr = await db.createTable("a", rows(0, 3));
      await addr.add(rows(3, 1));
      expect(await versionOperation(path.join(dir, "a.lance"), 2)).toEqual({ operation: "append", stableRowIds: false });
      expect(await versionOperation(path.join(dir, "a.lance"), 99)).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
