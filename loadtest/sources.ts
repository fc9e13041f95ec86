// What the workloads send: query vectors (from a file, or sampled from the table through its query
// API), full-text queries (words of the sampled rows unless given), and rows to insert (a file, or
// the sampled rows again), all read once before the run.
import { readFileSync } from "node:fs";
import { DataType, RecordBatchStreamWriter, Table, tableFromIPC, type Vector } from "apache-arrow";
import { callJson, type Client } from "./http.js";
import type { Options } from "./options.js";

export interface Sources {
  vectors: number[][];
  /** The vector column the sampled vectors came from (when sampled). */
  vectorColumn?: string;
  text: string[];
  /** Insert bodies, each one batch, in the format of `insertContentType`. */
  inserts: Buffer[];
  insertContentType: string;
}

export const tablePath = (table: string, op: string) => `/v1/table/${encodeURIComponent(table).replace(/%24/g, "$")}/${op}`;

const isFloatList = (t: DataType) =>
  (DataType.isFixedSizeList(t) || DataType.isList(t)) && DataType.isFloat(t.children[0].type);

/** The vector column of a table: the one named, else the only fixed-size list of floats. */
function vectorColumnOf(t: Table, named: string | undefined, where: string): string {
  if (named) {
    if (!t.schema.fields.some((f) => f.name === named)) throw new Error(`${where}: no column ${named}`);
    return named;
  }
  const vs = t.schema.fields.filter((f) => isFloatList(f.type)).map((f) => f.name);
  if (vs.length !== 1) throw new Error(`${where}: ${vs.length ? `several vector columns (${vs.join(", ")})` : "no vector column"}; name one with --vector-column`);
  return vs[0];
}

const vectorsOf = (col: Vector): number[][] => {
  const out: number[][] = [];
  for (const v of col) if (v) out.push(Array.from(v as Iterable<number>));
  return out;
};

/** Query vectors from a file: JSON lines (arrays, or objects with one array), a JSON array, `.npy` (float32/64, 2-D) or Arrow IPC. */
export function readVectors(file: string, column?: string): number[][] {
  const bytes = readFileSync(file);
  if (/\.npy$/i.test(file)) return readNpy(bytes, file);
  if (/\.(arrow|arrows|ipc|feather)$/i.test(file)) {
    const t = tableFromIPC(bytes);
    return vectorsOf(t.getChild(vectorColumnOf(t, column, file))!);
  }
  const text = bytes.toString("utf8").trim();
  const items: unknown[] = text.startsWith("[") ? JSON.parse(text) : text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  return items.map((it, i) => {
    const v = Array.isArray(it) ? it : column ? (it as Record<string, unknown>)[column] : Object.values(it as object).find(Array.isArray);
    if (!Array.isArray(v) || !v.every((x) => typeof x === "number")) throw new Error(`${file}: item ${i} is not a vector (an array of numbers)`);
    return v as number[];
  });
}

/** A NumPy `.npy` file of a 2-D float32 or float64 array, C order. */
function readNpy(b: Buffer, file: string): number[][] {
  if (b.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${file}: not a .npy file`);
  const major = b[6];
  const headerLen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString("latin1", start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shape = /'shape':\s*\((\d+),\s*(\d+)\)/.exec(header);
  if (/'fortran_order':\s*True/.test(header) || !shape || (descr !== "<f4" && descr !== "<f8")) {
    throw new Error(`${file}: expected a 2-D little-endian float32 or float64 array in C order (header ${header.trim()})`);
  }
  const [n, dim] = [Number(shape[1]), Number(shape[2])];
  const data = b.subarray(start + headerLen);
  const size = descr === "<f4" ? 4 : 8;
  const out: number[][] = [];
  for (let i = 0; i < n; i++) {
    const row: number[] = [];
    for (let j = 0; j < dim; j++) {
      const at = (i * dim + j) * size;
      row.push(size === 4 ? data.readFloatLE(at) : data.readDoubleLE(at));
    }
    out.push(row);
  }
  return out;
}

/** Rows of the table through its query API: a scan of `n` rows from a random offset. */
async function sampleRows(c: Client, headers: Record<string, string>, table: string, n: number, accept: string): Promise<Buffer> {
  const count = await callJson(c, headers, "POST", tablePath(table, "count_rows"), {});
  const total = typeof count === "number" ? count : Number(count?.count ?? count?.num_rows ?? 0);
  const offset = Math.floor(Math.random() * Math.max(0, total - n));
  const a = await c.send({
    method: "POST",
    path: tablePath(table, "query"),
    headers: { ...headers, accept, "content-type": "application/json" },
    body: Buffer.from(JSON.stringify({ k: n, offset })),
  });
  if (a.status !== 200) throw new Error(`sampling ${table}: ${a.status || a.error} ${a.body.toString().slice(0, 300)}`);
  return a.body;
}

/** Words of the sampled rows' text columns, for full-text queries nobody gave. */
function wordsOf(t: Table, columns: string[] | undefined): string[] {
  const names = columns ?? t.schema.fields.filter((f) => DataType.isUtf8(f.type) || DataType.isLargeUtf8(f.type)).map((f) => f.name);
  const words = new Set<string>();
  for (const name of names) {
    for (const s of t.getChild(name) ?? []) for (const w of String(s ?? "").toLowerCase().match(/\p{L}{3,}/gu) ?? []) words.add(w);
  }
  return [...words].slice(0, 200);
}

/** Arrow IPC stream bodies of `batch` rows each, cut from `t`. */
function arrowBatches(t: Table, batch: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < t.numRows; i += batch) {
    const w = RecordBatchStreamWriter.writeAll(t.slice(i, i + batch));
    out.push(Buffer.from(w.toUint8Array(true)));
  }
  return out;
}

/** JSON-lines bodies of `batch` rows each. */
const jsonBatches = (lines: string[], batch: number): Buffer[] =>
  Array.from({ length: Math.ceil(lines.length / batch) }, (_, i) => Buffer.from(lines.slice(i * batch, (i + 1) * batch).join("\n") + "\n"));

export async function loadSources(o: Options, c: Client, headers: Record<string, string>): Promise<Sources> {
  const uses = (placeholder: string) => o.workloads.some((w) => w.kind === "raw" && JSON.stringify(w.body ?? null).includes(placeholder));
  const needVectors = o.mode === "recall" || uses("{{vector}}") || o.workloads.some((w) => ["vector", "filtered_vector", "hybrid"].includes(w.kind));
  const textless = uses("{{text}}") || o.workloads.some((w) => (w.kind === "fts" || w.kind === "hybrid") && !w.text?.length);
  const needText = textless && !o.text.length;
  const needRows = o.workloads.some((w) => w.kind === "insert");
  const s: Sources = { vectors: [], text: o.text, inserts: [], insertContentType: "" };
  let sample: Table | null = null;
  if ((needVectors && !o.queries) || needText || (needRows && !o.insertRows)) {
    sample = tableFromIPC(await sampleRows(c, headers, o.table, o.sample, "application/vnd.apache.arrow.file"));
    if (!sample.numRows) throw new Error(`table ${o.table} has no rows to sample; give --queries (and --insert-rows, --text)`);
  }
  if (needVectors) {
    if (o.queries) s.vectors = readVectors(o.queries, o.vectorColumn);
    else {
      s.vectorColumn = vectorColumnOf(sample!, o.vectorColumn, `table ${o.table}`);
      s.vectors = vectorsOf(sample!.getChild(s.vectorColumn)!);
    }
    if (!s.vectors.length) throw new Error("no query vectors");
  }
  if (needText) {
    s.text = wordsOf(sample!, o.textColumns);
    if (!s.text.length) throw new Error(`table ${o.table}: no words in its text columns for full-text queries; give --text`);
  }
  if (needRows) {
    if (o.insertRows && /\.(arrow|arrows|ipc|feather)$/i.test(o.insertRows)) {
      if (o.insertFormat === "json") throw new Error("--insert-format json takes rows as JSON lines, not Arrow");
      s.inserts = arrowBatches(tableFromIPC(readFileSync(o.insertRows)), o.insertBatch);
    } else if (o.insertRows) {
      if (o.insertFormat === "arrow") throw new Error("--insert-rows with JSON lines sends JSON: add --insert-format json (or give an Arrow IPC file)");
      s.inserts = jsonBatches(readFileSync(o.insertRows, "utf8").split("\n").filter((l) => l.trim()), o.insertBatch);
    } else if (o.insertFormat === "arrow") {
      s.inserts = arrowBatches(sample!, o.insertBatch);
    } else {
      const rows = (await sampleRows(c, headers, o.table, o.sample, "application/x-ndjson")).toString("utf8");
      s.inserts = jsonBatches(rows.split("\n").filter((l) => l.trim()), o.insertBatch);
    }
    s.insertContentType = o.insertFormat === "arrow" ? "application/vnd.apache.arrow.stream" : "application/x-ndjson";
  }
  return s;
}
