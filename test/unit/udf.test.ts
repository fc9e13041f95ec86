// The "udf" pool task in process: JavaScript UDFs (scalar, batch, struct fields) in their sandbox,
// the WebAssembly ABI with the example module, and every way a UDF can fail: a throw (naming the
// row's key), a wrong type, a loop past the time limit, and attempts to leave the sandbox.
import { readFileSync } from "node:fs";
import path from "node:path";
import wabtInit from "wabt";
import { beforeAll, describe, expect, it } from "vitest";
import type { UdfDefinition } from "../../src/compute/udf.js";
import { arrow } from "../../src/engine/arrow.js";
import type { JsonArrowDataType } from "../../src/engine/json-arrow.js";
import { runUdf as udf, type UdfReply } from "../../workers/threads/udf.js";
import { paced } from "../helpers/pace.js";

let wasm = "";
beforeAll(async () => {
  const wabt = await wabtInit();
  const wat = readFileSync(path.resolve(__dirname, "../../native/udf/double_plus_one.wat"), "utf8");
  wasm = Buffer.from(wabt.parseWat("double_plus_one.wat", wat).toBinary({}).buffer).toString("base64");
});

let keys = 0;
function def(source: string, type: JsonArrowDataType, opts: Partial<UdfDefinition> = {}): UdfDefinition {
  return {
    key: `k${++keys}`,
    backend: "js",
    source,
    batch: false,
    inputs: ["__in0"],
    sources: ["x"],
    output: { name: "out", type, nullable: true, structField: "" },
    name: "",
    timeoutMs: 1000,
    wasmMaxPages: 64,
    ...opts,
  };
}

const ids = (n: number) => arrow.vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(i)), new arrow.Int64());
function input(cols: Record<string, import("apache-arrow").Vector>): Uint8Array {
  return arrow.tableToIPC(new arrow.Table(cols), "stream");
}
function values(r: UdfReply): unknown[] {
  if (!r.ok) throw new Error(r.error);
  const t = arrow.tableFromIPC(r.output!);
  expect(t.schema.fields.map((f) => f.name)).toEqual(["out"]);
  return [...t.getChild("out")!];
}
const run = (u: UdfDefinition, cols: Record<string, import("apache-arrow").Vector>) => udf({ op: "run", udf: u, input: input(cols), keep: ["id"] });
const int64 = { type: "int64" };

describe("JavaScript UDFs", () => {
  it("scalar: one call per row, int64 in and out", async () => {
    const r = await run(def("(x) => x * 2 + 1", int64), { id: ids(5), __in0: ids(5) });
    expect(values(r)).toEqual([1n, 3n, 5n, 7n, 9n]);
  });

  it("batch: one call with one array per input", async () => {
    const u = def("(xs, ys) => xs.map((x, i) => x + ys[i])", { type: "float64" }, { batch: true, inputs: ["__in0", "__in1"] });
    const r = await run(u, { id: ids(3), __in0: arrow.vectorFromArray([1.5, 2, 3]), __in1: arrow.vectorFromArray([10, 20, 30]) });
    expect(values(r)).toEqual([11.5, 22, 33]);
  });

  it("a struct field of the result, strings, lists and nulls", async () => {
    const u = def("(s, v) => s === null ? null : ({ label: s.toUpperCase() + v.length, other: 1 })", { type: "utf8" }, { inputs: ["__in0", "__in1"], output: { name: "out", type: { type: "utf8" }, nullable: true, structField: "label" } });
    const vec = arrow.vectorFromArray([[1, 2], [3], [4, 5, 6]], new arrow.List(new arrow.Field("item", new arrow.Float32(), true)));
    const r = await run(u, { id: ids(3), __in0: arrow.vectorFromArray(["a", null, "c"], new arrow.Utf8()), __in1: vec });
    expect(values(r)).toEqual(["A2", null, "C3"]);
  });

  it("a fixed-size list output (a vector)", async () => {
    const type = { type: "fixed_size_list", length: 2, fields: [{ name: "item", type: { type: "float32" }, nullable: true }] };
    const r = await run(def("(x) => [Number(x), Number(x) / 2]", type), { id: ids(2), __in0: ids(2) });
    const t = arrow.tableFromIPC((r as { output: Uint8Array }).output);
    expect(Array.from(t.getChild("out")!.get(1) as Float32Array)).toEqual([1, 0.5]);
  });

  it("a struct output with an int64 field (was: Cannot convert 0 to a BigInt)", async () => {
    const type = { type: "struct", fields: [{ name: "n", type: { type: "int64" }, nullable: true }, { name: "l", type: { type: "list", fields: [{ name: "item", type: { type: "int64" }, nullable: true }] }, nullable: true }] };
    const r = await run(def("(x) => ({ n: Number(x) * 10, l: [1, null] })", type), { id: ids(2), __in0: ids(2) });
    expect(values(r).map((v) => JSON.stringify((v as { toJSON(): unknown }).toJSON(), (_, x) => (typeof x === "bigint" ? `${x}n` : x)))).toEqual(['{"n":"0n","l":["1n",null]}', '{"n":"10n","l":["1n",null]}']);
  });

  it("a throw fails the batch naming the row's key", async () => {
    const r = await run(def("(x) => { if (x === 3) throw new Error('bad row'); return x; }", int64), { id: ids(5), __in0: ids(5) });
    expect(r).toEqual({ ok: false, error: "the UDF failed on the row with id = 3: bad row" });
  });

  it("a value of the wrong type fails naming the row", async () => {
    const r = await run(def("(x) => 'text'", int64), { id: ids(2), __in0: ids(2) });
    expect(r).toEqual({ ok: false, error: "the UDF failed on the row with id = 0: expected an integer, got string" });
  });

  it("a batch UDF must return one value per row", async () => {
    const r = await run(def("(xs) => [1]", int64, { batch: true }), { id: ids(3), __in0: ids(3) });
    expect(r).toEqual({ ok: false, error: "the UDF failed on the batch: a batch UDF must return one value per row: got 1 for 3 rows" });
  });

  it("an endless loop stops at the time limit, and the worker stays usable", async () => {
    const u = def("(x) => { for (;;) {} }", int64);
    const t0 = Date.now();
    expect(await run(u, { id: ids(2), __in0: ids(2) })).toEqual({ ok: false, error: "the UDF ran longer than 1000 ms on a batch of 2 rows" });
    expect(Date.now() - t0).toBeLessThan(paced(5_000));
    expect(values(await run(def("(x) => x", int64), { id: ids(2), __in0: ids(2) }))).toEqual([0n, 1n]);
  });

  it("a source that does not compile, or is not a function, is refused by check", async () => {
    expect(await udf({ op: "check", udf: def("(x) => {", int64) })).toMatchObject({ ok: false, error: expect.stringMatching(/Unexpected/) });
    expect(await udf({ op: "check", udf: def("42", int64) })).toEqual({ ok: false, error: "the udf source must evaluate to a function" });
    expect(await udf({ op: "check", udf: def("(x) => x", { type: "map" }) })).toMatchObject({ ok: false, error: expect.stringMatching(/cannot produce/) });
  });

  const escapes: [string, string][] = [
    ["process", "() => process.pid"],
    ["require", "() => require('fs')"],
    ["globalThis.process", "() => globalThis.process.pid"],
    ["constructor.constructor", "(x) => (function () {}).constructor('return process')().pid"],
    ["an input's constructor", "(x) => [x].constructor.constructor('return process')().pid"],
    ["eval", "() => eval('1 + 1')"],
    ["dynamic import", "() => import('node:fs')"],
    ["WebAssembly", "() => WebAssembly.Module.length"],
    ["ArrayBuffer", "() => new ArrayBuffer(8).byteLength"],
    ["SharedArrayBuffer", "() => new SharedArrayBuffer(8).byteLength"],
    ["timers", "() => setTimeout(() => {}, 1)"],
    ["fetch", "() => fetch('http://127.0.0.1')"],
    ["a planted prototype setter", "(x) => { Object.defineProperty(Array.prototype, 0, { set() {} }); return 1; }"],
  ];
  for (const [what, source] of escapes) {
    it(`${what} is out of reach`, async () => {
      const r = await run(def(source, { type: "float64" }), { id: ids(1), __in0: ids(1) });
      expect(r.ok, JSON.stringify(r)).toBe(false);
    });
  }
});

describe("WebAssembly UDFs", () => {
  const wdef = (opts: Partial<UdfDefinition> = {}) => def(wasm, int64, { backend: "wasm", source: wasm, ...opts });

  it("the example module computes x * 2 + 1 and keeps nulls", async () => {
    const x = arrow.vectorFromArray([1n, null, 5n, -4n], new arrow.Int64());
    expect(values(await run(wdef(), { id: ids(4), __in0: x }))).toEqual([3n, null, 11n, -7n]);
  });

  it("many batches, one instance each", async () => {
    const batches = [0, 1, 2].map((b) =>
      new arrow.RecordBatch({ id: arrow.makeData({ type: new arrow.Int64(), length: 3, data: BigInt64Array.from([0n, 1n, 2n].map((i) => i + BigInt(b * 3))) }), __in0: arrow.makeData({ type: new arrow.Int64(), length: 3, data: BigInt64Array.from([1n, 2n, 3n]) }) }),
    );
    const bytes = arrow.tableToIPC(new arrow.Table(batches), "stream");
    const r = await udf({ op: "run", udf: wdef(), input: bytes, keep: ["id"] });
    expect(values(r)).toEqual([3n, 5n, 7n, 3n, 5n, 7n, 3n, 5n, 7n]);
  });

  it("a module outside the ABI is refused by check, naming what is missing", async () => {
    expect(await udf({ op: "check", udf: wdef({ source: Buffer.from("not wasm").toString("base64") }) })).toMatchObject({ ok: false, error: expect.stringMatching(/not a valid WebAssembly module/) });
    const noImport = "AGFzbQEAAAA="; // an empty module
    expect(await udf({ op: "check", udf: wdef({ source: noImport }) })).toMatchObject({ ok: false, error: expect.stringMatching(/env\.memory/) });
  });

  it("a wrong output type fails the batch", async () => {
    const r = await run(wdef({ output: { name: "out", type: { type: "float64" }, nullable: true, structField: "" } }), { id: ids(1), __in0: ids(1) });
    expect(r).toMatchObject({ ok: false, error: expect.stringMatching(/apply returned Int64; the column is Float64/) });
  });
});

describe("Python UDFs", () => {
  const pdef = (source: string, type: JsonArrowDataType, opts: Partial<UdfDefinition> = {}) => def(source, type, { backend: "python", ...opts });

  it("scalar: one call per row, int64 in and out", async () => {
    const r = await run(pdef("def f(x):\n    return x * 2 + 1", int64), { id: ids(5), __in0: ids(5) });
    expect(values(r)).toEqual([1n, 3n, 5n, 7n, 9n]);
  }, 60_000);

  it("batch: one call with one list per input", async () => {
    const u = pdef("def add(xs, ys):\n    return [x + y for x, y in zip(xs, ys)]", { type: "float64" }, { batch: true, inputs: ["__in0", "__in1"] });
    const r = await run(u, { id: ids(3), __in0: arrow.vectorFromArray([1.5, 2, 3]), __in1: arrow.vectorFromArray([10, 20, 30]) });
    expect(values(r)).toEqual([11.5, 22, 33]);
  });

  it("a struct output, a struct field of the result, strings, lists, None and bytes", async () => {
    const u = pdef("def f(s, v, b):\n    return None if s is None else {'label': s.upper() + str(len(v)) + b.hex(), 'other': 1}", { type: "utf8" }, {
      inputs: ["__in0", "__in1", "__in2"],
      output: { name: "out", type: { type: "utf8" }, nullable: true, structField: "label" },
    });
    const vec = arrow.vectorFromArray([[1, 2], [3], [4, 5, 6]], new arrow.List(new arrow.Field("item", new arrow.Float32(), true)));
    const bin = arrow.vectorFromArray([new Uint8Array([1]), new Uint8Array([255]), new Uint8Array([])], new arrow.Binary());
    const r = await run(u, { id: ids(3), __in0: arrow.vectorFromArray(["a", null, "c"], new arrow.Utf8()), __in1: vec, __in2: bin });
    expect(values(r)).toEqual(["A201", null, "C3"]);
    const type = { type: "struct", fields: [{ name: "n", type: { type: "int64" }, nullable: true }, { name: "s", type: { type: "utf8" }, nullable: true }] };
    const s = await run(pdef("def f(x):\n    return {'n': x * 10, 's': 'v' + str(x)}", type), { id: ids(2), __in0: ids(2) });
    expect(values(s).map((v) => (v as { toJSON(): unknown }).toJSON())).toEqual([{ n: 0n, s: "v0" }, { n: 10n, s: "v1" }]);
  });

  it("udf_name picks one of several functions; several without it is refused", async () => {
    const src = "def helper(x):\n    return x + 100\n\ndef main(x):\n    return helper(x) * 2";
    expect(values(await run(pdef(src, int64, { name: "main" }), { id: ids(2), __in0: ids(2) }))).toEqual([200n, 202n]);
    expect(await udf({ op: "check", udf: pdef(src, int64) })).toEqual({ ok: false, error: "the source defines 2 functions (helper, main): name the one to run with udf_name" });
  });

  it("a raise fails the batch naming the row's key; a wrong type names what came back", async () => {
    const r = await run(pdef("def f(x):\n    if x == 3:\n        raise ValueError('bad row')\n    return x", int64), { id: ids(5), __in0: ids(5) });
    expect(r).toEqual({ ok: false, error: "the UDF failed on the row with id = 3: ValueError: bad row" });
    const t = await run(pdef("def f(x):\n    return 'text'", int64), { id: ids(2), __in0: ids(2) });
    expect(t).toEqual({ ok: false, error: "the UDF failed on the row with id = 0: TypeError: expected an int, got a str" });
  });

  it("source that does not compile is refused by check", async () => {
    expect(await udf({ op: "check", udf: pdef("def f(x):\n  return (", int64) })).toMatchObject({ ok: false, error: expect.stringMatching(/SyntaxError/) });
    expect(await udf({ op: "check", udf: pdef("x = 1", int64) })).toEqual({ ok: false, error: "the source defines no function" });
  });

  const escapes: [string, string][] = [
    ["import js", "def f(x):\n    import js\n    return js.process.pid"],
    ["import pyodide_js", "def f(x):\n    import pyodide_js\n    return 1"],
    ["pyodide.code.run_js", "def f(x):\n    from pyodide.code import run_js\n    return run_js('process.pid')"],
    ["import os", "def f(x):\n    import os\n    return os.system('true')"],
    ["os through another module", "import random\ndef f(x):\n    return random._os.system('true')"],
    ["sys.modules", "def f(x):\n    import sys\n    return sys.modules['js'].process.pid"],
    ["subprocess", "def f(x):\n    import subprocess\n    return subprocess.run(['true']).returncode"],
    ["__import__ of js", "def f(x):\n    return __import__('js').process.pid"],
  ];
  for (const [what, source] of escapes) {
    it(`${what} is out of reach`, async () => {
      const r = await run(pdef(source, { type: "float64" }), { id: ids(1), __in0: ids(1) });
      expect(r.ok, JSON.stringify(r)).toBe(false);
      expect(values(await run(pdef("def f(x):\n    return x", int64), { id: ids(1), __in0: ids(1) }))).toEqual([0n]);
    });
  }
});
