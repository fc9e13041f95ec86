// Table lifecycle and listings: create, declare, register, describe, exists, drop, deregister,
// rename, list. The catalog entry is the table's identity; its data lives at entry.location.
import { CreateTableQuery, DescribeTableQuery, ListTablesQuery } from "../schemas/params.js";
import path from "node:path";
import type * as A from "apache-arrow";
import { authoriseObject, covers, type Principal } from "../auth/principal.js";
import type { Entry } from "../catalog/catalog.js";
import { checkName, objectIdOf, tenantOf } from "../catalog/names.js";
import { requireRoom } from "../catalog/quotas.js";
import { normaliseLocation, resolveLocation } from "../catalog/locations.js";
import { DEREGISTERED } from "../catalog/root-listing.js";
import { fileInfo, joinPath } from "../util/store-files.js";
import { createDataset, creatable, hasMarker, hasVersions } from "../engine/datasets.js";
import { namedBranch, type TableHandle } from "../engine/tables.js";
import { tableSchema, tableVersion } from "../engine/table-info.js";
import { toJsonSchema } from "../engine/json-arrow.js";
import { storable } from "../engine/ipc-in.js";
import { checkRowCount } from "../engine/rows-in.js";
import { checkoutTag, refError } from "../engine/refs.js";
import { catalogCheck, requestCommit, type Work } from "../engine/deadline.js";
import { ApiError, Code, invalid } from "../errors.js";
import { CommonBody } from "../schemas/common.js";
import { DeclareTable, DescribeTable, RegisterTable, RenameTable, TableExists } from "../schemas/table.js";
import type { Services } from "../services.js";
import { alreadyExists, createEntry, declareIn, deregisterIn, dirOf, existingTable, located, locationFor, removeTableData, tableName } from "../lifecycle/table-lifecycle.js";
import { arrowOp, jsonOp, queryOp } from "./define.js";
import { page, pageOf } from "./pagination.js";
import { openAt } from "./table-ref.js";
import { requireNamespace, requireNamespaceNow, requireTable } from "../catalog/lookup.js";
import { empty, json } from "./types.js";
import { describeView, viewOf } from "../compute/views.js";
import { listVersions } from "../engine/version-list.js";

const q = JSON.stringify;
const leaf = (e: Entry) => e.id[e.id.length - 1];

/** Tables that have data (not declared only), in the given order. */
async function withData(svc: Services, entries: Entry[]): Promise<Entry[]> {
  const keep = await Promise.all(entries.map((e) => (e.location ? hasVersions(dirOf(svc, e)) : false)));
  return entries.filter((_, i) => keep[i]);
}

// ---- listings ----

export const listTables = queryOp(async ({ id, args, svc, principal }) => {
  await requireNamespaceNow(svc.catalog, id);
  const { after, limit } = pageOf(args);
  let tables = svc.catalog.children(id, "table").filter((e) => covers(principal, e.id));
  if (args.include_declared === false) tables = await withData(svc, tables);
  const p = page(tables, leaf, after, limit);
  return json({ tables: p.items.map(leaf), page_token: p.pageToken });
}, { query: ListTablesQuery });

export const listAllTables = queryOp(async ({ args, svc, principal, delimiter }) => {
  await svc.catalog.refresh();
  const { after, limit } = pageOf(args);
  let tables = svc.catalog.allTables().filter((e) => covers(principal, e.id));
  if (args.include_declared === false) tables = await withData(svc, tables);
  const names = tables.map((e) => e.id.join(delimiter)).sort();
  const p = page(names, (n) => n, after, limit);
  return json({ tables: p.items, page_token: p.pageToken });
}, { query: ListTablesQuery });

// ---- create / declare / register ----

const uriFor = (svc: Services, p: Principal, dir: string) => (located(svc, p) ? { table_uri: dir } : {});

/** create's `properties` parameter: a JSON object of strings. */
function propertiesOf(raw: string | undefined): Record<string, string> | undefined {
  if (raw === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw invalid("properties: must be a JSON object of strings");
  }
  if (v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v) || Object.values(v as object).some((x) => typeof x !== "string")) {
    throw invalid("properties: must be a JSON object of strings");
  }
  return v as Record<string, string>;
}

export const createTable = arrowOp(async ({ id, args, raw, rows, svc, principal, work }) => {
  tableName(id);
  const mode: "create" | "exist_ok" | "overwrite" = args.mode ?? "create";
  const properties = propertiesOf(args.properties);
  const data = rows ? await svc.pool.jsonRows(rows, { schema: null, optional: [], table: objectIdOf(id) }) : await svc.pool.ingest(raw);
  if (rows) storable(data.schema);
  checkRowCount(data.numRows, data.schema, svc.config.maxDecodedBody);
  await svc.catalog.refresh(true);
  requireNamespace(svc.catalog, id.slice(0, -1));
  if (!existingTable(svc, id)) return createNew(svc, principal, id, data, properties ?? {}, work);
  // Filling a declared table or overwriting one writes at its location: one writer at a time.
  return svc.catalog.exclusive(async () => {
    await svc.catalog.refresh(true);
    const existing = await requireTable(svc.catalog, id);
    const dir = dirOf(svc, existing);
    const declaredOnly = !(await hasVersions(dir));
    if (!declaredOnly && mode === "create") throw alreadyExists(id);
    if (!declaredOnly && mode === "exist_ok") {
      const t = await svc.tables.open(existing);
      return json({ ...locationFor(svc, principal, dir), version: await tableVersion(t), properties: existing.properties });
    }
    if (!creatable(existing.location!)) {
      throw invalid(`table ${q(existing.objectId)} lives at ${q(existing.location)}, where Quiver cannot write a new dataset; drop it first`);
    }
    // Overwrite commits a new version holding only the new data (history is kept).
    const t = await requestCommit(work, () => createDataset(svc.tables, existing.location!, data, declaredOnly ? "create" : "overwrite"));
    svc.tables.commits.announce({ table: existing, branch: null, version: await tableVersion(t), change: "overwrite", rows: data.numRows, byCachedHandle: false });
    const entry = { ...existing, properties: properties ?? existing.properties };
    if (properties) await svc.catalog.replace(existing, entry, catalogCheck(work));
    return json({ ...locationFor(svc, principal, dir), version: await tableVersion(t), properties: entry.properties });
  });
}, { query: CreateTableQuery });

async function createNew(svc: Services, principal: Principal, id: string[], data: A.Table, properties: Record<string, string>, work: Work | null) {
  const { table, dir } = await createEntry(svc, id, properties, (location) => createDataset(svc.tables, location, data, "create"), work);
  return json({ ...locationFor(svc, principal, dir), version: await tableVersion(table), properties });
}

export const declareTable = jsonOp(DeclareTable, async ({ id, body, svc, principal, work }) =>
  svc.catalog.exclusive(async () => json((await declareIn(svc, id, body, principal, work)).response)),
);

const nests = (a: string, b: string) => a === b || a.startsWith(b + path.sep) || b.startsWith(a + path.sep);

/**
 * Registering a location reads what is there: a credential limited to namespace prefixes may not
 * register data that belongs to a table outside them (the location of such a table, or a directory
 * inside or around it), nor the kept data of a deregistered table, which records no owner. The 403
 * does not name the other table.
 */
async function authoriseLocation(svc: Services, principal: Principal, location: string, dir: string): Promise<void> {
  if (principal.prefixes === null) return;
  const deny = (why: string) => new ApiError(Code.PermissionDenied, `location: ${q(location)} ${why}; only a credential without namespace prefixes may register it`);
  if (svc.catalog.allTables().some((e) => e.location !== null && nests(e.location, location) && !covers(principal, e.id))) throw deny("holds data of a table this credential may not access");
  if (await fileInfo(joinPath(dir, DEREGISTERED))) throw deny("is the kept data of a deregistered table");
}

export const registerTable = jsonOp(RegisterTable, async ({ id, body, svc, principal, work }) => {
  const check = catalogCheck(work);
  tableName(id);
  const location = normaliseLocation(svc.tables.root, body.location);
  const dir = resolveLocation(svc.tables.root, location);
  if (!(await hasVersions(dir))) throw invalid(`location: ${q(body.location)} is not a Lance dataset (it has no _versions)`);
  const properties = body.properties ?? {};
  return svc.catalog.exclusive(async () => {
    await svc.catalog.refresh(true);
    await authoriseLocation(svc, principal, location, dir);
    requireNamespace(svc.catalog, id.slice(0, -1));
    // A directory-listed root dataset has no row yet: registering it gives it one (and this id).
    const other = svc.catalog.allTables().find((e) => e.location === location && e.objectId !== objectIdOf(id) && !e.listed);
    if (other) throw new ApiError(Code.TableAlreadyExists, `location ${q(body.location)} is already registered as table ${q(other.objectId)}`);
    const entry: Entry = { id, objectId: objectIdOf(id), type: "table", location, properties };
    const existing = existingTable(svc, id);
    if (existing && body.mode !== "overwrite") throw alreadyExists(id);
    if (existing) await svc.catalog.replace(existing, entry, check);
    else {
      requireRoom(svc.catalog, id, "table", svc.config);
      await svc.catalog.insert(entry, Code.TableAlreadyExists, check);
    }
    svc.tables.evict(entry.objectId);
    return json({ location: dir, properties });
  });
});

// ---- describe / exists ----

interface Ref {
  version?: number | null;
  branch?: string | null;
  tag?: string | null;
}

/** Open a table at a version, branch or tag (a fresh handle: checkout must not move the cached one). */
async function openRef(svc: Services, entry: Entry, ref: Ref): Promise<TableHandle> {
  if (!ref.tag) return openAt(svc, entry, ref);
  if (ref.version != null || ref.branch) throw invalid("tag: cannot be combined with version or branch");
  const t = await svc.tables.open(entry, { fresh: true });
  try {
    await checkoutTag(t, ref.tag);
  } catch (err) {
    throw refError(err, { table: entry.objectId, tag: ref.tag }) ?? err;
  }
  return t;
}

async function basicStats(t: TableHandle, version: number) {
  const v = (await listVersions(t)).find((x) => x.version === version);
  const md = v?.metadata ?? {};
  return { num_deleted_rows: Number(md.total_deletion_file_rows ?? 0), num_fragments: Number(md.total_fragments ?? 0) };
}

const notDeclaredVersion = (entry: Entry) =>
  new ApiError(Code.TableVersionNotFound, `table ${q(entry.objectId)} is declared only and has no versions yet`);

export const describeTable = jsonOp(DescribeTable, async ({ id, body, args, svc, lancedbClient, principal }) => {
  const entry = await requireTable(svc.catalog, id);
  if (body.tag && (body.version != null || body.branch)) throw invalid("tag: cannot be combined with version or branch");
  const withUri = body.with_table_uri ?? args.with_table_uri ?? false;
  const detailed = body.load_detailed_metadata ?? args.load_detailed_metadata ?? false;
  const dir = dirOf(svc, entry);
  const base = {
    table: leaf(entry),
    namespace: entry.id.slice(0, -1),
    ...locationFor(svc, principal, dir),
    ...(withUri ? uriFor(svc, principal, dir) : {}),
    properties: entry.properties,
    managed_versioning: svc.config.managedVersioning,
  };
  // LanceDB's client treats a description with a version and schema as an existing table.
  if (!(await hasVersions(dir))) {
    if (body.version != null || body.tag || namedBranch(body.branch)) throw notDeclaredVersion(entry);
    return json({ ...base, is_only_declared: true });
  }
  const t = await openRef(svc, entry, body);
  const version = await tableVersion(t);
  const schema = await tableSchema(t);
  const view = await viewOf(svc.views, entry);
  return json({
    ...base,
    version,
    schema: toJsonSchema(schema, lancedbClient ? "lance" : "namespace"),
    metadata: Object.fromEntries(schema.metadata),
    ...(detailed ? { stats: await basicStats(t, version) } : {}),
    ...(view ? { materialized_view: describeView(view) } : {}),
    is_only_declared: false,
  });
}, { query: DescribeTableQuery });

export const tableExists = jsonOp(TableExists, async ({ id, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const dir = dirOf(svc, entry);
  if (await hasVersions(dir)) {
    if (body.version != null) await openAt(svc, entry, { version: body.version });
    return empty(200);
  }
  if (body.version != null) throw notDeclaredVersion(entry);
  if (await hasMarker(dir)) return empty(200);
  throw new ApiError(Code.TableNotFound, `table ${q(entry.objectId)} has neither data nor a reservation at ${q(entry.location)}`);
});

// ---- drop / deregister / rename ----

const dropped = (svc: Services, entry: Entry) => json({ id: entry.id, location: dirOf(svc, entry), properties: entry.properties });

export const dropTable = jsonOp(CommonBody, async ({ id, svc, work }) => {
  const entry = await svc.catalog.exclusive(async () => {
    await svc.catalog.refresh(true);
    const e = await requireTable(svc.catalog, id);
    await svc.catalog.remove([e], catalogCheck(work));
    return e;
  });
  await removeTableData(svc, entry);
  return dropped(svc, entry);
});

export const deregisterTable = jsonOp(CommonBody, async ({ id, svc, work }) => {
  const { entry } = await svc.catalog.exclusive(() => deregisterIn(svc, id, work));
  svc.tables.evict(entry.objectId);
  return dropped(svc, entry);
});

export const renameTable = jsonOp(RenameTable, async ({ id, body, svc, principal, work }) => {
  const check = catalogCheck(work);
  checkName(body.new_table_name, "new_table_name");
  const target = body.new_namespace_id ? "new_namespace_id" : body.new_namespace ? "new_namespace" : null;
  const ns = body.new_namespace_id ?? body.new_namespace ?? id.slice(0, -1);
  ns.forEach((n) => checkName(n, target ?? "new_namespace_id"));
  const newId = [...ns, body.new_table_name];
  authoriseObject(principal, newId, "write", target ?? "new_table_name");
  await svc.catalog.exclusive(async () => {
    await svc.catalog.refresh(true);
    const entry = await requireTable(svc.catalog, id);
    requireNamespace(svc.catalog, ns);
    if (existingTable(svc, newId)) throw alreadyExists(newId);
    if (tenantOf(entry.objectId) !== tenantOf(objectIdOf(newId))) requireRoom(svc.catalog, newId, "table", svc.config);
    // LanceDB cannot rename tables: the new id takes over the same data directory.
    await svc.catalog.insert({ ...entry, id: newId, objectId: objectIdOf(newId) }, Code.TableAlreadyExists, check);
    await svc.catalog.remove([entry], check);
    await svc.jobs.retarget(id, newId);
    svc.tables.evict(entry.objectId);
  });
  return json({});
});
