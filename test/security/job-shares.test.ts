// Row 9 of the bounds attack: two long backfills of one tenant held both backfill slots
// (--backfill-jobs 2), and another tenant's job stayed Queued until they were canceled; no job had
// a run-time bound. Now a tenant (top-level namespace) runs at most --max-running-jobs-per-tenant
// jobs of a kind while another tenant's job waits: one of its backfills is queued again (it
// resumes from its checkpoint later) and the other tenant's starts within seconds; a job past
// --max-job-seconds is stopped as a cancel stops it and ends Failed saying so, its slot free.
import { beforeAll, describe, expect, it, vi } from "vitest";
import { paced } from "../helpers/pace.js";
import { serverForFile } from "../helpers/quiver.js";
import { settle, until } from "../helpers/transactions.js";
import { addColumn, jsColumn, post, rows, TENANT_KEYS, W1, W2 } from "../helpers/sandbox.js";

vi.setConfig({ testTimeout: 300_000 });

const args = ["--workers", "2", "--udf-timeout-ms", "20000"];
const q = serverForFile({ args: [...args, "--backfill-jobs", "2"], env: { QUIVER_API_KEYS: TENANT_KEYS } });
// One backfill slot: the next backfill starts only once the bounded one let go of it.
const bounded = serverForFile({ args: [...args, "--backfill-jobs", "1", "--max-job-seconds", "4"], env: { QUIVER_API_KEYS: TENANT_KEYS } });

/**
 * About 20 ms a row, one task at a time (`concurrency: 1`): 500 rows keep a backfill running for
 * 10 s or more, on one core. Two tasks at a time over 1,000 rows lasted as long and spun twice the CPU.
 */
const SLOW = jsColumn("(x) => { const end = Date.now() + 20; while (Date.now() < end); return String(x); }");
const FAST = jsColumn("(x) => String(x)");
const ROWS = 500;

beforeAll(async () => {
  for (const s of [q, bounded]) {
    for (const ns of ["ns1", "ns2"]) expect((await post(s, `/v1/namespace/${ns}/create`, {})).status).toBe(200);
    for (const t of ["ns1$a", "ns1$b", "ns1$c", "ns2$t"]) expect((await post(s, `/v1/table/${t}/create`, rows(ROWS))).status).toBe(200);
  }
}, 120_000);

const backfill = async (s: typeof q, table: string, column: string, key: string) => {
  const r = await post(s, `/v1/table/${table}/backfill_column`, { column, task_size: 10, checkpoint_size: 50, concurrency: 1 }, key);
  expect(r.status, r.text).toBe(202);
  return r.json.job_id as string;
};
const count = async (s: typeof q, table: string, predicate: string) => (await post(s, `/v1/table/${table}/count_rows`, { predicate })).json as number;

describe("running jobs per tenant while another tenant waits", () => {
  it("two long backfills of ns1 do not keep ns2's backfill Queued: it starts within seconds, one of ns1's goes on, and both of ns1's finish every row", async () => {
    const a = await addColumn(q, "ns1$a", SLOW, W1);
    const b = await addColumn(q, "ns1$b", SLOW, W1);
    const c = await addColumn(q, "ns2$t", FAST, W2);
    for (const r of [a, b, c]) expect(r.status, r.text).toBe(200);
    const ja = await backfill(q, "ns1$a", a.column, W1);
    const jb = await backfill(q, "ns1$b", b.column, W1);
    await until(q, ja, (s) => s === "Running", 60_000);
    await until(q, jb, (s) => s === "Running", 60_000);

    const jc = await backfill(q, "ns2$t", c.column, W2);
    // ns2's backfill starts while neither of ns1's has ended: one of them gives its slot. Before, it
    // waited for one of them to end (10 s and more each). Told by the jobs' states, not a clock.
    let states: string[] = [];
    for (const end = Date.now() + paced(120_000); Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      states = await Promise.all([ja, jb, jc].map(async (j) => (await q.call("POST", `/v1/transaction/${j}/describe`, {})).json.status as string));
      if (states[2] !== "Queued") break;
    }
    expect(states[2]).not.toMatch(/Queued|Failed/);
    expect(states.slice(0, 2)).not.toContain("Succeeded");
    expect(states.slice(0, 2)).toContain("Running");
    expect((await settle(q, jc, 120_000)).status).toBe("Succeeded");
    expect(await count(q, "ns2$t", `${c.column} IS NULL`)).toBe(0);

    // ns1's backfill that gave its slot resumes, and both compute every row.
    for (const [j, table, column] of [[ja, "ns1$a", a.column], [jb, "ns1$b", b.column]]) {
      expect((await settle(q, j, 240_000)).status).toBe("Succeeded");
      expect(await count(q, table, `${column} IS NULL`)).toBe(0);
    }
  });
});

describe("a job's run time", () => {
  it("a backfill past --max-job-seconds ends Failed naming the bound, commits nothing after, and frees its slot", async () => {
    const a = await addColumn(bounded, "ns1$c", SLOW, W1);
    expect(a.status, a.text).toBe(200);
    const j = await backfill(bounded, "ns1$c", a.column, W1);
    const done = await settle(bounded, j, 120_000);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/ran longer than 4 s \(max-job-seconds\)/);
    const after = await count(bounded, "ns1$c", `${a.column} IS NOT NULL`);
    expect(after).toBeLessThan(ROWS);
    await new Promise((r) => setTimeout(r, 2000));
    expect(await count(bounded, "ns1$c", `${a.column} IS NOT NULL`)).toBe(after);
    // Its slot is free: the next backfill starts.
    const c = await addColumn(bounded, "ns2$t", FAST, W2);
    const next = await backfill(bounded, "ns2$t", c.column, W2);
    expect((await until(bounded, next, (s) => s !== "Queued", 30_000)).properties.started_at).toBeDefined();
    await settle(bounded, next, 60_000);
  });
});
