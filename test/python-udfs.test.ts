// Python UDFs end to end on a real server, in its compute sandbox: virtual columns (scalar, batch,
// struct output, udf_name), a udtf and a chunker view, and the time limit. Escapes: test/security/sandbox-escape-backends.test.ts;
// the memory limit: test/python-memory.test.ts.
import { Field, Float64, Int64, Schema, Table, Utf8, vectorFromArray } from "apache-arrow";
import { describe, expect, it, vi } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

// Each worker loads its interpreter once (about 0.5 s from the build's snapshot, more on a loaded
// machine): one worker, as these tests run one Python task at a time.
const q = serverForFile({ args: ["--udf-timeout-ms", "2000", "--workers", "1"] });
vi.setConfig({ testTimeout: 240_000 });

const post = (p: string, body?: unknown) => q.call("POST", p, body);
const json = { accept: "application/json" };
let tables = 0;
async function table(n = 6): Promise<string> {
  const id = `py${++tables}`;
  const rows = Array.from({ length: n }, (_, i) => ({ id: i + 1, x: (i + 1) / 2, s: `w${i + 1} v${i + 1}` }));
  expect((await post(`/v1/table/${id}/create`, rows)).status).toBe(200);
  return id;
}
const python = (udf: string, type: object, extra: Record<string, unknown> = {}, column = "y") => ({ udf_backend: "python", udf, input_columns: ["x"], outputs: [{ column, data_type: type, nullable: true }], ...extra });
async function addColumn(t: string, vc: object, name = "y") {
  return post(`/v1/table/${t}/add_columns`, { new_columns: [{ name, virtual_column: vc }] });
}
async function backfill(t: string, column = "y") {
  const r = await post(`/v1/table/${t}/backfill_column`, { column });
  expect(r.status, r.text).toBe(202);
  return settle(q, r.json.job_id, 200_000);
}
async function values(t: string, column = "y"): Promise<unknown[]> {
  const r = await q.call("POST", `/v1/table/${t}/query`, { k: 100, columns: ["id", column] }, json);
  expect(r.status, r.text).toBe(200);
  return (r.json as Record<string, unknown>[]).sort((a, b) => Number(a.id) - Number(b.id)).map((row) => row[column]);
}

describe("Python virtual columns", () => {
  it("scalar: one call per row", async () => {
    const t = await table();
    expect((await addColumn(t, python("import math\n\ndef f(x):\n    return math.floor(x * 10) + 1", { type: "int64" }))).status).toBe(200);
    const done = await backfill(t);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    expect(done.properties.rows_computed).toBe("6");
    expect(await values(t)).toEqual([6, 11, 16, 21, 26, 31]);
  });

  it("batch: one call per batch with one list per input, udf_name choosing among functions", async () => {
    const t = await table();
    const udf = "def helper(v):\n    return v * 100\n\ndef scale(xs, ss):\n    return [helper(x) + len(s) for x, s in zip(xs, ss)]";
    const r = await addColumn(t, python(udf, { type: "float64" }, { udf_name: "scale", input_columns: ["x", "s"], field_metadata: { batch: "true" } }));
    expect(r.status, r.text).toBe(200);
    expect((await backfill(t)).status).toBe("Succeeded");
    expect(await values(t)).toEqual([55, 105, 155, 205, 255, 305]);
  });

  it("a struct output", async () => {
    const t = await table(2);
    const type = { type: "struct", fields: [{ name: "word", type: { type: "utf8" }, nullable: true }, { name: "n", type: { type: "int64" }, nullable: true }] };
    expect((await addColumn(t, python("def f(s):\n    w = s.split(' ')\n    return {'word': w[0], 'n': len(w)}", type, { input_columns: ["s"] }))).status).toBe(200);
    expect((await backfill(t)).status).toBe("Succeeded");
    expect(await values(t)).toEqual([{ word: "w1", n: 2 }, { word: "w2", n: 2 }]);
  });

  it("a source that does not compile is a 400 at add_columns naming the error", async () => {
    const t = await table(1);
    const r = await addColumn(t, python("def f(x):\n    return (", { type: "int64" }));
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/SyntaxError/);
  });

  it("an endless loop fails the backfill at the time limit, and the next Python backfill works", async () => {
    const t = await table(2);
    expect((await addColumn(t, python("def f(x):\n    while True:\n        pass", { type: "int64" }))).status).toBe(200);
    const done = await backfill(t);
    expect(done.status).toBe("Failed");
    expect(JSON.stringify(done.properties)).toMatch(/ran longer than 2000 ms/);
    const z = await addColumn(t, python("def f(x):\n    return int(x * 2)", { type: "int64" }, {}, "z"), "z");
    expect(z.status, z.text).toBe(200);
    expect((await backfill(t, "z")).status).toBe("Succeeded");
    expect(await values(t, "z")).toEqual([1, 2]);
  });
});

describe("Python views", () => {
  const envelope = (source: string) => Buffer.from(JSON.stringify({ backend: "python", source })).toString("base64");
  const types = { int64: new Int64(), float64: new Float64(), utf8: new Utf8() };
  const schemaOf = (fields: [string, keyof typeof types][]) => Buffer.from(toStream(new Table(new Schema(fields.map(([n, t]) => new Field(n, types[t], true)))))).toString("base64");

  async function view(name: string, body: object) {
    const r = await post(`/v1/materialized_view/${name}/create`, body);
    expect(r.status, r.text).toBe(201);
    const done = await settle(q, r.json.job_id, 200_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    const rows = await q.call("POST", `/v1/table/${name}/query`, { k: 1000 }, json);
    return rows.json as Record<string, unknown>[];
  }

  it("a udtf: all rows in, any rows out", async () => {
    const src = await table(4);
    const udtf = "def total(rows):\n    return [{'n': len(rows), 'sum': sum(r['x'] for r in rows)}]";
    const rows = await view("py_udtf", {
      kind: "udtf",
      source_query: JSON.stringify({ table: src }),
      output_schema: schemaOf([["n", "int64"], ["sum", "float64"]]),
      udtf_spec: { kind: "udtf", udtf: envelope(udtf), udtf_name: "total", udtf_version: "1", input_columns: ["x"] },
      with_no_data: false,
    });
    expect(rows).toEqual([{ n: 4, sum: 5 }]);
  });

  it("a chunker: each row to its words", async () => {
    const src = await table(2);
    const chunker = "def split(row):\n    return [{'word': w, 'pos': i} for i, w in enumerate(row['s'].split(' '))]";
    const rows = await view("py_chunks", {
      kind: "chunker",
      source_query: JSON.stringify({ table: src, columns: ["id"] }),
      output_schema: schemaOf([["id", "int64"], ["word", "utf8"], ["pos", "int64"]]),
      udtf_spec: { kind: "chunker", udtf: envelope(chunker), udtf_name: "split", udtf_version: "1", input_columns: ["s"] },
      with_no_data: false,
    });
    const got = rows.map(({ id, word, pos }) => ({ id, word, pos })).sort((a, b) => Number(a.id) - Number(b.id) || Number(a.pos) - Number(b.pos));
    expect(got).toEqual([
      { id: 1, word: "w1", pos: 0 },
      { id: 1, word: "v1", pos: 1 },
      { id: 2, word: "w2", pos: 0 },
      { id: 2, word: "v2", pos: 1 },
    ]);
  });
});
