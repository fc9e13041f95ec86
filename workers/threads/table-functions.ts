// Pool task "table": a materialized view's table function over a batch of source rows, moved in
// as Arrow IPC bytes. A udtf (JavaScript, Python, or SQL run by sql.js over the rows loaded as a
// table named `source`) maps all its rows to the view's rows; a chunker (JavaScript or Python) maps each row to
// zero or more, and each output row carries the position of its source row in the batch (column
// `PARENT`); the caller adds the source row's id, ordinal and columns from the rows it sent.
import vm from "node:vm";
import { isMainThread, resourceLimits } from "node:worker_threads";
import type * as A from "apache-arrow";
import { Piscina } from "piscina";
import initSqlJs, { type Database, type SqlJsStatic } from "sql.js";
import { jsShape, PARENT, type Shape, type TableFunction } from "../../src/compute/udf.js";
import { arrow } from "../../src/engine/arrow.js";
import { fromJsonField, type JsonArrowField } from "../../src/engine/json-arrow.js";
import { column, plain, toVector } from "./arrow-values.js";
import { compilePython, loadPython, usePythonInterrupt } from "./python.js";
import { compileJs, type Plain, type Sandbox } from "./sandbox.js";

export interface TableRequest {
  op: "check" | "run";
  kind: "udtf" | "chunker";
  fn: TableFunction;
  /** The view's columns the function produces (for a chunker, those the source row does not give). */
  output: JsonArrowField[];
  /** Source rows; for a chunker with their `__source_row_id`. */
  input?: Uint8Array;
  timeoutMs: number;
  /** A Python function's time limit, set from the sandbox process's main thread (python.ts). */
  interrupt?: Int32Array;
}

/** Output rows as IPC bytes (moved), or the failure. */
export type TableReply = Uint8Array | { ok: boolean; error?: string };

if (!isMainThread) process.on("unhandledRejection", () => undefined);

const sandboxes = new Map<string, Sandbox>();
const CACHE_SIZE = 16;
let sqlite: Promise<SqlJsStatic> | null = null;
// SQLite's memory is WebAssembly memory, outside the worker's heap limit: it gets a bound of the
// same size, past which its allocations fail ("out of memory") and the task fails alone, before
// the sandbox's own memory bound is near.
const SQL_HEAP_MB = resourceLimits.maxOldGenerationSizeMb ?? 1024;

/** An empty SQLite database under SQL_HEAP_MB (the limit is the library's, set again for each). */
async function database(): Promise<Database> {
  const SQL = await (sqlite ??= initSqlJs());
  const db = new SQL.Database();
  db.run(`PRAGMA hard_heap_limit = ${SQL_HEAP_MB * 2 ** 20}`);
  return db;
}
const sqlContext = vm.createContext(Object.create(null));
const SQL_CALL = new vm.Script("__quiverSql()", { filename: "quiver-sql-call" });

/** The function's sandbox, compiled once per worker (a Python one once per interpreter). */
async function sandbox(fn: TableFunction, timeoutMs: number): Promise<Sandbox> {
  const python = fn.backend === "python" ? await loadPython() : null;
  const key = JSON.stringify([fn.backend, fn.name, fn.code, python?.generation ?? 0]);
  let sb = sandboxes.get(key);
  if (!sb) {
    sb = python ? compilePython(python, fn.code, fn.name, timeoutMs) : compileJs(fn.code, timeoutMs);
    if (sandboxes.size >= CACHE_SIZE) sandboxes.delete(sandboxes.keys().next().value!);
    sandboxes.set(key, sb);
  }
  return sb;
}

function shapes(output: JsonArrowField[], fn: TableFunction): [string, Shape][] {
  return output.map((f) => {
    const s = jsShape(f.type);
    if (!s) throw new Error(`a ${fn.backend === "python" ? "Python" : "JavaScript"} table function cannot produce column ${JSON.stringify(f.name)} of type ${JSON.stringify(f.type)}`);
    return [f.name, s];
  });
}

/** Rows of an Arrow table as objects built inside the sandbox. */
function rowsInside(t: A.Table, sb: Sandbox): unknown[] {
  const cols = t.schema.fields.map((f) => [f.name, column(t.getChild(f.name)!, sb)] as const);
  const out = sb.array(t.numRows);
  for (let i = 0; i < t.numRows; i++) out[i] = sb.inside(Object.fromEntries(cols.map(([n, c]) => [n, c[i] as Plain])));
  return out;
}

async function runInSandbox(req: TableRequest, input: A.Table): Promise<A.Table | string> {
  const sb = await sandbox(req.fn, req.timeoutMs);
  const chunker = req.kind === "chunker";
  const rows = rowsInside(input, sb);
  const r = sb.runRows(rows, chunker, shapes(req.output, req.fn));
  if ("error" in r) return r.row < 0 ? `the ${req.kind} failed: ${r.error}` : `the ${req.kind} failed on source row ${r.row}: ${r.error}`;
  const vectors: Record<string, A.Vector> = {};
  req.output.forEach((f, i) => (vectors[f.name] = toVector(r.columns[i], fromJsonField(f).type)));
  if (!chunker) return new arrow.Table(vectors);
  return new arrow.Table({ ...vectors, [PARENT]: arrow.vectorFromArray(r.parents, new arrow.Uint32()) });
}

/** A value SQLite can hold: numbers, text, blobs or NULL (lists and structs as JSON text). */
function sqlValue(v: Plain): number | string | Uint8Array | null {
  if (v === null) return null;
  if (typeof v === "bigint") return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : String(v);
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number" || typeof v === "string") return v;
  return JSON.stringify(v, (_, x) => (typeof x === "bigint" ? String(x) : x));
}

/** A value SQLite returned that a column of `type` holds (numbers and text only: what SQL gives). */
function sqlFits(v: Plain, type: A.DataType): boolean {
  if (v === null) return true;
  if (arrow.DataType.isInt(type)) return Number.isInteger(v) || typeof v === "bigint";
  if (arrow.DataType.isFloat(type)) return typeof v === "number";
  if (arrow.DataType.isUtf8(type) || arrow.DataType.isLargeUtf8(type)) return typeof v === "string";
  return true;
}

async function runSql(req: TableRequest, input: A.Table): Promise<A.Table | string> {
  const db = await database();
  try {
    const names = input.schema.fields.map((f) => `"${f.name.replace(/"/g, '""')}"`);
    db.run(`CREATE TABLE source (${names.join(", ") || "_"})`);
    if (input.numRows > 0) {
      const insert = db.prepare(`INSERT INTO source VALUES (${names.map(() => "?").join(", ")})`);
      db.run("BEGIN");
      const cols = input.schema.fields.map((f) => input.getChild(f.name)!);
      for (let i = 0; i < input.numRows; i++) insert.run(cols.map((c) => sqlValue(plain(c.get(i), c.type))));
      db.run("COMMIT");
      insert.free();
    }
    (sqlContext as { __quiverSql?: () => unknown }).__quiverSql = () => db.exec(req.fn.code);
    let results: { columns: string[]; values: unknown[][] }[];
    try {
      results = SQL_CALL.runInContext(sqlContext, { timeout: req.timeoutMs }) as typeof results;
    } catch (e) {
      if ((e as { code?: string }).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") return `the udtf's SQL ran longer than ${req.timeoutMs} ms`;
      if ((e as Error).message === "out of memory") return `the udtf's SQL ran out of memory: SQLite's heap is bounded to ${SQL_HEAP_MB} MB (--worker-heap-mb)`;
      return `the udtf's SQL failed: ${(e as Error).message}`;
    }
    const last = results[results.length - 1] ?? { columns: [], values: [] };
    const vectors: Record<string, A.Vector> = {};
    for (const f of req.output) {
      const at = last.columns.indexOf(f.name);
      if (at < 0) return `the udtf's SQL returned no column ${JSON.stringify(f.name)} (it returned ${JSON.stringify(last.columns)})`;
      const type = fromJsonField(f).type;
      const isBool = arrow.DataType.isBool(type);
      const values = last.values.map((row) => (isBool && row[at] !== null ? row[at] !== 0 : row[at]) as Plain);
      const bad = values.findIndex((v) => !sqlFits(v, type));
      if (bad >= 0) return `the udtf's SQL returned ${JSON.stringify(values[bad])} in column ${JSON.stringify(f.name)} of its row ${bad}, which a ${String(type)} column cannot hold`;
      vectors[f.name] = toVector(values, type);
    }
    return new arrow.Table(vectors);
  } finally {
    db.close();
  }
}

/** Pure, for tests: compile (op "check") or run one batch. */
async function runTable(req: TableRequest): Promise<{ ok: true; output?: Uint8Array } | { ok: false; error: string }> {
  try {
    usePythonInterrupt(req.interrupt);
    if (req.op === "check") {
      if (req.fn.backend !== "sql") {
        await sandbox(req.fn, req.timeoutMs);
        shapes(req.output, req.fn);
      } else {
        const db = await database();
        try {
          // Planning against an empty source with any columns checks the syntax alone.
          db.run("CREATE TABLE source (_)");
          db.prepare(req.fn.code).free();
        } catch (e) {
          if (!/no such column/.test((e as Error).message)) throw e;
        } finally {
          db.close();
        }
      }
      return { ok: true };
    }
    const input = arrow.tableFromIPC(req.input!);
    const out = req.fn.backend === "sql" ? await runSql(req, input) : await runInSandbox(req, input);
    if (typeof out === "string") return { ok: false, error: out };
    return { ok: true, output: arrow.tableToIPC(out, "stream") };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e?.code === "ERR_SCRIPT_EXECUTION_TIMEOUT") return { ok: false, error: `the ${req.kind} ran longer than ${req.timeoutMs} ms` };
    return { ok: false, error: String(e?.message ?? err) };
  }
}

/** The pool task: runTable, with the output moved (not copied) to the calling thread. */
export async function table(req: TableRequest): Promise<TableReply> {
  const r = await runTable(req);
  return r.ok && r.output ? (Piscina.move(r.output) as Uint8Array) : { ok: r.ok, error: r.ok ? undefined : r.error };
}
