// What the serving index reads from LanceDB, its store of record: which vector columns have an
// index (and its distance type), a table's rows as Arrow IPC (whole, or the ones a commit added or
// changed), its row ids, the rows a filter selects, the engine's output schema for a search, and
// rows taken by id.
import type { Schema } from "apache-arrow";
import * as lancedb from "@lancedb/lancedb";
import { emptyIpcFile } from "./ipc-out.js";
import { readSchema } from "./schema-ipc.js";
import { nativeExecute, searchSchema } from "./query.js";
import type { QuerySpec } from "./query-spec.js";
import type { TableHandle } from "./tables.js";
import { listVersions } from "./version-list.js";

export interface IndexedVectors {
  column: string;
  metric: "l2" | "cosine" | "dot";
  dim: number;
}

const T_FLOAT = 3;
const T_FIXED_SIZE_LIST = 16;
const SINGLE = 1;

/**
 * The float32 vector columns of a table that carry a vector index (IVF_PQ, IVF_HNSW_SQ, ...) with a
 * distance the serving index measures the same way (l2, cosine, dot; not hamming).
 */
export async function indexedVectors(t: TableHandle): Promise<IndexedVectors[]> {
  const schema = (await readSchema(t)) as unknown as Schema;
  const out: IndexedVectors[] = [];
  for (const ix of await t.listIndices()) {
    if (!/^(IVF|HNSW)/i.test(ix.indexType) || ix.columns.length !== 1) continue;
    const field = schema.fields.find((f) => f.name === ix.columns[0]);
    const type = field?.type as { typeId: number; listSize: number; children: { type: { typeId: number; precision: number } }[] } | undefined;
    if (!type || type.typeId !== T_FIXED_SIZE_LIST || type.children[0].type.typeId !== T_FLOAT || type.children[0].type.precision !== SINGLE) continue;
    const metric = (await t.indexStats(ix.name))?.distanceType ?? "l2";
    if (metric === "l2" || metric === "cosine" || metric === "dot") out.push({ column: ix.columns[0], metric, dim: type.listSize });
  }
  return out;
}

/**
 * Whether the vector index on `column` covers any row left. One that covers none (its rows all
 * deleted, or rewritten by updates) LanceDB does not search with: it measures every row, by L2
 * unless the search names a metric.
 */
export async function indexCoversRows(t: TableHandle, column: string): Promise<boolean> {
  const ix = (await t.listIndices()).find((x) => /^(IVF|HNSW)/i.test(x.indexType) && x.columns.length === 1 && x.columns[0] === column);
  return !!ix && ((await t.indexStats(ix.name))?.numIndexedRows ?? 0) > 0;
}

export const schemaOf = async (t: TableHandle) => (await readSchema(t)) as unknown as Schema;

/** Each engine buffer of a query's result, as a complete Arrow IPC file the caller may move. */
async function* buffers(q: lancedb.Query | lancedb.TakeQuery): AsyncGenerator<Uint8Array> {
  const it = await nativeExecute(q);
  for (let b = await it.next(); b; b = await it.next()) yield new Uint8Array(b);
}

/**
 * Rows with their `_rowid` and `columns`: all of them, or those `where` selects (SQL over the
 * table's columns and `_rowid`, `_row_last_updated_at_version`).
 */
export function readRows(t: TableHandle, columns: string[], where?: string): AsyncGenerator<Uint8Array> {
  const q = t.query().withRowId().select(columns);
  if (where) q.where(where);
  return buffers(q);
}

/** Every row id of the table at the handle's version. */
export async function rowIdsOf(t: TableHandle, where?: string): Promise<BigUint64Array[]> {
  const q = t.query().withRowId().select(["_rowid"]);
  if (where) q.where(where);
  const out: BigUint64Array[] = [];
  for await (const b of q) out.push(b.getChild("_rowid")!.toArray() as BigUint64Array);
  return out;
}

/** Rows of `ids` with `columns` and `_rowid`, as Arrow IPC files (in row id order, not the given one). */
export function takeRows(t: TableHandle, ids: bigint[], columns: string[]): AsyncGenerator<Uint8Array> {
  return buffers(t.takeRowIds(ids).select(columns).withRowId());
}

/** The schema the engine answers `spec` with (an empty IPC file): the serving index answers the same. */
export async function answerSchema(t: TableHandle, spec: QuerySpec, name: string): Promise<Uint8Array> {
  return emptyIpcFile((await searchSchema(t, spec, name)) as never);
}

/** When version `version` of the table was committed (ms), or null when it is no longer kept. */
export async function versionTime(t: TableHandle, version: number): Promise<number | null> {
  const v = (await listVersions(t)).find((x) => x.version === version);
  return v ? new Date(v.timestamp).getTime() : null;
}
