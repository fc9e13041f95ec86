// LanceDB's side of materialized views: query views are LanceDB's own (`createMaterializedView`,
// refreshed incrementally by it); udtf and chunker views are tables Quiver writes, from source rows
// read here.
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import { lanceNameOf } from "../catalog/locations.js";
import { invalid } from "../errors.js";
import { arrow } from "./arrow.js";
import { ipcFileBytes } from "./ipc-out.js";
import { nativeExecute } from "./query.js";
import { dataError } from "./datasets.js";
import { engineReason, errorText } from "./messages.js";
import type { Tables } from "./tables.js";

/** What a query view selects from its source (src/compute/views.ts, ViewQuery). */
export interface ViewQuery {
  /** [output name, SQL expression] pairs; null for every column. */
  columns: [string, string][] | null;
  filter: string | null;
  limit: number | null;
}

/** The select of a view query, as LanceDB takes it (output name → SQL expression). */
const selectOf = (form: ViewQuery) => (form.columns ? new Map(form.columns) : null);

// LanceDB's refusal of an aggregate carries a whole query plan: the sentence is enough.
const noAggregates = () => invalid("source_query.columns: query views cannot aggregate (no GROUP BY, count, sum, min, max or avg); use a udtf view for aggregates");

/** The schema a query view over `source` would have (its rows' columns), checking the form's SQL. */
export async function queryViewSchema(source: lancedb.Table, form: ViewQuery, sourceName: string): Promise<A.Schema> {
  const q = source.query();
  const select = selectOf(form);
  if (select) q.select(select);
  if (form.filter !== null) q.where(form.filter);
  try {
    return (await q.outputSchema()) as unknown as A.Schema;
  } catch (err) {
    if (/Aggregate/.test(errorText(err))) throw noAggregates();
    throw dataError(err, form.filter !== null ? "source_query.filter or source_query.columns" : "source_query.columns", sourceName) ?? invalid(`source_query: ${engineReason(err)}`);
  }
}

/** LanceDB's name for a table at `location` on the data directory's plain connection. */
function nameAt(location: string, what: string): string {
  const name = lanceNameOf(location);
  if (name === null) throw invalid(`${what}: the table lives at ${JSON.stringify(location)}, which LanceDB's views cannot reference; query views need a table Quiver created`);
  return name;
}

/** Create a query view at `viewLocation` over the table at `sourceLocation`. */
export async function createQueryView(tables: Tables, viewLocation: string, sourceLocation: string, form: ViewQuery): Promise<lancedb.Table> {
  const select = form.columns ?? undefined;
  try {
    const mv = await tables.plain.createMaterializedView(nameAt(viewLocation, "id"), nameAt(sourceLocation, "source_query.table"), {
      ...(select ? { select } : {}),
      ...(form.filter !== null ? { where: form.filter } : {}),
      ...(form.limit !== null ? { limit: form.limit } : {}),
    });
    return mv.table();
  } catch (err) {
    const msg = errorText(err);
    if (/require stable row ids/.test(msg)) {
      throw invalid("source_query.table: query views need a source table with stable row ids: tables created through Quiver have them; a table created elsewhere needs LanceDB's new_table_enable_stable_row_ids storage option when it is created");
    }
    if (/Aggregate|aggregat/i.test(msg)) throw noAggregates();
    throw dataError(err, "source_query", "") ?? err;
  }
}

/** LanceDB's refresh of a query view, from the source's `srcVersion` (its latest when undefined). */
export const refreshQueryView = (view: lancedb.Table, srcVersion: number | undefined) => view.refreshMaterializedView(false, srcVersion);

/** The values of `column` in the rows `filter` selects (all when null). */
export async function columnValues(t: lancedb.Table, column: string, filter: string | null): Promise<unknown[]> {
  const q = t.query().select([column]);
  if (filter !== null) q.where(filter);
  return (await q.toArray()).map((r) => r[column] as unknown);
}

/** The row ids of the rows `filter` selects (all when null). */
export async function rowIdsWhere(t: lancedb.Table, filter: string | null): Promise<bigint[]> {
  const q = t.query().select(new Map([["v", "_row_last_updated_at_version"]])).withRowId();
  if (filter !== null) q.where(filter);
  return Array.from((await q.toArrow()).getChild("_rowid")!.toArray() as BigUint64Array);
}

/**
 * Source rows as one IPC file: by row ids, or those a filter selects (all when null, at most
 * `limit`); `select` maps output names to SQL (every column when null). No rows: an empty file of
 * the query's columns.
 */
export async function sourceRows(source: lancedb.Table, part: string | null | bigint[], select: Map<string, string> | null, limit: number | null): Promise<Uint8Array> {
  const q = Array.isArray(part) ? source.takeRowIds(part) : source.query();
  if (select) q.select(select);
  if (!Array.isArray(part)) {
    const sq = q as lancedb.Query;
    if (part !== null) sq.where(part);
    if (limit !== null) sq.limit(limit);
  }
  return (await ipcFileBytes(await nativeExecute(q))) ?? new Uint8Array(arrow.tableToIPC(new arrow.Table((await q.outputSchema()) as never), "stream"));
}

/** Source rows by id with their row ids (`_rowid`), as one IPC file; `select` as for sourceRows (every column when empty). */
export async function sourceRowsWithIds(source: lancedb.Table, ids: bigint[], select: Map<string, string>): Promise<Uint8Array | null> {
  const q = source.takeRowIds(ids).withRowId();
  if (select.size > 0) q.select(select);
  return ipcFileBytes(await nativeExecute(q));
}

/** Create an empty udtf or chunker view table at `location` with `schema`. */
export const createViewTable = (tables: Tables, location: string, schema: A.Schema) =>
  tables.plain.createEmptyTable(nameAt(location, "id"), schema as never, { mode: "create" });

// IVF indexes whose search with one probe returns a whole partition (HNSW variants stop early).
const PARTITIONED = ["IvfFlat", "IvfPq", "IvfSq", "IvfRq"];

/** The IVF index on `column` a udtf partitions by: 400 when there is none. */
export async function partitionIndex(source: lancedb.Table, column: string): Promise<lancedb.IndexConfig> {
  const ix = (await source.listIndices()).find((i) => i.columns.length === 1 && i.columns[0] === column && PARTITIONED.includes(i.indexType));
  if (!ix) throw invalid(`udtf_spec.partition_by_indexed_column: column ${JSON.stringify(column)} has no IVF_FLAT, IVF_PQ or IVF_RQ index to partition by (create one first)`);
  return ix;
}

/**
 * The source rows (matching `filter`) grouped by the IVF partition they are indexed in. LanceDB's
 * Node API does not expose partitions, but a search with exactly one probe returns the rows of the
 * partition nearest the query vector, and a row is indexed in the partition nearest its vector: so
 * searching with an ungrouped row's own vector yields its partition, one search per partition. Rows
 * not indexed yet (written after the build) form one more group.
 */
export async function indexPartitions(source: lancedb.Table, column: string, filter: string | null): Promise<bigint[][]> {
  const ix = await partitionIndex(source, column);
  const distance = ((await source.indexStats(ix.name))?.distanceType ?? "l2") as "l2";
  const ids = await rowIdsWhere(source, filter);
  const grouped = new Set<bigint>();
  const groups: bigint[][] = [];
  const unindexed: bigint[] = [];
  for (const id of ids) {
    if (grouped.has(id)) continue;
    const [row] = await source.takeRowIds([id]).select([column]).toArray();
    const vq = source.vectorSearch(Array.from(row[column] as Iterable<number>)).column(column).distanceType(distance).minimumNprobes(1).maximumNprobes(1).fastSearch().limit(ids.length).withRowId().select(["_distance"]);
    if (filter !== null) vq.where(filter);
    const got = Array.from((await vq.toArrow()).getChild("_rowid")!.toArray() as BigUint64Array);
    if (!got.includes(id)) {
      unindexed.push(id);
      grouped.add(id);
      continue;
    }
    const fresh = got.filter((x) => !grouped.has(x));
    fresh.forEach((x) => grouped.add(x));
    groups.push(fresh);
  }
  return unindexed.length > 0 ? [...groups, unindexed] : groups;
}
