// Issue 52: on a store that stopped answering, requests held their slots for minutes (searches of
// one shape waited behind two batch calls that never settled), and two inserts whose clients gave
// up were committed 17 minutes later. Now every request is raced against its deadline
// (--query-timeout-ms for reads, --write-timeout-ms for writes, or a smaller x-request-timeout-ms)
// and answered 503 reason `deadline` by it, freeing its slot; a batch's engine call is abandoned
// at its members' deadline; and a write answered at its deadline (or whose client left) commits
// nothing after, while one whose commit had begun says so and its Idempotency-Key retry gets its
// answer. The store is Azurite behind a relay that holds its bytes (test/helpers/store-proxy.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAzurite, type Azurite } from "../helpers/azurite.js";
import { startStoreProxy, type StoreProxy } from "../helpers/store-proxy.js";
import { paced, probeUntil } from "../helpers/pace.js";
import { removeDir, startQuiver, type Quiver } from "../helpers/quiver.js";

const CONTAINER = "deadlines";
const DIM = 8;
const asJson = { "content-type": "application/json" };
const wantJson = { accept: "application/json" };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let az: Azurite;
let proxy: StoreProxy;
let q: Quiver;
/** The server's own deadlines: 4 s on an idle machine, paced to the load when it starts (a table's create on Azurite took longer beside a second suite). */
let limitMs = 4_000;

beforeAll(async () => {
  limitMs = paced(4_000);
  az = await startAzurite();
  await az.createContainer(CONTAINER);
  proxy = await startStoreProxy(az.url);
  const options = { ...az.storageOptions(), azure_storage_endpoint: `${proxy.url}/devstoreaccount1` };
  q = await startQuiver({
    dataUri: `az://${CONTAINER}/quiver`,
    args: [...Object.entries(options).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]), "--workers", "2", "--auto-maintenance", "off", "--serving", "off", "--query-timeout-ms", String(limitMs), "--write-timeout-ms", String(limitMs)],
  });
}, 90_000);

afterAll(async () => {
  proxy?.resume();
  await q?.stop();
  if (q?.dataDir) removeDir(q.dataDir);
  await proxy?.close();
  await az?.stop();
});

const rows = (from: number, n: number) => Array.from({ length: n }, (_, k) => ({ id: from + k, vector: Array.from({ length: DIM }, (_, d) => Math.sin(from + k + d)) }));

/** A request through the server, timed; `ms` is how long its answer took. */
async function timed(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const t0 = performance.now();
  const r = await fetch(`${q.url}${path}`, {
    method,
    headers: { "x-api-key": "test-admin-key", ...(typeof body === "string" ? asJson : body === undefined ? {} : asJson), ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    signal,
  });
  const text = await r.text();
  return { status: r.status, text, ms: performance.now() - t0, detail: r.status >= 400 ? (JSON.parse(text).detail as string) : "" };
}

const search = (table: string, i: number, timeoutMs?: number) =>
  timed("POST", `/v1/table/${table}/query`, { vector: { single_vector: rows(i, 1)[0].vector }, k: 5, columns: ["id"] }, { ...wantJson, ...(timeoutMs ? { "x-request-timeout-ms": String(timeoutMs) } : {}) });

const ids = async (table: string, predicate: string) => {
  const r = await timed("POST", `/v1/table/${table}/query`, { filter: predicate, k: 1000, columns: ["id"] }, wantJson);
  expect(r.status, r.text).toBe(200);
  return (JSON.parse(r.text) as { id: number }[]).map((x) => x.id).sort((a, b) => a - b);
};

async function inFlight(): Promise<number> {
  const text = (await timed("GET", "/metrics")).text;
  return Number(/^quiver_requests_in_flight(?:\{[^}]*\})? (\S+)$/m.exec(text)?.[1] ?? NaN);
}

describe("a store that stops answering", () => {
  it("searches of one shape, describe, versions, count and an insert each answer 503 `deadline` at their deadline; a search of that shape runs once the store answers, its batch calls still held", async () => {
    expect((await timed("POST", "/v1/table/dl/create", JSON.stringify(rows(0, 300)))).status).toBe(200);
    expect((await search("dl", 1)).status).toBe(200);

    proxy.stall();
    // Past the consistency interval, so each read asks the store about the table.
    await sleep(1_500);
    const searches = Array.from({ length: 6 }, (_, i) => search("dl", i, 2_500));
    const others = [
      timed("POST", "/v1/table/dl/describe", {}, { "x-request-timeout-ms": "2500" }),
      timed("POST", "/v1/table/dl/version/list", {}, { "x-request-timeout-ms": "2500" }),
      timed("POST", "/v1/table/dl/count_rows", { predicate: "id > 3" }, { "x-request-timeout-ms": "2500" }),
      timed("POST", "/v1/table/dl/insert", JSON.stringify(rows(5_000, 2)), { "x-request-timeout-ms": "2500" }),
    ];
    for (const r of await Promise.all(searches)) {
      expect(r.status, r.text).toBe(503);
      expect(r.detail).toMatch(/deadline of 2500 ms/);
      expect(r.ms).toBeLessThan(2_500 + paced(4_000));
    }
    for (const r of await Promise.all(others)) {
      expect(r.status, r.text).toBe(503);
      expect(r.detail).toMatch(/deadline of 2500 ms/);
      expect(r.ms).toBeLessThan(2_500 + paced(4_000));
    }
    const insert = (await Promise.all(others))[3];
    expect(insert.detail).toMatch(/\(--write-timeout-ms, or a smaller x-request-timeout-ms header\); none of its table commits had begun, and none begins after this answer/);
    expect(await inFlight()).toBe(0);

    // The engine calls the searches made stay held for good; new connections to the store pass.
    // A search of that shape is answered: not held behind them for good. Until the store client
    // gives up the held reads (its own request timeout, ~30 s) the engine's reads of the same files
    // wait for them, so it is asked again until then (the relay keeps the held calls held: before,
    // Azurite closed their idle connections after 5 s and their retries passed).
    proxy.passNew();
    const after = await probeUntil("a search of the stalled searches' shape answers 200", async () => {
      const r = await search("dl", 3, 8_000);
      if (r.status === 503 && /deadline of \d+ ms/.test(r.detail)) return null;
      return r;
    }, 60_000);
    expect(after.status, after.text).toBe(200);
    proxy.resume();
    // The insert answered at its deadline never commits, now that the store answers.
    await sleep(3_000);
    expect(await ids("dl", "id >= 5000")).toEqual([]);
  }, 120_000);

  it("a write answered at its deadline or left by its client commits nothing after; one whose commit had begun says so, and its Idempotency-Key retry gets its answer", async () => {
    expect((await timed("POST", "/v1/table/zw/create", JSON.stringify(rows(0, 50)))).status).toBe(200);
    // Held from the moment the first insert's data file is sent: its commit has begun.
    proxy.stallAt(/^PUT \S*_zw\.lance\/data\//m);
    const a = timed("POST", "/v1/table/zw/insert", JSON.stringify(rows(1_000, 3)), { "idempotency-key": "zw-a", "x-request-timeout-ms": "3000" });
    for (const until = performance.now() + 10_000; !proxy.stalled() && performance.now() < until; ) await sleep(20);
    expect(proxy.stalled()).toBe(true);
    // Queued behind it, with a key and without; and one whose client leaves.
    const b = timed("POST", "/v1/table/zw/insert", JSON.stringify(rows(2_000, 3)), { "idempotency-key": "zw-b", "x-request-timeout-ms": "2000" });
    const c = timed("POST", "/v1/table/zw/insert", JSON.stringify(rows(3_000, 3)), { "x-request-timeout-ms": "2000" });
    const gone = timed("POST", "/v1/table/zw/insert", JSON.stringify(rows(4_000, 3)), {}, AbortSignal.timeout(1_000)).catch((e: Error) => e);
    const [ra, rb, rc] = await Promise.all([a, b, c]);
    expect(await gone).toBeInstanceOf(Error);
    expect(ra.status, ra.text).toBe(503);
    expect(ra.detail).toMatch(/deadline of 3000 ms \(--write-timeout-ms.*; its commit had begun and may take effect: retry with the same Idempotency-Key to get its answer/);
    expect(ra.ms).toBeLessThan(3_000 + paced(4_000));
    for (const r of [rb, rc]) {
      expect(r.status, r.text).toBe(503);
      expect(r.detail).toMatch(/deadline of 2000 ms \(--write-timeout-ms.*; none of its table commits had begun, and none begins after this answer/);
      expect(r.ms).toBeLessThan(2_000 + paced(4_000));
    }

    proxy.resume();
    // A's retry waits for its first attempt and answers what that committed, once.
    const again = await timed("POST", "/v1/table/zw/insert", JSON.stringify(rows(1_000, 3)), { "idempotency-key": "zw-a" });
    expect(again.status, again.text).toBe(200);
    expect(JSON.parse(again.text).num_inserted_rows).toBe(3);
    await sleep(3_000);
    expect(await ids("zw", "id >= 1000")).toEqual([1_000, 1_001, 1_002]);
    // B's retry runs it now: its rows are there once.
    const bAgain = await timed("POST", "/v1/table/zw/insert", JSON.stringify(rows(2_000, 3)), { "idempotency-key": "zw-b" });
    expect(bAgain.status, bAgain.text).toBe(200);
    expect(await ids("zw", "id >= 1000")).toEqual([1_000, 1_001, 1_002, 2_000, 2_001, 2_002]);
    expect((await timed("POST", "/v1/table/zw/insert", JSON.stringify(rows(1_000, 3)), { "idempotency-key": "zw-a" })).text).toBe(again.text);
  }, 120_000);

  it("an insert whose Idempotency-Key answer the store holds is answered by its deadline, not held with it; its retry gets that answer once the store answers, the rows there once", async () => {
    expect((await timed("POST", "/v1/table/zk/create", JSON.stringify(rows(0, 5)))).status).toBe(200);
    // The key's claim writes the idempotency table's first data file of this request, its kept answer the second.
    proxy.holdAt(/^PUT \S*idempotency\S*\/data\//m, 2);
    const first = await timed("POST", "/v1/table/zk/insert", JSON.stringify(rows(100, 3)), { "idempotency-key": "zk-a", "x-request-timeout-ms": String(paced(3_000)) }, AbortSignal.timeout(paced(20_000)));
    expect(proxy.holding()).toBe(true);
    // Unbounded, the answer waited for the held keep: none came.
    expect(first.status, first.text).toBe(200);
    expect(JSON.parse(first.text).num_inserted_rows).toBe(3);
    proxy.resume();
    // The retry waits for the keep (the claim is renewed meanwhile) and replays it; one past its own deadline is asked again.
    const again = await probeUntil("the retry's replayed answer", async () => {
      const r = await timed("POST", "/v1/table/zk/insert", JSON.stringify(rows(100, 3)), { "idempotency-key": "zk-a" });
      if (r.status === 503) return null;
      expect(r.status, r.text).toBe(200);
      return r;
    });
    expect(again.text).toBe(first.text);
    expect(await ids("zk", "id >= 100")).toEqual([100, 101, 102]);
  }, 120_000);
});
