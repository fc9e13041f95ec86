// Materialized views: their definitions (as created, and the parts Quiver runs), and the record of
// each view's last refresh, kept in the shared store (src/util/system-table.ts) by view location.
// Every replica reads them from a snapshot at most one consistency interval old (a write's check
// that its table is no view reads it on every write); a caller that must see the latest asks fresh.
import { createHash } from "node:crypto";
import path from "node:path";
import type * as A from "apache-arrow";
import type { Principal } from "../auth/principal.js";
import { sameId, SEP } from "../catalog/names.js";
import { arrow } from "../engine/arrow.js";
import { invalid } from "../errors.js";
import { errorPolicy, type ErrorHandlingBody, type ErrorPolicy } from "./error-handling.js";
import type { TableFunction } from "./udf.js";
import { checkExpression, checkSqlBody, type ExpressionLimits } from "../schemas/expression.js";
import { migrateLog } from "../util/json-log.js";
import { sqlString, type SystemTables } from "../util/system-table.js";
import { keepFresh, type Freshness } from "../util/keep-fresh.js";
import { log } from "../log.js";
import { recordFreshnessCheck } from "../metrics.js";

export type ViewKind = "query" | "udtf" | "chunker";

/**
 * The source_query form Quiver executes (JSON): `table` (a path id, as an array or joined with
 * `$`), and optionally `filter` (SQL), `columns` (names, or output name → SQL expression), `limit`,
 * `branch` and `version`. Any other source_query is stored as sent and not refreshed.
 */
export interface SourceForm {
  table: string[];
  filter: string | null;
  /** [output name, SQL expression] pairs; null for every column. */
  columns: [string, string][] | null;
  limit: number | null;
  branch: string | null;
  version: number | null;
}

/** The forms of `udtf_spec.udtf` this server runs, as errors name them. */
export const TABLE_FUNCTION_FORMS = '{"backend":"js","source":…}, {"backend":"python","source":…} or {"backend":"sql","sql":…} (base64)';

export interface ViewDefinition {
  kind: ViewKind;
  /** As sent. */
  sourceQuery: string;
  outputSchema: string;
  udtfSpec: Record<string, unknown> | null;
  autoRefresh: boolean;
  /** What Quiver runs: null when source_query or udtf is in a form it does not execute. */
  source: SourceForm | null;
  fn: TableFunction | null;
  inputColumns: string[] | null;
  partitionBy: string | null;
  /** A vector column whose IVF index's partitions are the udtf's partitions. */
  partitionByIndexed: string | null;
  /** udtf_spec.error_handling (absent in definitions stored before it was run: fail). */
  errors?: ErrorPolicy;
}

export interface ViewRefresh {
  sourceVersion: number;
  viewVersion: number;
  at: number;
  rowsWritten: number;
  mode: string;
  /** output_limit left rows out: the next refresh computes the view whole again. */
  truncated?: boolean;
}

/**
 * The credential that defined a view, as it was then (its stable id, name, role and prefixes; never
 * its secret or hash): every refresh reads the source on its behalf (src/jobs/kinds/view-refresh.ts).
 */
export type Definer = Pick<Principal, "key" | "subject" | "role" | "prefixes">;

export const definerOf = (p: Principal): Definer => ({ key: p.key, subject: p.subject, role: p.role, prefixes: p.prefixes });

export interface ViewRecord {
  id: string[];
  location: string;
  definition: ViewDefinition;
  lastRefresh: ViewRefresh | null;
  /** Absent on views defined before definers were kept: the next manual refresh records its caller. */
  definer?: Definer;
}

/** The view columns Quiver adds: the source row a view row came from, and a chunker child's ordinal. */
export const SOURCE_ROW_ID = "__source_row_id";
export const CHUNK = "__chunk";

const q = JSON.stringify;
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** Quiver's form of a source_query, or null for any other (opaque) one. Bad fields of the form are 400. */
function parseSourceQuery(text: string): SourceForm | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isObject(v) || v.table === undefined) return null;
  const at = (f: string) => `source_query.${f}`;
  const table = typeof v.table === "string" ? v.table.split(SEP) : v.table;
  if (!Array.isArray(table) || table.length === 0 || !table.every((s) => typeof s === "string" && s !== "")) throw invalid(`${at("table")}: must be a table id, an array of names or names joined with "$"`);
  const str = (f: string) => {
    if (v[f] == null) return null;
    if (typeof v[f] !== "string") throw invalid(`${at(f)}: must be a string`);
    return v[f] as string;
  };
  const int = (f: string) => {
    if (v[f] == null) return null;
    if (!Number.isSafeInteger(v[f]) || (v[f] as number) < 0) throw invalid(`${at(f)}: must be an integer >= 0`);
    return v[f] as number;
  };
  let columns: [string, string][] | null = null;
  if (Array.isArray(v.columns)) {
    if (!v.columns.every((c) => typeof c === "string" && c !== "")) throw invalid(`${at("columns")}: must be column names, or an object of output name → SQL expression`);
    columns = (v.columns as string[]).map((c) => [c, "`" + c.replace(/`/g, "``") + "`"]);
  } else if (isObject(v.columns)) {
    if (!Object.values(v.columns).every((e) => typeof e === "string" && e !== "")) throw invalid(`${at("columns")}: every expression must be a non-empty string`);
    columns = Object.entries(v.columns as Record<string, string>);
  } else if (v.columns != null) throw invalid(`${at("columns")}: must be column names, or an object of output name → SQL expression`);
  return { table, filter: str("filter"), columns, limit: int("limit"), branch: str("branch"), version: int("version") };
}

/** The base64 Arrow IPC schema of output_schema. */
function decodeOutputSchema(b64: string): A.Schema {
  let schema: A.Schema;
  try {
    schema = arrow.tableFromIPC(Buffer.from(b64, "base64")).schema;
  } catch (e) {
    throw invalid(`output_schema: not a base64 Arrow IPC schema (${(e as Error).message})`);
  }
  if (schema.fields.length === 0) throw invalid("output_schema: not a base64 Arrow IPC schema (no fields)");
  return schema;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** The body of udtf_spec.udtf, or null when it is not in the form Quiver runs (e.g. a Python pickle). */
function decodeTableFunction(udtf: string): TableFunction | null {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(udtf, "base64").toString("utf8"));
  } catch {
    return null;
  }
  if (!isObject(v)) return null;
  if ((v.backend === "js" || v.backend === "python") && typeof v.source === "string") return { backend: v.backend, code: v.source, name: typeof v.name === "string" ? v.name : "" };
  if (v.backend === "sql" && typeof v.sql === "string") return { backend: "sql", code: v.sql, name: "" };
  return null;
}

export interface CreateInput {
  kind: string;
  source_query: string;
  output_schema: string;
  udtf_spec?: (Record<string, unknown> & { udtf: string; error_handling?: unknown; kind?: string | null; udtf_sha?: string | null; input_columns?: string[] | null; partition_by?: string | null; partition_by_indexed_column?: string | null }) | null;
  auto_refresh?: boolean | null;
}

/** A view's definition from a create request; every mismatch is 400 naming the field. */
export function defineView(b: CreateInput, limits: ExpressionLimits): { definition: ViewDefinition; schema: A.Schema } {
  const kind: ViewKind = b.kind === "scalar_udtf" ? "chunker" : (b.kind as ViewKind);
  const schema = decodeOutputSchema(b.output_schema);
  const spec = b.udtf_spec ?? null;
  if (kind === "query" && spec) throw invalid("udtf_spec: must be null for a query view");
  if (kind !== "query" && !spec) throw invalid(`udtf_spec: is required for a ${kind} view`);
  let fn: TableFunction | null = null;
  if (spec) {
    const specKind = spec.kind === "scalar_udtf" ? "chunker" : spec.kind;
    if (specKind != null && specKind !== kind) throw invalid(`udtf_spec.kind: ${q(spec.kind)} differs from the view's kind ${q(b.kind)}`);
    if (spec.udtf_sha != null && sha256(spec.udtf) !== spec.udtf_sha.toLowerCase()) throw invalid("udtf_spec.udtf_sha: is not the SHA-256 of udtf_spec.udtf");
    if (spec.partition_by != null && spec.partition_by_indexed_column != null) throw invalid("udtf_spec: partition_by and partition_by_indexed_column are mutually exclusive");
    if (kind === "chunker" && (spec.partition_by != null || spec.partition_by_indexed_column != null)) throw invalid("udtf_spec.partition_by: only batch udtf views are partitioned");
    fn = decodeTableFunction(spec.udtf);
    if (fn?.backend === "sql" && kind === "chunker") throw invalid('udtf_spec.udtf: a chunker runs JavaScript ({"backend":"js","source":…}) or Python ({"backend":"python","source":…}), not SQL');
    if (fn?.backend === "sql") checkSqlBody("udtf_spec.udtf.sql", fn.code, limits);
  }
  const source = parseSourceQuery(b.source_query);
  if (source?.filter != null) checkExpression("source_query.filter", source.filter, limits);
  for (const [name, expr] of source?.columns ?? []) checkExpression(`source_query.columns.${name}`, expr, limits);
  const reserved = schema.fields.find((f) => f.name === SOURCE_ROW_ID || f.name === CHUNK);
  if (reserved) throw invalid(`output_schema: ${q(reserved.name)} is a column Quiver adds to every view`);
  return {
    schema,
    definition: {
      kind,
      sourceQuery: b.source_query,
      outputSchema: b.output_schema,
      udtfSpec: spec,
      autoRefresh: b.auto_refresh ?? false,
      source,
      fn,
      inputColumns: spec?.input_columns ?? null,
      partitionBy: spec?.partition_by ?? null,
      partitionByIndexed: spec?.partition_by_indexed_column ?? null,
      errors: errorPolicy(spec?.error_handling as ErrorHandlingBody | null | undefined),
    },
  };
}

export interface Views {
  /** `fresh`: read the store now, not the snapshot (a job or a view operation about to act on it). */
  get(location: string, fresh?: boolean): Promise<ViewRecord | undefined>;
  /** Views whose source is table `id`. */
  ofSource(id: readonly string[]): Promise<ViewRecord[]>;
  put(rec: ViewRecord): Promise<void>;
  forget(location: string): Promise<void>;
  /** Stop re-reading the store in the background. */
  close(): void;
}

/** The lines of the local file earlier releases kept. */
type Line = ViewRecord | { forget: string };

export async function openViews(store: SystemTables, stateDir: string, freshness: Freshness): Promise<Views> {
  const table = await store.open("views", []);
  const row = (rec: ViewRecord) => ({ key: rec.location, doc: JSON.stringify(rec) });
  await migrateLog<Line>(path.join(stateDir, "views.jsonl"), async (lines) => {
    const kept = new Map<string, ViewRecord>();
    for (const l of lines) if ("forget" in l) kept.delete(l.forget);
    else kept.set(l.location, l);
    await table.upsert([...kept.values()].map(row));
  });
  let byLocation = new Map<string, ViewRecord>();
  /** When the snapshot was last asked for, and when its last read started. */
  const age = { usedAt: 0, checkedAt: -Infinity };
  let loading: Promise<Map<string, ViewRecord>> | null = null;
  const load = (ahead = false) =>
    (loading ??= (async () => {
      const at = Date.now();
      recordFreshnessCheck("views", ahead);
      const rows = await table.select();
      byLocation = new Map(rows.map((r) => [r.key as string, JSON.parse(r.doc as string) as ViewRecord]));
      age.checkedAt = at;
      return byLocation;
    })().finally(() => (loading = null)));
  const current = () => {
    age.usedAt = Date.now();
    return age.usedAt - age.checkedAt < freshness.intervalMs ? byLocation : load();
  };
  const close = keepFresh(freshness, () => [age], () => load(true).then(() => undefined, (err: unknown) => log.debug("views check failed", { error: String(err) })));
  return {
    async get(location, fresh = false) {
      if (!fresh) return (await current()).get(location);
      const rows = await table.select(`key = ${sqlString(location)}`);
      return rows.length ? (JSON.parse(rows[0].doc as string) as ViewRecord) : undefined;
    },
    ofSource: async (id) => [...(await current()).values()].filter((v) => v.definition.source && sameId(v.definition.source.table, id)),
    async put(rec) {
      await table.upsert([row(rec)]);
      byLocation.set(rec.location, rec);
    },
    async forget(location) {
      await table.deleteWhere(`key = ${sqlString(location)}`);
      byLocation.delete(location);
    },
    close,
  };
}

/** The view's record when the table at `entry` is one; null otherwise. */
export const viewOf = async (views: Views, entry: { location: string | null }, fresh = false): Promise<ViewRecord | null> => (entry.location ? ((await views.get(entry.location, fresh)) ?? null) : null);

/** A view's udtf_spec as shown to readers: the table function's body left out. */
export function shownSpec(d: ViewDefinition): Record<string, unknown> | null {
  if (!d.udtfSpec) return null;
  const { udtf: _body, ...spec } = d.udtfSpec;
  return spec;
}

/** What describe shows of a view. */
export function describeView(rec: ViewRecord) {
  const d = rec.definition;
  const r = rec.lastRefresh;
  return {
    kind: d.kind,
    source_query: d.sourceQuery,
    runs_source_query: d.source !== null,
    udtf_spec: shownSpec(d),
    auto_refresh: d.autoRefresh,
    last_refresh: r ? { source_version: r.sourceVersion, view_version: r.viewVersion, refreshed_at: new Date(r.at).toISOString(), rows_written: r.rowsWritten, mode: r.mode } : null,
  };
}
