// Virtual columns: UDFs that throw, loop or allocate without bound; long backfills cancelled,
// written under, and killed mid-way.
import { describe, expect, it } from "vitest";
import { paced } from "./helpers/pace.js";
import { settle } from "./helpers/transactions.js";
import { virtualColumnServer, rows, js, n } from "./helpers/virtual-columns.js";

const { q, post, count, version, fresh, add, backfill } = virtualColumnServer();

describe("UDFs that fail", () => {
  const failing: [string, string, RegExp][] = [
    ["throws", "(x) => { if (x >= 50) throw new Error('no good'); return x; }", /the UDF failed on the row with id = 200: no good/],
    ["loops forever", "(x) => { for (;;) {} }", /the UDF ran longer than 1000 ms/],
    // Whichever limit it meets first stops it: on a loaded machine the time limit can come before the heap.
    ["allocates without bound", "(x) => { const a = []; for (;;) a.push(new Array(1e6).fill(x)); }", /exceeded the worker heap limit \(--worker-heap-mb 128\)|the UDF ran longer than \d+ ms/],
    ["reaches for process", "(x) => process.pid", /process is not defined/],
  ];
  for (const [what, udf, reason] of failing) {
    it(`one that ${what} fails its job with the reason; the server keeps serving`, async () => {
      const t = await fresh(300);
      await add(t, "y", js(udf));
      const done = await backfill(t, { column: "y" });
      expect(done.status).toBe("Failed");
      expect(done.properties.error_message).toMatch(reason);
      expect(await count(t)).toBe(300);
      expect((await post(t, "query", { k: 3, filter: "id < 3" })).status).toBe(200);
    });
  }
});

describe("long backfills: cancel, concurrent writes, a crash", () => {
  // A batch UDF that takes 150 ms per task of 500 rows: a 10,000-row backfill lasts about 3 s.
  const slow = js("(xs) => { const t = Date.now(); while (Date.now() - t < 150) {} return xs.map((x) => x * 2 + 1); }", "float64", { field_metadata: { batch: "true" } });
  const params = { task_size: 500, checkpoint_size: 1000, concurrency: 1 };
  const props = async (job: string) => (await q.call("POST", `/v1/transaction/${job}/describe`, {})).json as { status: string; properties: Record<string, string> };
  async function start(t: string): Promise<string> {
    const r = await post(t, "backfill_column", { column: "y", ...params });
    expect(r.status, r.text).toBe(202);
    return r.json.job_id;
  }
  async function whenDone(job: string, rows: number) {
    const end = Date.now() + paced(30_000);
    while (Date.now() < end) {
      const p = await props(job);
      if (n(p.properties.rows_done) >= rows) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`job ${job} did not reach ${rows} rows`);
  }

  it("a cancelled backfill, run again, computes each row once", async () => {
    const t = await fresh(10_000);
    await add(t, "y", slow);
    const first = await start(t);
    await whenDone(first, 2000);
    const c = await q.call("POST", `/v1/transaction/${first}/alter`, { actions: [{ setStatusAction: { status: "Canceled" } }] });
    expect(c.json.status).toBe("Canceled");
    const v = await version(t);
    await new Promise((r) => setTimeout(r, 500));
    expect(await version(t)).toBe(v);
    const once = n((await props(first)).properties.rows_computed);
    expect(once).toBeGreaterThanOrEqual(2000);
    expect(once).toBeLessThan(10_000);
    const second = await backfill(t, { column: "y", ...params });
    expect(second.status).toBe("Succeeded");
    expect(once + n(second.properties.rows_computed)).toBe(10_000);
    expect(await count(t, "y IS NULL OR y <> x * 2 + 1")).toBe(0);
  });

  it("inserts and updates during a backfill are kept; a follow-up backfill completes the column", async () => {
    const t = await fresh(10_000);
    await add(t, "y", slow);
    const job = await start(t);
    await whenDone(job, 1000);
    expect((await post(t, "insert", rows(10_000, 100))).status).toBe(200);
    expect((await post(t, "update", { predicate: "id < 50", updates: [["s", "'changed'"]] })).status).toBe(200);
    expect((await post(t, "update", { predicate: "id >= 9000 AND id < 9010", updates: [["x", "x + 1000"]] })).status).toBe(200);
    expect((await settle(q, job, 60_000)).status).toBe("Succeeded");
    expect(await count(t)).toBe(10_100);
    expect(await count(t, "s = 'changed'")).toBe(50);
    expect(await count(t, "id >= 9000 AND id < 9010 AND x >= 1000")).toBe(10);
    // Rows the backfill read before they changed were left for the next one, never overwritten.
    expect(await count(t, "y IS NOT NULL AND y <> x * 2 + 1")).toBe(0);
    await backfill(t, { column: "y", ...params, concurrency: 2 });
    expect(await count(t, "y IS NULL OR y <> x * 2 + 1")).toBe(0);
    expect(await count(t, "s = 'changed'")).toBe(50);
  });

  it("killed mid-backfill (SIGKILL), the server restarts and the same job resumes to every row correct", async () => {
    const t = await fresh(10_000);
    await add(t, "y", slow);
    const job = await start(t);
    await whenDone(job, 2000);
    await q.kill();
    await q.restart();
    const done = await settle(q, job, 60_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(await count(t, "y IS NULL OR y <> x * 2 + 1")).toBe(0);
  });
});
