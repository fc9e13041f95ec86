// Pool task "udf": compile a JavaScript, Python or WebAssembly UDF (once per worker, cached by its
// definition hash) and run it over one batch of input rows, moved in as Arrow IPC bytes; the
// computed column alone is moved back as IPC bytes (the caller keeps the keys it sent: an answer
// cannot name other rows).
import type * as A from "apache-arrow";
import { isMainThread } from "node:worker_threads";
import { Piscina } from "piscina";
import { jsShape, type Shape, type UdfDefinition } from "../../src/compute/udf.js";
import { arrow } from "../../src/engine/arrow.js";
import { fromJsonType } from "../../src/engine/json-arrow.js";
import { column, plain, toVector } from "./arrow-values.js";
import { compilePython, loadPython, usePythonInterrupt, type Interpreter } from "./python.js";
import { compileJs, type Sandbox } from "./sandbox.js";
import { compileWasm, runWasm, type WasmUdf } from "./wasm-udf.js";

/** `interrupt`: a Python UDF's time limit, set from the sandbox process's main thread (python.ts). */
export type UdfRequest =
  | { op: "check"; udf: UdfDefinition; interrupt?: Int32Array }
  | { op: "run"; udf: UdfDefinition; input: Uint8Array; keep: string[]; interrupt?: Int32Array };

/** `output`: IPC stream bytes of the computed column; `rows`: rows the UDF computed. An error names the failing row by its key. */
export type UdfReply = { ok: true; output?: Uint8Array; rows?: number } | { ok: false; error: string };

/** What crosses back to the main thread: the output bytes (moved), or the failure. */
export type UdfTaskReply = Uint8Array | { ok: boolean; error?: string };

type Compiled = { kind: "sandbox"; sandbox: Sandbox; shape: Shape } | { kind: "wasm"; wasm: WasmUdf };

// A UDF may drop a rejected promise; in a worker that must not end the thread.
if (!isMainThread) process.on("unhandledRejection", () => undefined);

const CACHE_SIZE = 16;
const cache = new Map<string, Compiled>();

/** `python`: the loaded interpreter (its generation keys the cache: a reloaded one compiles again). */
function compile(udf: UdfDefinition, python: Interpreter | null): Compiled {
  const key = python ? `${udf.key}:${python.generation}` : udf.key;
  const hit = cache.get(key);
  if (hit) return hit;
  let c: Compiled;
  if (udf.backend === "wasm") {
    c = { kind: "wasm", wasm: compileWasm(udf.source, udf.wasmMaxPages) };
  } else {
    const shape = jsShape(udf.output.type);
    if (!shape) throw new Error(`a ${udf.backend === "js" ? "JavaScript" : "Python"} UDF cannot produce ${JSON.stringify(udf.output.type)}`);
    const sandbox = python ? compilePython(python, udf.source, udf.name, udf.timeoutMs) : compileJs(udf.source, udf.timeoutMs);
    c = { kind: "sandbox", sandbox, shape };
  }
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(key, c);
  return c;
}

function keyOf(t: A.Table, keep: string[], row: number): string {
  if (row < 0) return "the batch";
  return `the row with ${keep.map((k) => `${k} = ${JSON.stringify(plain(t.getChild(k)!.get(row), t.getChild(k)!.type), (_, x) => (typeof x === "bigint" ? String(x) : x))}`).join(", ")}`;
}

function run(udf: UdfDefinition, c: Compiled, input: A.Table, keep: string[]): { vector: A.Vector } | { error: string } {
  const type = fromJsonType(udf.output.type, udf.output.name);
  if (c.kind === "sandbox") {
    const cols = udf.inputs.map((n) => column(input.getChild(n)!, c.sandbox));
    const r = c.sandbox.run(cols, input.numRows, udf.batch, c.shape, udf.output.structField);
    if ("error" in r) return { error: `the UDF failed on ${keyOf(input, keep, r.row)}: ${r.error}` };
    return { vector: toVector(r.values, type) };
  }
  const fields = udf.inputs.map((n) => input.schema.fields.find((f) => f.name === n)!);
  // The task's record batches share one time limit.
  const deadline = performance.now() + udf.timeoutMs;
  const parts = input.batches.map((b) => {
    const out = runWasm(c.wasm, fields, udf.inputs.map((n) => b.getChild(n)!.data[0]), b.numRows, deadline - performance.now());
    if (out.length !== b.numRows) throw new Error(`apply returned ${out.length} rows for a batch of ${b.numRows}`);
    if (String(out.type) !== String(type)) throw new Error(`apply returned ${String(out.type)}; the column is ${String(type)}`);
    return out;
  });
  return { vector: parts.length === 1 ? parts[0] : parts.reduce((a, b) => a.concat(b)) };
}

const describe = (err: unknown, udf: UdfDefinition, rows?: number): string => {
  const e = err as { code?: string; message?: string };
  if (e?.code === "ERR_SCRIPT_EXECUTION_TIMEOUT") return `the UDF ran longer than ${udf.timeoutMs} ms${rows === undefined ? " while loading" : ` on a batch of ${rows} rows`}`;
  return String(e?.message ?? err);
};

export async function runUdf(req: UdfRequest): Promise<UdfReply> {
  let compiled: Compiled;
  try {
    usePythonInterrupt(req.interrupt);
    compiled = compile(req.udf, req.udf.backend === "python" ? await loadPython() : null);
  } catch (err) {
    return { ok: false, error: describe(err, req.udf) };
  }
  if (req.op === "check") return { ok: true };
  const input = arrow.tableFromIPC(req.input);
  try {
    const r = run(req.udf, compiled, input, req.keep);
    if ("error" in r) return { ok: false, error: r.error };
    const out = new arrow.Table({ [req.udf.output.name]: r.vector });
    return { ok: true, output: arrow.tableToIPC(out, "stream"), rows: input.numRows };
  } catch (err) {
    return { ok: false, error: describe(err, req.udf, input.numRows) };
  }
}

/** The pool task: runUdf, with the output moved (not copied) to the main thread. */
export async function udf(req: UdfRequest): Promise<UdfTaskReply> {
  const r = await runUdf(req);
  return r.ok && r.output ? (Piscina.move(r.output) as Uint8Array) : { ok: r.ok, error: r.ok ? undefined : r.error };
}
