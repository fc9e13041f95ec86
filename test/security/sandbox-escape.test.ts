// Untrusted code (js, python and wasm UDFs, udtf and chunker bodies) against a real server holding
// API keys: every way out of the node:vm context that reaches the host realm's `Function`, and
// Python's way back to JavaScript through Pyodide's internals, lands in the compute sandbox
// process, which holds no key, cannot write files, spawn processes, load addons or reach the
// network; Pyodide's `js` and `pyodide_js` are gone; thrown values and wasm `start`/`alloc` stay
// under the time limit.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import wabtInit from "wabt";
import { Field, Float64, Int64, Schema, Table, Utf8, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toStream } from "../helpers/arrow.js";
import { ADMIN_KEY, DEFAULT_KEYS, serverForFile } from "../helpers/quiver.js";
import { settle } from "../helpers/transactions.js";
import { paced } from "../helpers/pace.js";

const q = serverForFile({ args: ["--udf-timeout-ms", "1000", "--workers", "1"] });
const marks = mkdtempSync(path.join(tmpdir(), "quiver-escape-"));
afterAll(() => rmSync(marks, { recursive: true, force: true }));

/** The exploit, verbatim. */
const EXPLOIT = '(() => { let leak = "?"; import("x").catch((e) => { const p = e.constructor.constructor("return process")(); leak = JSON.stringify({ keys: p.env.QUIVER_API_KEYS, id: p.getBuiltinModule("child_process").execSync("id").toString() }); }); return (id) => leak; })()';

/** From the host `Function` reached through `via` (an expression of `e`, `src`), try everything and report it. */
const attempt = (file: string) =>
  `const p = F("return process")(); const r = []; const t = (f) => { try { r.push(String(f())); } catch (err) { r.push("denied"); } };` +
  ` t(() => JSON.stringify(p.env)); t(() => JSON.stringify(p.argv)); t(() => p.getBuiltinModule("child_process").execSync("id").toString());` +
  ` t(() => p.getBuiltinModule("fs").writeFileSync(${JSON.stringify(file)}, "x")); leak = r.join("|");`;

/** Does a value from the sandbox hold anything it must never reach? */
function assertClean(text: string, file?: string) {
  for (const [key] of DEFAULT_KEYS.split(",").map((k) => k.split(":"))) expect(text).not.toContain(key);
  expect(text).not.toContain("uid=");
  if (file) expect(existsSync(file)).toBe(false);
}

const rows = (n: number) =>
  toStream(new Table({
    id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(i)), new Int64()),
    x: vectorFromArray(Array.from({ length: n }, (_, i) => i / 2), new Float64()),
    text: vectorFromArray(Array.from({ length: n }, (_, i) => `w${i} v${i}`), new Utf8()),
  }));
const post = (p: string, body?: unknown, key = ADMIN_KEY) => q.call("POST", p, body, { "x-api-key": key });
let tables = 0;
async function table(n = 20): Promise<string> {
  const id = `esc${++tables}`;
  expect((await post(`/v1/table/${id}/create`, rows(n))).status).toBe(200);
  return id;
}
const jsColumn = (udf: string, type = "utf8") => ({ udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: "y", data_type: { type }, nullable: true }] });
async function addColumn(t: string, vc: object) {
  return post(`/v1/table/${t}/add_columns`, { new_columns: [{ name: "y", virtual_column: vc }] });
}
async function backfill(t: string) {
  const r = await post(`/v1/table/${t}/backfill_column`, { column: "y", task_size: 5, concurrency: 1 });
  expect(r.status, r.text).toBe(202);
  return settle(q, r.json.job_id, 120_000);
}
async function columnText(t: string): Promise<string> {
  const r = await post(`/v1/table/${t}/query`, { k: 1000, columns: { column_names: ["y"] } }, undefined);
  expect(r.status).toBe(200);
  return Buffer.from(r.bytes).toString("latin1");
}

describe("a js virtual column that escapes the vm context", () => {
  it("the issue's exploit, backfilled and queried: no key material, no uid=", { timeout: 240_000 }, async () => {
    const t = await table(20);
    expect((await addColumn(t, jsColumn(EXPLOIT))).status).toBe(200);
    const done = await backfill(t);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    assertClean(await columnText(t));
  });

  it("a write at add_columns time (the check runs the source) leaves no file", async () => {
    const t = await table(5);
    const file = path.join(marks, "add-columns");
    const udf = `(() => { let leak; const F = (async () => {}).constructor; import("x").catch((e) => { const F = e.constructor.constructor; ${attempt(file)} }); return (x) => String(leak); })()`;
    await addColumn(t, jsColumn(udf));
    await new Promise((r) => setTimeout(r, 500));
    assertClean("", file);
  });

  // Every object the source can hold that might come from the host realm.
  const vias: [string, string][] = [
    ["the import() error", 'import("x").catch((e) => { const F = e.constructor.constructor; BODY });'],
    ["an input value", "self = (x) => { try { const F = x.constructor.constructor; BODY } catch {} return String(leak); };"],
    ["a caught TypeError", "try { null.x; } catch (e) { const F = e.constructor.constructor; BODY }"],
    ["a promise", "const F = Promise.resolve().constructor.constructor; BODY"],
    ["an iterator", "const F = [][Symbol.iterator]().constructor.constructor; BODY"],
    ["arguments", "(function () { const F = arguments.constructor.constructor; BODY })();"],
    ["a generator", "const F = (function* () {}).constructor.constructor; BODY"],
    ["an async function", "const F = (async () => {}).constructor; BODY"],
    ["a stack-trace hook", "try { Error.prepareStackTrace = (e, s) => s; const s = new Error().stack; const F = s[0].getFunction().constructor; BODY } catch (e) { try { Error.captureStackTrace({}); } catch {} }"],
    ["a Proxy's traps", "const P = new Proxy({}, { get: (o, k, r) => { try { const F = r.constructor.constructor; BODY } catch {} return undefined; } }); P.x;"],
  ];
  for (const [name, via] of vias) {
    it(`constructor.constructor through ${name}: no secret, no file, no process`, { timeout: 240_000 }, async () => {
      const t = await table(10);
      const file = path.join(marks, name.replace(/\W+/g, "-"));
      const udf = `(() => { let leak = "none"; let self = null; try { ${via.replace("BODY", attempt(file))} } catch (e) {} return self ?? ((x) => String(leak)); })()`;
      const added = await addColumn(t, jsColumn(udf));
      if (added.status === 200) {
        const done = await backfill(t);
        if (done.status === "Succeeded") assertClean(await columnText(t), file);
        else assertClean(JSON.stringify(done.properties), file);
      } else {
        expect(added.status).toBe(400);
        assertClean(added.text, file);
      }
    });
  }

  it("results with Symbol.toPrimitive, toJSON, getters and Proxies: the job fails or stores plain values, nothing leaks", { timeout: 240_000 }, async () => {
    const t = await table(10);
    const file = path.join(marks, "results");
    const hook = `() => { const F = (async () => {}).constructor; let leak; ${attempt(file)} return leak; }`;
    const udf = `(x) => { const h = ${hook}; return [{ [Symbol.toPrimitive]: h, toJSON: h, toString: h }, { get length() { return h(); } }, new Proxy({}, { get: h })][Math.floor(x) % 3]; }`;
    expect((await addColumn(t, jsColumn(udf))).status).toBe(200);
    const done = await backfill(t);
    expect(done.status).toBe("Failed");
    assertClean(JSON.stringify(done.properties), file);
  });

  it("a thrown getter at compile time ends within the time limit with a clear 400", async () => {
    const t = await table(5);
    const started = Date.now();
    const r = await addColumn(t, jsColumn("(() => { throw Object.create(Error.prototype, { message: { get() { for (;;); } }, code: { get() { for (;;); } } }); })()"));
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(/ran longer than 1000 ms/);
    expect(Date.now() - started).toBeLessThan(paced(20_000));
  });

  it("a memory bomb at definition ends as a clear 400, and the server keeps serving", async () => {
    const t = await table(5);
    const r = await addColumn(t, jsColumn("(() => { const a = []; for (;;) a.push(new Array(1e6).fill(1)); })()"));
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatch(/ran out of memory|ran longer than 1000 ms/);
    expect((await post(`/v1/table/${t}/count_rows`, {})).json).toBe(5);
  });
});

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
