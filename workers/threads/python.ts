// Python UDFs and table functions: CPython compiled to WebAssembly (Pyodide), one interpreter per
// worker thread of the compute sandbox, restored from a memory snapshot at its first Python task
// (about 0.5 s of CPU) and kept.
// The boundary is the sandbox process (no secrets, no network, no file writes, no child
// processes); inside it, what would lead out of Python is removed as well: Pyodide's `js` and
// `pyodide_js` modules (the host's JavaScript), the os functions that start processes, and user
// code imports none of the modules that reach them. A Python call that Node's permission model
// refuses kills the interpreter; the next task loads a fresh one.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { PyodideAPI } from "pyodide";
import type { Shape } from "../../src/compute/udf.js";
import { MAX_ERROR_CHARS } from "../../src/util/bounded-text.js";
import type { Plain, Sandbox } from "./sandbox.js";

// Set up once per interpreter: the import guard, and the drivers that call user functions and
// check what they return (the same rules as the JavaScript sandbox's driver).
const DRIVER = `
import builtins, os, posix, sys, types
from pyodide.ffi import jsnull

for _m in ("js", "pyodide_js"):
    sys.modules.pop(_m, None)
for _mod in (os, posix):
    for _n in ("system", "popen", "fork", "forkpty", "kill", "killpg", "posix_spawn", "posix_spawnp", "execv", "execve",
               "execl", "execle", "execlp", "execlpe", "execvp", "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
               "spawnv", "spawnve", "spawnvp", "spawnvpe"):
        if hasattr(_mod, _n):
            delattr(_mod, _n)

_BLOCKED = {"js", "pyodide_js", "pyodide", "_pyodide", "_pyodide_core", "micropip", "ctypes", "_ctypes", "subprocess",
            "_posixsubprocess", "os", "posix", "sys", "importlib", "_imp", "builtins", "gc", "_thread", "threading",
            "socket", "_socket", "select", "signal", "multiprocessing", "pyodide_http", "code", "inspect"}
_import = builtins.__import__

def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.split(".")[0] in _BLOCKED:
        raise ImportError("module " + repr(name) + " is not available to UDFs")
    return _import(name, globals, locals, fromlist, level)

_user_builtins = dict(builtins.__dict__)
_user_builtins["__import__"] = _guarded_import

def _message(e):
    try:
        m = type(e).__name__ + ": " + str(e)
    except BaseException:
        return "an exception that cannot be shown"
    if len(m) > ${MAX_ERROR_CHARS}:
        m = m[:${MAX_ERROR_CHARS}] + "… (" + str(len(m) - ${MAX_ERROR_CHARS}) + " more characters cut)"
    return m

# Compiled functions by number: the JavaScript side holds the number, never a proxy of a function.
_functions = {}
_next = [0]
_KEEP = 64

def _keep(fn):
    _next[0] += 1
    _functions[_next[0]] = fn
    if len(_functions) > _KEEP:
        del _functions[next(iter(_functions))]
    return {"fn": _next[0]}

def _load(source, name):
    # A copy per function: one function's code cannot change another's builtins (its __import__, say).
    ns = {"__builtins__": dict(_user_builtins), "__name__": "udf"}
    try:
        exec(compile(source, "udf.py", "exec"), ns)
    except KeyboardInterrupt:
        return {"timeout": True}
    except BaseException as e:
        return {"error": _message(e)}
    if name and isinstance(ns.get(name), types.FunctionType):
        return _keep(ns[name])
    fns = [k for k, v in ns.items() if isinstance(v, types.FunctionType) and v.__module__ == "udf"]
    if len(fns) != 1:
        named = " (none is " + repr(name) + ")" if name else ""
        return {"error": "the source defines " + (str(len(fns)) + " functions (" + ", ".join(fns) + ")" + named + ": name the one to run with udf_name" if fns else "no function")}
    return _keep(ns[fns[0]])

def _py(v):
    if v is jsnull:
        return None
    t = type(v)
    if t is list:
        return [_py(x) for x in v]
    if t is dict:
        return {k: _py(x) for k, x in v.items()}
    if t is memoryview:
        return bytes(v)
    return v

def _kind(v):
    return {list: "a list", tuple: "a tuple", dict: "a dict", str: "a str", bool: "a bool", int: "an int", float: "a float"}.get(type(v), "a " + type(v).__name__)

_EXPECTED = {"number": "a number", "int64": "an int", "string": "a str", "bool": "a bool", "list": "a list", "struct": "a dict"}

def _check(v, s):
    if v is None:
        return jsnull
    k = s["k"]
    t = type(v)
    if k == "number" and t in (int, float):
        return float(v)
    if k == "int64" and (t is int or (t is float and v.is_integer())):
        v = int(v)
        if v < -2**63 or v >= 2**64:
            raise OverflowError(str(v) + " does not fit in 64 bits")
        return v
    if k == "string" and t is str:
        return v
    if k == "bool" and t is bool:
        return v
    if k == "list" and t in (list, tuple):
        if s["size"] is not None and len(v) != s["size"]:
            raise TypeError("expected a list of " + str(s["size"]) + " values, got " + str(len(v)))
        return [_check(x, s["of"]) for x in v]
    if k == "struct" and t is dict:
        return {name: _check(v.get(name), fs) for name, fs in s["fields"]}
    raise TypeError("expected " + _EXPECTED[k] + ", got " + _kind(v))

def _pick(v, field):
    if field == "" or v is None:
        return v
    if type(v) is not dict:
        raise TypeError("expected a dict with field " + repr(field) + ", got " + _kind(v))
    return v.get(field)

def _run(fn, cols, n, batch, shape, field):
    fn = _functions[fn]
    cols = [_py(c) for c in cols]
    shape = _py(shape)
    row = -1
    try:
        if batch:
            r = fn(*cols)
            if type(r) not in (list, tuple):
                raise TypeError("a batch UDF must return a list, got " + _kind(r))
            if len(r) != n:
                raise TypeError("a batch UDF must return one value per row: got " + str(len(r)) + " for " + str(n) + " rows")
            out = []
            for row in range(n):
                out.append(_check(_pick(r[row], field), shape))
        else:
            out = []
            row = 0
            for args in zip(*cols) if cols else ((),) * n:
                out.append(_check(_pick(fn(*args), field), shape))
                row += 1
    except KeyboardInterrupt:
        return {"timeout": True}
    except BaseException as e:
        return {"error": _message(e), "row": row}
    return {"values": out}

def _run_rows(fn, rows, chunker, fields):
    fn = _functions[fn]
    rows = _py(rows)
    fields = _py(fields)
    known = {f[0] for f in fields}
    cols = [[] for _ in fields]
    parents = []
    row = -1
    def take(o):
        if type(o) is not dict:
            raise TypeError("an output row must be a dict, got " + _kind(o))
        if not chunker:
            for k in o:
                if k not in known:
                    raise TypeError("an output row has field " + repr(k) + ", which is not a column of the view")
        for i, (name, s) in enumerate(fields):
            cols[i].append(_check(o.get(name), s))
    try:
        if not chunker:
            out = fn(rows)
            if type(out) not in (list, tuple):
                raise TypeError("a udtf must return a list of rows, got " + _kind(out))
            for row in range(len(out)):
                take(out[row])
        else:
            for row in range(len(rows)):
                out = fn(rows[row])
                if out is None:
                    continue
                if type(out) not in (list, tuple):
                    raise TypeError("a chunker must return a list of rows (or None), got " + _kind(out))
                for o in out:
                    take(o)
                    parents.append(row)
    except KeyboardInterrupt:
        return {"timeout": True}
    except BaseException as e:
        return {"error": _message(e), "row": row}
    return {"columns": cols, "parents": parents}
`;

type PyProxy = { toJs(o?: object): unknown; destroy(): void; (...args: unknown[]): PyProxy };
type Reply = { timeout?: true; error?: string; row?: number; fn?: number; values?: Plain[]; columns?: Plain[][]; parents?: number[] };

export interface Interpreter {
  py: PyodideAPI;
  load: PyProxy;
  run: PyProxy;
  runRows: PyProxy;
  /** Changes with each load: a function compiled by an interpreter that died is compiled again. */
  generation: number;
}

let interpreter: Interpreter | null = null;
let loading: Promise<Interpreter> | null = null;
let generations = 0;

/**
 * Pyodide's Node file system asks `process.binding("constants")`, which the permission model
 * refuses; the constants it wants are public in `fs.constants`.
 */
function allowConstantsBinding(): void {
  const p = process as unknown as { binding(name: string): unknown };
  const binding = p.binding.bind(process);
  p.binding = (name) => (name === "constants" ? { fs: fs.constants } : binding(name));
}

/**
 * The memory snapshot of a bootstrapped interpreter of this Pyodide version, which the build
 * makes (native/build-python-snapshot.mjs); without one (a build that did not make it, or a
 * Pyodide upgraded since) the interpreter bootstraps itself, 8x the CPU.
 */
function snapshot(version: string): Uint8Array | undefined {
  // dist/workers/threads/python.js → dist/native/
  const file = new URL(`../../native/python-${version}.snapshot`, import.meta.url);
  return fs.existsSync(file) ? fs.readFileSync(file) : undefined;
}

/** This thread's interpreter, loaded on first use. */
export function loadPython(): Promise<Interpreter> {
  if (interpreter) return Promise.resolve(interpreter);
  loading ??= (async () => {
    allowConstantsBinding();
    const { loadPyodide } = await import("pyodide");
    const require = createRequire(import.meta.url);
    // Its files are found from the package's folder, named outright (a bundler may move the module).
    const indexURL = path.dirname(require.resolve("pyodide")) + path.sep;
    const py = await loadPyodide({ indexURL, _loadSnapshot: snapshot(require("pyodide/package.json").version), stdout: () => undefined, stderr: () => undefined });
    py.unregisterJsModule("js");
    py.unregisterJsModule("pyodide_js");
    py.runPython(DRIVER);
    const get = (n: string) => py.globals.get(n) as PyProxy;
    interpreter = { py, load: get("_load"), run: get("_run"), runRows: get("_run_rows"), generation: ++generations };
    return interpreter;
  })().finally(() => (loading = null));
  return loading;
}

// The time limit: the sandbox process's main thread sets `interrupt[0]` to SIGINT past the limit
// (Python then raises KeyboardInterrupt); `interrupt[1]` is 1 while user code runs.
let interrupt: Int32Array | null = null;

/** The interrupt buffer of the task this thread runs next. */
export function usePythonInterrupt(buffer: Int32Array | undefined): void {
  interrupt = buffer ?? null;
}

function timedOut(timeoutMs: number): Error {
  return Object.assign(new Error(`ran longer than ${timeoutMs} ms`), { code: "ERR_SCRIPT_EXECUTION_TIMEOUT" });
}

/** Call a driver function with the time limit; a dead interpreter is dropped so the next task loads another. */
function call(it: Interpreter, f: PyProxy, timeoutMs: number, args: unknown[]): Reply {
  // Input data (arrays, shapes) becomes Python lists and dicts; a compiled function is passed as is.
  const converted = args.map((a) => (Array.isArray(a) || (a !== null && typeof a === "object" && Object.getPrototypeOf(a) === Object.prototype) ? it.py.toPy(a) : a));
  if (interrupt) {
    Atomics.store(interrupt, 0, 0);
    it.py.setInterruptBuffer(interrupt);
    Atomics.store(interrupt, 1, 1);
  }
  let result: PyProxy;
  try {
    result = f(...converted);
  } catch (err) {
    if ((err as { pyodide_fatal_error?: boolean }).pyodide_fatal_error) {
      interpreter = null;
      throw new Error(`it stopped the Python interpreter (${String((err as Error).message).split("\n")[0]}); the next task loads a new one`);
    }
    throw err;
  } finally {
    if (interrupt) Atomics.store(interrupt, 1, 0);
    for (const c of converted) (c as { destroy?: () => void })?.destroy?.();
  }
  const reply = result.toJs({ dict_converter: Object.fromEntries, create_pyproxies: false }) as Reply;
  result.destroy();
  if (reply.timeout) throw timedOut(timeoutMs);
  return reply;
}

/** Compile `source` (Python defining the function; the one named `name`, else its only one): a sandbox. */
export function compilePython(it: Interpreter, source: string, name: string, timeoutMs: number): Sandbox {
  const loaded = call(it, it.load, timeoutMs, [source, name]);
  if (loaded.error !== undefined) throw new Error(loaded.error);
  const fn = loaded.fn!;
  // Callers cache sandboxes by interpreter generation: one of a dropped interpreter is never used again.
  return {
    bytes: true,
    inside: (v) => v,
    array: (n) => new Array(n),
    run(cols, n, batch, shape: Shape, structField) {
      const r = call(it, it.run, timeoutMs, [fn, cols, n, batch, shape, structField]);
      return r.error !== undefined ? { error: r.error, row: r.row ?? -1 } : { values: r.values! };
    },
    runRows(rows, chunker, fields) {
      const r = call(it, it.runRows, timeoutMs, [fn, rows, chunker, fields]);
      return r.error !== undefined ? { error: r.error, row: r.row ?? -1 } : { columns: r.columns!, parents: r.parents! };
    },
  };
}
