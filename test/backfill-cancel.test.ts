// Issue 52: on Azurite, a backfill still queuing its tasks canceled after 14 s: its planning went
// on to its end, queuing every task, and only then were they canceled. Now the planning stops
// before its next task and cancels those it queued before the cancel is answered; no version after
// the answer adds rows. The store is Azurite behind a relay that slows its bytes
// (test/helpers/store-proxy.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAzurite, type Azurite } from "./helpers/azurite.js";
import { startStoreProxy, type StoreProxy } from "./helpers/store-proxy.js";
import { paced, SLOW_TEST_MS } from "./helpers/pace.js";
import { removeDir, startQuiver, type Caller, type Quiver } from "./helpers/quiver.js";

const column = (name: string, udf: string) => ({
  new_columns: [{ name, virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "int64" }, nullable: true }] } }],
});
const spin = (ms: number) => `(x) => { const end = Date.now() + ${ms}; while (Date.now() < end); return x + 1; }`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ id: i, x: i }));

async function describeTx(q: Caller, id: string) {
  return (await q.call("POST", `/v1/transaction/${id}/describe`, {})).json as { status: string; properties: Record<string, string> };
}

/** Cancel `job`; the table's version at the answer. */
async function cancel(q: Caller, table: string, job: string): Promise<number> {
  const c = await q.call("POST", "/v1/jobs/cancel", { job_id: job });
  expect(c.status, c.text).toBeLessThan(300);
  return (await q.call("POST", `/v1/table/${table}/describe`, {})).json.version as number;
}

const filled = async (q: Caller, table: string, col: string) => (await q.call("POST", `/v1/table/${table}/count_rows`, { predicate: `${col} IS NOT NULL` })).json as number;

/** No version after `version` on `table` for `forMs`, and the rows filled unchanged. */
async function nothingAfter(q: Caller, table: string, col: string, version: number, forMs: number) {
  const rows = await filled(q, table, col);
  await sleep(forMs);
  expect((await q.call("POST", `/v1/table/${table}/describe`, {})).json.version).toBe(version);
  expect(await filled(q, table, col)).toBe(rows);
}

describe("a cancel of a split backfill on an object store", () => {
  let az: Azurite;
  let proxy: StoreProxy;
  let q: Quiver;
  beforeAll(async () => {
    az = await startAzurite();
    await az.createContainer("plan");
    proxy = await startStoreProxy(az.url);
    const options = { ...az.storageOptions(), azure_storage_endpoint: `${proxy.url}/devstoreaccount1` };
    q = await startQuiver({
      dataUri: "az://plan/quiver",
      // The default 60 s write deadline on an idle machine: beside a second suite the cancel (its
      // stop and its commit through the slowed store) answered 503 at 60 s.
      env: { QUIVER_WRITE_TIMEOUT_MS: String(paced(60_000)) },
      args: [...Object.entries(options).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]), "--workers", "2", "--auto-maintenance", "off", "--backfill-tasks", "16", "--backfill-jobs", "1"],
    });
  }, 90_000);
  afterAll(async () => {
    await q?.stop();
    if (q?.dataDir) removeDir(q.dataDir);
    await proxy?.close();
    await az?.stop();
  });

  it("still queuing its tasks stops before its next one: the tasks it queued canceled, nothing committed after the answer", async () => {
    expect((await q.call("POST", "/v1/table/plan/create", rows(320))).status).toBe(200);
    expect((await q.call("POST", "/v1/table/plan/add_columns", column("z", spin(20)))).status).toBe(200);
    // Every store call takes a few hundred milliseconds more: queuing 16 tasks takes many seconds.
    proxy.delay(60);
    const job = await q.call("POST", "/v1/table/plan/backfill_column", { column: "z", checkpoint_size: 20 });
    expect(job.status, job.text).toBe(202);
    let planning = false;
    for (const until = performance.now() + paced(60_000); performance.now() < until && !planning; await sleep(100)) {
      const d = await describeTx(q, job.json.job_id);
      planning = d.status === "Running" && d.properties.tasks === undefined;
    }
    expect(planning).toBe(true);
    await sleep(1_000);
    const version = await cancel(q, "plan", job.json.job_id);
    const d = await describeTx(q, job.json.job_id);
    expect(d.status).toBe("Canceled");
    // It stopped queuing (on the code before, all 16 were queued first), and the tasks it queued were canceled with it.
    const listed = (await q.call("POST", "/v1/jobs/list", { table: "plan" })).json.jobs as { job_type: string; status: string }[];
    const queued = listed.filter((j) => j.job_type === "backfill_task");
    expect(queued.length).toBeLessThan(16);
    // A task may have run to its end before the cancel was asked (a loaded machine runs the first
    // ones during the planning): it stays Succeeded; none is left queued or running, and nothing
    // commits after the answer (below).
    for (const t of queued) expect(["Canceled", "Succeeded"]).toContain(t.status);
    expect(queued.some((t) => t.status === "Canceled")).toBe(true);
    await nothingAfter(q, "plan", "z", version, 4_000);
  }, SLOW_TEST_MS);
});
