// Virtual (UDF-backed) columns: the descriptor of lance-namespace's `virtual_column`, as Quiver
// keeps it in the column's field metadata (so it survives restarts and any reader that opens the
// table), and the definition hash that tells values computed by one definition from another.
import { createHash } from "node:crypto";
import type { JsonArrowDataType } from "../engine/json-arrow.js";
import { invalid } from "../errors.js";
import { matchMode } from "../schemas/mode.js";

/** The UDF backends Quiver runs; any other is stored and described, and a backfill of it is 400. */
export const RUNNABLE = ["sql", "js", "python", "wasm"] as const;
export type Runnable = (typeof RUNNABLE)[number];

export interface VirtualColumn {
  /** The physical column the UDF fills. */
  column: string;
  /** As given (e.g. "DockerUDFSpecV1"); a runnable one in its canonical spelling. */
  backend: string;
  /** sql: the expression; js: the function's source; python: source defining the function; wasm: the module, base64. */
  udf: string;
  udfName: string;
  udfVersion: string;
  /** Field paths the UDF reads, in argument order. */
  inputs: string[];
  /** The field of the UDF's result this column takes; "" for the whole result. */
  structField: string;
  /** The declared output type; null when the backend derives it (sql). */
  dataType: JsonArrowDataType | null;
  nullable: boolean;
  /** js: called once per batch with one array per input (field_metadata `batch: "true"`). */
  batch: boolean;
  /** Rows written later are computed by a follow-up backfill. */
  autoBackfill: boolean;
  image: string | null;
  manifest: string | null;
  manifestChecksum: string | null;
  /** Field metadata the client gave (`field_metadata`, `outputs[].metadata`): set on the field as is. */
  fieldMetadata: Record<string, string>;
}

export const runnable = (vc: VirtualColumn): Runnable | null => matchMode(vc.backend, RUNNABLE) ?? null;

const PREFIX = "virtual_column";
const key = (k: string) => `${PREFIX}.${k}`;

/** The field metadata that holds a descriptor (merged with what LanceDB keeps there). */
export function toFieldMetadata(vc: VirtualColumn): Record<string, string> {
  const out: Record<string, string> = {
    ...vc.fieldMetadata,
    [PREFIX]: "true",
    [key("udf_backend")]: vc.backend,
    [key("udf")]: vc.udf,
    [key("udf_name")]: vc.udfName,
    [key("udf_version")]: vc.udfVersion,
    [key("udf_inputs")]: JSON.stringify(vc.inputs),
    [key("struct_field")]: vc.structField,
    [key("nullable")]: String(vc.nullable),
    [key("batch")]: String(vc.batch),
    [key("auto_backfill")]: String(vc.autoBackfill),
    [key("field_metadata")]: JSON.stringify(vc.fieldMetadata),
  };
  if (vc.dataType) out[key("data_type")] = JSON.stringify(vc.dataType);
  if (vc.image !== null) out[key("image")] = vc.image;
  if (vc.manifest !== null) out[key("manifest")] = vc.manifest;
  if (vc.manifestChecksum !== null) out[key("manifest_checksum")] = vc.manifestChecksum;
  return out;
}

/** The descriptor kept on a field, or null when the field is not a virtual column. */
export function fromFieldMetadata(column: string, meta: Map<string, string> | Record<string, string> | undefined): VirtualColumn | null {
  const m = meta instanceof Map ? Object.fromEntries(meta) : (meta ?? {});
  if (m[PREFIX] !== "true") return null;
  const json = <T>(k: string, def: T): T => {
    try {
      return m[key(k)] === undefined ? def : (JSON.parse(m[key(k)]) as T);
    } catch {
      return def;
    }
  };
  return {
    column,
    backend: m[key("udf_backend")] ?? "",
    udf: m[key("udf")] ?? "",
    udfName: m[key("udf_name")] ?? column,
    udfVersion: m[key("udf_version")] ?? "",
    inputs: json<string[]>("udf_inputs", []),
    structField: m[key("struct_field")] ?? "",
    dataType: json<JsonArrowDataType | null>("data_type", null),
    nullable: m[key("nullable")] !== "false",
    batch: m[key("batch")] === "true",
    autoBackfill: m[key("auto_backfill")] === "true",
    image: m[key("image")] ?? null,
    manifest: m[key("manifest")] ?? null,
    manifestChecksum: m[key("manifest_checksum")] ?? null,
    fieldMetadata: json<Record<string, string>>("field_metadata", {}),
  };
}

/** The virtual column `name` among a schema's fields, or null. */
export function virtualColumnOf(fields: readonly { name: string; metadata: Map<string, string> }[], name: string): VirtualColumn | null {
  const f = fields.find((x) => x.name === name);
  return f ? fromFieldMetadata(name, f.metadata) : null;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** Identifies what computes the values: two definitions with one hash compute the same values. */
export function definitionHash(vc: VirtualColumn): string {
  const { backend, udf, udfVersion, inputs, structField, dataType, batch } = vc;
  return sha256(JSON.stringify({ backend: runnable(vc) ?? backend, udf, udfVersion, inputs, structField, dataType, batch })).slice(0, 32);
}

/** The request's descriptor fields (add: with `outputs`; alter: a partial one). */
export interface DescriptorInput {
  input_columns?: string[] | null;
  outputs?: { column: string; struct_field?: string | null; data_type?: { type: string } | null; nullable?: boolean | null; metadata?: Record<string, string> | null }[] | null;
  image?: string | null;
  udf?: string | null;
  udf_name?: string | null;
  udf_version?: string | null;
  udf_backend?: string | null;
  auto_backfill?: boolean | null;
  manifest?: string | null;
  manifest_checksum?: string | null;
  field_metadata?: Record<string, string> | null;
}

/**
 * A descriptor from a request: a new one (add_columns, `base` null) or `base` with the given fields
 * replaced (alter_columns). Checks what needs no table: the output entry, the checksum, the udf's
 * presence. `at` names the request field in errors.
 */
export function describeVirtual(column: string, d: DescriptorInput, at: string, base: VirtualColumn | null): VirtualColumn {
  const given = <T>(v: T | null | undefined, def: T): T => (v === null || v === undefined ? def : v);
  let output: { structField: string; dataType: JsonArrowDataType | null; nullable: boolean; metadata: Record<string, string> } | null = null;
  if (d.outputs) {
    if (d.outputs.length !== 1) throw invalid(`${at}.outputs: one output per virtual column (Quiver computes one column per UDF), got ${d.outputs.length}`);
    const o = d.outputs[0];
    if (o.column !== column) throw invalid(`${at}.outputs[0].column: must be the column's own name ${JSON.stringify(column)}, got ${JSON.stringify(o.column)}`);
    output = { structField: o.struct_field ?? "", dataType: (o.data_type as JsonArrowDataType | null) ?? null, nullable: o.nullable ?? true, metadata: o.metadata ?? {} };
  }
  const udf = given(d.udf, base?.udf ?? "");
  if (udf === "") throw invalid(`${at}.udf: is required`);
  const manifest = given(d.manifest, base?.manifest ?? null);
  const manifestChecksum = given(d.manifest_checksum, base?.manifestChecksum ?? null);
  if (manifest !== null && manifestChecksum !== null && sha256(manifest) !== manifestChecksum.toLowerCase()) {
    throw invalid(`${at}.manifest_checksum: is not the SHA-256 of manifest`);
  }
  const fieldMetadata = { ...base?.fieldMetadata, ...output?.metadata, ...(d.field_metadata ?? {}) };
  const backend = given(d.udf_backend, base?.backend ?? "");
  const vc: VirtualColumn = {
    column,
    backend: matchMode(backend, RUNNABLE) ?? backend,
    udf,
    udfName: given(d.udf_name, base?.udfName ?? column),
    udfVersion: given(d.udf_version, d.udf != null ? sha256(udf).slice(0, 16) : (base?.udfVersion ?? sha256(udf).slice(0, 16))),
    inputs: given(d.input_columns, base?.inputs ?? []),
    structField: output?.structField ?? base?.structField ?? "",
    dataType: output?.dataType ?? base?.dataType ?? null,
    nullable: output?.nullable ?? base?.nullable ?? true,
    batch: fieldMetadata.batch === "true",
    autoBackfill: given(d.auto_backfill, base?.autoBackfill ?? false),
    image: given(d.image, base?.image ?? null),
    manifest,
    manifestChecksum,
    fieldMetadata,
  };
  const kind = runnable(vc);
  if (kind !== "sql" && vc.dataType === null) throw invalid(`${at}.outputs[0].data_type: is required for a ${vc.backend || "virtual"} column`);
  if (kind !== null && kind !== "sql" && vc.inputs.length === 0) throw invalid(`${at}.input_columns: a ${kind} UDF needs at least one input column`);
  return vc;
}

// The types an sql column may declare, as SQL names for the CAST that gives the expression its type.
const SQL_TYPES: Record<string, string> = {
  int8: "TINYINT", int16: "SMALLINT", int32: "INT", int64: "BIGINT",
  float32: "FLOAT", float: "FLOAT", float64: "DOUBLE", double: "DOUBLE",
  utf8: "VARCHAR", string: "VARCHAR", bool: "BOOLEAN", boolean: "BOOLEAN", date32: "DATE",
};

/** The SQL LanceDB stores for an sql column: the expression, cast to the declared type if any. */
export function sqlValue(vc: VirtualColumn, at: string): string {
  if (!vc.dataType) return vc.udf;
  const t = SQL_TYPES[vc.dataType.type.toLowerCase()];
  if (!t) {
    const names = [...new Set(Object.keys(SQL_TYPES).filter((k) => !["float", "double", "string", "boolean"].includes(k)))];
    throw invalid(`${at}.outputs[0].data_type: an sql column can declare ${names.join(", ")}; leave data_type out to take the expression's own type`);
  }
  return `CAST((${vc.udf}) AS ${t})`;
}
