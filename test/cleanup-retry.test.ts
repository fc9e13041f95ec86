// A maintenance job whose cleanup fails halfway runs again until the versions it was removing are
// gone (issue 52), across a crash and restart of its server too. On Azurite: the oldest version's
// manifest is leased, and Azure refuses to delete a leased blob, so the cleanup fails partway, as a
// store refusing deletes for a while leaves it (Lance removes old versions' files and manifests in
// one stream, data files first; which of them a failed batch took with it varies). Plus: a table dropped right after a write, before the automatic check its
// write armed, is no warning.
import { BlobServiceClient, StorageSharedKeyCredential, type BlobLeaseClient, type ContainerClient } from "@azure/storage-blob";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AZURITE_ACCOUNT, AZURITE_KEY, startAzurite, type Azurite } from "./helpers/azurite.js";
import { rows, until } from "./helpers/maintenance.js";
import { probeUntil } from "./helpers/pace.js";
import { logLine, removeDir, startQuiver, type Quiver, type StartOptions } from "./helpers/quiver.js";
import { settle, terminal } from "./helpers/transactions.js";

const CONTAINER = "cleanup";
let az: Azurite;
let blobs: ContainerClient;
let q: Quiver;
let opts: StartOptions;

beforeAll(async () => {
  az = await startAzurite();
  await az.createContainer(CONTAINER);
  blobs = new BlobServiceClient(az.endpoint, new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY)).getContainerClient(CONTAINER);
  const storage = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
  // Retention window 0: a job's cleanup removes every version but the latest. Debug lines for the dropped table's check.
  opts = { dataUri: `az://${CONTAINER}/quiver`, args: [...storage, "--workers", "1", "--retain-versions-ms", "0", "--log-level", "debug"] };
  q = await startQuiver(opts);
}, 60_000);

afterAll(async () => {
  await q?.stop();
  if (q?.dataDir) removeDir(q.dataDir);
  await az?.stop();
});

const post = (id: string, op: string, body?: unknown, qs = "") => q.call("POST", `/v1/table/${id}/${op}${qs}`, body);
const names = async (prefix: string) => {
  const out: string[] = [];
  for await (const b of blobs.listBlobsFlat({ prefix })) out.push(b.name);
  return out;
};
const describeJob = async (id: string) => (await q.call("POST", `/v1/transaction/${id}/describe`, {})).json as { status: string; properties: Record<string, string> };
const failures = (d: { properties: Record<string, string> }) => Number(d.properties.cleanup_failures ?? 0);
/** The version a manifest's name gives (Lance's V2 naming counts down from 2^64 - 1). */
const versionOf = (name: string) => {
  const n = BigInt(name.replace(/^.*\//, "").replace(/\.manifest$/, ""));
  return n > 2n ** 63n ? 2n ** 64n - 1n - n : n;
};

it("a cleanup that failed halfway runs again, after a restart too, until the old versions are gone", async () => {
  const off = `?properties=${encodeURIComponent(JSON.stringify({ "quiver.maintenance": "off" }))}`;
  expect((await post("t", "create", rows(0, 10), off)).status).toBe(200);
  for (let i = 1; i < 4; i++) expect((await post("t", "insert", rows(i * 10, 10))).status).toBe(200);
  const dir = ((await post("t", "describe", {})).json.location as string).replace(/^az:\/\/[^/]+\//, "");
  const oldest = (await names(`${dir}/_versions/`)).find((n) => versionOf(n) === 1n)!;
  const lease: BlobLeaseClient = blobs.getBlobClient(oldest).getBlobLeaseClient();
  await lease.acquireLease(-1);

  const job = (await post("t", "optimize", {})).json.job_id as string;
  const first = await until(() => describeJob(job), (d) => failures(d) > 0 || terminal(d.status));
  expect(first.status, JSON.stringify(first.properties)).toBe("Running");
  expect(first.properties.last_failure).toContain("(code: 412)");
  // A crash in between (at once, so that few runs fail before it): the restarted server resumes the
  // job and goes on counting its failures.
  const crashed = q;
  await crashed.kill();
  await logLine(crashed, (l) => l.includes("maintenance failed with its cleanup asked") && l.includes(job));
  q = await startQuiver({ ...opts, dataDir: crashed.dataDir });
  const resumed = await until(() => describeJob(job), (d) => failures(d) > failures(first) || terminal(d.status));
  expect(resumed.status, JSON.stringify(resumed.properties)).toBe("Running");
  // The files the cleanup removed before the refusal are gone (which ones, the store's batches
  // decide), the leased manifest is still there, and every version listed can be read.
  expect(await names(`${dir}/_versions/`)).toContain(oldest);
  const listed = ((await post("t", "version/list", {})).json.versions as { version: number }[]).map((v) => v.version);
  for (const version of listed) expect((await post("t", "count_rows", { version })).status).toBe(200);

  await lease.releaseLease();
  const done = await settle(q, job, 120_000);
  expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
  expect(Number(done.properties.cleanup_failures)).toBeGreaterThanOrEqual(2);
  // Only the kept versions' manifests are left (the latest), every one listed and readable.
  const versions = ((await post("t", "version/list", {})).json.versions as { version: number }[]).map((v) => v.version).sort((a, b) => a - b);
  expect((await names(`${dir}/_versions/`)).map(versionOf).map(Number).sort((a, b) => a - b)).toEqual(versions);
  expect((await post("t", "count_rows", {})).json).toBe(40);
}, 240_000);

it("a table dropped right after a write is no warning from the automatic check its write armed", async () => {
  expect((await post("gone", "create", rows(0, 1))).status).toBe(200);
  expect((await post("gone", "insert", rows(1, 1))).status).toBe(200);
  expect((await post("gone", "drop", {})).status).toBe(200);
  const seen = await probeUntil("the dropped table's check", async () =>
    q.stderr().split("\n").find((l) => l.includes("automatic maintenance not started") && l.includes('"gone"')) ?? null,
  );
  expect(JSON.parse(seen)).toMatchObject({ level: "debug", table: "gone" });
});
