// WebAssembly UDFs. The ABI (docs/compute.md, "Virtual columns and backfills"):
//   import  env.memory                       the instance's memory (capped by --udf-wasm-memory-mb)
//   export  alloc(size: i32) -> i32           memory for the host to write inputs into
//   export  apply(inputs: i32, n_inputs: i32, n_rows: i32) -> i32
// `inputs` points to n_inputs pairs of u32 (ArrowArray*, ArrowSchema*), the input columns in the
// Arrow C Data Interface layout (wasm32); apply returns a pointer to one such pair holding the output
// column, which the host reads back with arrow-js-ffi and copies at once (a view dies when memory
// grows). A fresh instance runs each record batch, so a UDF keeps no state between batches and its
// memory never outgrows the cap; instantiation (`start`), `alloc` and `apply` run under the time limit.
import { createRequire } from "node:module";
import vm from "node:vm";
import type * as A from "apache-arrow";
import { arrow } from "../../src/engine/arrow.js";

// The CommonJS build, which uses the same apache-arrow copy as the rest of Quiver.
const ffi = createRequire(import.meta.url)("arrow-js-ffi") as typeof import("arrow-js-ffi");

const { Type } = arrow;

export interface WasmUdf {
  module: WebAssembly.Module;
  memory: { min: number; max: number };
}

/** The limits of the module's `env.memory` import, read from its import section. */
function memoryImport(bytes: Uint8Array): { min: number; max: number | null } | null {
  let p = 8;
  const u32 = () => {
    let r = 0;
    let shift = 0;
    let b: number;
    do {
      b = bytes[p++];
      r += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    return r;
  };
  const name = () => {
    const n = u32();
    const s = Buffer.from(bytes.subarray(p, p + n)).toString("utf8");
    p += n;
    return s;
  };
  const limits = () => {
    const flags = bytes[p++];
    const min = u32();
    return { min, max: flags & 1 ? u32() : null, flags };
  };
  while (p < bytes.length) {
    const id = bytes[p++];
    const size = u32();
    const end = p + size;
    if (id !== 2) {
      p = end;
      continue;
    }
    for (let i = u32(); i > 0; i--) {
      const mod = name();
      const field = name();
      const kind = bytes[p++];
      if (kind === 0) u32();
      else if (kind === 1) {
        p++;
        limits();
      } else if (kind === 2) {
        const l = limits();
        if (mod === "env" && field === "memory") {
          if (l.flags & ~1) throw new Error("env.memory must be a plain 32-bit memory (not shared, not 64-bit)");
          return l;
        }
      } else if (kind === 3) p += 2;
      else {
        p++;
        u32();
      }
    }
    return null;
  }
  return null;
}

/** Compile and check a module against the ABI; throws naming what does not fit. */
export function compileWasm(base64: string, maxPages: number): WasmUdf {
  const bytes = Buffer.from(base64, "base64");
  if (!WebAssembly.validate(bytes)) throw new Error("not a valid WebAssembly module (the udf must be the module's bytes, base64)");
  const module = new WebAssembly.Module(bytes);
  const imports = WebAssembly.Module.imports(module);
  const stray = imports.filter((i) => !(i.module === "env" && i.name === "memory" && i.kind === "memory"));
  if (stray.length > 0) throw new Error(`the module may import only env.memory; it imports ${stray.map((i) => `${i.module}.${i.name}`).join(", ")}`);
  const mem = memoryImport(bytes);
  if (!mem) throw new Error("the module must import its memory as env.memory (so the host can cap it)");
  const exports = new Map(WebAssembly.Module.exports(module).map((e) => [e.name, e.kind]));
  for (const f of ["alloc", "apply"]) if (exports.get(f) !== "function") throw new Error(`the module must export a function ${f}`);
  if (mem.min > maxPages) throw new Error(`the module needs ${mem.min * 64} KiB of memory, more than the limit of ${maxPages * 64} KiB`);
  return { module, memory: { min: mem.min, max: Math.min(mem.max ?? maxPages, maxPages) } };
}

/** Arrow C Data Interface format strings of the input types the ABI passes. */
function formatOf(t: A.DataType): string {
  const x = t as any;
  switch (t.typeId) {
    case Type.Int: {
      const c = ({ 8: "c", 16: "s", 32: "i", 64: "l" } as Record<number, string>)[x.bitWidth];
      return x.isSigned ? c : c.toUpperCase();
    }
    case Type.Float: return ["e", "f", "g"][x.precision];
    case Type.Bool: return "b";
    case Type.Utf8: return "u";
    case Type.LargeUtf8: return "U";
    case Type.Binary: return "z";
    case Type.LargeBinary: return "Z";
    case Type.FixedSizeList: return `+w:${x.listSize}`;
    case Type.List: return "+l";
    case Type.Struct: return "+s";
    default: throw new Error(`input type ${String(t)} is not passed to WebAssembly UDFs`);
  }
}

/** Writes inputs into an instance's memory through its own `alloc`. */
function writer(memory: WebAssembly.Memory, alloc: (n: number) => number) {
  const bytes = (src: ArrayBufferView | null): number => {
    if (!src || src.byteLength === 0) return 0;
    const p = alloc(src.byteLength);
    new Uint8Array(memory.buffer, p, src.byteLength).set(new Uint8Array(src.buffer, src.byteOffset, src.byteLength));
    return p;
  };
  const cstring = (s: string) => bytes(Buffer.from(s + "\0", "utf8"));
  const pointers = (ps: number[]) => bytes(Uint32Array.from(ps));

  // Every pointer a struct holds is allocated before the struct's own view is made: an alloc may
  // grow the memory, which detaches views made before it.
  function schema(f: { name: string; type: A.DataType; nullable: boolean }): number {
    const kids = (f.type.children ?? []).map((c: A.Field) => schema(c));
    const format = cstring(formatOf(f.type));
    const name = cstring(f.name);
    const children = kids.length ? pointers(kids) : 0;
    const p = alloc(48);
    const v = new DataView(memory.buffer, p, 48);
    v.setUint32(0, format, true);
    v.setUint32(4, name, true);
    v.setUint32(8, 0, true);
    v.setBigInt64(16, f.nullable ? 2n : 0n, true);
    v.setBigInt64(24, BigInt(kids.length), true);
    v.setUint32(32, children, true);
    v.setUint32(36, 0, true);
    v.setUint32(40, 0, true);
    v.setUint32(44, 0, true);
    return p;
  }

  function array(d: A.Data): number {
    const x = d as any;
    const validity = d.nullCount > 0 ? bytes(d.nullBitmap ?? null) : 0;
    let buffers: number[];
    switch (d.type.typeId) {
      case Type.Utf8: case Type.LargeUtf8: case Type.Binary: case Type.LargeBinary:
        buffers = [validity, bytes(x.valueOffsets), bytes(x.values)];
        break;
      case Type.List:
        buffers = [validity, bytes(x.valueOffsets)];
        break;
      case Type.FixedSizeList: case Type.Struct:
        buffers = [validity];
        break;
      default:
        buffers = [validity, bytes(x.values)];
    }
    const kids = (d.children ?? []).map((c: A.Data) => array(c));
    const bufferList = pointers(buffers);
    const children = kids.length ? pointers(kids) : 0;
    const p = alloc(64);
    const v = new DataView(memory.buffer, p, 64);
    v.setBigInt64(0, BigInt(d.length), true);
    v.setBigInt64(8, BigInt(d.nullCount), true);
    v.setBigInt64(16, BigInt(d.offset), true);
    v.setBigInt64(24, BigInt(buffers.length), true);
    v.setBigInt64(32, BigInt(kids.length), true);
    v.setUint32(40, bufferList, true);
    v.setUint32(44, children, true);
    v.setUint32(48, 0, true);
    v.setUint32(52, 0, true);
    v.setUint32(56, 0, true);
    return p;
  }
  return { array, schema, pointers };
}

const context = vm.createContext(Object.create(null));
const CALL = new vm.Script("__quiverApply()", { filename: "quiver-wasm-call" });

/**
 * Run the UDF over one record batch's input columns; returns the output column, copied out. The
 * instance is made (its `start` runs), its inputs written through its `alloc`, and `apply` called,
 * all under `timeoutMs`.
 */
export function runWasm(udf: WasmUdf, fields: A.Field[], columns: A.Data[], rows: number, timeoutMs: number): A.Vector {
  const memory = new WebAssembly.Memory({ initial: udf.memory.min, maximum: udf.memory.max });
  (context as { __quiverApply?: () => number }).__quiverApply = () => {
    const instance = new WebAssembly.Instance(udf.module, { env: { memory } });
    const { alloc, apply } = instance.exports as { alloc: (n: number) => number; apply: (p: number, n: number, rows: number) => number };
    const w = writer(memory, alloc);
    const pairs = columns.flatMap((d, i) => [w.array(d), w.schema(fields[i])]);
    return apply(w.pointers(pairs), columns.length, rows);
  };
  const out = CALL.runInContext(context, { timeout: Math.max(1, Math.ceil(timeoutMs)) }) as number;
  if (!Number.isInteger(out) || out <= 0 || out + 8 > memory.buffer.byteLength) throw new Error(`apply returned ${out}, not a pointer to the output column`);
  const [arrayPtr, schemaPtr] = new Uint32Array(memory.buffer.slice(out, out + 8));
  const field = ffi.parseField(memory.buffer, schemaPtr);
  return ffi.parseVector(memory.buffer, arrayPtr, field.type, true) as A.Vector;
}
