// Virtual columns end to end: sql, js and wasm UDFs declared with add_columns, backfilled over
// 100,000 rows and checked against the reference computation. Which rows a backfill computes and
// bad descriptors: virtual-columns-rows.test.ts; UDFs that fail and long backfills:
// virtual-columns-long.test.ts (each file its own server, so vitest runs them side by side).
import { readFileSync } from "node:fs";
import path from "node:path";
import wabtInit from "wabt";
import { beforeAll, describe, expect, it } from "vitest";
import { fromIPC } from "./helpers/arrow.js";
import { virtualColumnServer, js, n } from "./helpers/virtual-columns.js";

const { post, count, fresh, add, backfill } = virtualColumnServer();
const N = 100_000;

let wasm = "";
beforeAll(async () => {
  const wabt = await wabtInit();
  const wat = readFileSync(path.resolve(__dirname, "../native/udf/double_plus_one.wat"), "utf8");
  wasm = Buffer.from(wabt.parseWat("double_plus_one.wat", wat).toBinary({}).buffer).toString("base64");
});

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
