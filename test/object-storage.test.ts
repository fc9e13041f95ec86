// Tables on object storage, end to end against Azurite (Azure Blob Storage's emulator, started
// here, in memory): `--data-dir az://<container>/quiver` with storage options, and every kind of
// work that reaches the store: the catalog, writes, reads, versions, an index build and a js
// backfill in their job processes (which get the options in their requests), drop; and the files
// Quiver keeps beside LanceDB's there (managed versions published with the store's conditional
// put, a declared table's marker, orphan reclaim). Plus: an unreachable S3 endpoint fails the start
// in bounded time with one line.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { ContainerSASPermissions, generateBlobSASQueryParameters, StorageSharedKeyCredential } from "@azure/storage-blob";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AZURITE_ACCOUNT, AZURITE_KEY, startAzurite, type Azurite } from "./helpers/azurite.js";
import { racingWritersLoseNothing } from "./helpers/managed-versions.js";
import { openManifestTable } from "../src/engine/manifest-table.js";
import { renderMetrics } from "../src/metrics.js";
import { listNames, useStorageOptions } from "../src/util/store-files.js";
import { sample } from "./helpers/metrics.js";
import { ADMIN_KEY, logLine, removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";
import { paced } from "./helpers/pace.js";

const MAIN = path.resolve(__dirname, "../dist/src/main.js");
const CONTAINER = "quivertest";
const asJson = { "content-type": "application/json" };
const wantJson = { accept: "application/json" };

let az: Azurite;
let q: Quiver;
const optionArgs = (o: Record<string, string>) => Object.entries(o).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);

beforeAll(async () => {
  az = await startAzurite();
  await az.createContainer(CONTAINER);
  q = await startQuiver({ dataUri: `az://${CONTAINER}/quiver`, args: [...optionArgs(az.storageOptions()), "--workers", "2", "--auto-maintenance", "off"] });
}, 60_000);

afterAll(async () => {
  await q?.stop();
  if (q?.dataDir) removeDir(q.dataDir);
  await az?.stop();
});

const post = (id: string, op: string, body?: unknown, headers?: Record<string, string>) => q.call("POST", `/v1/table/${id}/${op}`, body, headers);
const rows = (from: number, n: number) =>
  Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return { id: i, x: i / 4, cat: `c${i % 3}`, text: `word${i % 5} doc ${i}`, vector: [Math.sin(i), Math.cos(i), Math.sin(i / 2), Math.cos(i / 3)] };
  });
const count = async (id: string, predicate?: string) => {
  const r = await post(id, "count_rows", predicate ? { predicate } : {});
  expect(r.status, r.text).toBe(200);
  return r.json as number;
};

describe("a Quiver server on Azurite (az://)", () => {
  it("starts with its state in the local --state-dir and its catalog in the container", async () => {
    // The state directory is local; no table or catalog file is (no manifest link either).
    expect(existsSync(q.dataDir)).toBe(true);
    expect(readdirSync(q.dataDir).filter((n) => n.endsWith(".lance") || n === "__manifest" || n === "manifest-link")).toEqual([]);
    expect((await q.call("GET", "/readyz")).status).toBe(200);
  });

  it("namespace and table create, insert, query (vector and filter), count", async () => {
    expect((await q.call("POST", "/v1/namespace/ns/create", {})).status).toBe(200);
    const c = await post("ns$t", "create", JSON.stringify(rows(0, 300)), asJson);
    expect(c.status, c.text).toBe(200);
    const ins = await post("ns$t", "insert", JSON.stringify(rows(300, 50)), asJson);
    expect(ins.status, ins.text).toBe(200);
    expect(await count("ns$t")).toBe(350);
    expect(await count("ns$t", "cat = 'c1'")).toBe(rows(0, 350).filter((r) => r.cat === "c1").length);
    const listed = await q.call("GET", "/v1/namespace/ns/table/list");
    expect(listed.json.tables).toEqual(["t"]);
    const d = await post("ns$t", "describe", {});
    expect(d.status, d.text).toBe(200);
    expect(d.json.location).toMatch(new RegExp(`^az://${CONTAINER}/quiver/[0-9a-f]{8}_ns\\.t\\.lance$`));

    const v = rows(7, 1)[0].vector;
    const hits = await post("ns$t", "query", { vector: { single_vector: v }, k: 10, columns: ["id"] }, wantJson);
    expect(hits.status, hits.text).toBe(200);
    expect(hits.json).toHaveLength(10);
    expect(hits.json[0].id).toBe(7);
    const filtered = await post("ns$t", "query", { filter: "id >= 340", k: 100, columns: ["id"] }, wantJson);
    expect(filtered.json.map((r: { id: number }) => r.id).sort((a: number, b: number) => a - b)).toEqual([340, 341, 342, 343, 344, 345, 346, 347, 348, 349]);
  });

  it("versions: list, describe, restore", async () => {
    const list = await post("ns$t", "version/list", {});
    expect(list.status, list.text).toBe(200);
    const versions = list.json.versions.map((v: { version: number }) => v.version);
    expect(versions.length).toBeGreaterThanOrEqual(2);
    expect(list.json.versions[0].manifest_path).toMatch(/^_versions\/\d{20}\.manifest$/);
    const first = versions[0];
    const desc = await post("ns$t", "version/describe", { version: first });
    expect(desc.status, desc.text).toBe(200);
    expect(desc.json.version.version).toBe(first);
    const r = await post("ns$t", "restore", { version: first });
    expect(r.status, r.text).toBe(200);
    expect(await count("ns$t")).toBe(300);
    // Back to 350 rows for what follows.
    expect((await post("ns$t", "insert", JSON.stringify(rows(300, 50)), asJson)).status).toBe(200);
    expect(await count("ns$t")).toBe(350);
  });

  it("an FTS index build runs as a job to success, and a match query uses it", async () => {
    const r = await post("ns$t", "create_index", { column: "text", index_type: "FTS" });
    expect(r.status, r.text).toBe(200);
    const done = await settle(q, r.json.transaction_id, 120_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    const ix = await post("ns$t", "index/list", {});
    expect(ix.json.indexes.map((i: { index_type: string }) => i.index_type)).toContain("FTS");
    const hits = await post("ns$t", "query", { full_text_query: { string_query: { query: "word3", columns: ["text"] } }, k: 100, columns: ["id"] }, wantJson);
    expect(hits.status, hits.text).toBe(200);
    expect(hits.json.length).toBe(rows(0, 350).filter((x) => x.text.startsWith("word3 ")).length);
  });

  it("an IVF_PQ index build runs as a job to success", async () => {
    const r = await post("ns$t", "create_index", { column: "vector", index_type: "IVF_PQ", num_partitions: 2, num_sub_vectors: 2 });
    expect(r.status, r.text).toBe(200);
    const done = await settle(q, r.json.transaction_id, 120_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
  });

  it("a js virtual column is backfilled by its job process", async () => {
    const add = await post("ns$t", "add_columns", {
      new_columns: [{ name: "y", virtual_column: { udf_backend: "js", udf: "(x) => x * 2 + 1", input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "float64" }, nullable: true }] } }],
    });
    expect(add.status, add.text).toBe(200);
    const b = await post("ns$t", "backfill_column", { column: "y" });
    expect(b.status, b.text).toBe(202);
    const done = await settle(q, b.json.job_id, 120_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(await count("ns$t", "y = x * 2 + 1")).toBe(350);
    // Which rows are stale is read from the manifest in the store: a second backfill computes none.
    const again = await post("ns$t", "backfill_column", { column: "y" });
    expect((await settle(q, again.json.job_id, 120_000)).properties.rows_computed).toBe("0");
  });

  it("maintenance (compaction, index upkeep, version cleanup) runs as a job to success, a tag on the way", async () => {
    expect((await post("ns$t", "tags/create", { tag: "keep", version: 2 })).status).toBe(200);
    const r = await post("ns$t", "optimize", {});
    expect(r.status, r.text).toBe(202);
    const done = await settle(q, r.json.job_id, 120_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(await count("ns$t")).toBe(350);
    const tags = await post("ns$t", "tags/list", {});
    expect(tags.json.tags.keep.version).toBe(2);
    expect((await post("ns$t", "stats", {})).json.maintenance.bytes_on_disk).toBeGreaterThan(0);
  });

  it("what LanceDB does not answer is read from Lance's files in the store: a tag's branch, a branch's creation time", async () => {
    const before = Math.floor(Date.now() / 1000);
    expect((await post("ns$t", "branches/create", { name: "dev" })).status).toBe(200);
    const dev = (await post("ns$t", "branches/list", {})).json.branches.dev;
    expect(dev.createAt).toBeGreaterThanOrEqual(before - 1);
    const version = (await post("ns$t", "describe", {})).json.version;
    expect((await post("ns$t", "tags/create", { tag: "ondev", version, branch: "dev" })).status).toBe(200);
    expect((await post("ns$t", "tags/list", {})).json.tags.ondev).toMatchObject({ branch: "dev", version });
  });

  it("a root table; drop removes the table and its data", async () => {
    expect((await post("root1", "create", JSON.stringify(rows(0, 10)), asJson)).status).toBe(200);
    expect((await q.call("GET", "/v1/table")).json.tables).toContain("root1");
    const drop = await post("ns$t", "drop", {});
    expect(drop.status, drop.text).toBe(200);
    expect((await post("ns$t", "exists", {})).status).toBe(404);
    // The same name again gets a fresh, empty table.
    expect((await post("ns$t", "create", JSON.stringify(rows(0, 3)), asJson)).status).toBe(200);
    expect(await count("ns$t")).toBe(3);
  });

  it("Quiver's own requests to the store are timed by operation, and failed ones counted (quiver_object_store_*)", async () => {
    // The server's: listings of the data directory at start, markers and manifests in this file's tests.
    const text = (await q.call("GET", "/metrics")).text;
    expect(sample(text, "quiver_object_store_request_duration_seconds_count", { store: "az", operation: "list_children" })).toBeGreaterThan(0);
    expect(sample(text, "quiver_object_store_errors_total", { store: "az", operation: "list_children" })).toBe(0);
    // One that fails, in this process (the same recorder): a listing in a container that does not exist.
    useStorageOptions(az.storageOptions());
    await expect(listNames("az://no-such-container/x")).rejects.toThrow();
    const mine = await renderMetrics();
    expect(sample(mine, "quiver_object_store_errors_total", { store: "az", operation: "list_children" })).toBe(1);
    expect(sample(mine, "quiver_object_store_request_duration_seconds_count", { store: "az", operation: "list_children" })).toBe(1);
  });

  it("a container that does not exist is made at start, with one warning saying so; storage options from a config file (docs/operations.md's example)", async () => {
    const config = path.join(mkdtempSync(path.join(tmpdir(), "quiver-config-")), "r0.json");
    writeFileSync(config, JSON.stringify({ "replica-name": "r0", "storage-options": az.storageOptions() }), { mode: 0o600 });
    const fresh = await startQuiver({ dataUri: "az://made-at-start/quiver", args: ["--config", config, "--auto-maintenance", "off"], env: { QUIVER_LOG_LEVEL: "warn" } });
    try {
      expect(fresh.proc.spawnargs.join(" ")).not.toContain(az.storageOptions().account_key);
      expect(fresh.stderr()).toContain('"msg":"created the data directory\'s container, which did not exist","dataDir":"az://made-at-start/quiver"');
      expect((await fresh.call("POST", "/v1/namespace/made/create", {})).status).toBe(200);
      expect((await fresh.call("POST", "/v1/namespace/made/exists", {})).status).toBe(200);
    } finally {
      await fresh.stop();
      removeDir(fresh.dataDir);
      rmSync(path.dirname(config), { recursive: true, force: true });
    }
  }, 60_000);

  it("a restart on the same container and state directory sees the catalog and the tables", async () => {
    const stateDir = q.dataDir;
    await q.stop();
    q = await startQuiver({ dataUri: `az://${CONTAINER}/quiver`, dataDir: stateDir, args: optionArgs(az.storageOptions()) });
    expect(await count("root1")).toBe(10);
    expect(await count("ns$t")).toBe(3);
  }, 60_000);
});

describe("files beside LanceDB's on Azurite: managed versions, declared tables, orphan reclaim", () => {
  const FILES = "quiverfiles";
  let m: Quiver;
  let db: lancedb.Connection;
  beforeAll(async () => {
    await az.createContainer(FILES);
    m = await startQuiver({ dataUri: `az://${FILES}/q`, args: [...optionArgs(az.storageOptions()), "--managed-versioning", "--orphan-min-age-ms", "0", "--auto-maintenance", "off"], env: { QUIVER_LOG_LEVEL: "debug" } });
    // LanceDB's REST namespace client writes the data itself, so it gets the store's options too.
    db = await lancedb.connectNamespace("rest", { uri: m.url, headers: { "x-api-key": ADMIN_KEY } }, { storageOptions: az.storageOptions() });
  }, 60_000);
  afterAll(async () => {
    await m?.stop();
    if (m?.dataDir) removeDir(m.dataDir);
  });
  const call = (p: string, body?: unknown, headers?: Record<string, string>) => m.call("POST", p, body, headers);
  const open = (name: string) => db.openTable(name, [], { storageOptions: az.storageOptions() });
  const versionsOf = async (id: string) => (await call(`/v1/table/${id}/version/list?descending=true`)).json.versions.map((v: { version: number }) => v.version);

  it("LanceDB's client declares the table and commits each version through version/create; Quiver publishes it with a conditional put", async () => {
    const t = await db.createTable("mv", [{ id: 1 }, { id: 2 }]);
    await t.add([{ id: 3 }]);
    expect(await t.version()).toBe(2);
    const d = await call("/v1/table/mv/describe", {});
    expect(d.json).toMatchObject({ managed_versioning: true, version: 2 });
    expect((await call("/v1/table/mv/count_rows", {})).json).toBe(3);
    await logLine(m, (l) => l.includes('"op":"CreateTableVersion"') && l.includes('"status":200'));
    // The record read from the store: the manifest's key in the container, its size and e_tag.
    const v = (await call("/v1/table/mv/version/describe", { version: 2 })).json.version;
    expect(v.manifest_path).toMatch(/^q\/[0-9a-f]{8}_mv\.lance\/_versions\/18446744073709551613\.manifest$/);
    expect(v.manifest_size).toBeGreaterThan(0);
    expect(v.e_tag).toMatch(/\S/);
  });

  it("writers racing on one version: one wins, the others get a 409 and retry; nothing is lost", () => racingWritersLoseNothing(m, db, open));

  it("attack: version/create takes a manifest only from the table's own _versions: another table's, a .. path or another container is 400, nothing published", async () => {
    const keyOf = async (t: string) => ((await call(`/v1/table/${t}/describe`, {})).json.location as string).replace(/^az:\/\/[^/]+\//, "");
    const [mine, other] = [await keyOf("mv"), await keyOf("race")];
    const before = await versionsOf("mv");
    for (const manifest_path of [
      `${other}/_versions/18446744073709551614.manifest-stolen`,
      `${mine}/_versions/../../${other.split("/").pop()}/_versions/1.manifest-x`,
      `az://othercontainer/${mine}/_versions/1.manifest-x`,
    ]) {
      const r = await call("/v1/table/mv/version/create", { version: before[0] + 1, manifest_path });
      expect(r.status, `${manifest_path}: ${r.text}`).toBe(400);
      expect(r.json.detail).toMatch(/is not a staged manifest/);
    }
    expect(await versionsOf("mv")).toEqual(before);
  });

  it("version/delete takes versions out of the history; the latest still reads", async () => {
    const t = await db.createTable("vd", [{ id: 1 }]);
    await t.add([{ id: 2 }]);
    await t.add([{ id: 3 }]);
    const r = await call("/v1/table/vd/version/delete", { ranges: [{ start_version: 1, end_version: 3 }] });
    expect(r.status, r.text).toBe(200);
    expect(r.json.deleted_count).toBe(2);
    expect(await versionsOf("vd")).toEqual([3]);
    expect((await call("/v1/table/vd/count_rows", {})).json).toBe(3);
  });

  it("reclaim removes a dataset no catalog row names, and keeps every table and a deregistered table's data", async () => {
    const plain = await lancedb.connect(`az://${FILES}/q`, { storageOptions: az.storageOptions() });
    await plain.createTable("stray", [{ id: 1 }]);
    expect((await call("/v1/table/keep/create", JSON.stringify([{ id: 1 }, { id: 2 }]), asJson)).status).toBe(200);
    const dereg = await call("/v1/table/vd/deregister", {});
    expect(dereg.status, dereg.text).toBe(200);
    const r = await call("/v1/admin/reclaim");
    expect(r.status, r.text).toBe(200);
    expect(r.json.removed).toEqual(["stray.lance"]);
    expect(await plain.tableNames()).not.toContain("stray");
    for (const t of ["mv", "race", "keep"]) expect((await call(`/v1/table/${t}/count_rows`, {})).status).toBe(200);
    // The kept data is whole: registered again, it reads as before.
    const back = await call("/v1/table/vd2/register", { location: dereg.json.location });
    expect(back.status, back.text).toBe(200);
    expect((await call("/v1/table/vd2/count_rows", {})).json).toBe(3);
  });
});

/** Run the server to its exit; answers the exit code, stderr and the time it took. */
function runQuiverToEnd(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string; ms: number }> {
  const t0 = Date.now();
  const proc = spawn(process.execPath, [MAIN, "--port", "0", ...args], { env: { ...(process.env as Record<string, string>), QUIVER_API_KEYS: "k:admin", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr!.on("data", (d) => (stderr += d));
  proc.stdout!.resume();
  return new Promise((resolve) => proc.on("exit", (code) => resolve({ code, stderr, ms: Date.now() - t0 })));
}

describe("replicas starting together on a new data directory", () => {
  it("each opens the catalog's manifest table: the creations that lose to another open the winner's (one used to end its start)", async () => {
    useStorageOptions(az.storageOptions());
    const state = mkdtempSync(path.join(tmpdir(), "quiver-state-"));
    try {
      for (let round = 0; round < 10; round++) {
        const root = `az://${CONTAINER}/together-${round}`;
        const stores = await Promise.all(Array.from({ length: 4 }, () => openManifestTable(root, state, az.storageOptions())));
        expect((await Promise.all(stores.map((m) => m.readAll()))).map((r) => r.rows.length)).toEqual([0, 0, 0, 0]);
      }
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("start-up errors", () => {
  const state = mkdtempSync(path.join(tmpdir(), "quiver-state-"));
  afterAll(() => rmSync(state, { recursive: true, force: true }));

  it("an unreachable S3 endpoint fails the start within the deadline, with one line and no stack", async () => {
    const r = await runQuiverToEnd([
      "--data-dir", "s3://bucket/quiver", "--state-dir", state, "--storage-timeout-ms", "2000", "--start-retry-ms", "0",
      "--storage-option", "endpoint=http://127.0.0.1:1", "--storage-option", "allow_http=true",
      "--storage-option", "aws_access_key_id=dummy", "--storage-option", "aws_secret_access_key=dummy-secret-value", "--storage-option", "region=us-east-1",
    ]);
    expect(r.code).toBe(1);
    expect(r.ms).toBeLessThan(paced(12_000));
    const lines = r.stderr.trim().split("\n").filter((l) => l.startsWith("quiver:"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^quiver: cannot open the data directory s3:\/\/bucket\/quiver: /);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    // Storage option values (keys) are never printed.
    expect(r.stderr).not.toContain("dummy-secret-value");
  });

  // Before, each of these was told to create a container (one that existed, for a wrong key), in a
  // sentence cut off ("or give credentials allowed to"). Each now names what is missing or refused.
  const azureStart = async (container: string, options: Record<string, string>) => {
    const r = await runQuiverToEnd(["--data-dir", `az://${container}/quiver`, "--state-dir", state, ...optionArgs(options)]);
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    const lines = r.stderr.trim().split("\n").filter((l) => l.startsWith("quiver:"));
    expect(lines).toHaveLength(1);
    return { line: lines[0], stderr: r.stderr };
  };

  it("a wrong Azure account key, for a container that exists: the key is named as refused, no container advice, no key printed", async () => {
    const wrongKey = Buffer.from("not the account's key").toString("base64");
    const { line, stderr } = await azureStart(CONTAINER, { ...az.storageOptions(), account_key: wrongKey });
    expect(line).toBe(`quiver: cannot open the data directory az://${CONTAINER}/quiver: ${az.endpoint} refused the account_key given for account devstoreaccount1 (403 AuthorizationFailure): the key is not that account's`);
    expect(stderr).not.toContain(wrongKey);
  });

  it("no account key nor SAS: the missing options are named", async () => {
    const { account_key: _key, ...noKey } = az.storageOptions();
    const { line } = await azureStart(CONTAINER, noKey);
    expect(line).toMatch(/refused a request without credentials \(403 \w+\): give the account_key or sas_token storage option$/);
  });

  it("a container that does not exist, with a SAS that may not create it: the container is named, with how to create it", async () => {
    const sas = generateBlobSASQueryParameters(
      { containerName: "not-made", permissions: ContainerSASPermissions.parse("racwdl"), expiresOn: new Date(Date.now() + 3_600_000) },
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY),
    ).toString();
    const { account_key: _key, ...noKey } = az.storageOptions();
    const { line, stderr } = await azureStart("not-made", { ...noKey, sas_token: sas });
    expect(line).toBe(
      `quiver: cannot open the data directory az://not-made/quiver: the container not-made does not exist at ${az.endpoint}, or the sas_token given may not check or create it (403 AuthorizationPermissionMismatch): create it (e.g. \`az storage container create --name not-made\`), or give an account_key, which may create it`,
    );
    expect(stderr).not.toContain(sas);
  });

  it("an object store data directory without --state-dir is refused", async () => {
    const r = await runQuiverToEnd(["--data-dir", "gs://bucket/x"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^quiver: state-dir is required when data-dir is on an object store/);
  });

  it("storage options from QUIVER_STORAGE_OPTIONS must be a JSON object; the value is not echoed", async () => {
    const r = await runQuiverToEnd(["--data-dir", "az://c/x", "--state-dir", state], { QUIVER_STORAGE_OPTIONS: "account_key=secret123" });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/QUIVER_STORAGE_OPTIONS must be a JSON object/);
    expect(r.stderr).not.toContain("secret123");
  });

  it("an unknown scheme is refused", async () => {
    const r = await runQuiverToEnd(["--data-dir", "hdfs://x/y"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/unsupported scheme/);
  });
});
