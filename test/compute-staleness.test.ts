// Staleness is per column: a backfill of one UDF column leaves the others' values fresh, and an
// insert into a table with auto_backfill columns costs each of them only the inserted rows.
import { describe, expect, it, vi } from "vitest";
import { paced } from "./helpers/pace.js";
import { removeDir, serverForFile, startQuiver, type Quiver } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const q = serverForFile({ args: ["--auto-backfill-delay-ms", "100", "--workers", "1"] });
// Several backfills or refreshes per test on a shared 2-core machine.
vi.setConfig({ testTimeout: 300_000 });
const post = (id: string, op: string, body?: unknown, s: Quiver = q) => s.call("POST", `/v1/table/${id}/${op}`, body);
const rows = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ id: from + i, x: from + i }));
const col = (name: string, udf: string, extra: Record<string, unknown> = {}) => ({
  name,
  virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "int64" }, nullable: true }], ...extra },
});

async function table(id: string, n: number, cols: unknown[], s: Quiver = q) {
  expect((await post(id, "create", rows(1, n), s)).status).toBe(200);
  const r = await post(id, "add_columns", { new_columns: cols }, s);
  expect(r.status, r.text).toBe(200);
}
async function backfill(t: string, column: string) {
  const r = await post(t, "backfill_column", { column });
  expect(r.status, r.text).toBe(202);
  const done = await settle(q, r.json.job_id, 200_000);
  expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
  return Number(done.properties.rows_computed);
}

describe("staleness per column", () => {
  it("a backfill of one column leaves another column's values fresh", async () => {
    await table("st1", 3, [col("a", "(x) => x + 1"), col("b", "(x) => x + 1")]);
    const computed: number[] = [];
    for (const c of ["a", "a", "b", "a", "b", "b"]) computed.push(await backfill("st1", c));
    expect(computed).toEqual([3, 0, 3, 0, 0, 0]);
  });

  it("a row whose input changed is stale for every column, also after another column's backfill", async () => {
    await table("st2", 3, [col("a", "(x) => x + 1"), col("b", "(x) => x * 2")]);
    await backfill("st2", "a");
    await backfill("st2", "b");
    expect((await post("st2", "update", { predicate: "id = 2", updates: [["x", "20"]] })).status).toBe(200);
    expect(await backfill("st2", "a")).toBe(1);
    expect(await backfill("st2", "b")).toBe(1);
    expect(await backfill("st2", "a")).toBe(0);
    const r = await q.call("POST", "/v1/table/st2/query", { filter: "id = 2", columns: ["a", "b"], k: 10 }, { accept: "application/json" });
    expect(r.json).toEqual([{ a: 21, b: 40 }]);
  });

  it("a column whose input is another virtual column is stale after that column's backfill", async () => {
    await table("st3", 3, [col("a", "(x) => x + 1")]);
    const r = await post("st3", "add_columns", {
      new_columns: [{ name: "c", virtual_column: { udf_backend: "js", udf: "(a) => a * 10", input_columns: ["a"], outputs: [{ column: "c", data_type: { type: "int64" }, nullable: true }] } }],
    });
    expect(r.status, r.text).toBe(200);
    await backfill("st3", "a");
    expect(await backfill("st3", "c")).toBe(3);
    expect((await post("st3", "update", { predicate: "id = 1", updates: [["x", "5"]] })).status).toBe(200);
    expect(await backfill("st3", "a")).toBe(1);
    expect(await backfill("st3", "c")).toBe(1);
  });

  it("auto_backfill: an insert of 10 rows costs each auto column 10 computed rows", async () => {
    const auto = { auto_backfill: true };
    await table("st4", 2000, [col("a", "(x) => x + 1", auto), col("b", "(x) => x + 2", auto)]);
    await backfill("st4", "a");
    await backfill("st4", "b");
    for (let i = 0; i < 3; i++) expect((await post("st4", "insert", rows(2001 + 10 * i, 10))).status).toBe(200);
    const end = Date.now() + paced(60_000);
    let jobs: { job_id: string; state: string }[] = [];
    for (;;) {
      jobs = (await q.call("POST", "/v1/jobs/list", { table: ["st4"] })).json.jobs;
      const nulls = (await post("st4", "count_rows", { predicate: "a IS NULL OR b IS NULL" })).json as number;
      if (nulls === 0 && jobs.every((j) => j.state !== "IN_PROGRESS")) break;
      if (Date.now() > end) throw new Error(`auto backfills did not finish: ${JSON.stringify(jobs)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    let computed = 0;
    for (const j of jobs.slice(0, jobs.length - 2)) {
      const d = await q.call("POST", `/v1/transaction/${j.job_id}/describe`, {});
      computed += Number(d.json.properties.rows_computed);
    }
    // Three inserts of 10 rows, two columns: at most 60 computed rows (a lost race recomputes a few).
    expect(computed).toBeGreaterThanOrEqual(60);
    expect(computed).toBeLessThanOrEqual(120);
    expect((await post("st4", "count_rows", { predicate: "a <> x + 1 OR b <> x + 2" })).json).toBe(0);
  });
});

describe("auto_backfill under a stream of writes", () => {
  it("writes landing while a follow-up is being queued leave no row uncomputed", { timeout: 240_000 }, async () => {
    // A 10 ms wait: the next write's follow-up starts while the last one still queues its job.
    const s = await startQuiver({ args: ["--auto-backfill-delay-ms", "10", "--workers", "1"] });
    try {
      const auto = { auto_backfill: true };
      await table("ws", 10, [col("a", "(x) => x + 1", auto), col("b", "(x) => x + 2", auto)], s);
      // Follow-ups queue one backfill of a table at a time: never two in progress at once.
      let most = 0;
      let watching = true;
      const watch = (async () => {
        while (watching) {
          const jobs = (await s.call("POST", "/v1/jobs/list", { table: ["ws"] })).json.jobs as { state: string }[];
          most = Math.max(most, jobs.filter((j) => j.state === "IN_PROGRESS").length);
          await new Promise((r) => setTimeout(r, 25));
        }
      })();
      await Promise.all(
        Array.from({ length: 4 }, async (_, c) => {
          for (let i = 0; i < 8; i++) {
            expect((await post("ws", "insert", rows(100 + c * 100 + i, 1), s)).status).toBe(200);
            await new Promise((r) => setTimeout(r, 5 + ((c * 7 + i * 13) % 40)));
          }
        }),
      );
      const end = Date.now() + paced(150_000);
      for (;;) {
        const jobs = (await s.call("POST", "/v1/jobs/list", { table: ["ws"] })).json.jobs as { state: string }[];
        const left = (await post("ws", "count_rows", { predicate: "a IS NULL OR b IS NULL" }, s)).json as number;
        if (left === 0 && jobs.every((j) => j.state !== "IN_PROGRESS")) break;
        if (Date.now() > end) throw new Error(`${left} rows left uncomputed; jobs: ${JSON.stringify(jobs)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      watching = false;
      await watch;
      expect((await post("ws", "count_rows", { predicate: "a <> x + 1 OR b <> x + 2" }, s)).json).toBe(0);
      expect(most).toBe(1);
    } finally {
      await s.stop();
      removeDir(s.dataDir);
    }
  });
});
