// Schema changes through LanceDB: its column and field-metadata calls, the one place its
// schema-evolution error texts become API errors, and schema-level metadata, for which LanceDB
// has no call of its own.
import type * as lancedb from "@lancedb/lancedb";
import { ApiError, Code, invalid } from "../errors.js";
import { recordCommitConflict } from "../metrics.js";
import type * as A from "apache-arrow";
import { arrow } from "./arrow.js";
import { EXPRESSION_FAULT } from "./query-errors.js";
import { engineReason, errorText, isCommitConflict } from "./messages.js";

// Texts LanceDB uses when the request, not the server, is at fault.
// "Not supported" is an expression the engine cannot evaluate, e.g. an aggregate.
const CLIENT_FAULT = /^(Invalid input, |Invalid expression for column |lance error: LanceError\(Schema\)|lance error: Invalid user input|lance error: Not supported: )/;

/** A rejected schema change as a 400; `field` names the request input holding the SQL it evaluated, if any. */
function schemaEditError(err: unknown, field?: string): ApiError | null {
  if (isCommitConflict(err)) {
    recordCommitConflict("schema");
    return new ApiError(Code.ConcurrentModification, `concurrent schema change: ${engineReason(err)}; retry`);
  }
  const msg = errorText(err);
  const sql = field !== undefined && EXPRESSION_FAULT.test(msg);
  if (!sql && !CLIENT_FAULT.test(msg)) return null;
  const reason = engineReason(err).replace(/^Not supported: /, "not supported: ").slice(0, 400);
  return invalid(field !== undefined ? `${field}: ${reason}` : reason);
}

/** Runs one schema-changing LanceDB call; returns the version it committed. */
export async function commitSchemaEdit(edit: () => Promise<{ version: number }>, field?: string): Promise<number> {
  try {
    return (await edit()).version;
  } catch (err) {
    throw schemaEditError(err, field) ?? err;
  }
}

export type ColumnAlteration = lancedb.ColumnAlteration;
export type FieldMetadataUpdate = lancedb.FieldMetadataUpdate;

/** Adds columns whose values are SQL over each row; `field` names the request input holding it. */
export const addSqlColumns = (t: lancedb.Table, cols: { name: string; valueSql: string }[], field: string) => commitSchemaEdit(() => t.addColumns(cols), field);

export const alterColumns = (t: lancedb.Table, alterations: ColumnAlteration[]) => commitSchemaEdit(() => t.alterColumns(alterations));

export const dropColumns = (t: lancedb.Table, paths: string[]) => commitSchemaEdit(() => t.dropColumns(paths));

export const updateFieldMetadata = (t: lancedb.Table, updates: FieldMetadataUpdate[]) => commitSchemaEdit(() => t.updateFieldMetadata(updates));

/** Adds all-null columns (nullable, of the given types, with the given field metadata). */
export const addNullColumns = (t: lancedb.Table, fields: { name: string; type: A.DataType; metadata?: Record<string, string> }[]) =>
  commitSchemaEdit(() =>
    t.addColumns(new arrow.Schema(fields.map((f) => new arrow.Field(f.name, f.type, true, f.metadata ? new Map(Object.entries(f.metadata)) : undefined)))),
  );

/**
 * Adds keys to the table's schema metadata. Lance merges a schema's metadata into the table's when
 * columns are added, keeping existing values, so adding no columns commits just the new keys.
 */
export const addSchemaMetadata = (t: lancedb.Table, entries: Record<string, string>) =>
  commitSchemaEdit(() => t.addColumns(new arrow.Schema([], new Map(Object.entries(entries)))));
