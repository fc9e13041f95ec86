// What a worker needs to run a JavaScript, Python or WebAssembly UDF: plain data, built on the main thread
// from a column's descriptor and sent with each task; workers compile it once and cache it by key.
import type { JsonArrowDataType } from "../engine/json-arrow.js";
import { definitionHash, runnable, type VirtualColumn } from "./virtual-column.js";

export interface UdfDefinition {
  /** The definition hash: a worker's cache key. */
  key: string;
  backend: "js" | "python" | "wasm";
  /** js: a function expression's source; python: source defining the function; wasm: the module, base64. */
  source: string;
  /** python: the function to run when the source defines several (udf_name); "" when it defines one. */
  name: string;
  /** js, python: one call per batch with one list per input, instead of one call per row. */
  batch: boolean;
  /** Columns of the input batch, in argument order. */
  inputs: string[];
  /** The table's columns (paths) each input is read from. */
  sources: string[];
  output: { name: string; type: JsonArrowDataType; nullable: boolean; structField: string };
  timeoutMs: number;
  /** wasm: the most 64 KiB pages an instance's memory may have. */
  wasmMaxPages: number;
}

/** The JavaScript value a column holds, checked inside the sandbox before it leaves it. */
export type Shape =
  | { k: "number" }
  | { k: "int64" }
  | { k: "string" }
  | { k: "bool" }
  | { k: "list"; of: Shape; size: number | null }
  | { k: "struct"; fields: [string, Shape][] };

const NUMBER = /^(u?int(8|16|32)|float(16|32|64)|halffloat|float|double|date32|date64|time(32|64)(:.*)?|timestamp(:.*)?|duration(:.*)?)$/i;

/** The shape of values a JavaScript UDF returns for a column of type `t`; null if it cannot produce it. */
export function jsShape(t: JsonArrowDataType): Shape | null {
  const type = t.type.toLowerCase();
  if (NUMBER.test(type)) return { k: "number" };
  if (type === "int64" || type === "uint64") return { k: "int64" };
  if (["utf8", "string", "large_utf8", "large_string"].includes(type)) return { k: "string" };
  if (type === "bool" || type === "boolean") return { k: "bool" };
  if (type === "list" || type === "large_list" || type.startsWith("fixed_size_list")) {
    const child = t.fields?.[0] ? jsShape(t.fields[0].type) : null;
    if (!child) return null;
    const size = type.startsWith("fixed_size_list") ? (t.length ?? Number(type.split(":")[1])) : null;
    return { k: "list", of: child, size };
  }
  if (type === "struct") {
    const fields = (t.fields ?? []).map((f) => [f.name, jsShape(f.type)] as const);
    if (fields.length === 0 || fields.some(([, s]) => s === null)) return null;
    return { k: "struct", fields: fields as [string, Shape][] };
  }
  return null;
}

/** Limits a worker applies to UDFs (from the configuration). */
export interface UdfLimits {
  udfTimeoutMs: number;
  udfWasmMemoryMb: number;
}

/** The input columns of a task's batch are named by position: their paths may clash with the key's. */
const inputAlias = (i: number) => `__in${i}`;

/** What a worker runs for a JavaScript, Python or WebAssembly column. */
export function udfDefinition(vc: VirtualColumn, limits: UdfLimits): UdfDefinition {
  return {
    key: definitionHash(vc),
    backend: runnable(vc) as UdfDefinition["backend"],
    source: vc.udf,
    name: runnable(vc) === "python" ? vc.udfName : "",
    batch: vc.batch,
    inputs: vc.inputs.map((_, i) => inputAlias(i)),
    sources: vc.inputs,
    output: { name: vc.column, type: vc.dataType!, nullable: vc.nullable, structField: vc.structField },
    timeoutMs: limits.udfTimeoutMs,
    wasmMaxPages: limits.udfWasmMemoryMb * 16,
  };
}

/**
 * A view's table function (udtf or chunker body), decoded: `udtf_spec.udtf` is base64 of
 * `{"backend":"js","source":…}`, `{"backend":"python","source":…,"name"?:…}` (the function named,
 * else the source's only one) or `{"backend":"sql","sql":…}`.
 */
export interface TableFunction {
  backend: "js" | "python" | "sql";
  code: string;
  /** python: the function to run; "" for the source's only one. */
  name: string;
}

/** A chunker's answer: each output row's position among the source rows it was given. */
export const PARENT = "__parent";
