// Files of vectors as benchmarks ship them: .fvecs/.bvecs (the SIFT and GIST sets; each vector a
// little-endian int32 dimension then its values as float32 or uint8), .ivecs (their ground truth:
// int32 neighbour ids), NumPy .npy (2-D float32/float64, C order), Arrow IPC with a vector column,
// and JSON (lines of arrays or of objects holding one array, or one array of arrays). Read into one
// flat Float32Array; every error names the file and is an input error (exit 2).
import { readFileSync, writeFileSync } from "node:fs";
import { DataType, tableFromIPC, type Table } from "apache-arrow";
import { badInput } from "./input-error.js";

/** `count` vectors of `dim` values, row after row. */
export interface Vectors {
  dim: number;
  count: number;
  data: Float32Array;
}

export const ARROW_FILE = /\.(arrow|arrows|ipc|feather)$/i;

/** Vector `i` of `v`, a view of its data. */
export const row = (v: Vectors, i: number): Float32Array => v.data.subarray(i * v.dim, (i + 1) * v.dim);

/** The vectors as arrays of numbers (what request bodies carry). */
export const toArrays = (v: Vectors): number[][] => Array.from({ length: v.count }, (_, i) => Array.from(row(v, i)));

function read(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw badInput(`${file}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (e as Error).message}`);
  }
}

/** Records of a .fvecs/.bvecs/.ivecs file: each a 4-byte dimension, then `dim` values of `size` bytes. */
function vecsRecords(b: Buffer, file: string, size: number): { dim: number; count: number } {
  if (b.length < 4) throw badInput(`${file}: empty or not a vecs file`);
  const dim = b.readInt32LE(0);
  const record = 4 + dim * size;
  if (dim <= 0 || b.length % record !== 0) throw badInput(`${file}: not a vecs file of ${size}-byte values (first dimension ${dim}, ${b.length} bytes)`);
  const count = b.length / record;
  for (let i = 0; i < count; i++) if (b.readInt32LE(i * record) !== dim) throw badInput(`${file}: vector ${i} has dimension ${b.readInt32LE(i * record)}, not ${dim}`);
  return { dim, count };
}

function readVecs(b: Buffer, file: string, kind: "f" | "b"): Vectors {
  const size = kind === "f" ? 4 : 1;
  const { dim, count } = vecsRecords(b, file, size);
  const data = new Float32Array(count * dim);
  const record = 4 + dim * size;
  for (let i = 0; i < count; i++) {
    const at = i * record + 4;
    for (let j = 0; j < dim; j++) data[i * dim + j] = kind === "f" ? b.readFloatLE(at + 4 * j) : b[at + j];
  }
  return { dim, count, data };
}

/** Neighbour ids of an .ivecs file (as the SIFT and GIST sets ship their ground truth): one row per query. */
export function readIvecs(file: string): { k: number; count: number; ids: Int32Array } {
  const b = read(file);
  const { dim, count } = vecsRecords(b, file, 4);
  const ids = new Int32Array(count * dim);
  for (let i = 0; i < count; i++) for (let j = 0; j < dim; j++) ids[i * dim + j] = b.readInt32LE(i * (4 + 4 * dim) + 4 + 4 * j);
  return { k: dim, count, ids };
}

function writeVecs(file: string, dim: number, count: number, put: (b: Buffer, at: number, i: number) => void): void {
  const b = Buffer.alloc(count * (4 + 4 * dim));
  for (let i = 0; i < count; i++) {
    const at = i * (4 + 4 * dim);
    b.writeInt32LE(dim, at);
    for (let j = 0; j < dim; j++) put(b, at + 4 + 4 * j, i * dim + j);
  }
  writeFileSync(file, b);
}

export const writeFvecs = (file: string, v: Vectors) => writeVecs(file, v.dim, v.count, (b, at, i) => b.writeFloatLE(v.data[i], at));
export const writeIvecs = (file: string, k: number, count: number, ids: Int32Array) => writeVecs(file, k, count, (b, at, i) => b.writeInt32LE(ids[i], at));

/** A NumPy `.npy` file of a 2-D float32 or float64 array, C order. */
function readNpy(b: Buffer, file: string): Vectors {
  if (b.toString("latin1", 1, 6) !== "NUMPY") throw badInput(`${file}: not a .npy file`);
  const major = b[6];
  const headerLen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString("latin1", start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shape = /'shape':\s*\((\d+),\s*(\d+)\)/.exec(header);
  if (/'fortran_order':\s*True/.test(header) || !shape || (descr !== "<f4" && descr !== "<f8")) {
    throw badInput(`${file}: expected a 2-D little-endian float32 or float64 array in C order (header ${header.trim()})`);
  }
  const [count, dim] = [Number(shape[1]), Number(shape[2])];
  const body = b.subarray(start + headerLen);
  const size = descr === "<f4" ? 4 : 8;
  if (body.length < count * dim * size) throw badInput(`${file}: shorter than its header's shape (${count}, ${dim})`);
  const data = new Float32Array(count * dim);
  for (let i = 0; i < count * dim; i++) data[i] = size === 4 ? body.readFloatLE(i * 4) : body.readDoubleLE(i * 8);
  return { dim, count, data };
}

const isFloatList = (t: DataType) => (DataType.isFixedSizeList(t) || DataType.isList(t)) && DataType.isFloat(t.children[0].type);

/** The vector column of a table: the one named, else the only list of floats. */
export function vectorColumnOf(t: Table, named: string | undefined, where: string): string {
  if (named) {
    if (!t.schema.fields.some((f) => f.name === named)) throw badInput(`${where}: no column ${named}`);
    return named;
  }
  const vs = t.schema.fields.filter((f) => isFloatList(f.type)).map((f) => f.name);
  if (vs.length !== 1) throw badInput(`${where}: ${vs.length ? `several vector columns (${vs.join(", ")})` : "no vector column"}; name one with --vector-column`);
  return vs[0];
}

/** Vectors of an Arrow column (nulls skipped), checked to share one dimension. */
export function columnVectors(t: Table, column: string, where: string): Vectors {
  const rows: ArrayLike<number>[] = [];
  for (const v of t.getChild(column)!) if (v) rows.push((v as { toArray(): ArrayLike<number> }).toArray());
  return fromRows(rows, where);
}

function fromRows(rows: ArrayLike<number>[], where: string): Vectors {
  const dim = rows[0]?.length ?? 0;
  const data = new Float32Array(rows.length * dim);
  rows.forEach((r, i) => {
    if (r.length !== dim) throw badInput(`${where}: vector ${i} has ${r.length} values, vector 0 has ${dim}`);
    data.set(r, i * dim);
  });
  return { dim, count: rows.length, data };
}

/** JSON: one array of vectors, or JSON lines each a vector (an array, or an object holding one). */
function readJson(text: string, file: string, column: string | undefined): Vectors {
  let items: unknown[] | null = null;
  if (text.startsWith("[")) {
    try {
      const whole = JSON.parse(text) as unknown;
      // One line holding one vector is JSON lines of one item.
      items = Array.isArray(whole) && whole.every((x) => typeof x === "number") ? [whole] : (whole as unknown[]);
    } catch {
      items = null; // not one JSON value: JSON lines
    }
  }
  if (!items) {
    items = [];
    for (const [n, line] of text.split("\n").entries()) {
      if (!line.trim()) continue;
      try {
        items.push(JSON.parse(line));
      } catch (e) {
        throw badInput(`${file}: line ${n + 1} is not JSON: ${(e as Error).message}`);
      }
    }
  }
  if (!Array.isArray(items)) throw badInput(`${file}: expected JSON lines of vectors or an array of vectors`);
  const rows = items.map((it, i) => {
    const v = Array.isArray(it) ? it : column ? (it as Record<string, unknown>)?.[column] : it && typeof it === "object" ? Object.values(it).find(Array.isArray) : undefined;
    if (!Array.isArray(v) || !v.length || !v.every((x) => typeof x === "number")) throw badInput(`${file}: item ${i} is not a vector (an array of numbers)`);
    return v as number[];
  });
  return fromRows(rows, file);
}

/** Vectors from a file, by its name: .fvecs, .bvecs, .npy, Arrow IPC, else JSON. */
export function readVectorFile(file: string, column?: string): Vectors {
  const b = read(file);
  let v: Vectors;
  if (/\.fvecs$/i.test(file)) v = readVecs(b, file, "f");
  else if (/\.bvecs$/i.test(file)) v = readVecs(b, file, "b");
  else if (/\.npy$/i.test(file)) v = readNpy(b, file);
  else if (ARROW_FILE.test(file)) {
    let t: Table;
    try {
      t = tableFromIPC(b);
    } catch (e) {
      throw badInput(`${file}: not Arrow IPC: ${(e as Error).message}`);
    }
    v = columnVectors(t, vectorColumnOf(t, column, file), file);
  } else v = readJson(b.toString("utf8").trim(), file, column);
  if (!v.count) throw badInput(`${file}: no vectors`);
  return v;
}
