// Untrusted code against a real server holding API keys (js escapes: sandbox-escape.test.ts):
// Python's way back to JavaScript through Pyodide's internals lands in the compute sandbox process;
// Pyodide's `js` and `pyodide_js` are gone; udtf and chunker bodies escape no further than UDFs;
// wasm `start`/`alloc` stay under the time limit; the sandbox process denies what it must.
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import wabtInit from "wabt";
import { Field, Int64, Schema, Table, Utf8 } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { toStream } from "../helpers/arrow.js";
import { assertClean, attempt, escapeServer } from "../helpers/escapes.js";
import { settle } from "../helpers/transactions.js";
import { paced } from "../helpers/pace.js";

const { q, marks, post, table, addColumn, backfill } = escapeServer();

describe("python UDFs that reach for JavaScript or processes", () => {
  // At the source's top level: add_columns runs it in the server's own sandbox (a call's attempts
  // are the same code path, tested in process by test/unit/udf.test.ts).
  const python = (udf: string) => ({ udf_backend: "python", udf: `${udf}\n\ndef f(x):\n    return str(x)`, input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "utf8" }, nullable: true }] });
  const escapes: [string, string][] = [
    ["import js", "import js\nleak = str(js.process.env)"],
    ["import pyodide_js", "import pyodide_js\nleak = str(pyodide_js._api)"],
    ["run_js", "from pyodide.code import run_js\nleak = str(run_js('process.env'))"],
    ["sys.modules", "import sys\nleak = str(sys.modules['js'].process.env)"],
    ["os.system through another module", "import random\nleak = str(random._os.system('id'))"],
  ];
  for (const [what, udf] of escapes) {
    it(`${what}: add_columns is a 400 saying what is missing, and the column is not added`, { timeout: 120_000 }, async () => {
      const t = await table(2);
      const r = await addColumn(t, python(udf));
      expect(r.status, r.text).toBe(400);
      expect(r.json.detail).toMatch(/not available to UDFs|No module named 'js'|has no attribute 'system'/);
      assertClean(r.text);
      const fields = (await post(`/v1/table/${t}/describe`, {})).json.schema.fields as { name: string }[];
      expect(fields.map((f) => f.name)).not.toContain("y");
    });
  }
});

describe("views whose body escapes", () => {
  const envelope = (source: string) => Buffer.from(JSON.stringify({ backend: "js", source })).toString("base64");
  const types = { int64: new Int64(), utf8: new Utf8() };
  const schema = (fields: [string, "int64" | "utf8"][]) => Buffer.from(toStream(new Table(new Schema(fields.map(([n, t]) => new Field(n, types[t], true)))))).toString("base64");

  for (const kind of ["udtf", "chunker"] as const) {
    it(`a ${kind} with the import() escape: no secret in the view, no file`, { timeout: 240_000 }, async () => {
      const src = await table(10);
      const file = path.join(marks, `view-${kind}`);
      const body = `(() => { let leak = "none"; import("x").catch((e) => { const F = e.constructor.constructor; ${attempt(file)} }); return (rows) => [{ out: String(leak) }]; })()`;
      const view = `esc_${kind}`;
      const r = await post(`/v1/materialized_view/${view}/create`, {
        kind,
        source_query: JSON.stringify({ table: src, ...(kind === "chunker" ? { columns: ["id"] } : {}) }),
        output_schema: schema(kind === "chunker" ? [["id", "int64"], ["out", "utf8"]] : [["out", "utf8"]]),
        udtf_spec: { kind, udtf: envelope(body), udtf_name: "x", udtf_version: "1", input_columns: ["text"] },
        with_no_data: false,
      });
      expect(r.status, r.text).toBe(201);
      const done = await settle(q, r.json.job_id, 120_000);
      for (let i = 0; i < 2 && done.status === "Succeeded"; i++) {
        const again = await post(`/v1/materialized_view/${view}/refresh`, {});
        if (again.status === 202) await settle(q, again.json.job_id, 120_000);
      }
      const out = await post(`/v1/table/${view}/query`, { k: 1000 });
      assertClean(out.text + JSON.stringify(done.properties), file);
    });
  }
});

describe("wasm modules that loop outside apply", () => {
  let wabt: Awaited<ReturnType<typeof wabtInit>>;
  beforeAll(async () => {
    wabt = await wabtInit();
  });
  const module = (start: boolean, alloc: string) =>
    Buffer.from(
      wabt.parseWat("m.wat", `(module (import "env" "memory" (memory 1))
        (func $spin (loop $l (br $l)))
        (func (export "alloc") (param i32) (result i32) ${alloc})
        (func (export "apply") (param i32 i32 i32) (result i32) (i32.const 0))
        ${start ? "(start $spin)" : ""})`).toBinary({}).buffer,
    ).toString("base64");

  for (const [name, start, alloc] of [["whose start loops forever", true, "(i32.const 8)"], ["whose alloc loops forever", false, "(loop $l (br $l)) (i32.const 8)"]] as const) {
    it(`a module ${name}: the job fails with a time-limit error, promptly`, { timeout: 240_000 }, async () => {
      const t = await table(10);
      const r = await addColumn(t, { udf_backend: "wasm", udf: module(start, alloc), input_columns: ["id"], outputs: [{ column: "y", data_type: { type: "int64" }, nullable: true }] });
      expect(r.status, r.text).toBe(200);
      const started = Date.now();
      const done = await backfill(t);
      expect(done.status).toBe("Failed");
      expect(done.properties.error_message).toMatch(/ran longer than 1000 ms|past its time limit/);
      expect(Date.now() - started).toBeLessThan(paced(60_000));
    });
  }
});

/** Python reaches the worker's JavaScript through Pyodide's own modules: then it runs `probe` there. */
const pythonReaching = (probe: string) => `_g = None
def f(x):
    global _g
    if _g is None:
        imp = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "BuiltinImporter"][0].load_module("builtins").__import__
        core = imp("sys").modules["_pyodide_core"]
        _g = core.create_proxy(f).constructor.constructor("return " + ${JSON.stringify(probe)})()
    return str(_g(x))
`;

describe("the compute sandbox process itself", () => {
  for (const backend of ["js", "python"] as const) {
    it(`denies ${backend} code that reaches its JavaScript env, file writes, reads of the data dir and key files, child processes, loopback connections and addons`, { timeout: 120_000 }, async () => {
      const { createCompute } = await import("../../dist/workers/compute-client.js");
      const { udfInSandbox } = await import("../../dist/workers/compute-answers.js");
      const { arrow } = await import("../../dist/src/engine/arrow.js");
      let connections = 0;
      const listener = createServer((s) => {
        connections++;
        s.end("hello");
      });
      await new Promise<void>((r) => listener.listen(0, "127.0.0.1", () => r()));
      const port = (listener.address() as { port: number }).port;
      const addon = path.resolve(__dirname, "../../node_modules/@lancedb/lancedb-linux-x64-gnu/lancedb.linux-x64-gnu.node");
      const keyFile = path.join(q.dataDir, ".quiver");
      const file = path.join(marks, "direct");
      const probe = `(() => { let leak = "pending"; import("x").catch((e) => { const p = e.constructor.constructor("return process")(); const r = {}; const t = (k, f) => { try { r[k] = "ALLOWED " + String(f()).slice(0, 40); } catch (err) { r[k] = "denied"; } };
        t("env", () => { const s = JSON.stringify(p.env); if (s === "{}") throw new Error("empty"); return s; });
        t("write", () => p.getBuiltinModule("fs").writeFileSync(${JSON.stringify(file)}, "x"));
        t("readData", () => p.getBuiltinModule("fs").readdirSync(${JSON.stringify(q.dataDir)}));
        t("readKeys", () => p.getBuiltinModule("fs").readdirSync(${JSON.stringify(keyFile)}));
        t("exec", () => p.getBuiltinModule("child_process").execSync("id"));
        t("dlopen", () => p.dlopen({ exports: {} }, ${JSON.stringify(addon)}));
        r.net = "no answer"; leak = JSON.stringify(r);
        const s = p.getBuiltinModule("net").connect(${port}, "127.0.0.1");
        s.on("connect", () => { r.net = "ALLOWED"; leak = JSON.stringify(r); });
        s.on("error", () => { r.net = "denied"; leak = JSON.stringify(r); }); }); return (x) => leak; })()`;
      const compute = createCompute({ workers: 1, workerHeapMb: 128, sandboxMemoryMb: 1024 });
      try {
        const source = backend === "js" ? probe : pythonReaching(probe);
        const udf = { key: "probe", backend, source, name: "", batch: false, inputs: ["__in0"], sources: ["x"], output: { name: "y", type: { type: "utf8" }, nullable: true, structField: "" }, timeoutMs: 5000, wasmMaxPages: 16 };
        const input = new arrow.Table({ id: arrow.vectorFromArray([1n], new arrow.Int64()), __in0: arrow.vectorFromArray([1], new arrow.Float64()) });
        let answer = "pending";
        for (let i = 0; i < 30 && (answer === "pending" || answer.includes("no answer")); i++) {
          const out = await udfInSandbox(compute, udf as never, arrow.tableToIPC(input, "stream"), input, ["id"]);
          answer = String(out.getChild("y")!.get(0));
          await new Promise((r) => setTimeout(r, 100));
        }
        expect(answer).not.toMatch(/^the UDF|Error/);
        const r = JSON.parse(answer) as Record<string, string>;
        expect({ ...r, net: r.net === "ALLOWED" ? "ALLOWED" : "denied" }).toEqual({ env: "denied", write: "denied", readData: "denied", readKeys: "denied", exec: "denied", dlopen: "denied", net: "denied" });
        expect(connections).toBe(0);
        expect(existsSync(file)).toBe(false);
      } finally {
        await compute.close();
        listener.close();
      }
    });
  }
});
