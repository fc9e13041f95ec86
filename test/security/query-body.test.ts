// Issue 50, row 4: one query of 55,000 query vectors (990 KB) held the event loop ~30-100 ms in
// JSON.parse and validation, even when its answer was a 400. A query body of READ_AHEAD bytes or
// more is now parsed and validated in the worker pool, its vectors read into one Float32Array: the
// answers are the event loop's (the 400 past the bound, the rows at the bound, every bad vector's 400).
// explain_plan and analyze_plan carry a query too: their large bodies take the same path, with the
// same answers (before, they were parsed and validated on the event loop at any size).
import * as lancedb from "@lancedb/lancedb";
import { describe, expect, it } from "vitest";
import { batches, queryVectors } from "../../bench/dataset.js";
import { READ_AHEAD } from "../../src/schemas/query-body.js";
import { sample } from "../helpers/metrics.js";
import { READ_KEY, serverForFile } from "../helpers/quiver.js";

const SPEC = { rows: 500, dim: 16, rank: 4, seed: 11 };
const qv = queryVectors(SPEC, 512).map((v) => Array.from(v));

const q = serverForFile({
  args: ["--serving", "off"],
  seed: async (dataDir) => {
    const db = await lancedb.connectNamespace("dir", { root: dataDir });
    await db.createTable("v", [...batches(SPEC, SPEC.rows)][0]);
  },
});
const query = (body: unknown) => q.call("POST", "/v1/table/v/query", typeof body === "string" ? body : JSON.stringify(body), { "x-api-key": READ_KEY, "content-type": "application/json", accept: "application/json" });
const reads = async () => sample((await q.call("GET", "/metrics")).text, "quiver_pool_task_seconds_count", { task: "queryBody" }) ?? 0;
const ids = (rows: { id: number; query_index?: number }[], i?: number) => rows.filter((r) => i === undefined || r.query_index === i).map((r) => r.id);

describe("a large query body", () => {
  it("past the bound on query vectors is read in the pool and refused with the same 400", async () => {
    const body = `{"k":10,"vector":{"multi_vector":[${Array(55_000).fill("[0,0,0,0,0,0,0,1]").join(",")}]}}`;
    const before = await reads();
    const r = await query(body);
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toBe("vector.multi_vector: must NOT have more than 512 items");
    expect(await reads()).toBe(before + 1);
    const flat = await query(`{"k":10,"vector":[${Array(55_000).fill("[0,0,0,0,0,0,0,1]").join(",")}]}`);
    expect(flat.json.detail).toBe("vector: must NOT have more than 512 items");
  });

  it("at the bound is read in the pool and answers each vector's rows as a small query does", async () => {
    const body = JSON.stringify({ k: 3, columns: ["id"], vector: { multi_vector: qv } });
    expect(body.length).toBeGreaterThan(READ_AHEAD);
    const before = await reads();
    const r = await query(body);
    expect(r.status, r.text).toBe(200);
    expect(await reads()).toBe(before + 1);
    expect(r.json).toHaveLength(3 * 512);
    for (const i of [0, 255, 511]) {
      const one = await query({ k: 3, columns: ["id"], vector: { single_vector: qv[i] } });
      expect(ids(r.json, i)).toEqual(ids(one.json));
    }
    // The flat list LanceDB's client sends, and one vector padded past the threshold by a long list of them.
    const list = await query({ k: 3, columns: ["id"], vector: qv });
    expect(list.json).toEqual(r.json);
    // A small body is read where it is, as before.
    expect((await query({ k: 3, columns: ["id"], vector: { single_vector: qv[0] } })).status).toBe(200);
    expect(await reads()).toBe(before + 2);
  });

  it("with a bad vector is the same 400 naming the same field as a small body", async () => {
    const many = qv.slice(0, 500);
    const pad = JSON.stringify(many).slice(1, -1);
    for (const [vector, detail] of [
      [`{"multi_vector":[${pad},["x"]]}`, "vector.multi_vector[500][0]: must be number"],
      [`{"multi_vector":[${pad},[1,2]]}`, "vector.multi_vector[500]: has 2 dimensions, vector.multi_vector[0] has 16"],
      [`{"multi_vector":[${pad},[]]}`, "vector.multi_vector[500]: must not be empty"],
      [`{"multi_vector":[${pad},[1e400]]}`, "vector.multi_vector[500][0]: a number outside the range of a 64-bit float"],
      [`{"multi_vector":[${pad},[[1]]]}`, "vector.multi_vector[500][0]: must be number"],
      [`{"single_vector":[${pad}]}`, "vector.single_vector[0]: must be number"],
      [`{"single_vector":[${JSON.stringify(qv[0].concat(...qv.slice(1, 500))).slice(1, -1)}],"multi_vector":[[1]]}`, "vector: provide single_vector or multi_vector, not both"],
      [`{"single_vector":[${Array(20_000).fill(1).join(",")}]}`, null],
    ] as const) {
      const r = await query(`{"k":3,"vector":${vector}}`);
      expect(r.status, vector.slice(-40)).toBe(400);
      if (detail !== null) expect(r.json.detail).toBe(detail);
      else expect(r.json.detail).toMatch(/^vector/);
    }
  });
});

describe("a large explain_plan or analyze_plan body", () => {
  const plan = (op: "explain_plan" | "analyze_plan", body: string) => q.call("POST", `/v1/table/v/${op}`, body, { "x-api-key": READ_KEY, "content-type": "application/json" });
  // The same body, whitespace taking it past READ_AHEAD: read in the pool.
  const padded = (body: string) => body + " ".repeat(READ_AHEAD);

  it("past the bound on query vectors is read in the pool and refused with the query's 400", async () => {
    const vectors = Array(55_000).fill("[0,0,0,0,0,0,0,1]").join(",");
    const before = await reads();
    const explain = await plan("explain_plan", `{"query":{"k":10,"vector":{"multi_vector":[${vectors}]}}}`);
    expect(explain.status, explain.text).toBe(400);
    expect(explain.json.detail).toBe("query.vector.multi_vector: must NOT have more than 512 items");
    const analyze = await plan("analyze_plan", `{"k":10,"vector":[${vectors}]}`);
    expect(analyze.status, analyze.text).toBe(400);
    expect(analyze.json.detail).toBe("vector: must NOT have more than 512 items");
    expect(await reads()).toBe(before + 2);
  });

  it("is read in the pool and answers the plan of the same body read on the event loop", async () => {
    const query = { k: 3, columns: ["id"], vector: { multi_vector: qv.slice(0, 2) } };
    const small = JSON.stringify({ query, verbose: true });
    const before = await reads();
    const [looped, pooled] = [await plan("explain_plan", small), await plan("explain_plan", padded(small))];
    expect(looped.status, looped.text).toBe(200);
    expect(pooled.json).toBe(looped.json);
    expect(await reads()).toBe(before + 1);
    // The vectors read in the pool reach the plan: without them it is another (a scan's).
    expect((await plan("explain_plan", padded(JSON.stringify({ query: { k: 3, columns: ["id"] }, verbose: true })))).json).not.toBe(looped.json);
    // Every query vector the bound allows, past the threshold by themselves.
    const full = await plan("explain_plan", JSON.stringify({ query: { ...query, vector: { multi_vector: qv } } }));
    expect(full.status, full.text).toBe(200);
    // analyze_plan takes the query's fields at the top level, and runs it.
    const analyzed = await plan("analyze_plan", padded(JSON.stringify(query)));
    expect(analyzed.status, analyzed.text).toBe(200);
    expect(analyzed.json).toMatch(/output_rows=6\b/);
    expect(await reads()).toBe(before + 4);
  });

  it("with a bad query is the same 400 naming the same field as on the event loop", async () => {
    const bad = [
      ["explain_plan", `{"query":{"k":3,"vector":{"multi_vector":[[1,2],["x"]]}}}`],
      ["explain_plan", `{"query":{"k":3,"vector":{"multi_vector":[[1,2],[1]]}}}`],
      ["explain_plan", `{"query":{"k":3,"vector":[[1e400]]}}`],
      ["explain_plan", `{"query":{"k":3,"vector":{"single_vector":[1],"multi_vector":[[1]]}}}`],
      ["explain_plan", `{"query":{"k":3,"vector":${"[".repeat(70)}${"]".repeat(70)}}}`],
      ["explain_plan", `{"query":5}`],
      ["explain_plan", `{"verbose":true}`],
      ["explain_plan", `{"query":{"k":-1}}`],
      ["explain_plan", `{"query":{"k":3},"bogus":1}`],
      ["analyze_plan", `{"k":3,"vector":{"multi_vector":[[1,2],["x"]]}}`],
      ["analyze_plan", `{"k":3,"query":{}}`],
    ] as const;
    const before = await reads();
    for (const [op, body] of bad) {
      const looped = await plan(op, body);
      expect(looped.status, body).toBe(400);
      const pooled = await plan(op, padded(body));
      expect([pooled.status, pooled.json.detail], body).toEqual([400, looped.json.detail]);
    }
    expect(await reads()).toBe(before + bad.length);
  });
});
