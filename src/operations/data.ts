// Row-level operations: insert, merge insert, update, delete, count and statistics. Writes on
// main go through the cached table handle, so later reads see them; `branch` writes leave main alone.
import type { Static } from "@sinclair/typebox";
import { BranchQuery, InsertQuery, MergeInsertQuery } from "../schemas/params.js";
import type * as A from "apache-arrow";
import { fromFieldMetadata, runnable } from "../compute/virtual-column.js";
import { arrow } from "../engine/arrow.js";
import { dataError } from "../engine/datasets.js";
import { manifestVanished } from "../engine/version-list.js";
import { namedBranch, type TableHandle, type WriteOf } from "../engine/tables.js";
import { checkFits, storable } from "../engine/ipc-in.js";
import { checkRowCount } from "../engine/rows-in.js";
import { isFilterFault, isSqlFault } from "../engine/query-errors.js";
import { LSM_UNSUPPORTED } from "../engine/messages.js";
import { writeSpec } from "../engine/lsm.js";
import { countMatching, countRows, planFilter, tableStats } from "../engine/table-info.js";
import type { Upload } from "../engine/upload.js";
import { addFile, deleteRows, updateRows } from "../engine/writes.js";
import { checkValueBound } from "../engine/value-size.js";
import { invalid, isApiError, unsupported } from "../errors.js";
import { canonicalPath, parseFieldPath } from "../schemas/field-path.js";
import { CountTableRows, DeleteFromTable, GetTableStats, UpdateTable } from "../schemas/data.js";
import { arrowOp, jsonOp } from "./define.js";
import { maintenanceFigures } from "../jobs/kinds/maintenance.js";
import { openTable, refuseView } from "./table-ref.js";
import type { OpContext } from "./types.js";
import { boundOf, json } from "./types.js";

/**
 * Run a LanceDB call, turning its input errors into 4xx about `field` (chosen from the error when
 * the call takes several inputs); given the `table` name, SQL naming an unknown column is a 404.
 */
async function engine<T>(field: string | ((err: unknown) => string), table: string | undefined, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isApiError(err)) throw err;
    throw dataError(err, typeof field === "string" ? field : field(err), table) ?? err;
  }
}

/**
 * The table named by the path, on the branch the request names (body field or `?branch=`), and a
 * way to commit to it: one write at a time per table and branch (see Tables.write).
 */
async function target(ctx: OpContext, at: { branch?: string | null; version?: number | null } = {}, write?: string) {
  const branch: string | undefined = at.branch ?? ctx.args.branch;
  const { entry, table } = await openTable(ctx.svc, ctx.id, { branch, version: at.version });
  if (write) await refuseView(ctx.svc, entry, write);
  const commit = <T>(of: Omit<WriteOf, "work">, fn: () => Promise<T>) => ctx.svc.tables.write(entry, branch, { ...of, work: ctx.work }, fn);
  return { entry, table, commit, branch, schema: () => ctx.svc.tables.schemaOf(entry, table) };
}

/**
 * The rows to write: the Arrow body, or the JSON rows read as the table's schema. SQL virtual
 * columns the rows leave out are left out of it too: the engine computes them, as for Arrow.
 */
function isSqlColumn(f: A.Field): boolean {
  const vc = fromFieldMetadata(f.name, f.metadata);
  return vc !== null && runnable(vc) === "sql";
}

async function arrowBody(ctx: OpContext, schema: A.Schema, name: string, append: boolean): Promise<Upload> {
  const { rows } = ctx;
  const data = rows ? await ctx.svc.pool.jsonUpload(rows, { schema, optional: schema.fields.filter(isSqlColumn).map((f) => f.name), table: name }) : await ctx.svc.pool.upload(ctx.raw);
  if (rows) storable(data.schema);
  if (data.numRows === 0) throw invalid(ctx.rows ? "body: holds no rows" : "body: the Arrow IPC stream holds no rows");
  checkFits(data.schema, data.nulls, schema, name);
  // The engine builds the columns the body leaves out as nulls, so each row costs the table's width.
  checkRowCount(data.numRows, new arrow.Schema(schema.fields.filter((f) => !isSqlColumn(f))), ctx.svc.config.maxDecodedBody);
  // An append leaves bool columns null in every row to the engine (engine/upload.ts); any other
  // write would mean something else without them.
  if (!append && data.nullBools.length > 0) {
    throw invalid(`body: bool column ${JSON.stringify(data.nullBools[0])} is null in every row; this write cannot carry it so (an insert can: leave the column out)`);
  }
  return data;
}

export const insertIntoTable = arrowOp(async (ctx) => {
  const mode: "append" | "overwrite" = ctx.args.mode ?? "append";
  const { entry, table, commit, branch, schema } = await target(ctx, {}, "insert");
  const data = await arrowBody(ctx, await schema(), entry.objectId, mode === "append");
  const version = await engine("body", undefined, async () =>
    mode === "append" ? ctx.svc.appends.append(entry, branch, table, data, ctx.work) : (await commit({ change: "insert", rows: data.numRows }, () => addFile(table, data.file, mode))).version,
  );
  return json({ version, num_inserted_rows: data.numRows });
}, { query: InsertQuery });

export const mergeInsertIntoTable = arrowOp(async (ctx) => {
  const q: Static<typeof MergeInsertQuery> = ctx.args;
  // Upstream's `on` is an array of field paths, sent as the parameter repeated (a composite key).
  const paths = q.on ?? [];
  if (paths.length === 0) throw invalid("on: is required (one or more key columns)");
  const matchedFilt = q.when_matched_update_all_filt;
  const bySourceFilt = q.when_not_matched_by_source_delete_filt;
  const { entry, table, branch, schema: schemaOf } = await target(ctx, {}, "merge_insert");
  const schema = await schemaOf();
  const on = paths.map((p) => {
    const segs = parseFieldPath(p, "on:");
    if (!schema.fields.some((f) => f.name === segs[0])) throw invalid(`on: column ${JSON.stringify(canonicalPath(segs))} not found in table ${JSON.stringify(entry.objectId)}`);
    if (segs.length > 1) throw invalid(`on: ${JSON.stringify(canonicalPath(segs))} is a nested field; merge keys must be top-level columns`);
    return segs[0];
  });
  if (new Set(on).size < on.length) throw invalid(`on: a key column is named twice (${paths.join(", ")})`);
  const data = await arrowBody(ctx, schema, entry.objectId, false);
  const missing = on.find((c) => !data.schema.fields.some((f) => f.name === c));
  if (missing) throw invalid(`body: key column ${JSON.stringify(missing)} is missing from the data`);

  // A spec installed by another client would take the rows into a MemWAL this engine cannot flush.
  if (await writeSpec(table)) throw unsupported(`${LSM_UNSUPPORTED}; remove the table's spec (unset_lsm_write_spec) to merge into it`);
  const how = {
    updateMatched: q.when_matched_update_all || matchedFilt ? { where: matchedFilt } : undefined,
    insertUnmatched: q.when_not_matched_insert_all,
    deleteNotInSource: q.when_not_matched_by_source_delete || bySourceFilt ? { where: bySourceFilt } : undefined,
    useIndex: q.use_index,
  };
  // The filters are SQL over the source and target rows, checked only as the merge runs.
  const filters = [matchedFilt && "when_matched_update_all_filt", bySourceFilt && "when_not_matched_by_source_delete_filt"];
  const sqlField = filters.filter(Boolean).join(" or ");
  const r = await engine(
    (err) => (sqlField && isSqlFault(err) ? sqlField : "merge_insert"),
    sqlField ? entry.objectId : undefined,
    () => ctx.svc.appends.merge(entry, branch, table, on, how, data, ctx.work),
  );
  return json({
    version: r.version,
    num_inserted_rows: r.numInsertedRows,
    num_updated_rows: r.numUpdatedRows,
    num_deleted_rows: r.numDeletedRows,
    // LanceDB's remote client also reads the source row count and the commit attempts.
    ...(ctx.lancedbClient ? { num_rows: r.numRows, num_attempts: r.numAttempts } : {}),
  });
}, { query: MergeInsertQuery });

export const updateTable = jsonOp(UpdateTable, async (ctx) => {
  const { body } = ctx;
  const { entry, table, commit, schema: schemaOf } = await target(ctx, body, "update");
  const schema = await schemaOf();
  body.updates.forEach(([col], i) => {
    if (!schema.fields.some((f) => f.name === col)) {
      throw invalid(`updates[${i}][0]: column ${JSON.stringify(col)} not found in table ${JSON.stringify(entry.objectId)}`);
    }
  });
  const valuesSql = Object.fromEntries(body.updates);
  const where = body.predicate || undefined;
  // Planning the predicate on its own first lets its errors name it rather than the values.
  if (where) await engine("predicate", entry.objectId, () => planFilter(table, where));
  const r = await engine((err) => (isFilterFault(err) ? "predicate" : "updates"), entry.objectId, () =>
    commit({ change: "update" }, async () => {
      // Inside the turn of writes: no other write comes between the values' check and the commit.
      for (const [i, [col, sql]] of body.updates.entries()) {
        await checkValueBound(table, `updates[${i}][1]`, col, schema.fields.find((f) => f.name === col)!.type, sql, where, ctx.svc.config);
      }
      return updateRows(table, valuesSql, where);
    }),
  );
  // LanceDB's remote client reads `rows_updated`; lance-namespace says `updated_rows`.
  return json(ctx.lancedbClient ? { version: r.version, rows_updated: r.rowsUpdated } : { version: r.version, updated_rows: r.rowsUpdated });
}, { query: BranchQuery });

export const deleteFromTable = jsonOp(DeleteFromTable, async (ctx) => {
  const { entry, table, commit } = await target(ctx, ctx.body, "delete");
  const r = await engine("predicate", entry.objectId, () => commit({ change: "delete" }, () => deleteRows(table, ctx.body.predicate)));
  return json({ version: r.version, num_deleted_rows: r.numDeletedRows });
}, { query: BranchQuery });

export const countTableRows = jsonOp(CountTableRows, async (ctx) => {
  const { entry, table } = await target(ctx, ctx.body);
  const predicate: string | undefined = ctx.body.predicate || undefined;
  // Without a predicate the count is read from the table's metadata; with one, it is a scan.
  return json(await engine("predicate", entry.objectId, () => (predicate ? countMatching(table, predicate, boundOf(ctx)) : countRows(table))));
}, { query: BranchQuery });

export const getTableStats = jsonOp(GetTableStats, async (ctx) => {
  const { entry, table } = await target(ctx, ctx.body);
  const branch = namedBranch(ctx.body.branch ?? ctx.args.branch) ?? null;
  const figures = async (t: TableHandle) => {
    const s = await tableStats(t);
    const f = s.fragmentStats;
    return {
      total_bytes: s.totalBytes,
      num_rows: s.numRows,
      num_indices: s.numIndices,
      fragment_stats: { num_fragments: f.numFragments, num_small_fragments: f.numSmallFragments, lengths: { ...f.lengths } },
      maintenance: await maintenanceFigures(ctx.svc, entry, t, branch),
    };
  };
  try {
    return json(await figures(table));
  } catch (err) {
    // The cached handle's version was cleaned up under it: the latest version answers.
    if (!manifestVanished(err)) throw err;
    return json(await figures(await ctx.svc.tables.open(entry, { branch, fresh: true })));
  }
}, { query: BranchQuery });
