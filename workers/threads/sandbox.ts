// The sandbox JavaScript UDFs and table functions run in: a `node:vm` context with no `process`, `require`, `fetch`,
// timers, `eval`/`Function` or WebAssembly, no raw-memory constructors (ArrayBuffer, typed arrays,
// SharedArrayBuffer, Atomics: their memory is outside the worker's heap limit), and every
// intrinsic frozen before user code runs. No object from outside the context ever goes in: inputs
// are built with the context's own constructors, so user code cannot reach this realm through
// `.constructor.constructor`. A trusted driver, set up first, calls the UDF and copies each result
// into plain data inside the context, under the batch's time limit; this side then reads only own
// data properties, so no user code (a getter, a proxy trap) ever runs outside that limit.
import vm from "node:vm";
import type { Shape } from "../../src/compute/udf.js";
import { MAX_ERROR_CHARS } from "../../src/util/bounded-text.js";

const DRIVER = `(() => {
  "use strict";
  const g = globalThis;
  const isArray = Array.isArray, create = Object.create, freeze = Object.freeze, names = Object.getOwnPropertyNames;
  const isInteger = Number.isInteger, Arr = Array, Str = String;
  for (const n of ["ArrayBuffer", "SharedArrayBuffer", "Atomics", "WebAssembly", "DataView", "Int8Array", "Uint8Array",
    "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float32Array", "Float64Array",
    "BigInt64Array", "BigUint64Array", "FinalizationRegistry", "WeakRef", "eval", "Function"]) delete g[n];
  // The global object itself stays open (it cannot be frozen); what it holds is frozen.
  const seen = new Set([g]);
  const harden = (v) => {
    if ((typeof v !== "object" && typeof v !== "function") || v === null || seen.has(v)) return;
    seen.add(v);
    freeze(v);
    for (const n of names(v)) {
      const d = Object.getOwnPropertyDescriptor(v, n);
      if (d && "value" in d) harden(d.value);
    }
    harden(Object.getPrototypeOf(v));
  };
  for (const n of names(g)) harden(g[n]);
  harden([][Symbol.iterator]());
  harden(function* () {});
  harden(async function () {});

  let job = null;
  // What user code threw, in words, cut to a few KB here (a thrown 100 MB string stays inside).
  const fail = (row, e) => {
    let m;
    try { m = e instanceof Error ? Str(e.message) : Str(e); } catch { m = "a value that cannot be shown"; }
    if (m.length > ${MAX_ERROR_CHARS}) m = m.slice(0, ${MAX_ERROR_CHARS}) + "… (" + (m.length - ${MAX_ERROR_CHARS}) + " more characters cut)";
    return { error: m, row };
  };
  const check = (v, s, row) => {
    if (v === null || v === undefined) return null;
    if (typeof v === "object" && typeof v.then === "function") throw new TypeError("it returned a Promise: async functions are not supported; return the value itself");
    switch (s.k) {
      case "number":
        if (typeof v === "number") return v;
        break;
      case "int64":
        if (typeof v === "bigint" || (typeof v === "number" && isInteger(v))) return v;
        break;
      case "string":
        if (typeof v === "string") return v;
        break;
      case "bool":
        if (typeof v === "boolean") return v;
        break;
      case "list": {
        if (!isArray(v)) break;
        const n = v.length;
        if (s.size !== null && n !== s.size) throw new TypeError("expected a list of " + s.size + " values, got " + n);
        const out = new Arr(n);
        for (let i = 0; i < n; i++) out[i] = check(v[i], s.of, row);
        return out;
      }
      case "struct": {
        if (typeof v !== "object") break;
        const out = create(null);
        for (const [name, fs] of s.fields) out[name] = check(v[name], fs, row);
        return out;
      }
    }
    throw new TypeError("expected " + (s.k === "int64" ? "an integer" : s.k === "list" ? "an array" : s.k === "struct" ? "an object" : "a " + s.k) + ", got " + (isArray(v) ? "an array" : typeof v));
  };
  // A promise is not a value (UDFs are synchronous); its rejection is handled here, not left unhandled.
  const settle = (v) => {
    if (v !== null && typeof v === "object" && typeof v.then === "function") v.then(undefined, () => undefined);
    return v;
  };
  const pick = (v, field) => (field === "" || v === null || v === undefined ? v : settle(v)[field]);
  const run = () => {
    const { fn, cols, n, batch, shape, field } = job;
    job = null;
    const out = new Arr(n);
    // -1: the batch call itself failed, not one row.
    let row = batch ? -1 : 0;
    try {
      if (batch) {
        const r = fn(...cols);
        if (!isArray(r)) throw new TypeError("a batch UDF must return an array, got " + typeof r);
        if (r.length !== n) throw new TypeError("a batch UDF must return one value per row: got " + r.length + " for " + n + " rows");
        for (row = 0; row < n; row++) out[row] = check(settle(pick(r[row], field)), shape, row);
      } else {
        const args = new Arr(cols.length);
        for (; row < n; row++) {
          for (let c = 0; c < cols.length; c++) args[c] = cols[c][row];
          out[row] = check(settle(pick(fn(...args), field)), shape, row);
        }
      }
    } catch (e) {
      return fail(row, e);
    }
    return { values: out };
  };
  // Table functions: a udtf maps all its rows to any number of rows; a chunker maps each row to
  // zero or more. Each output row's fields are checked into one array per field.
  const runRows = () => {
    const { fn, rows, chunker, fields } = job;
    job = null;
    const known = new Set(fields.map((f) => f[0]));
    const cols = fields.map(() => []);
    const parents = [];
    let row = -1;
    const take = (o, at) => {
      if (typeof o !== "object" || o === null || isArray(o)) throw new TypeError("an output row must be an object, got " + (isArray(o) ? "an array" : typeof o));
      // A udtf's row is the view's row: a field the view lacks would be lost silently.
      if (!chunker) for (const k of Object.keys(o)) if (!known.has(k)) throw new TypeError("an output row has field " + JSON.stringify(k) + ", which is not a column of the view");
      for (let f = 0; f < fields.length; f++) cols[f].push(check(o[fields[f][0]], fields[f][1], at));
    };
    try {
      if (!chunker) {
        const out = settle(fn(rows));
        if (!isArray(out)) throw new TypeError("a udtf must return an array of rows, got " + typeof out);
        for (row = 0; row < out.length; row++) take(settle(out[row]), row);
      } else {
        for (row = 0; row < rows.length; row++) {
          const out = settle(fn(rows[row]));
          if (out === null || out === undefined) continue;
          if (!isArray(out)) throw new TypeError("a chunker must return an array of rows (or nothing), got " + typeof out);
          for (let c = 0; c < out.length; c++) {
            take(settle(out[c]), row);
            parents.push(row);
          }
        }
      }
    } catch (e) {
      return fail(row, e);
    }
    return { columns: cols, parents };
  };
  // Evaluating the source: whatever it throws is described here, under the time limit, so no
  // value the source made (a getter on message, a Proxy, a Symbol.toPrimitive) reaches the host.
  const load = () => {
    const { factory } = job;
    job = null;
    let fn;
    try {
      fn = factory();
    } catch (e) {
      return fail(-1, e);
    }
    if (typeof fn !== "function") return { error: "the udf source must evaluate to a function", row: -1 };
    return { fn };
  };
  Object.defineProperty(g, "__quiverLoad", { value: load, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(g, "__quiverRun", { value: run, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(g, "__quiverRunRows", { value: runRows, writable: false, configurable: false, enumerable: false });
  return {
    array: (n) => new Arr(n),
    object: () => create(null),
    prepare: (fn, cols, n, batch, shape, field) => { job = { fn, cols, n, batch, shape, field }; },
    prepareRows: (fn, rows, chunker, fields) => { job = { fn, rows, chunker, fields }; },
    prepareLoad: (factory) => { job = { factory }; },
  };
})()`;

interface Driver {
  array(n: number): unknown[];
  object(): Record<string, unknown>;
  prepare(fn: unknown, cols: unknown[], n: number, batch: boolean, shape: unknown, field: string): void;
  prepareRows(fn: unknown, rows: unknown, chunker: boolean, fields: unknown): void;
  prepareLoad(factory: unknown): void;
}

/** A value this side reads after a run: plain data copied by the driver inside the context. */
export type Plain = null | number | bigint | string | boolean | Uint8Array | Plain[] | { [k: string]: Plain };

export interface Sandbox {
  /** Binary values go in as bytes (Python's `bytes`), not as arrays of numbers. */
  bytes: boolean;
  /** A context-made copy of plain input data (arrays and objects are rebuilt inside the context). */
  inside(v: Plain): unknown;
  array(n: number): unknown[];
  /** Run the UDF over `n` rows; the values come back checked against `shape`. */
  run(cols: unknown[], n: number, batch: boolean, shape: Shape, structField: string): { values: Plain[] } | { error: string; row: number };
  /** Run a table function over `rows`: one array per output field and, for a chunker, each output row's input row. */
  runRows(rows: unknown[], chunker: boolean, fields: [string, Shape][]): { columns: Plain[][]; parents: number[] } | { error: string; row: number };
}

const RUN = new vm.Script("__quiverRun()", { filename: "quiver-udf-driver" });
const RUN_ROWS = new vm.Script("__quiverRunRows()", { filename: "quiver-udf-driver" });
const LOAD = new vm.Script("__quiverLoad()", { filename: "quiver-udf-driver" });

/**
 * Compile `source` (a function expression) in a fresh sandbox; throws a plain Error on a compile
 * error, on anything the evaluation throws (described inside the sandbox) or on a non-function.
 */
export function compileJs(source: string, timeoutMs: number): Sandbox {
  const context = vm.createContext(Object.create(null), {
    codeGeneration: { strings: false, wasm: false },
    microtaskMode: "afterEvaluate",
  });
  const driver = new vm.Script(DRIVER, { filename: "quiver-udf-driver" }).runInContext(context) as Driver;
  // A function body parses alone (an unbalanced brace is a syntax error), so the source cannot
  // step out of the factory and run outside the driver's try.
  const factory = vm.compileFunction(`"use strict";\nreturn (${source}\n);`, [], { parsingContext: context, filename: "udf.js" });
  driver.prepareLoad(factory);
  const loaded = LOAD.runInContext(context, { timeout: timeoutMs }) as { fn: unknown } | { error: string };
  if ("error" in loaded) throw new Error(loaded.error);
  const fn = loaded.fn;

  const inside = (v: Plain): unknown => {
    if (v === null || typeof v !== "object") return v;
    if (Array.isArray(v)) {
      const out = driver.array(v.length);
      for (let i = 0; i < v.length; i++) out[i] = inside(v[i]);
      return out;
    }
    const out = driver.object();
    const o = v as { [k: string]: Plain };
    for (const k of Object.keys(o)) out[k] = inside(o[k]);
    return out;
  };
  return {
    bytes: false,
    inside,
    array: (n) => driver.array(n),
    run(cols, n, batch, shape, structField) {
      driver.prepare(fn, cols, n, batch, inside(shape as unknown as Plain), structField);
      return RUN.runInContext(context, { timeout: timeoutMs }) as { values: Plain[] } | { error: string; row: number };
    },
    runRows(rows, chunker, fields) {
      driver.prepareRows(fn, rows, chunker, inside(fields as unknown as Plain));
      return RUN_ROWS.runInContext(context, { timeout: timeoutMs }) as { columns: Plain[][]; parents: number[] } | { error: string; row: number };
    },
  };
}
