// Virtual columns: which rows a backfill computes (where, missing, stale after an input update or
// an alter, read_version, num_frags); auto_backfill; every validation error, each leaving the table
// as it was.
import { Float64, Table, vectorFromArray } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { paced } from "./helpers/pace.js";
import { virtualColumnServer, rows, js } from "./helpers/virtual-columns.js";

const { q, post, count, version, nextId, fresh, add, backfill } = virtualColumnServer();

describe("which rows a backfill computes", () => {
  it("where: exactly the rows it selects", async () => {
    const t = await fresh();
    await add(t, "y", js("(x) => x + 1"));
    const done = await backfill(t, { column: "y", where: "id < 100" });
    expect(done.properties).toMatchObject({ rows_done: "100", rows_computed: "100", where: "id < 100" });
    expect(await count(t, "y IS NOT NULL")).toBe(100);
  });

  it("by default: rows without a value, and rows whose input changed since", async () => {
    const t = await fresh();
    await add(t, "y", js("(x) => x * 10"));
    expect((await backfill(t, { column: "y" })).properties.rows_computed).toBe("1000");
    expect((await backfill(t, { column: "y" })).properties.rows_computed).toBe("0");
    expect((await post(t, "insert", rows(1000, 10))).status).toBe(200);
    expect((await post(t, "update", { predicate: "id < 5", updates: [["x", "x + 100"]] })).status).toBe(200);
    const done = await backfill(t, { column: "y" });
    expect(done.properties.rows_computed).toBe("15");
    expect(await count(t, "y IS NULL OR y <> x * 10")).toBe(0);
  });

  it("after an alter: old values stay until the next backfill recomputes every row once", async () => {
    const t = await fresh();
    await add(t, "y", js("(x) => x * 2"));
    await backfill(t, { column: "y" });
    const r = await post(t, "alter_columns", { alterations: [{ path: "y", virtual_column: { udf: "(x) => x * 4" } }] });
    expect(r.status, r.text).toBe(200);
    expect(await count(t, "y = x * 2")).toBe(1000);
    const field = (await post(t, "describe", {})).json.schema.fields.find((f: { name: string }) => f.name === "y");
    expect(field.metadata["virtual_column.udf"]).toBe("(x) => x * 4");
    expect((await backfill(t, { column: "y" })).properties.rows_computed).toBe("1000");
    expect(await count(t, "y = x * 4")).toBe(1000);
    expect((await backfill(t, { column: "y" })).properties.rows_computed).toBe("0");
  });

  it("read_version: inputs as of that version; rows changed since are left for the next backfill", async () => {
    const t = await fresh();
    await add(t, "y", js("(x) => x + 1"));
    const v = await version(t);
    expect((await post(t, "update", { predicate: "id < 10", updates: [["x", "x + 1000"]] })).status).toBe(200);
    const done = await backfill(t, { column: "y", read_version: v });
    expect(done.properties).toMatchObject({ read_version: String(v), rows_done: "990", rows_skipped: "10" });
    expect(await count(t, "id < 10 AND y IS NULL")).toBe(10);
    expect((await backfill(t, { column: "y" })).properties.rows_computed).toBe("10");
    expect(await count(t, "y IS NULL OR y <> x + 1")).toBe(0);
  });

  it("num_frags: only the rows of the first fragments", async () => {
    const t = await fresh(100);
    expect((await post(t, "insert", rows(100, 50))).status).toBe(200);
    await add(t, "y", js("(x) => x"));
    expect((await backfill(t, { column: "y", num_frags: 1 })).properties.rows_done).toBe("100");
    expect(await count(t, "y IS NULL")).toBe(50);
  });

  it("auto_backfill: rows written later get a follow-up job", async () => {
    const t = await fresh(100);
    await add(t, "y", js("(x) => x - 1", "float64", { auto_backfill: true }));
    await backfill(t, { column: "y" });
    expect((await post(t, "insert", rows(100, 20))).status).toBe(200);
    expect((await post(t, "insert", rows(120, 20))).status).toBe(200);
    const end = Date.now() + paced(20_000);
    let jobs: { job_id: string; job_type: string; state: string }[] = [];
    while (Date.now() < end) {
      jobs = (await q.call("POST", "/v1/jobs/list", { table: [t] })).json.jobs;
      if (jobs.length >= 2 && jobs.every((j) => j.state !== "IN_PROGRESS")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(jobs.map((j) => j.state)).toEqual(["DONE", "DONE"]);
    const follow = await q.call("POST", `/v1/transaction/${jobs[0].job_id}/describe`, {});
    expect(follow.json.properties).toMatchObject({ auto: "true", rows_computed: "40" });
    expect(await count(t, "y IS NULL OR y <> x - 1")).toBe(0);
  });
});

describe("bad descriptors and requests change nothing", () => {
  let t = "";
  beforeAll(async () => {
    t = await fresh(100);
    await add(t, "good", js("(x) => x"));
  });

  async function rejected(op: string, body: unknown, status: number, detail: RegExp) {
    const before = await version(t);
    const r = await post(t, op, body);
    expect(r.status, r.text).toBe(status);
    expect(r.json.detail).toMatch(detail);
    expect(await version(t)).toBe(before);
  }
  const addVc = (vc: Record<string, unknown>, name = "y") => ({ new_columns: [{ name, virtual_column: vc }] });

  const cases: [string, string, unknown, number, RegExp][] = [
    ["an unknown input column", "add_columns", addVc({ ...js("(x) => x"), input_columns: ["nope"] }), 404, /^new_columns\[0\]\.virtual_column\.input_columns\[0\]: column "nope" not found/],
    ["outputs naming another column", "add_columns", addVc({ ...js("(x) => x"), outputs: [{ column: "other", data_type: { type: "float64" }, nullable: true }] }), 400, /outputs\[0\]\.column: must be the column's own name "y"/],
    ["two outputs", "add_columns", addVc({ ...js("(x) => x"), outputs: [{ column: "y", data_type: { type: "float64" } }, { column: "y", data_type: { type: "float64" } }] }), 400, /one output per virtual column/],
    ["a js body that does not compile", "add_columns", addVc(js("(x) => {")), 400, /^new_columns\[0\]\.virtual_column\.udf: /],
    ["a js body that is not a function", "add_columns", addVc(js("41 + 1")), 400, /must evaluate to a function/],
    ["a type js cannot produce", "add_columns", addVc(js("(x) => x", "binary")), 400, /cannot produce/],
    ["a wasm body that is not a module", "add_columns", addVc({ ...js("x"), udf_backend: "wasm", udf: "bm90IHdhc20=" }), 400, /not a valid WebAssembly module/],
    ["a missing output type", "add_columns", addVc({ udf_backend: "js", udf: "(x) => x", input_columns: ["x"] }), 400, /data_type: is required/],
    ["an sql expression over an unknown column", "add_columns", addVc({ udf_backend: "sql", udf: "nope + 1" }), 400, /^new_columns\[0\]\.virtual_column\.udf: .*nope/],
    ["a non-deterministic sql expression", "add_columns", addVc({ udf_backend: "sql", udf: "random()" }), 400, /not deterministic/],
    ["a manifest whose checksum does not match", "add_columns", addVc({ ...js("(x) => x"), manifest: "{}", manifest_checksum: "00" }), 400, /manifest_checksum: is not the SHA-256/],
    ["virtual and plain columns in one request", "add_columns", { new_columns: [{ name: "y", virtual_column: js("(x) => x") }, { name: "p", expression: "1" }] }, 400, /cannot be mixed/],
    ["an alter combined with a rename", "alter_columns", { alterations: [{ path: "good", rename: "g2", virtual_column: { udf: "(x) => 1" } }] }, 400, /cannot be combined with rename/],
    ["a backfill of a plain column", "backfill_column", { column: "x" }, 400, /"x" is not a virtual column/],
    ["a backfill of an unknown column", "backfill_column", { column: "nope" }, 404, /column "nope" not found/],
    ["a backfill with a bad where", "backfill_column", { column: "good", where: "id >>> 2" }, 400, /^where: /],
    ["a backfill at an unknown version", "backfill_column", { column: "good", read_version: 999 }, 404, /version 999 not found/],
  ];
  for (const [what, op, body, status, detail] of cases) it(`${what} → ${status}`, () => rejected(op, body, status, detail));

  it("a stored-only backend: add and describe work, a backfill is 400 naming the backends that run", async () => {
    const vc = { udf_backend: "DockerUDFSpecV1", udf: "gASVAAAA", image: "img:1", udf_name: "embed", udf_version: "3", input_columns: ["s"], outputs: [{ column: "emb", data_type: { type: "float32" }, nullable: true }] };
    expect(await add(t, "emb", vc)).toBeGreaterThan(0);
    const field = (await post(t, "describe", {})).json.schema.fields.find((f: { name: string }) => f.name === "emb");
    expect(field.metadata).toMatchObject({ "virtual_column.udf_backend": "DockerUDFSpecV1", "virtual_column.image": "img:1", "virtual_column.udf_version": "3" });
    await rejected("backfill_column", { column: "emb" }, 400, /udf_backend "DockerUDFSpecV1" .* is stored but not run by this server; it runs sql, js, python, wasm; for a Python function, send its source with udf_backend "python"/);
  });

  it("a js backfill needs a key; an sql one takes no where", async () => {
    const k = nextId();
    expect((await post(k, "create", toStream(new Table({ x: vectorFromArray([1, 2], new Float64()) })))).status).toBe(200);
    await add(k, "y", js("(x) => x"));
    const r = await post(k, "backfill_column", { column: "y" });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/has none: give it a primary key/);
    await add(t, "sq", { udf_backend: "sql", udf: "x + 1" });
    await rejected("backfill_column", { column: "sq", where: "id < 3" }, 400, /^where: an sql column/);
  });
});
