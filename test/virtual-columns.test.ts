// Virtual columns end to end: sql, js and wasm UDFs declared with add_columns, backfilled over
// 100,000 rows and checked against the reference computation; which rows a backfill computes
// (where, missing, stale after an input update or an alter); auto_backfill; every validation error,
// each leaving the table as it was; and UDFs that throw, loop or allocate without bound.
import { readFileSync } from "node:fs";
import path from "node:path";
import wabtInit from "wabt";
import { Float64, Int64, Table, Utf8, vectorFromArray } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { fromIPC, toStream } from "./helpers/arrow.js";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const q = serverForFile({ args: ["--udf-timeout-ms", "1000", "--worker-heap-mb", "128", "--auto-backfill-delay-ms", "200", "--workers", "1"] });
const N = 100_000;

let wasm = "";
beforeAll(async () => {
  const wabt = await wabtInit();
  const wat = readFileSync(path.resolve(__dirname, "../native/udf/double_plus_one.wat"), "utf8");
  wasm = Buffer.from(wabt.parseWat("double_plus_one.wat", wat).toBinary({}).buffer).toString("base64");
});

const rows = (from: number, n: number) =>
  toStream(new Table({
    id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(from + i)), new Int64()),
    x: vectorFromArray(Array.from({ length: n }, (_, i) => (from + i) / 4), new Float64()),
    s: vectorFromArray(Array.from({ length: n }, (_, i) => `w${(from + i) % 7}`), new Utf8()),
  }));
const post = (id: string, op: string, body?: unknown, qs = "") => q.call("POST", `/v1/table/${id}/${op}${qs}`, body);
const count = async (id: string, predicate?: string) => (await post(id, "count_rows", predicate ? { predicate } : {})).json as number;
const version = async (id: string) => (await post(id, "describe", {})).json.version as number;

let tables = 0;
async function fresh(n = 1000): Promise<string> {
  const id = `vc${++tables}`;
  expect((await post(id, "create", rows(0, n))).status).toBe(200);
  return id;
}
const js = (udf: string, type = "float64", extra: Record<string, unknown> = {}) => ({ udf_backend: "js", udf, input_columns: ["x"], ...extra, outputs: [{ column: "y", data_type: { type }, nullable: true }] });
/** Add virtual column `name`; the descriptor's output (if any) is renamed to it. */
async function add(t: string, name: string, vc: Record<string, unknown>) {
  const outputs = (vc.outputs as Record<string, unknown>[] | undefined)?.map((o) => ({ ...o, column: name }));
  const r = await post(t, "add_columns", { new_columns: [{ name, virtual_column: { ...vc, ...(outputs ? { outputs } : {}) } }] });
  expect(r.status, r.text).toBe(200);
  return r.json.version as number;
}
async function backfill(t: string, body: Record<string, unknown>) {
  const r = await post(t, "backfill_column", body);
  expect(r.status, r.text).toBe(202);
  return settle(q, r.json.job_id, 120_000);
}
const n = (v: string | undefined) => Number(v);

describe("each backend over 100,000 rows", () => {
  let t = "";
  beforeAll(async () => {
    t = await fresh(N);
  });

  it("sql: LanceDB computes it; the descriptor is in the field metadata", async () => {
    await add(t, "z", { udf_backend: "sql", udf: "x * 3 + 1", input_columns: ["x"], outputs: [{ column: "z", data_type: { type: "float64" }, nullable: true }] });
    const done = await backfill(t, { column: "z" });
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(n(done.properties.rows_done)).toBe(N);
    expect(await count(t, "z IS NULL OR z <> x * 3 + 1")).toBe(0);
    const field = (await post(t, "describe", {})).json.schema.fields.find((f: { name: string }) => f.name === "z");
    expect(field.metadata).toMatchObject({ virtual_column: "true", "virtual_column.udf_backend": "sql", "virtual_column.udf": "x * 3 + 1", "virtual_column.udf_inputs": '["x"]' });
  });

  it("js: computed in the worker pool", async () => {
    await add(t, "y", js("(x) => x * 2 + 1"));
    const done = await backfill(t, { column: "y" });
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties).toMatchObject({ rows_total: String(N), rows_done: String(N), rows_computed: String(N), rows_skipped: "0" });
    expect(await count(t, "y IS NULL OR y <> x * 2 + 1")).toBe(0);
  });

  it("wasm: the example module over an int64 column", async () => {
    await add(t, "w", { udf_backend: "wasm", udf: wasm, input_columns: ["id"], outputs: [{ column: "w", data_type: { type: "int64" }, nullable: true }] });
    const done = await backfill(t, { column: "w" });
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(n(done.properties.rows_done)).toBe(N);
    expect(await count(t, "w IS NULL OR w <> id * 2 + 1")).toBe(0);
  });

  it("js batch mode, string output, struct field of the result", async () => {
    const udf = "(xs, ss) => xs.map((x, i) => ({ label: ss[i] + ':' + Math.floor(x), n: 1 }))";
    await add(t, "label", { udf_backend: "js", udf, input_columns: ["x", "s"], field_metadata: { batch: "true" }, outputs: [{ column: "label", struct_field: "label", data_type: { type: "utf8" }, nullable: true }] });
    const done = await backfill(t, { column: "label" });
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    const r = await post(t, "query", { filter: "id IN (0, 9, 77777)", columns: { column_names: ["id", "label"] }, k: 10 });
    const out = fromIPC(r.bytes);
    const got = Object.fromEntries(Array.from({ length: out.numRows }, (_, i) => [String(out.getChild("id")!.get(i)), out.getChild("label")!.get(i)]));
    expect(got).toEqual({ 0: "w0:0", 9: "w2:2", 77777: "w0:19444" });
  });
});

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
    const end = Date.now() + 20_000;
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
    const k = `vc${++tables}`;
    expect((await post(k, "create", toStream(new Table({ x: vectorFromArray([1, 2], new Float64()) })))).status).toBe(200);
    await add(k, "y", js("(x) => x"));
    const r = await post(k, "backfill_column", { column: "y" });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/has none: give it a primary key/);
    await add(t, "sq", { udf_backend: "sql", udf: "x + 1" });
    await rejected("backfill_column", { column: "sq", where: "id < 3" }, 400, /^where: an sql column/);
  });
});

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
    const end = Date.now() + 30_000;
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
