// A child process that refreshes one materialized view (started by src/jobs/kinds/view-refresh.ts),
// at the lowest CPU priority, like a backfill (workers/backfill.ts says why).
// - query: LanceDB's own refresh (incremental where it can be, else a rebuild).
// - udtf: a full refresh, skipped when the source has not changed since the last one; the source
//   rows (one partition per `partition_by` value, in parallel in the compute sandbox) go through the table
//   function, and the new contents replace the old in one commit.
// - chunker: incremental: source rows new or updated since the last refresh get their children
//   (re)computed; children of deleted rows, or of rows that left the filter, are removed; all in one
//   commit. Without per-row update versions on the source (stable row ids), every refresh rebuilds.
import type * as A from "apache-arrow";
import { resolveLocation } from "../../src/catalog/locations.js";
import { CHUNK, SOURCE_ROW_ID, type SourceForm, type ViewDefinition } from "../../src/compute/views.js";
import { arrow } from "../../src/engine/arrow.js";
import { quoteIdent } from "../../src/engine/computed-columns.js";
import { toJsonField, type JsonArrowField } from "../../src/engine/json-arrow.js";
import { columnValues, indexPartitions, refreshQueryView, rowIdsWhere, sourceRows, sourceRowsWithIds } from "../../src/engine/views.js";
import { countRows, tableSchema, tableVersion } from "../../src/engine/table-info.js";
import { namedBranch, openTables, type TableHandle } from "../../src/engine/tables.js";
import { CHECK_EVERY_READ } from "../../src/util/keep-fresh.js";
import { addRows, mergeRows } from "../../src/engine/writes.js";
import { usesStableRowIds } from "../../src/engine/versions.js";
import { FAIL, recordFailure, underPolicy, type Failures } from "../../src/compute/error-handling.js";
import { tableInSandbox } from "../compute-answers.js";
import type { Compute } from "../compute-client.js";
import type { RefreshMessage, RefreshRequest, RefreshResult, RefreshStep } from "../protocol.js";
import { serveJob, withCompute } from "./job-process.js";

type Step = (rows: number) => Promise<void>;

/**
 * Run the table function over source rows (IPC bytes) in the sandbox, under the view's error
 * policy; the output rows, checked. A chunker's failing rows are found by halving the input and
 * produce no children; a udtf's failing partition (`partition`, for the job's list) produces none
 * as a whole, since its function sees the partition at once. Failures are recorded in `failures`
 * against `total` source rows (the cap).
 */
function apply(compute: Compute, req: RefreshRequest, kind: "udtf" | "chunker", output: JsonArrowField[], input: Uint8Array, failures: Failures & { total: number }, partition?: string): Promise<A.Table> {
  const table = arrow.tableFromIPC(input);
  const policy = req.definition.errors ?? FAIL;
  const run = (part: A.Table) => tableInSandbox(compute, { kind, fn: req.definition.fn!, output, timeoutMs: req.timeoutMs }, part === table ? input : arrow.tableToIPC(part, "stream"), part);
  const skip = (part: A.Table, err: unknown) => {
    const key = kind === "chunker" ? JSON.stringify({ [SOURCE_ROW_ID]: String(part.getChild(SOURCE_ROW_ID)!.get(0)) }) : JSON.stringify({ partition: partition ?? "all rows" });
    recordFailure(policy, failures, part.numRows, key, err, failures.total);
    return new arrow.Table();
  };
  return underPolicy(policy, table, run, skip, (parts) => new arrow.Table(parts.flatMap((t) => t.batches)), kind === "chunker");
}

/** `rows` as one table of exactly the view's schema (columns, order, types, metadata). */
function asView(rows: A.Table[], schema: A.Schema): A.Table {
  const children = schema.fields.map((f) => {
    const values = rows.flatMap((t) => {
      const v = t.getChild(f.name);
      return v ? [...v] : new Array(t.numRows).fill(null);
    });
    return arrow.vectorFromArray(values, f.type).data[0];
  });
  const length = rows.reduce((n, t) => n + t.numRows, 0);
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length, nullCount: 0, children });
  return new arrow.Table([new arrow.RecordBatch(schema, data)]);
}

/** The columns a table function reads: its input columns, else the form's, else all. */
function inputSelect(def: ViewDefinition, form: SourceForm): Map<string, string> | null {
  if (def.inputColumns) return new Map(def.inputColumns.map((c) => [c, quoteIdent(c)]));
  return form.columns ? new Map(form.columns) : null;
}

async function refreshUdtf(req: RefreshRequest, compute: Compute, view: TableHandle, source: TableHandle, sourceVersion: number, started: (total: number) => Promise<Step>): Promise<RefreshResult> {
  const def = req.definition;
  const form = def.source!;
  const schema = (await tableSchema(view)) as unknown as A.Schema;
  if (req.lastSourceVersion === sourceVersion) return { mode: "no_op", rows_written: 0, source_version: sourceVersion, view_version: await tableVersion(view) };
  const output = schema.fields.map((f) => toJsonField(f));
  // One task per partition value (or one for all rows), `concurrency` at a time.
  const filters: (string | null)[] = [form.filter];
  if (def.partitionBy) {
    const values = new Set(await columnValues(source, def.partitionBy, form.filter));
    filters.splice(0, 1, ...[...values].map((v) => {
      const cond = v === null || v === undefined ? `${quoteIdent(def.partitionBy!)} IS NULL` : `${quoteIdent(def.partitionBy!)} = ${typeof v === "string" ? `'${v.replace(/'/g, "''")}'` : String(v)}`;
      return form.filter !== null ? `(${form.filter}) AND ${cond}` : cond;
    }));
  }
  const select = inputSelect(def, form);
  /** One partition's rows: by filter, or by row ids (an index's partition). */
  const read = (part: string | null | bigint[]) => sourceRows(source, part, select, form.limit);
  const parts: (string | null | bigint[])[] = def.partitionByIndexed ? await indexPartitions(source, def.partitionByIndexed, form.filter) : filters;
  const total = Math.min(await countRows(source, form.filter ?? undefined), form.limit ?? Infinity);
  const step = await started(total);
  const failures = { rows_failed: 0, failed_rows: [], total };
  const named = (part: string | null | bigint[]) => (Array.isArray(part) ? `${part.length} rows of an index partition` : (part ?? undefined));
  const outputs: A.Table[] = [];
  for (let i = 0; i < parts.length; i += req.concurrency) {
    const slice = parts.slice(i, i + req.concurrency);
    const inputs = await Promise.all(slice.map(read));
    outputs.push(...(await Promise.all(inputs.map((input, j) => apply(compute, req, "udtf", output, input, failures, named(slice[j]))))));
    await step(inputs.reduce((n, b) => n + arrow.tableFromIPC(b).numRows, 0));
  }
  const rows = asView(outputs, schema);
  committing = true;
  const r = await addRows(view, rows, "overwrite");
  return { mode: "rebuild", rows_written: rows.numRows, source_version: sourceVersion, view_version: r.version, ...failed(failures) };
}

async function refreshChunker(req: RefreshRequest, compute: Compute, view: TableHandle, source: TableHandle, sourceVersion: number, started: (total: number) => Promise<Step>): Promise<RefreshResult> {
  const def = req.definition;
  const form = def.source!;
  const schema = (await tableSchema(view)) as unknown as A.Schema;
  const tracked = await usesStableRowIds(resolveLocation(req.root, req.source!.location!), sourceVersion, namedBranch(form.branch));
  const incremental = tracked && req.lastSourceVersion !== null;
  if (incremental && req.lastSourceVersion === sourceVersion) return { mode: "no_op", rows_written: 0, source_version: sourceVersion, view_version: await tableVersion(view) };

  // Parents to (re)compute: matching the filter, and new or updated since the last refresh.
  const since = incremental ? `_row_last_updated_at_version > ${req.lastSourceVersion}` : null;
  const and = (a: string | null, b: string | null) => (a === null ? b : b === null ? a : `(${a}) AND (${b})`);
  let parents = await rowIdsWhere(source, and(form.filter, since));
  if (form.limit !== null) parents = parents.slice(0, form.limit);
  // Children to remove: of every parent that changed (it is recomputed or left the filter) and of deleted ones.
  let affected: bigint[] | null = null;
  if (incremental) {
    const changed = await rowIdsWhere(source, since);
    const live = new Set(await rowIdsWhere(source, null));
    const had = (await columnValues(view, SOURCE_ROW_ID, null)).map((v) => BigInt(v as bigint));
    affected = [...new Set([...changed, ...had.filter((id) => !live.has(id))])];
    if (affected.length === 0 && parents.length === 0) return { mode: "no_op", rows_written: 0, source_version: sourceVersion, view_version: await tableVersion(view) };
  }

  const parentCols = (form.columns ?? []).map(([out]) => out).filter((c) => schema.fields.some((f) => f.name === c));
  const produced = schema.fields.filter((f) => f.name !== SOURCE_ROW_ID && f.name !== CHUNK && !parentCols.includes(f.name)).map((f) => toJsonField(f));
  const select = new Map<string, string>([...(inputSelect(def, form) ?? new Map()), ...(form.columns ?? []).filter(([out]) => parentCols.includes(out))]);
  const step = await started(parents.length);
  const failures = { rows_failed: 0, failed_rows: [], total: parents.length };
  const outputs: A.Table[] = [];
  for (let i = 0; i < parents.length; i += req.sourceTaskSize * req.concurrency) {
    const batch = [];
    for (let j = i; j < Math.min(i + req.sourceTaskSize * req.concurrency, parents.length); j += req.sourceTaskSize) {
      const ids = parents.slice(j, j + req.sourceTaskSize);
      batch.push(
        (async () => {
          const t = arrow.tableFromIPC((await sourceRowsWithIds(source, ids, select))!);
          const input = new arrow.Table({ ...Object.fromEntries(t.schema.fields.filter((f) => f.name !== "_rowid").map((f) => [f.name, t.getChild(f.name)!])), [SOURCE_ROW_ID]: t.getChild("_rowid")! });
          return apply(compute, req, "chunker", produced, new Uint8Array(arrow.tableToIPC(input, "stream")), failures);
        })(),
      );
    }
    outputs.push(...(await Promise.all(batch)));
    await step(Math.min(req.sourceTaskSize * req.concurrency, parents.length - i));
  }
  let rows = asView(outputs, schema);
  const all = rows.numRows;
  if (req.outputLimit !== null) {
    const kept = incremental ? (await countRows(view)) - (affected!.length ? await countRows(view, `${SOURCE_ROW_ID} IN (${affected!.join(", ")})`) : 0) : 0;
    rows = rows.slice(0, Math.max(0, req.outputLimit - kept));
  }
  committing = true;
  // Children of affected parents (all, in a rebuild) that the new rows do not replace are removed.
  const deleteNotInSource = !incremental ? {} : affected!.length > 0 ? { where: `${SOURCE_ROW_ID} IN (${affected!.join(", ")})` } : undefined;
  const r = await mergeRows(view, [SOURCE_ROW_ID, CHUNK], { updateMatched: {}, insertUnmatched: true, deleteNotInSource })(arrow.tableToIPC(rows, "file"));
  return { mode: incremental ? "incremental" : "rebuild", rows_written: rows.numRows, source_version: sourceVersion, view_version: r.version, truncated: rows.numRows < all, ...failed(failures) };
}

/** The result's failure fields, when a skip policy left rows out. */
const failed = (f: Failures) => (f.rows_failed > 0 ? { rows_failed: f.rows_failed, failed_rows: f.failed_rows } : {});

// A refresh commits only at its end (a query view's: inside LanceDB's call, atomically), so a stop
// before that ends the process at once and leaves the view as it was.
let committing = false;

serveJob<RefreshRequest, RefreshMessage>(async (req, { send }) => {
  const tables = await openTables(req.root, CHECK_EVERY_READ, req.storage);
  const view = await tables.open(req.view, { fresh: true });
  const def = req.definition;
  let result: RefreshResult;
  if (def.kind === "query") {
    const r = await refreshQueryView(view, req.srcVersion ?? def.source?.version ?? undefined);
    result = { mode: r.mode, rows_written: r.rowsWritten, source_version: r.sourceVersion, view_version: r.version };
  } else {
    const form = def.source!;
    const source = await tables.open(req.source!, { branch: form.branch, version: req.srcVersion ?? form.version ?? undefined });
    const sourceVersion = await tableVersion(source);
    const started = async (rows_total: number): Promise<Step> => {
      const at: RefreshStep = { read_version: sourceVersion, rows_total, rows_done: 0 };
      await send({ type: "step", step: { ...at } });
      return async (rows) => {
        at.rows_done += rows;
        await send({ type: "step", step: { ...at } });
      };
    };
    const refresh = def.kind === "udtf" ? refreshUdtf : refreshChunker;
    result = await withCompute(req, req.view.objectId, (compute) => refresh(req, compute, view, source, sourceVersion, started));
  }
  await send({ type: "progress", result });
}, () => !committing);
