// Externally managed versions: LanceDB's REST namespace client in managed-versioning mode commits
// each version through Quiver (version/create); version/delete, table/version/batch-create and
// table/batch-commit with upstream's shapes, all or nothing.
import { existsSync, readdirSync, renameSync, copyFileSync } from "node:fs";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { racingWritersLoseNothing } from "./helpers/managed-versions.js";
import { sample } from "./helpers/metrics.js";
import { ADMIN_KEY, NS1_KEY, logLine, serverForFile } from "./helpers/quiver.js";

// The default consistency interval (1 s): Quiver sees the client's commits because they go through it.
const q = serverForFile({ args: ["--managed-versioning"], env: { QUIVER_LOG_LEVEL: "debug" } });
let db: lancedb.Connection;
beforeAll(async () => {
  db = await lancedb.connectNamespace("rest", { uri: q.url, headers: { "x-api-key": ADMIN_KEY } });
});

const post = (p: string, body?: unknown, headers?: Record<string, string>) => q.call("POST", p, body, headers);
const ids = (n: number[]) => toStream(new Table({ id: vectorFromArray(n, new Int32()) }));
const versionsOf = async (id: string) => (await post(`/v1/table/${id}/version/list?descending=true`)).json.versions.map((v: { version: number }) => v.version);

/**
 * A table made through Quiver at version 2 whose latest manifest is taken back to a staged name:
 * the table reads as version 1, and version 2 waits to be published. Answers the manifest_path to
 * send, as LanceDB's client does (object-store form: absolute, without the leading slash).
 */
async function staged(id: string) {
  expect((await post(`/v1/table/${id}/create`, ids([1, 2]))).status).toBe(200);
  expect((await post(`/v1/table/${id}/insert`, ids([3]))).json.version).toBe(2);
  const dir = (await post(`/v1/table/${id}/describe`, {})).json.location as string;
  const name = readdirSync(path.join(dir, "_versions")).sort()[0]; // V2 names sort newest first
  const stagedAt = path.join(dir, "_versions", `${name}-test-${Math.random().toString(36).slice(2)}`);
  renameSync(path.join(dir, "_versions", name), stagedAt);
  return { dir, manifest_path: stagedAt.slice(1), final: path.join(dir, "_versions", name) };
}

describe("LanceDB's REST namespace client with managed versioning", () => {
  it("declare and describe say so, and every commit goes through version/create", async () => {
    const t = await db.createTable("mv1", [{ id: 1 }, { id: 2 }]);
    await t.add([{ id: 3 }]);
    expect(await t.version()).toBe(2);
    // Quiver published both versions itself: its view is current at once, with no interval to wait.
    const d = await post("/v1/table/mv1/describe", {});
    expect(d.json).toMatchObject({ managed_versioning: true, version: 2 });
    expect((await post("/v1/table/mv1/count_rows", {})).json).toBe(3);
    await logLine(q, (l) => l.includes('"op":"CreateTableVersion"') && l.includes('"status":200'));
    const v = await post("/v1/table/mv1/version/describe", { version: 2 });
    expect(v.json.version.manifest_path).toBe(path.join(d.json.location, "_versions", "18446744073709551613.manifest").slice(1));
    expect(await (await db.openTable("mv1")).countRows()).toBe(3);
  });

  it("writers racing on the same version: one wins, the others get a conflict and retry; nothing is lost", () => racingWritersLoseNothing(q, db, (name: string) => db.openTable(name)));
});

describe("version/create", () => {
  it("publishes a staged manifest as the next version; the table reads it at once", async () => {
    const s = await staged("vc1");
    expect(await versionsOf("vc1")).toEqual([1]);
    const r = await post("/v1/table/vc1/version/create", { version: 2, manifest_path: s.manifest_path, naming_scheme: "V2" });
    expect(r.status).toBe(200);
    expect(r.json.version).toMatchObject({ version: 2, manifest_path: s.final.slice(1) });
    expect(r.json.version.manifest_size).toBeGreaterThan(0);
    expect(existsSync(s.final)).toBe(true);
    expect(existsSync("/" + s.manifest_path)).toBe(false);
    expect((await post("/v1/table/vc1/count_rows", {})).json).toBe(3);
  });

  it("two requests for the same version: one wins, the other is 409", async () => {
    const s = await staged("vrace");
    const other = `${s.manifest_path}-other`;
    copyFileSync("/" + s.manifest_path, "/" + other);
    const [a, b] = await Promise.all([s.manifest_path, other].map((p) => post("/v1/table/vrace/version/create", { version: 2, manifest_path: p })));
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    expect(await versionsOf("vrace")).toEqual([2, 1]);
    expect((await post("/v1/table/vrace/count_rows", {})).json).toBe(3);
  });

  it("an existing version is 409; a gap, a foreign path, a wrong size or metadata are 400; nothing changes", async () => {
    const s = await staged("vc2");
    const spare = `${s.manifest_path}-spare`;
    copyFileSync("/" + s.manifest_path, "/" + spare);
    const bad = async (body: object, status: number, detail: RegExp) => {
      const r = await post("/v1/table/vc2/version/create", { version: 2, manifest_path: s.manifest_path, ...body });
      expect(r.status, r.text).toBe(status);
      expect(r.json.detail).toMatch(detail);
    };
    await bad({ version: 3 }, 400, /^version: 3 skips version 2/);
    await bad({ manifest_path: "etc/passwd" }, 400, /^manifest_path: "etc\/passwd" is not a staged manifest/);
    await bad({ manifest_path: s.final.slice(1) }, 400, /is not a staged manifest/);
    await bad({ manifest_size: 1 }, 400, /^manifest_size: 1 differs/);
    await bad({ metadata: { a: "b" } }, 400, /^metadata: /);
    await bad({ manifest_path: s.manifest_path + "x" }, 400, /^manifest_path: no staged manifest/);
    expect(await versionsOf("vc2")).toEqual([1]);
    expect((await post("/v1/table/vc2/version/create", { version: 2, manifest_path: s.manifest_path })).status).toBe(200);
    const conflicts = async () => sample((await q.call("GET", "/metrics")).text, "quiver_commit_conflicts_total", { kind: "version" });
    const before = await conflicts();
    const again = await post("/v1/table/vc2/version/create", { version: 2, manifest_path: spare });
    expect(again.status).toBe(409);
    expect(again.json.code).toBe(14);
    // The lost race is counted (quiver_commit_conflicts_total, kind "version").
    expect(await conflicts()).toBe(before! + 1);
    expect((await post("/v1/table/nosuch/version/create", { version: 1, manifest_path: spare })).json.code).toBe(4);
  });
});

describe("version/delete", () => {
  it("deletes version records in [start, end) ranges; -1 reaches the latest; tagged versions are kept", async () => {
    expect((await post("/v1/table/vd/create", ids([1]))).status).toBe(200);
    for (const n of [2, 3, 4, 5]) await post("/v1/table/vd/insert", ids([n]));
    expect(await versionsOf("vd")).toEqual([5, 4, 3, 2, 1]);
    const bad = await post("/v1/table/vd/version/delete", { ranges: [{ start_version: 3, end_version: 3 }] });
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toMatch(/^ranges\[0\]: end_version 3 must be greater/);
    const r = await post("/v1/table/vd/version/delete", { ranges: [{ start_version: 2, end_version: 4 }] });
    expect(r.json).toEqual({ deleted_count: 2 });
    expect(await versionsOf("vd")).toEqual([5, 4, 1]);
    expect((await post("/v1/table/vd/tags/create", { tag: "keep", version: 4 })).status).toBe(200);
    const tagged = await post("/v1/table/vd/version/delete", { ranges: [{ start_version: 4, end_version: -1 }] });
    expect(tagged.status).toBe(400);
    expect(tagged.json.detail).toContain('tagged "keep"');
    expect(await versionsOf("vd")).toEqual([5, 4, 1]);
    expect((await post("/v1/table/vd/count_rows", {})).json).toBe(5);
  });
});

describe("table/version/batch-create", () => {
  it("creates versions of several tables at once", async () => {
    const [a, b] = [await staged("bc_a"), await staged("bc_b")];
    const r = await post("/v1/table/version/batch-create", {
      entries: [
        { id: ["bc_a"], version: 2, manifest_path: a.manifest_path },
        { id: ["bc_b"], version: 2, manifest_path: b.manifest_path },
      ],
    });
    expect(r.status, r.text).toBe(200);
    expect(r.json.versions.map((v: { version: number }) => v.version)).toEqual([2, 2]);
    expect(await versionsOf("bc_a")).toEqual([2, 1]);
    expect(await versionsOf("bc_b")).toEqual([2, 1]);
  });

  it("is all or nothing: one conflicting entry leaves every table as it was", async () => {
    const [a, b] = [await staged("bn_a"), await staged("bn_b")];
    expect((await post("/v1/table/bn_b/version/create", { version: 2, manifest_path: b.manifest_path })).status).toBe(200);
    const again = `${b.final}-again`;
    copyFileSync(b.final, again);
    const r = await post("/v1/table/version/batch-create", {
      entries: [
        { id: ["bn_a"], version: 2, manifest_path: a.manifest_path },
        { id: ["bn_b"], version: 2, manifest_path: again.slice(1) },
      ],
    });
    expect(r.status).toBe(409);
    expect(r.json.detail).toMatch(/^entries\[1\]: version 2 of table "bn_b" exists already/);
    expect(await versionsOf("bn_a")).toEqual([1]);
    expect(existsSync("/" + a.manifest_path)).toBe(true);
  });

  it("ids outside the credential's namespaces are 403", async () => {
    const r = await post("/v1/table/version/batch-create", { entries: [{ id: ["bc_a"], version: 3, manifest_path: "x.manifest-1" }] }, { "x-api-key": NS1_KEY });
    expect(r.status).toBe(403);
  });
});

describe("table/batch-commit", () => {
  it("declares, publishes and deregisters in one atomic batch, answering in order", async () => {
    const s = await staged("cm_a");
    expect((await post("/v1/table/cm_old/create", ids([1]))).status).toBe(200);
    const r = await post("/v1/table/batch-commit", {
      operations: [
        { declare_table: { id: ["cm_new"] } },
        { create_table_version: { id: ["cm_a"], version: 2, manifest_path: s.manifest_path } },
        { delete_table_versions: { id: ["cm_a"], ranges: [{ start_version: 1, end_version: 2 }] } },
        { deregister_table: { id: ["cm_old"] } },
      ],
    });
    expect(r.status, r.text).toBe(200);
    expect(r.json.results[0].declare_table).toMatchObject({ managed_versioning: true });
    expect(r.json.results[1].create_table_version.version.version).toBe(2);
    expect(r.json.results[2].delete_table_versions).toEqual({ deleted_count: 1 });
    expect(r.json.results[3].deregister_table.id).toEqual(["cm_old"]);
    expect((await post("/v1/table/cm_new/exists", {})).status).toBe(200);
    expect(await versionsOf("cm_a")).toEqual([2]);
    expect((await post("/v1/table/cm_old/exists", {})).status).toBe(404);
  });

  it("a failing operation takes back the ones before it", async () => {
    const s = await staged("cf_a");
    expect((await post("/v1/table/cf_old/create", ids([1]))).status).toBe(200);
    const r = await post("/v1/table/batch-commit", {
      operations: [
        { declare_table: { id: ["cf_new"] } },
        { deregister_table: { id: ["cf_old"] } },
        { create_table_version: { id: ["cf_a"], version: 2, manifest_path: s.manifest_path } },
        { delete_table_versions: { id: ["cf_a"], ranges: [{ start_version: 0, end_version: -1 }] } },
        { declare_table: { id: ["cf_old2"] } },
        { create_table_version: { id: ["cf_a"], version: 3, manifest_path: "nowhere/x.manifest-1" } },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^operations\[5\]: /);
    expect((await post("/v1/table/cf_new/exists", {})).status).toBe(404);
    expect((await post("/v1/table/cf_old2/exists", {})).status).toBe(404);
    expect((await post("/v1/table/cf_old/count_rows", {})).json).toBe(1);
    expect(await versionsOf("cf_a")).toEqual([1]);
    expect(existsSync("/" + s.manifest_path)).toBe(true);
  });

  it("an operation must name exactly one kind", async () => {
    const r = await post("/v1/table/batch-commit", { operations: [{ declare_table: { id: ["x1"] }, deregister_table: { id: ["x2"] } }] });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^operations\[0\]: provide exactly one of/);
    expect((await post("/v1/table/x1/exists", {})).status).toBe(404);
  });
});
