// Materialized views: create (201 {version, job_id?}) and refresh (202 {job_id}). A view is a
// table in the catalog; Quiver keeps its definition (and writes it into the view's schema
// metadata), answers writes to it with 400, and describes it.
import type * as A from "apache-arrow";
import { requireNamespace, requireTable } from "../catalog/lookup.js";
import type { Entry } from "../catalog/catalog.js";
import { authoriseObject, sandboxScope, type Principal } from "../auth/principal.js";
import { CHUNK, defineView, definerOf, shownSpec, SOURCE_ROW_ID, TABLE_FUNCTION_FORMS, viewOf, type SourceForm, type ViewDefinition } from "../compute/views.js";
import { arrow } from "../engine/arrow.js";
import { toJsonField } from "../engine/json-arrow.js";
import { createQueryView, createViewTable, partitionIndex, queryViewSchema } from "../engine/views.js";
import { tableSchema, tableVersion } from "../engine/table-info.js";
import type { TableHandle } from "../engine/tables.js";
import { ApiError, Code, invalid } from "../errors.js";
import { refreshExclusive, refreshSpec, VIEW_REFRESH } from "../jobs/kinds/view-refresh.js";
import { resolveFieldPath, type FieldLike } from "../schemas/field-path.js";
import { CreateMaterializedView, RefreshMaterializedView } from "../schemas/views.js";
import type { Services } from "../services.js";
import { checkInSandbox } from "../../workers/compute-answers.js";
import { jsonOp } from "./define.js";
import { createEntry } from "../lifecycle/table-lifecycle.js";
import { openAt } from "./table-ref.js";
import { json } from "./types.js";

const q = JSON.stringify;

/** The form of source_query Quiver runs, for the 400 that refuses another. */
const FORM = '{"table": "<ns$table>" or [..], "filter": "<SQL>", "columns": [..] or {"<out>": "<SQL>"}, "limit": n, "branch": "<name>", "version": n}';

/** Same columns by name and type (nullability and child names aside). */
function sameColumns(want: A.Schema, got: A.Schema): string | null {
  const shape = (s: A.Schema) => s.fields.filter((f) => f.name !== SOURCE_ROW_ID).map((f) => `${f.name}:${String(f.type)}`);
  const [w, g] = [shape(want), shape(got)];
  return w.length === g.length && w.every((x, i) => x === g[i]) ? null : `output_schema: ${q(w)} differs from the columns the source query yields, ${q(g)}`;
}

/** Check the source of a runnable view: the table, branch and version exist, its columns too. */
async function checkSource(svc: Services, def: ViewDefinition): Promise<{ entry: Entry; table: TableHandle }> {
  const form = def.source as SourceForm;
  const entry = await requireTable(svc.catalog, form.table);
  const table = await openAt(svc, entry, { branch: form.branch, version: form.version });
  const fields = (await tableSchema(table)).fields as unknown as FieldLike[];
  (def.inputColumns ?? []).forEach((c, i) => resolveFieldPath(fields, c, entry.objectId, `udtf_spec.input_columns[${i}]: column`));
  if (def.partitionBy) resolveFieldPath(fields, def.partitionBy, entry.objectId, "udtf_spec.partition_by: column");
  if (def.partitionByIndexed) {
    resolveFieldPath(fields, def.partitionByIndexed, entry.objectId, "udtf_spec.partition_by_indexed_column: column");
    await partitionIndex(table, def.partitionByIndexed);
  }
  return { entry, table };
}

/** The table function of view `id` compiles (JavaScript) or parses (SQL) in the compute sandbox of `principal`'s scope there. */
async function checkFunction(svc: Services, principal: Principal, id: string[], def: ViewDefinition, schema: A.Schema): Promise<void> {
  if (!def.fn || def.kind === "query") return;
  const output = schema.fields.map((f) => toJsonField(f));
  const error = await checkInSandbox(svc.compute.of(sandboxScope(principal, id)), { name: "table", request: { op: "check", kind: def.kind, fn: def.fn, output, timeoutMs: svc.config.udfTimeoutMs } }, svc.config.udfTimeoutMs);
  if (error !== null) throw invalid(`udtf_spec.udtf: ${error}`);
}

/** The schema of a udtf or chunker view: the output schema (plus provenance for a chunker), with the definition. */
function viewSchema(def: ViewDefinition, out: A.Schema): A.Schema {
  const extra = def.kind === "chunker" ? [new arrow.Field(SOURCE_ROW_ID, new arrow.Uint64(), false), new arrow.Field(CHUNK, new arrow.Uint32(), false)] : [];
  const meta = new Map([["quiver.view", JSON.stringify({ kind: def.kind, source_query: def.sourceQuery, udtf_spec: shownSpec(def), auto_refresh: def.autoRefresh })]]);
  return new arrow.Schema([...out.fields, ...extra], meta);
}

/** The caller may read the view's source (a view must not reach what its creator cannot). */
const authoriseSource = (principal: Principal, def: ViewDefinition) => {
  if (def.source) authoriseObject(principal, def.source.table, "read", "source_query.table");
};

export const createMaterializedView = jsonOp(CreateMaterializedView, async ({ id, body, svc, principal, work }) => {
  if (id.length === 0) throw invalid("id: a view id needs at least a view name");
  const { definition: def, schema } = defineView(body, svc.config);
  authoriseSource(principal, def);
  await svc.catalog.refresh(true);
  requireNamespace(svc.catalog, id.slice(0, -1));
  const runnable = def.source !== null && (def.kind === "query" || def.fn !== null);
  if (body.with_no_data === false && !runnable) {
    throw invalid(def.source === null ? `source_query: an initial refresh runs only this server's form, ${FORM}` : `udtf_spec.udtf: an initial refresh runs only ${TABLE_FUNCTION_FORMS}`);
  }
  if (svc.catalog.get(id)) throw new ApiError(Code.TableAlreadyExists, `${q(id.join("$"))} already exists`);
  let make: (location: string) => Promise<TableHandle>;
  if (def.kind === "query" && def.source) {
    if (def.source.branch) throw invalid("source_query.branch: query views read the main branch (LanceDB's views have no branches); a udtf or chunker view reads a branch");
    const { entry: src, table } = await checkSource(svc, def);
    const got = await queryViewSchema(table, def.source, src.objectId);
    const mismatch = sameColumns(schema, got);
    if (mismatch) throw invalid(mismatch);
    make = (location) => createQueryView(svc.tables, location, src.location!, def.source!);
  } else {
    if (def.source) await checkSource(svc, def);
    await checkFunction(svc, principal, id, def, schema);
    make = (location) => createViewTable(svc.tables, location, viewSchema(def, schema));
  }
  // A view whose initial refresh the queue bounds refuse is not made either.
  if (body.with_no_data === false) svc.jobs.admit(id, principal.key);
  const { entry, table } = await createEntry(svc, id, {}, make, work);
  await svc.views.put({ id, location: entry.location!, definition: def, lastRefresh: null, definer: definerOf(principal) });
  const version = await tableVersion(table);
  if (body.with_no_data !== false) return json({ version }, 201);
  const rec = await svc.jobs.submit(VIEW_REFRESH, id, refreshSpec({}, svc.config.workers), principal.key, refreshExclusive(id));
  return json({ version, job_id: rec.id }, 201);
});

export const refreshMaterializedView = jsonOp(RefreshMaterializedView, async ({ id, body, svc, principal }) => {
  const entry = await requireTable(svc.catalog, id);
  const view = await viewOf(svc.views, entry, true);
  if (!view) throw invalid(`id: table ${q(entry.objectId)} is not a materialized view`);
  const def = view.definition;
  if (def.source === null) throw invalid(`source_query: stored as sent; this server refreshes only its own form, ${FORM}`);
  if (def.kind !== "query" && def.fn === null) throw invalid(`udtf_spec.udtf: stored as sent; this server runs ${TABLE_FUNCTION_FORMS}`);
  if (body.output_limit != null && def.kind !== "chunker") throw invalid("output_limit: applies to chunker views only");
  authoriseSource(principal, def);
  if (!view.definer) await svc.views.put({ ...view, definer: definerOf(principal) });
  if (body.src_version != null) await openAt(svc, await requireTable(svc.catalog, def.source.table), { branch: def.source.branch, version: body.src_version });
  const rec = await svc.jobs.submit(VIEW_REFRESH, id, refreshSpec(body, svc.config.workers), principal.key, refreshExclusive(id));
  return json({ job_id: rec.id }, 202);
});
