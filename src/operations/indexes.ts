// Indexes: create (built in the background as a transaction), list, stats, drop.
// Listed statuses: "Active" for committed indexes; "Queued" / "Building" for builds still
// tracked as transactions on the latest version (they carry `transaction_id` and an empty uuid).
import { requireTable } from "../catalog/lookup.js";
import { sameId } from "../catalog/names.js";
import { ALL_PARAMS, checkIndexParams, dropIndex, friendlyType, indexKind, indexNotFound, indexStats, isIndexNotFound, isVectorKind, listIndexes, type ColumnType, type IndexBuildSpec, type IndexConfig, type IndexParams } from "../engine/indexes.js";
import { countRows, tableSchema } from "../engine/table-info.js";
import { mainOr } from "../engine/tables.js";
import { ApiError, Code, invalid } from "../errors.js";
import { INDEX_BUILD, indexBuildExclusive } from "../jobs/kinds/index-build.js";
import type { JobRecord } from "../jobs/store.js";
import { canonicalPath, parseFieldPath, resolveFieldPath } from "../schemas/field-path.js";
import { CLIENT_FTS_DEFAULTS, CreateIndex, DropIndex, IndexStats, ListIndices } from "../schemas/indexes.js";
import type { Services } from "../services.js";
import type { Static } from "@sinclair/typebox";
import { jsonOp } from "./define.js";
import { PageQuery } from "../schemas/params.js";
import { MAX_PAGE, page, pageOf } from "./pagination.js";
import { openAt } from "./table-ref.js";
import { json, type OpContext } from "./types.js";


/** Builds of table `id` (on `branch`) still Queued or Running. */
function pendingBuilds(svc: Services, id: readonly string[], branch: string | null): JobRecord[] {
  return svc.jobs
    .active()
    .filter((r) => r.operation === INDEX_BUILD && sameId(r.table, id) && (r.spec as IndexBuildSpec).branch === branch);
}


async function create(ctx: OpContext<Static<typeof CreateIndex>>, scalarOnly: boolean) {
  const { id, body, svc } = ctx;
  const entry = await requireTable(svc.catalog, id);
  const kind = indexKind(body.index_type);
  for (const [field, value] of Object.entries(CLIENT_FTS_DEFAULTS)) {
    const given = body[field as keyof typeof CLIENT_FTS_DEFAULTS];
    if (given != null && given !== value) throw invalid(`${field}: only ${JSON.stringify(value)} is supported by this server's engine, got ${JSON.stringify(given)}`);
  }
  if (scalarOnly && isVectorKind(kind)) throw invalid(`index_type: ${kind} is a vector index; create it with create_index`);
  const branch = mainOr(body.branch);
  const table = await openAt(svc, entry, { branch });
  const { segs, field } = resolveFieldPath((await tableSchema(table)).fields, body.column, entry.objectId);
  const column = canonicalPath(segs);
  const given = Object.fromEntries(ALL_PARAMS.map((p) => [p, body[p] ?? undefined])) as IndexParams;
  const params = checkIndexParams(kind, column, field.type as unknown as ColumnType, given);
  const name = body.name ?? `${column}_idx`;
  const where = `table ${JSON.stringify(entry.objectId)}`;
  const refuseBusy = () => {
    const busy = pendingBuilds(svc, id, branch).find((r) => {
      const s = r.spec as IndexBuildSpec;
      return s.name === name || (s.kind === kind && s.column === column);
    });
    if (!busy) return;
    const s = busy.spec as IndexBuildSpec;
    throw new ApiError(Code.TableIndexAlreadyExists, `index ${JSON.stringify(s.name)} (${s.kind} on ${JSON.stringify(s.column)}) of ${where} is already being built (transaction ${busy.id}); cancel it first to build another`);
  };
  refuseBusy();
  // A second index of the same type on the same column only costs a build and space: 409 unless asked.
  const same = (await listIndexes(table)).filter((i) => i.name === name || (friendlyType(i.indexType) === kind && i.columns.length === 1 && sameColumn(i.columns[0], column)));
  if (same.length > 0 && !body.replace) {
    const i = same[0];
    throw new ApiError(Code.TableIndexAlreadyExists, `index ${JSON.stringify(i.name)} (${friendlyType(i.indexType)} on ${JSON.stringify(i.columns[0])}) already exists in ${where}; send "replace": true to replace it`);
  }
  // Refused by the queue bounds before anything is dropped.
  svc.jobs.admit(id, ctx.principal.key);
  for (const i of same) await svc.tables.write(entry, branch, { change: "index", work: ctx.work }, () => dropIndex(table, i.name));
  refuseBusy();
  const spec: IndexBuildSpec = { column, kind, name, params, branch };
  // The name's slot decides between creates racing here or through other replicas.
  const rec = await svc.jobs.submit(INDEX_BUILD, id, spec, ctx.principal.key, indexBuildExclusive(id, branch, name));
  return json({ transaction_id: rec.id });
}

/** Does an index column as the engine lists it name the field at canonical path `column`? */
function sameColumn(engineColumn: string, column: string): boolean {
  try {
    return canonicalPath(parseFieldPath(engineColumn, "column")) === column;
  } catch {
    return engineColumn === column;
  }
}

export const createTableIndex = jsonOp(CreateIndex, (ctx) => create(ctx, false));
export const createTableScalarIndex = jsonOp(CreateIndex, (ctx) => create(ctx, true));

function indexRecord(c: IndexConfig) {
  return {
    index_name: c.name,
    index_uuid: c.indexUuid ?? "",
    columns: c.columns,
    status: "Active",
    index_type: friendlyType(c.indexType),
    type_url: c.typeUrl ?? null,
    num_indexed_rows: c.numIndexedRows ?? null,
    num_unindexed_rows: c.numUnindexedRows ?? null,
    size_bytes: c.sizeBytes ?? null,
    num_segments: c.numSegments ?? null,
    created_at: c.createdAt ? new Date(c.createdAt).toISOString() : null,
    index_version: c.indexVersion ?? null,
    index_details: c.indexDetails === undefined ? null : typeof c.indexDetails === "string" ? c.indexDetails : JSON.stringify(c.indexDetails),
  };
}

const buildStatus = (r: JobRecord) => (r.status === "Queued" ? "Queued" : "Building");

function pendingRecord(r: JobRecord) {
  const s = r.spec as IndexBuildSpec;
  return { index_name: s.name, index_uuid: "", columns: [s.column], status: buildStatus(r), index_type: s.kind, transaction_id: r.id };
}

export const listTableIndices = jsonOp(ListIndices, async ({ id, body, args, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch = mainOr(body.branch);
  const table = await openAt(svc, entry, { version: body.version, branch });
  const built = (await listIndexes(table)).map(indexRecord);
  const names = new Set(built.map((b) => b.index_name));
  const pending = body.version == null ? pendingBuilds(svc, id, branch).map(pendingRecord).filter((p) => !names.has(p.index_name)) : [];
  const all = [...built, ...pending].sort((a, b) => (a.index_name < b.index_name ? -1 : a.index_name > b.index_name ? 1 : 0));
  const q = pageOf(args);
  const { items, pageToken } = page(all, (i) => i.index_name, body.page_token ?? q.after, Math.min(body.limit ?? q.limit, MAX_PAGE));
  return json({ indexes: items, page_token: pageToken });
}, { query: PageQuery });

export const describeTableIndexStats = jsonOp(IndexStats, async ({ id, params, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const name = params.index_name;
  if (body.index_name && body.index_name !== name) throw invalid(`index_name: body ${JSON.stringify(body.index_name)} differs from the path's ${JSON.stringify(name)}`);
  const branch = mainOr(body.branch);
  const table = await openAt(svc, entry, { version: body.version, branch });
  const s = await indexStats(table, name);
  if (s) {
    return json({
      index_type: friendlyType(s.indexType),
      distance_type: s.distanceType ?? null,
      num_indexed_rows: s.numIndexedRows,
      num_unindexed_rows: s.numUnindexedRows,
      num_indices: s.numIndices ?? null,
      status: "Active",
    });
  }
  const building = body.version == null ? pendingBuilds(svc, id, branch).find((r) => (r.spec as IndexBuildSpec).name === name) : undefined;
  if (!building) throw indexNotFound(name, entry);
  const spec = building.spec as IndexBuildSpec;
  return json({
    index_type: spec.kind,
    distance_type: isVectorKind(spec.kind) ? (spec.params.distance_type ?? "l2") : null,
    num_indexed_rows: 0,
    num_unindexed_rows: await countRows(table),
    num_indices: 0,
    status: buildStatus(building),
    transaction_id: building.id,
  });
});

export const dropTableIndex = jsonOp(DropIndex, async ({ id, params, body, svc, work }) => {
  const entry = await requireTable(svc.catalog, id);
  const name = params.index_name;
  const branch = mainOr(body.branch);
  const table = await openAt(svc, entry, { branch });
  try {
    await svc.tables.write(entry, branch, { change: "index", work }, () => dropIndex(table, name));
  } catch (err) {
    if (!isIndexNotFound(err)) throw err;
    const building = pendingBuilds(svc, id, branch).find((r) => (r.spec as IndexBuildSpec).name === name);
    if (building) {
      throw new ApiError(Code.ConcurrentModification, `index ${JSON.stringify(name)} is still being built (transaction ${building.id}); cancel the transaction instead`);
    }
    throw indexNotFound(name, entry);
  }
  return json({});
});

