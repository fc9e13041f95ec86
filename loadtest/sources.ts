// What the workloads send: query vectors (a dataset's held-out queries, a file, or rows sampled from
// the table through its query API), full-text queries (words of the sampled rows unless given), and rows to insert (a file, or
// the sampled rows again), all read once before the run.
import { readFileSync } from "node:fs";
import { DataType, RecordBatchStreamWriter, Table, tableFromIPC } from "apache-arrow";
import { callJson, type Client } from "./http.js";
import { badInput } from "./input-error.js";
import type { Options } from "./options.js";
import { ARROW_FILE, columnVectors, readVectorFile, toArrays, vectorColumnOf } from "./vector-files.js";

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

/** Query vectors from a file (see vector-files.ts for the formats). */
export const readVectors = (file: string, column?: string): number[][] => toArrays(readVectorFile(file, column));

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

/** A query file of another dimension than the table's vectors would make every search a 400: refused before the run. */
function sameDimension(vectors: number[][], o: Options, table: Table): void {
  if (!table.numRows || !vectors.length) return;
  const column = vectorColumnOf(table, o.vectorColumn, `table ${o.table}`);
  const dim = columnVectors(table, column, `table ${o.table}`).dim;
  if (vectors[0].length !== dim) throw badInput(`--queries ${o.queries}: its vectors have ${vectors[0].length} dimensions, but column ${column} of ${o.table} holds ${dim}`);
}

/** `queries`: a dataset's held-out query vectors, used before a file or the table's own rows. */
export async function loadSources(o: Options, c: Client, headers: Record<string, string>, queries?: number[][]): Promise<Sources> {
  const uses = (placeholder: string) => o.workloads.some((w) => w.kind === "raw" && JSON.stringify(w.body ?? null).includes(placeholder));
  const needVectors = o.mode === "recall" || uses("{{vector}}") || o.workloads.some((w) => ["vector", "filtered_vector", "hybrid"].includes(w.kind));
  const textless = uses("{{text}}") || o.workloads.some((w) => (w.kind === "fts" || w.kind === "hybrid") && !w.text?.length);
  const needText = textless && !o.text.length;
  const needRows = o.workloads.some((w) => w.kind === "insert");
  const s: Sources = { vectors: [], text: o.text, inserts: [], insertContentType: "" };
  let sample: Table | null = null;
  if ((needVectors && !o.queries && !queries) || needText || (needRows && !o.insertRows)) {
    sample = tableFromIPC(await sampleRows(c, headers, o.table, o.sample, "application/vnd.apache.arrow.file"));
    if (!sample.numRows) throw badInput(`table ${o.table} has no rows to sample; give --queries (and --insert-rows, --text)`);
  }
  if (needVectors) {
    if (queries) s.vectors = queries;
    else if (o.queries) {
      s.vectors = readVectors(o.queries, o.vectorColumn);
      sameDimension(s.vectors, o, sample ?? tableFromIPC(await sampleRows(c, headers, o.table, 1, "application/vnd.apache.arrow.file")));
    } else {
      s.vectorColumn = vectorColumnOf(sample!, o.vectorColumn, `table ${o.table}`);
      s.vectors = toArrays(columnVectors(sample!, s.vectorColumn, `table ${o.table}`));
    }
    if (!s.vectors.length) throw new Error("no query vectors");
  }
  if (needText) {
    s.text = wordsOf(sample!, o.textColumns);
    if (!s.text.length) throw new Error(`table ${o.table}: no words in its text columns for full-text queries; give --text`);
  }
  if (needRows) {
    if (o.insertRows && ARROW_FILE.test(o.insertRows)) {
      if (o.insertFormat === "json") throw badInput("--insert-format json takes rows as JSON lines, not Arrow");
      s.inserts = arrowBatches(tableFromIPC(readFileSync(o.insertRows)), o.insertBatch);
    } else if (o.insertRows) {
      if (o.insertFormat === "arrow") throw badInput("--insert-rows with JSON lines sends JSON: add --insert-format json (or give an Arrow IPC file)");
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
