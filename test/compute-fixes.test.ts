// Bugs found using virtual columns and views as a Geneva user would: each test here failed before its fix.
import { describe, expect, it, vi } from "vitest";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const q = serverForFile({ args: ["--workers", "1"] });
// Several backfills or refreshes per test on a shared 2-core machine.
vi.setConfig({ testTimeout: 300_000 });
const post = (id: string, op: string, body?: unknown) => q.call("POST", `/v1/table/${id}/${op}`, body);
const wantJson = { accept: "application/json" };

describe("JSON inserts", () => {
  it("into a table with an SQL virtual column, leaving the column out: stored, and the column's backfill fills it", async () => {
    expect((await post("sqlvc", "create", [{ id: 1, x: 1.5, s: "a" }])).status).toBe(200);
    const add = await post("sqlvc", "add_columns", { new_columns: [{ name: "twice", virtual_column: { udf_backend: "sql", udf: "x * 2", input_columns: ["x"] } }] });
    expect(add.status, add.text).toBe(200);
    const r = await post("sqlvc", "insert", [{ id: 4, x: 4.5, s: "dddd" }]);
    expect(r.status, r.text).toBe(200);
    const job = await post("sqlvc", "backfill_column", { column: "twice" });
    expect(job.status, job.text).toBe(202);
    expect((await settle(q, job.json.job_id, 200_000)).status).toBe("Succeeded");
    const rows = await q.call("POST", "/v1/table/sqlvc/query", { k: 10, filter: "id = 4", columns: ["id", "twice"] }, wantJson);
    expect(rows.json).toEqual([{ id: 4, twice: 9 }]);
  });

  it("a bool column null in every inserted row: stored as nulls, not a 500", async () => {
    expect((await post("nullbool", "create", [{ a: 1, d: true }])).status).toBe(200);
    for (const row of [{ a: 2 }, { a: 3, d: null }]) {
      const r = await post("nullbool", "insert", [row]);
      expect(r.status, r.text).toBe(200);
    }
    const rows = await q.call("POST", "/v1/table/nullbool/query", { k: 10, columns: ["a", "d"] }, wantJson);
    expect([...rows.json].sort((x: { a: number }, y: { a: number }) => x.a - y.a)).toEqual([{ a: 1, d: true }, { a: 2, d: null }, { a: 3, d: null }]);
  });

  it("a merge that sets a bool column null in every row: 400 naming it, nothing changed", async () => {
    expect((await post("nullbool2", "create", [{ a: 1, d: true }])).status).toBe(200);
    const r = await q.call("POST", "/v1/table/nullbool2/merge_insert?on=a&when_matched_update_all=true", [{ a: 1, d: null }]);
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatch(/"d"/);
    expect((await q.call("POST", "/v1/table/nullbool2/query", { k: 10, columns: ["a", "d"] }, wantJson)).json).toEqual([{ a: 1, d: true }]);
  });
});

describe("backfills of keyed tables", () => {
  it("a js backfill of a table whose key has a BTREE index writes every row (it failed: _rowaddr not found)", async () => {
    const rows = Array.from({ length: 50 }, (_, i) => ({ id: i, x: i }));
    expect((await post("btreekey", "create", rows)).status).toBe(200);
    const idx = await post("btreekey", "create_index", { column: "id", index_type: "BTREE" });
    expect(idx.status, idx.text).toBe(200);
    expect((await settle(q, idx.json.transaction_id, 200_000)).status).toBe("Succeeded");
    const vc = { udf_backend: "js", udf: "(x) => x * 3", input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "int64" }, nullable: true }] };
    expect((await post("btreekey", "add_columns", { new_columns: [{ name: "y", virtual_column: vc }] })).status).toBe(200);
    const job = await post("btreekey", "backfill_column", { column: "y" });
    expect(job.status, job.text).toBe(202);
    const done = await settle(q, job.json.job_id, 200_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties.rows_computed).toBe("50");
    const got = await q.call("POST", "/v1/table/btreekey/query", { k: 100, columns: ["id", "y"] }, wantJson);
    expect(got.json.every((r: { id: number; y: number }) => r.y === r.id * 3)).toBe(true);
    expect(got.json).toHaveLength(50);
  });
});
