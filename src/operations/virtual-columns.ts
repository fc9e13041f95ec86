// Virtual columns: add and alter with a `virtual_column` descriptor, and backfill_column, which
// checks what it can at once and then starts a backfill job (202 {job_id}). Everything a request
// names is checked before anything is committed.
import { checkExpression } from "../schemas/expression.js";
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import type { Entry } from "../catalog/catalog.js";
import { requireTable } from "../catalog/lookup.js";
import { jsShape, udfDefinition } from "../compute/udf.js";
import { describeVirtual, runnable, sqlValue, toFieldMetadata, virtualColumnOf, type DescriptorInput, type VirtualColumn } from "../compute/virtual-column.js";
import { arrow } from "../engine/arrow.js";
import { backfillKey, declareSqlColumns } from "../engine/computed-columns.js";
import { dataError } from "../engine/datasets.js";
import { fromJsonType, type JsonArrowDataType } from "../engine/json-arrow.js";
import { addNullColumns, commitSchemaEdit } from "../engine/schema-edit.js";
import { namedBranch } from "../engine/tables.js";
import { ApiError, Code, invalid } from "../errors.js";
import { activeBackfill, BACKFILL, backfillSpec } from "../jobs/kinds/backfill.js";
import { BackfillColumn } from "../schemas/column.js";
import { resolveFieldPath, type FieldLike } from "../schemas/field-path.js";
import type { Services } from "../services.js";
import { checkInSandbox } from "../../workers/compute-answers.js";
import { jsonOp } from "./define.js";
import { openAt } from "./table-ref.js";
import { json } from "./types.js";
import { listVersions } from "../engine/version-list.js";

const q = JSON.stringify;

/** Checks of a descriptor against the table and its backend; `at` names the request field. */
async function checkVirtual(svc: Services, entry: Entry, fields: readonly A.Field[], vc: VirtualColumn, at: string): Promise<void> {
  vc.inputs.forEach((p, i) => resolveFieldPath(fields as unknown as FieldLike[], p, entry.objectId, `${at}.input_columns[${i}]: column`));
  const kind = runnable(vc);
  if (kind === "sql") {
    checkExpression(`${at}.udf`, vc.udf, svc.config);
    const dict = fields.find((f) => arrow.DataType.isDictionary(f.type) && new RegExp(`(^|[^\\w])${f.name.replace(/\W/g, "\\$&")}([^\\w]|$)`).test(vc.udf));
    if (dict) throw invalid(`${at}.udf: column ${q(dict.name)} is dictionary-encoded, which LanceDB's SQL computed columns cannot read; store it as plain strings`);
    sqlValue(vc, at);
    return;
  }
  if (kind === "js" && !jsShape(vc.dataType!)) throw invalid(`${at}.outputs[0].data_type: a JavaScript UDF cannot produce ${q(vc.dataType)}`);
  fromJsonType(vc.dataType!, vc.column);
  if (kind === null) return;
  const error = await checkInSandbox(svc.compute, { name: "udf", request: { op: "check", udf: udfDefinition(vc, svc.config) } }, svc.config.udfTimeoutMs);
  if (error !== null) throw invalid(`${at}.udf: ${error}`);
}

/** An entry of add_columns with `virtual_column` or `computed` (an sql column without a descriptor). */
export interface VirtualEntry {
  name: string;
  computed?: string | null;
  virtual_column?: DescriptorInput | null;
}

/** Adds virtual columns: sql ones as LanceDB computed columns, the others all-null with their descriptor. */
export async function addVirtualColumns(svc: Services, entry: Entry, t: lancedb.Table, fields: readonly A.Field[], entries: { e: VirtualEntry; at: string }[]): Promise<number> {
  const vcs = entries.map(({ e, at }) => {
    const field = `${at}.${e.virtual_column ? "virtual_column" : "computed"}`;
    return { vc: describeVirtual(e.name, e.virtual_column ?? { udf_backend: "sql", udf: e.computed }, field, null), at: field };
  });
  for (const { vc, at } of vcs) await checkVirtual(svc, entry, fields, vc, at);
  const sql = vcs.filter(({ vc }) => runnable(vc) === "sql");
  if (sql.length > 0 && sql.length < vcs.length) throw invalid("new_columns: sql virtual columns and other virtual columns cannot be mixed in one request");
  if (sql.length > 0) {
    const field = sql.length === 1 ? `${sql[0].at}.udf` : "new_columns.udf";
    return declareSqlColumns(t, sql.map(({ vc, at }) => ({ name: vc.column, valueSql: sqlValue(vc, at), metadata: toFieldMetadata(vc) })), field);
  }
  return addNullColumns(t, vcs.map(({ vc }) => ({ name: vc.column, type: fromJsonType(vc.dataType as JsonArrowDataType, vc.column), metadata: toFieldMetadata(vc) })));
}

/**
 * Replaces virtual columns' definitions. Values computed by an old definition stay until the next
 * backfill recomputes them; an sql column is declared afresh (LanceDB cannot change a computed
 * column's expression in place), so its values are null until then.
 */
export async function alterVirtualColumns(svc: Services, entry: Entry, t: lancedb.Table, fields: readonly A.Field[], alts: { path: string; d: DescriptorInput; at: string }[]): Promise<number> {
  const changes: { vc: VirtualColumn; at: string }[] = [];
  for (const { path, d, at } of alts) {
    const base = virtualColumnOf(fields, path);
    if (!base) throw invalid(`${at}.path: column ${q(path)} is not a virtual column; add one with add_columns and virtual_column`);
    const vc = describeVirtual(path, d, `${at}.virtual_column`, base);
    if ((runnable(base) === "sql") !== (runnable(vc) === "sql")) throw invalid(`${at}.virtual_column.udf_backend: cannot change between sql and other backends; drop the column and add it again`);
    await checkVirtual(svc, entry, fields, vc, `${at}.virtual_column`);
    changes.push({ vc, at });
  }
  const sql = changes.filter(({ vc }) => runnable(vc) === "sql");
  if (sql.length > 0) {
    if (sql.length < changes.length) throw invalid("alterations: sql virtual columns and other virtual columns cannot be altered in one request");
    await commitSchemaEdit(() => t.dropColumns(sql.map(({ vc }) => vc.column)));
    return declareSqlColumns(t, sql.map(({ vc, at }) => ({ name: vc.column, valueSql: sqlValue(vc, `${at}.virtual_column`), metadata: toFieldMetadata(vc) })), "alterations.virtual_column.udf");
  }
  return commitSchemaEdit(() => t.updateFieldMetadata(changes.map(({ vc }) => ({ path: vc.column, metadata: toFieldMetadata(vc), replace: true }))));
}

export const backfillColumn = jsonOp(BackfillColumn, async ({ id, body, svc, principal }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch = namedBranch(body.branch) ?? null;
  const t = await openAt(svc, entry, { branch });
  const fields = (await t.schema()).fields;
  const { field } = resolveFieldPath(fields as unknown as FieldLike[], body.column, entry.objectId, "column");
  const vc = virtualColumnOf(fields, field.name);
  if (!vc || field.name !== body.column) throw invalid(`column: ${q(body.column)} is not a virtual column (it has no virtual_column definition); add one with add_columns`);
  const kind = runnable(vc);
  if (!kind) throw invalid(`column: udf_backend ${q(vc.backend)} of column ${q(vc.column)} is stored but not run by this server; it runs ${["sql", "js", "wasm"].join(", ")}`);
  vc.inputs.forEach((p, i) => resolveFieldPath(fields as unknown as FieldLike[], p, entry.objectId, `input_columns[${i}] of column ${q(vc.column)}: column`));
  if (body.read_version != null) await openAt(svc, entry, { branch, version: body.read_version });
  if (body.where) {
    const where = body.where;
    try {
      await t.query().where(where).explainPlan();
    } catch (err) {
      throw dataError(err, "where", entry.objectId) ?? err;
    }
  }
  let key: string[] | null = null;
  if (kind === "sql") {
    if (body.where) throw invalid("where: an sql column is filled by LanceDB's refresh, which computes its missing and stale rows; it takes no where");
    await checkSqlRefresh(t, fields, vc);
  } else {
    key = backfillKey(fields);
    if (!key) {
      throw invalid(`column: a ${kind} backfill writes values by key, and table ${q(entry.objectId)} has none: give it a primary key (update_field_metadata with "lance-schema:unenforced-primary-key": "true" on a unique column) or an "id" column`);
    }
  }
  const running = activeBackfill(svc.jobs, id, vc.column, branch);
  if (running) throw new ApiError(Code.ConcurrentModification, `column ${q(vc.column)} is already being backfilled (job ${running.id}); cancel it or wait for it`);
  const spec = backfillSpec(vc, branch, key, body, svc.config.workers);
  const rec = await svc.jobs.submit(BACKFILL, id, spec, principal.key);
  return json({ job_id: rec.id }, 202);
});

/** LanceDB's refresh fails on a non-nullable input when a fragment has deleted rows: say so now. */
async function checkSqlRefresh(t: lancedb.Table, fields: readonly A.Field[], vc: VirtualColumn): Promise<void> {
  const f = fields.find((x) => x.name === vc.column)!;
  const inputs = JSON.parse(f.metadata.get("computed_column.inputs") ?? "[]") as string[];
  const strict = inputs.find((n) => fields.find((x) => x.name === n)?.nullable === false);
  if (strict === undefined) return;
  const versions = await listVersions(t);
  if (Number(versions[versions.length - 1]?.metadata.total_deletion_file_rows ?? 0) > 0) {
    throw invalid(`column: LanceDB cannot refresh ${q(vc.column)} while its non-nullable input ${q(strict)} is in fragments with deleted rows; make ${q(strict)} nullable (alter_columns) or compact the table`);
  }
}
