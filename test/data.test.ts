import path from "node:path";
import { Field, Float64, Int32, Schema, Table, Utf8, vectorFromArray } from "apache-arrow";
import * as lancedb from "@lancedb/lancedb";
import { beforeAll, describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const q = inProcessForFile();
beforeAll(async () => {
  expect((await q.call("POST", "/v1/namespace/d/create", {})).status).toBe(200);
  expect((await q.call("POST", "/v1/namespace/d$in/create", {})).status).toBe(200);
});

const rows = (ids: number[], names = ids.map((i) => `n${i}`)) =>
  toStream(new Table({ id: vectorFromArray(ids, new Int32()), name: vectorFromArray(names, new Utf8()) }));
const post = (id: string, op: string, body?: unknown) => q.call("POST", `/v1/table/${id}/${op}`, body);
const count = async (id: string, body: unknown = {}) => (await post(id, "count_rows", body)).json;
const version = async (id: string) => (await post(id, "describe", {})).json.version;
let n = 0;
/** A fresh table d$in$t<n> holding ids 1..k. */
async function fresh(k = 3): Promise<string> {
  const id = `d$in$t${++n}`;
  const ids = Array.from({ length: k }, (_, i) => i + 1);
  expect((await post(id, "create", rows(ids))).status).toBe(200);
  return id;
}
/** Open the table directly with LanceDB, at the location Quiver reports. */
async function direct(id: string) {
  const loc = (await post(id, "describe", {})).json.location as string;
  const db = await lancedb.connect(path.dirname(loc));
  return db.openTable(path.basename(loc, ".lance"));
}

describe("insert", () => {
  it("appends, returns the new version and row count; reads see it at once", async () => {
    const t = await fresh();
    const r = await post(t, "insert", rows([4, 5]));
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: 2, num_inserted_rows: 2 });
    expect(await count(t)).toBe(5);
    expect(await version(t)).toBe(2);
  });

  it("mode overwrite replaces the rows", async () => {
    const t = await fresh();
    const r = await post(t, "insert?mode=Overwrite", rows([9]));
    expect(r.json.version).toBe(2);
    expect(await count(t)).toBe(1);
    expect(await count(t, { version: 1 })).toBe(3);
  });

  it("strings encoded as a dictionary are accepted", async () => {
    const t = await fresh();
    const dict = new Table({ id: vectorFromArray([7], new Int32()), name: vectorFromArray(["x"]) });
    expect((await post(t, "insert", toStream(dict))).status).toBe(200);
    expect(await count(t, { predicate: "name = 'x'" })).toBe(1);
  });

  it("wrong column type is 400 naming the column; nothing written", async () => {
    const t = await fresh();
    const bad = new Table({ id: vectorFromArray([1.5], new Float64()), name: vectorFromArray(["x"], new Utf8()) });
    const r = await post(t, "insert", toStream(bad));
    expect(r.status).toBe(400);
    expect(r.json.detail).toContain('column "id"');
    expect(await version(t)).toBe(1);
    expect(await count(t)).toBe(3);
  });

  it("a column the table lacks is 400 naming it", async () => {
    const t = await fresh();
    const bad = new Table({ id: vectorFromArray([1], new Int32()), extra: vectorFromArray(["x"], new Utf8()) });
    const r = await post(t, "insert", toStream(bad));
    expect(r.status).toBe(400);
    expect(r.json.detail).toContain('column "extra"');
    expect(await version(t)).toBe(1);
  });

  it("nulls or a missing column for a non-nullable column are 400", async () => {
    const schema = new Schema([new Field("k", new Int32(), false), new Field("v", new Utf8(), true)]);
    const data = new Table(schema, {
      k: vectorFromArray([1], new Int32()),
      v: vectorFromArray(["a"], new Utf8()),
    } as any);
    const id = "d$in$strict";
    expect((await post(id, "create", toStream(data))).status).toBe(200);
    const withNull = new Table({ k: vectorFromArray([null], new Int32()), v: vectorFromArray(["b"], new Utf8()) });
    const r1 = await post(id, "insert", toStream(withNull));
    expect(r1.status).toBe(400);
    expect(r1.json.detail).toContain('column "k"');
    const missing = new Table({ v: vectorFromArray(["c"], new Utf8()) });
    const r2 = await post(id, "insert", toStream(missing));
    expect(r2.status).toBe(400);
    expect(r2.json.detail).toContain('column "k"');
    // a missing nullable column is fine (stored as nulls)
    expect((await post(id, "insert", toStream(new Table({ k: vectorFromArray([2], new Int32()) })))).status).toBe(200);
    expect(await count(id)).toBe(2);
  });

  it("a body that is not Arrow IPC is 400; unknown table 404 code 4", async () => {
    const t = await fresh();
    const r = await post(t, "insert", new TextEncoder().encode("garbage"));
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^body: /);
    expect((await post("d$in$nosuch", "insert", rows([1]))).json.code).toBe(4);
    expect((await post("d$nons$t", "insert", rows([1]))).json.code).toBe(1);
    expect(await version(t)).toBe(1);
  });

  it("two concurrent inserts: both rows present, each in its answered version (one group commit may hold both)", async () => {
    const t = await fresh(1);
    const [a, b] = await Promise.all([post(t, "insert", rows([100])), post(t, "insert", rows([200]))]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(await count(t, { predicate: "id = 100", version: a.json.version })).toBe(1);
    expect(await count(t, { predicate: "id = 200", version: b.json.version })).toBe(1);
    expect(await count(t, { predicate: "id IN (100, 200)" })).toBe(2);
  });

  it("an insert on a branch leaves main untouched", async () => {
    const t = await fresh();
    const tbl = await direct(t);
    await (await tbl.branches()).create("dev");
    const r = await post(t, "insert?branch=dev", rows([50, 51]));
    expect(r.status).toBe(200);
    expect(await count(t, { branch: "dev" })).toBe(5);
    expect(await count(t)).toBe(3);
    expect(await version(t)).toBe(1);
  });
});

describe("merge_insert", () => {
  it("upserts with on, update-all and insert-all", async () => {
    const t = await fresh();
    const r = await post(t, "merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true", rows([2, 9], ["two", "nine"]));
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: 2, num_inserted_rows: 1, num_updated_rows: 1, num_deleted_rows: 0 });
    expect(await count(t)).toBe(4);
    expect(await count(t, { predicate: "name = 'two'" })).toBe(1);
  });

  it("takes a composite key repeated or comma-separated, and filtered clauses", async () => {
    const t = await fresh();
    const r1 = await post(t, "merge_insert?on=id&on=name&when_matched_update_all=true&when_not_matched_insert_all=true", rows([1, 5], ["n1", "n5"]));
    expect(r1.json).toMatchObject({ num_inserted_rows: 1, num_updated_rows: 1 });
    const r2 = await post(t, "merge_insert?on=id,name&when_not_matched_insert_all=true", rows([1, 6], ["n1", "n6"]));
    expect(r2.json).toMatchObject({ num_inserted_rows: 1, num_updated_rows: 0 });
    const filt = encodeURIComponent("target.id > 2");
    const r3 = await post(t, `merge_insert?on=id&when_matched_update_all_filt=${filt}`, rows([1, 3], ["x", "y"]));
    expect(r3.json).toMatchObject({ num_updated_rows: 1, num_inserted_rows: 0 });
    const del = encodeURIComponent("id >= 5");
    const r4 = await post(t, `merge_insert?on=id&when_not_matched_by_source_delete=true&when_not_matched_by_source_delete_filt=${del}`, rows([1], ["n1"]));
    expect(r4.json).toMatchObject({ num_deleted_rows: 2 });
    expect(await count(t)).toBe(3);
  });

  it("a composite key given as upstream's repeated `on` matches on both columns", async () => {
    const orders = (customers: number[], dates: string[], amounts: number[]) =>
      toStream(
        new Table({
          customer_id: vectorFromArray(customers, new Int32()),
          order_date: vectorFromArray(dates, new Utf8()),
          amount: vectorFromArray(amounts, new Float64()),
        }),
      );
    const t = `d$in$orders${++n}`;
    expect((await post(t, "create", orders([1, 1, 2], ["2026-01-01", "2026-01-02", "2026-01-01"], [10, 20, 30]))).status).toBe(200);
    // Same customer, one date known and one new; the other customer's same date is a different key.
    const r = await post(
      t,
      "merge_insert?on=customer_id&on=order_date&when_matched_update_all=true&when_not_matched_insert_all=true",
      orders([1, 1, 3], ["2026-01-02", "2026-01-03", "2026-01-01"], [21, 40, 50]),
    );
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ num_updated_rows: 1, num_inserted_rows: 2, num_deleted_rows: 0 });
    expect(await count(t)).toBe(5);
    expect(await count(t, { predicate: "customer_id = 1 AND order_date = '2026-01-02' AND amount = 21" })).toBe(1);
    expect(await count(t, { predicate: "customer_id = 2 AND amount = 30" })).toBe(1);
    // A backtick-quoted field path names the same top-level column.
    const q2 = await post(t, "merge_insert?on=%60customer_id%60&on=order_date&when_matched_update_all=true", orders([2], ["2026-01-01"], [31]));
    expect(q2.json).toMatchObject({ num_updated_rows: 1, num_inserted_rows: 0 });
  });

  it("a nested, repeated or malformed key path is 400 naming it; nothing written", async () => {
    const t = await fresh();
    const before = await version(t);
    const nested = await post(t, "merge_insert?on=name.first&when_not_matched_insert_all=true", rows([9]));
    expect(nested.status).toBe(400);
    expect(nested.json.detail).toContain('"name.first" is a nested field');
    const twice = await post(t, "merge_insert?on=id&on=id&when_not_matched_insert_all=true", rows([9]));
    expect(twice.status).toBe(400);
    expect(twice.json.detail).toMatch(/^on: a key column is named twice/);
    const bad = await post(t, "merge_insert?on=%60id&when_not_matched_insert_all=true", rows([9]));
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toContain("unterminated backtick");
    expect(await version(t)).toBe(before);
  });

  it("missing or unknown `on`, and no clause, are 400; nothing written", async () => {
    const t = await fresh();
    const r1 = await post(t, "merge_insert?when_not_matched_insert_all=true", rows([9]));
    expect(r1.status).toBe(400);
    expect(r1.json.detail).toMatch(/^on: /);
    const r2 = await post(t, "merge_insert?on=zz&when_not_matched_insert_all=true", rows([9]));
    expect(r2.status).toBe(400);
    expect(r2.json.detail).toContain('"zz"');
    const r3 = await post(t, "merge_insert?on=id", rows([9]));
    expect(r3.status).toBe(400);
    const r4 = await post(t, "merge_insert?on=id&when_matched_update_all=maybe", rows([9]));
    expect(r4.status).toBe(400);
    expect(r4.json.detail).toMatch(/^when_matched_update_all: /);
    expect(await version(t)).toBe(1);
  });
});

describe("update and delete", () => {
  it("updates matching rows with SQL expressions", async () => {
    const t = await fresh();
    const r = await post(t, "update", { predicate: "id >= 2", updates: [["name", "concat(name, '!')"]] });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: 2, updated_rows: 2 });
    expect(await count(t, { predicate: "name LIKE '%!'" })).toBe(2);
  });

  it("bad SQL and unknown columns are 400 with the reason; nothing written", async () => {
    const t = await fresh();
    const r1 = await post(t, "update", { predicate: "id ==== 1", updates: [["name", "'x'"]] });
    expect(r1.status).toBe(400);
    expect(r1.json.detail).toMatch(/sql parser error|parsing/i);
    const r2 = await post(t, "update", { updates: [["zz", "'x'"]] });
    expect(r2.status).toBe(400);
    expect(r2.json.detail).toContain('"zz"');
    const r3 = await post(t, "update", { updates: [] });
    expect(r3.status).toBe(400);
    expect(r3.json.detail).toMatch(/^updates: /);
    expect(await version(t)).toBe(1);
  });

  it("deletes rows matching a predicate", async () => {
    const t = await fresh(5);
    const r = await post(t, "delete", { predicate: "id > 3" });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ version: 2, num_deleted_rows: 2 });
    expect(await count(t)).toBe(3);
    const bad = await post(t, "delete", { predicate: "nosuch = 1" });
    expect([bad.status, bad.json.code]).toEqual([404, 12]);
    expect(bad.json.detail).toMatch(/^predicate: .*nosuch/);
    expect((await post(t, "delete", {})).json.detail).toMatch(/^predicate: /);
    expect(await version(t)).toBe(2);
  });

  it("update and delete on a branch leave main untouched", async () => {
    const t = await fresh();
    await (await (await direct(t)).branches()).create("b1");
    expect((await post(t, "update", { branch: "b1", updates: [["name", "'b'"]] })).json.updated_rows).toBe(3);
    expect((await post(t, "delete", { branch: "b1", predicate: "id = 1" })).json.num_deleted_rows).toBe(1);
    expect(await count(t, { branch: "b1" })).toBe(2);
    expect(await count(t)).toBe(3);
    expect(await count(t, { predicate: "name = 'b'" })).toBe(0);
  });
});

describe("count_rows and stats", () => {
  it("counts with predicate and version; a bare integer", async () => {
    const t = await fresh(4);
    await post(t, "insert", rows([5]));
    const r = await post(t, "count_rows", { predicate: "id > 2" });
    expect(r.text).toBe("3");
    expect(await count(t, { version: 1 })).toBe(4);
    const v = await post(t, "count_rows", { version: 42 });
    expect(v.status).toBe(404);
    expect(v.json.code).toBe(11);
    const bad = await post(t, "count_rows", { predicate: "id >" });
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toMatch(/^predicate: /);
    expect((await post(t, "count_rows", { branch: "nob" })).json.code).toBe(22);
  });

  it("stats in the contract's shape", async () => {
    const t = await fresh(4);
    await post(t, "insert", rows([5, 6]));
    await post(t, "delete", { predicate: "id = 1" });
    const r = await post(t, "stats", {});
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ num_rows: 5, num_indices: 0, fragment_stats: { num_fragments: 2, num_small_fragments: 2 } });
    expect(r.json.total_bytes).toBeGreaterThan(0);
    expect(Object.keys(r.json.fragment_stats.lengths).sort()).toEqual(["max", "mean", "min", "p25", "p50", "p75", "p99"]);
    expect(r.json.fragment_stats.lengths.max).toBe(4);
    expect((await post("d$in$nosuch", "stats", {})).json.code).toBe(4);
  });
});
