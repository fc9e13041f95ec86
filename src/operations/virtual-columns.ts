// backfill_column: checks what it can at once and then starts a backfill job (202 {job_id}).
// Adding and altering virtual columns is a schema change (column.ts).
import type * as A from "apache-arrow";
import { requireTable } from "../catalog/lookup.js";
import { RUNNABLE, runnable, virtualColumnOf, type VirtualColumn } from "../compute/virtual-column.js";
import { backfillKey } from "../engine/computed-columns.js";
import { dataError } from "../engine/datasets.js";
import { namedBranch, type TableHandle } from "../engine/tables.js";
import { planFilter, tableSchema } from "../engine/table-info.js";
import { ApiError, Code, invalid } from "../errors.js";
import { BACKFILL, backfillExclusive, backfillSpec } from "../jobs/kinds/backfill.js";
import { BackfillColumn } from "../schemas/column.js";
import { resolveFieldPath, type FieldLike } from "../schemas/field-path.js";
import { jsonOp } from "./define.js";
import { openAt } from "./table-ref.js";
import { json } from "./types.js";
import { listVersions } from "../engine/version-list.js";

const q = JSON.stringify;

export const backfillColumn = jsonOp(BackfillColumn, async ({ id, body, svc, principal }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch = namedBranch(body.branch) ?? null;
  const t = await openAt(svc, entry, { branch });
  const fields = (await tableSchema(t)).fields;
  const { field } = resolveFieldPath(fields as unknown as FieldLike[], body.column, entry.objectId, "column");
  const vc = virtualColumnOf(fields, field.name);
  if (!vc || field.name !== body.column) throw invalid(`column: ${q(body.column)} is not a virtual column (it has no virtual_column definition); add one with add_columns`);
  const kind = runnable(vc);
  if (!kind) {
    // Geneva's pickled Python (DockerUDFSpecV1) cannot run outside its image: the same function runs here as source.
    const python = /python|docker|pickle/i.test(vc.backend) ? '; for a Python function, send its source with udf_backend "python"' : "";
    throw invalid(`column: udf_backend ${q(vc.backend)} of column ${q(vc.column)} is stored but not run by this server; it runs ${RUNNABLE.join(", ")}${python}`);
  }
  vc.inputs.forEach((p, i) => resolveFieldPath(fields as unknown as FieldLike[], p, entry.objectId, `input_columns[${i}] of column ${q(vc.column)}: column`));
  if (body.read_version != null) await openAt(svc, entry, { branch, version: body.read_version });
  if (body.where) {
    const where = body.where;
    try {
      await planFilter(t, where);
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
  const spec = backfillSpec(vc, branch, key, body, svc.config.workers, false, svc.config.backfillTasks);
  const rec = await svc.jobs.submit(BACKFILL, id, spec, principal.key, backfillExclusive(id, vc.column, branch));
  return json({ job_id: rec.id }, 202);
});

/** LanceDB's refresh fails on a non-nullable input when a fragment has deleted rows: say so now. */
async function checkSqlRefresh(t: TableHandle, fields: readonly A.Field[], vc: VirtualColumn): Promise<void> {
  const f = fields.find((x) => x.name === vc.column)!;
  const inputs = JSON.parse(f.metadata.get("computed_column.inputs") ?? "[]") as string[];
  const strict = inputs.find((n) => fields.find((x) => x.name === n)?.nullable === false);
  if (strict === undefined) return;
  const versions = await listVersions(t);
  if (Number(versions[versions.length - 1]?.metadata.total_deletion_file_rows ?? 0) > 0) {
    throw invalid(`column: LanceDB cannot refresh ${q(vc.column)} while its non-nullable input ${q(strict)} is in fragments with deleted rows; make ${q(strict)} nullable (alter_columns) or compact the table`);
  }
}
