// Schema changes: add, alter and drop columns, field and schema metadata. Every path and name is
// checked against the table's current schema first, so a rejected request changes nothing; an
// accepted one commits one version. Virtual columns are added and altered here too, with a
// `virtual_column` descriptor, checked against the table and their backend before any commit.
import { BranchQuery } from "../schemas/params.js";
import type * as A from "apache-arrow";
import type { Work } from "../engine/deadline.js";
import { fromJsonType, type JsonArrowDataType } from "../engine/json-arrow.js";
import * as schemaEdit from "../engine/schema-edit.js";
import { tableSchema } from "../engine/table-info.js";
import type { TableHandle } from "../engine/tables.js";
import type { Entry } from "../catalog/catalog.js";
import { invalid, unsupported } from "../errors.js";
import { AddColumns, AlterColumns, DropColumns, SchemaMetadataUpdate, UpdateFieldMetadata } from "../schemas/column.js";
import { canonicalPath, resolveFieldPath, type FieldLike } from "../schemas/field-path.js";
import type { Services } from "../services.js";
import { checkExpression } from "../schemas/expression.js";
import { jsShape, udfDefinition } from "../compute/udf.js";
import { describeVirtual, runnable, sqlValue, toFieldMetadata, virtualColumnOf, type DescriptorInput, type VirtualColumn } from "../compute/virtual-column.js";
import { arrow } from "../engine/arrow.js";
import { checkAddedValues, checkValueBound, type ValueLimits } from "../engine/value-size.js";
import { declareSqlColumns, quoteIdent } from "../engine/computed-columns.js";
import { checkInSandbox } from "../../workers/compute-answers.js";
import { jsonOp } from "./define.js";
import { requireTable } from "../catalog/lookup.js";
import { sandboxScope } from "../auth/principal.js";
import type { TenantTasks } from "../../workers/compute-tenants.js";
import { openAt, refuseView } from "./table-ref.js";
import { json } from "./types.js";

const q = JSON.stringify;

interface Target {
  entry: Entry;
  t: TableHandle;
  fields: FieldLike[];
}

/**
 * Runs a schema change on the writable handle of the table's latest version on `branch`, with its
 * current fields, one write at a time per table and branch: the checks and the commit see the same
 * schema, and the version answered is the change's own (see Tables.write).
 */
async function change<T>(svc: Services, work: Work | null, id: string[], branch: string | null | undefined, fn: (t: Target) => Promise<T>): Promise<T> {
  const entry = await requireTable(svc.catalog, id);
  await refuseView(svc, entry, "a schema change");
  return svc.tables.write(entry, branch, { change: "schema", work }, async () => {
    const t = await openAt(svc, entry, { branch });
    return fn({ entry, t, fields: (await tableSchema(t)).fields as FieldLike[] });
  });
}

const resolve = (fields: readonly FieldLike[], entry: Entry, path: string, what: string) =>
  canonicalPath(resolveFieldPath(fields, path, entry.objectId, what).segs);

function checkUnique(names: string[], what: string): void {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) throw invalid(`${what}: ${q(n)} is given more than once`);
    seen.add(n);
  }
}

export const addColumns = jsonOp(AddColumns, async ({ id, body, svc, principal, work }) => change(svc, work, id, body.branch, async ({ entry, t, fields }) => {
  const cols = body.new_columns;
  cols.forEach((c, i) => {
    const at = `new_columns[${i}]`;
    const given = [c.expression, c.data_type, c.computed, c.virtual_column].filter((x) => x != null).length;
    if (given !== 1) throw invalid(`${at}: needs exactly one of expression, data_type, computed or virtual_column`);
    if (c.name.includes(".")) throw invalid(`${at}.name: top-level column name ${q(c.name)} cannot contain "."`);
    if (fields.some((f) => f.name === c.name)) throw invalid(`${at}.name: column ${q(c.name)} already exists in table ${q(entry.objectId)}`);
  });
  checkUnique(cols.map((c) => c.name), "new_columns.name");
  const virtual = cols.filter((c) => c.computed != null || c.virtual_column != null);
  if (virtual.length > 0) {
    if (virtual.length < cols.length) throw invalid("new_columns: computed or virtual columns and other columns cannot be mixed in one request");
    const version = await addVirtualColumns(svc, svc.compute.of(sandboxScope(principal, id)), entry, t, fields as unknown as A.Field[], cols.map((e, i) => ({ e, at: `new_columns[${i}]` })));
    return json({ version });
  }
  const sql = cols.filter((c) => c.expression != null);
  // Two LanceDB calls would be two commits; a request is one.
  if (sql.length > 0 && sql.length < cols.length) throw invalid("new_columns: expression and data_type entries cannot be mixed in one request");
  for (const c of sql) await checkAddedValues(t, `new_columns[${cols.indexOf(c)}].expression`, c.name, c.expression!, svc.config);
  const version =
    sql.length > 0
      ? await schemaEdit.addSqlColumns(
          t,
          sql.map((c) => ({ name: c.name, valueSql: c.expression! })),
          sql.length === 1 ? `new_columns[${cols.indexOf(sql[0])}].expression` : "new_columns.expression",
        )
      : await schemaEdit.addNullColumns(t, cols.map((c) => ({ name: c.name, type: fromJsonType(c.data_type as JsonArrowDataType, c.name) })));
  return json({ version });
}));

export const alterColumns = jsonOp(AlterColumns, async ({ id, body, svc, principal, work }) => change(svc, work, id, body.branch, async ({ entry, t, fields }) => {
  const virtual = body.alterations.filter((a) => a.virtual_column != null);
  if (virtual.length > 0 && virtual.length < body.alterations.length) {
    throw invalid("alterations: virtual_column alterations and other alterations cannot be mixed in one request");
  }
  const alterations: schemaEdit.ColumnAlteration[] = body.alterations.map((a, i) => {
    const at = `alterations[${i}]`;
    const path = resolve(fields, entry, a.path, `${at}.path: column`);
    if (a.virtual_column != null) {
      if (a.rename != null || a.data_type != null || a.nullable != null) throw invalid(`${at}: virtual_column cannot be combined with rename, data_type or nullable`);
      return { path };
    }
    if (a.rename == null && a.data_type == null && a.nullable == null) throw invalid(`${at}: needs rename, data_type, nullable or virtual_column`);
    return {
      path,
      ...(a.rename != null ? { rename: a.rename } : {}),
      ...(a.data_type != null ? { dataType: fromJsonType(a.data_type as JsonArrowDataType, path) } : {}),
      ...(a.nullable != null ? { nullable: a.nullable } : {}),
    };
  });
  checkUnique(alterations.map((a) => a.path), "alterations.path");
  if (virtual.length > 0) {
    const alts = body.alterations.map((a, i) => ({ path: alterations[i].path, d: a.virtual_column!, at: `alterations[${i}]` }));
    return json({ version: await alterVirtualColumns(svc, svc.compute.of(sandboxScope(principal, id)), entry, t, fields as unknown as A.Field[], alts) });
  }
  for (const [i, a] of body.alterations.entries()) {
    if (a.data_type != null) await checkCastValues(t, `alterations[${i}].data_type`, resolveFieldPath(fields, a.path, entry.objectId).segs, alterations[i].dataType as A.DataType, svc.config);
  }
  return json({ version: await schemaEdit.alterColumns(t, alterations) });
}));

/**
 * A cast can grow each value (a list of float16 cast to float64 holds 4× the bytes), and casts
 * compound across alterations, so the values as cast are held to --max-value-bytes before the
 * commit, as an update's are: the column's items or bytes are counted in the new type's widths.
 */
async function checkCastValues(t: TableHandle, field: string, segs: string[], type: A.DataType, limits: ValueLimits): Promise<void> {
  // A filter on one field of a struct that names no other reads too few columns in Lance ("projection
  // supplied fewer column indices"); naming the whole column too reads them all.
  const where = segs.length > 1 ? `${quoteIdent(segs[0])} IS NOT NULL` : undefined;
  await checkValueBound(t, field, canonicalPath(segs), type, segs.map(quoteIdent).join("."), where, limits);
}

export const dropColumns = jsonOp(DropColumns, async ({ id, body, svc, work }) => change(svc, work, id, body.branch, async ({ entry, t, fields }) => {
  const paths = body.columns.map((c, i) => resolve(fields, entry, c, `columns[${i}]: column`));
  checkUnique(paths, "columns");
  return json({ version: await schemaEdit.dropColumns(t, paths) });
}));

export const updateFieldMetadata = jsonOp(UpdateFieldMetadata, async ({ id, body, svc, work }) => change(svc, work, id, body.branch, async ({ entry, t, fields }) => {
  const updates = body.updates.map((u, i) => ({
    path: resolve(fields, entry, u.path, `updates[${i}].path: column`),
    metadata: u.metadata,
    replace: u.replace ?? false,
  }));
  checkUnique(updates.map((u) => u.path), "updates.path");
  const version = await schemaEdit.updateFieldMetadata(t, updates);
  const after = (await tableSchema(t)).fields as FieldLike[];
  const out: Record<string, Record<string, string>> = {};
  for (const u of updates) {
    const f = resolveFieldPath(after, u.path, entry.objectId).field as FieldLike & { metadata?: Map<string, string> };
    out[u.path] = Object.fromEntries(f.metadata ?? []);
  }
  return json({ version, fields: out });
}));

// The body is the bare map; these keys are the request's own fields, not metadata.
const REQUEST_KEYS = new Set(["identity", "context", "id"]);

/**
 * Adds keys to the table's schema metadata and answers the resulting map. LanceDB 0.39 can only
 * add keys (see engine/schema-edit.ts), so changing an existing key's value is 406.
 */
export const updateSchemaMetadata = jsonOp(SchemaMetadataUpdate, async ({ id, body, args, svc, work }) => change(svc, work, id, args.branch, async ({ t }) => {
  const current = (await tableSchema(t)).metadata;
  const wanted = Object.entries(body as Record<string, unknown>).filter(([k]) => !REQUEST_KEYS.has(k)) as [string, string][];
  const changed = wanted.filter(([k, v]) => current.has(k) && current.get(k) !== v).map(([k]) => k);
  if (changed.length > 0) {
    throw unsupported(`schema metadata ${changed.map((k) => q(k)).join(", ")}: changing an existing key's value is not supported (LanceDB can only add keys)`);
  }
  const added = wanted.filter(([k]) => !current.has(k));
  if (added.length > 0) await schemaEdit.addSchemaMetadata(t, Object.fromEntries(added));
  return json(Object.fromEntries((await tableSchema(t)).metadata));
}), { query: BranchQuery });

/** Checks of a descriptor against the table and its backend (user code in `sandbox`); `at` names the request field. */
async function checkVirtual(svc: Services, sandbox: TenantTasks, entry: Entry, fields: readonly A.Field[], vc: VirtualColumn, at: string): Promise<void> {
  vc.inputs.forEach((p, i) => resolveFieldPath(fields as unknown as FieldLike[], p, entry.objectId, `${at}.input_columns[${i}]: column`));
  const kind = runnable(vc);
  if (kind === "sql") {
    checkExpression(`${at}.udf`, vc.udf, svc.config);
    const dict = fields.find((f) => arrow.DataType.isDictionary(f.type) && new RegExp(`(^|[^\\w])${f.name.replace(/\W/g, "\\$&")}([^\\w]|$)`).test(vc.udf));
    if (dict) throw invalid(`${at}.udf: column ${q(dict.name)} is dictionary-encoded, which LanceDB's SQL computed columns cannot read; store it as plain strings`);
    sqlValue(vc, at);
    return;
  }
  if ((kind === "js" || kind === "python") && !jsShape(vc.dataType!)) throw invalid(`${at}.outputs[0].data_type: a ${kind === "js" ? "JavaScript" : "Python"} UDF cannot produce ${q(vc.dataType)}`);
  fromJsonType(vc.dataType!, vc.column);
  if (kind === null) return;
  const error = await checkInSandbox(sandbox, { name: "udf", request: { op: "check", udf: udfDefinition(vc, svc.config) } }, svc.config.udfTimeoutMs);
  if (error !== null) throw invalid(`${at}.udf: ${error}`);
}

/** An entry of add_columns with `virtual_column` or `computed` (an sql column without a descriptor). */
interface VirtualEntry {
  name: string;
  computed?: string | null;
  virtual_column?: DescriptorInput | null;
}

/** Adds virtual columns: sql ones as LanceDB computed columns, the others all-null with their descriptor. */
async function addVirtualColumns(svc: Services, sandbox: TenantTasks, entry: Entry, t: TableHandle, fields: readonly A.Field[], entries: { e: VirtualEntry; at: string }[]): Promise<number> {
  const vcs = entries.map(({ e, at }) => {
    const field = `${at}.${e.virtual_column ? "virtual_column" : "computed"}`;
    return { vc: describeVirtual(e.name, e.virtual_column ?? { udf_backend: "sql", udf: e.computed }, field, null), at: field };
  });
  for (const { vc, at } of vcs) await checkVirtual(svc, sandbox, entry, fields, vc, at);
  const sql = vcs.filter(({ vc }) => runnable(vc) === "sql");
  if (sql.length > 0 && sql.length < vcs.length) throw invalid("new_columns: sql virtual columns and other virtual columns cannot be mixed in one request");
  if (sql.length > 0) {
    const field = sql.length === 1 ? `${sql[0].at}.udf` : "new_columns.udf";
    return declareSqlColumns(t, sql.map(({ vc, at }) => ({ name: vc.column, valueSql: sqlValue(vc, at), metadata: toFieldMetadata(vc) })), field);
  }
  return schemaEdit.addNullColumns(t, vcs.map(({ vc }) => ({ name: vc.column, type: fromJsonType(vc.dataType as JsonArrowDataType, vc.column), metadata: toFieldMetadata(vc) })));
}

/**
 * Replaces virtual columns' definitions. Values computed by an old definition stay until the next
 * backfill recomputes them; an sql column is declared afresh (LanceDB cannot change a computed
 * column's expression in place), so its values are null until then.
 */
async function alterVirtualColumns(svc: Services, sandbox: TenantTasks, entry: Entry, t: TableHandle, fields: readonly A.Field[], alts: { path: string; d: DescriptorInput; at: string }[]): Promise<number> {
  const changes: { vc: VirtualColumn; at: string }[] = [];
  for (const { path, d, at } of alts) {
    const base = virtualColumnOf(fields, path);
    if (!base) throw invalid(`${at}.path: column ${q(path)} is not a virtual column; add one with add_columns and virtual_column`);
    const vc = describeVirtual(path, d, `${at}.virtual_column`, base);
    if ((runnable(base) === "sql") !== (runnable(vc) === "sql")) throw invalid(`${at}.virtual_column.udf_backend: cannot change between sql and other backends; drop the column and add it again`);
    await checkVirtual(svc, sandbox, entry, fields, vc, `${at}.virtual_column`);
    changes.push({ vc, at });
  }
  const sql = changes.filter(({ vc }) => runnable(vc) === "sql");
  if (sql.length > 0) {
    if (sql.length < changes.length) throw invalid("alterations: sql virtual columns and other virtual columns cannot be altered in one request");
    await schemaEdit.dropColumns(t, sql.map(({ vc }) => vc.column));
    return declareSqlColumns(t, sql.map(({ vc, at }) => ({ name: vc.column, valueSql: sqlValue(vc, `${at}.virtual_column`), metadata: toFieldMetadata(vc) })), "alterations.virtual_column.udf");
  }
  return schemaEdit.updateFieldMetadata(t, changes.map(({ vc }) => ({ path: vc.column, metadata: toFieldMetadata(vc), replace: true })));
}
