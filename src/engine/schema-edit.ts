// Schema changes through LanceDB: its column and field-metadata calls, the one place its
// schema-evolution error texts become API errors, and schema-level metadata, for which LanceDB
// has no call of its own.
import type * as lancedb from "@lancedb/lancedb";
import { ApiError, Code, invalid } from "../errors.js";
import { recordCommitConflict, recordCommitRetries } from "../metrics.js";
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

// A schema change that lost its commit to a compaction (Quiver's own maintenance rewrites
// fragments in the background) changes nothing a client asked about: it is made again on the
// latest version, so background work never shows as a client's 409. A lost race with another
// client's change stays a 409.
const LOST_TO_COMPACTION = /concurrent transaction Rewrite/;
const SCHEMA_EDIT_ATTEMPTS = 4;

/** Runs one schema-changing LanceDB call on `t`; returns the version it committed. */
export async function commitSchemaEdit(t: lancedb.Table, edit: () => Promise<{ version: number }>, field?: string): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await edit()).version;
    } catch (err) {
      if (attempt < SCHEMA_EDIT_ATTEMPTS && isCommitConflict(err) && LOST_TO_COMPACTION.test(errorText(err))) {
        recordCommitRetries("table", 1);
        await t.checkoutLatest();
        continue;
      }
      throw schemaEditError(err, field) ?? err;
    }
  }
}

export type ColumnAlteration = lancedb.ColumnAlteration;
export type FieldMetadataUpdate = lancedb.FieldMetadataUpdate;

/** Adds columns whose values are SQL over each row; `field` names the request input holding it. */
export const addSqlColumns = (t: lancedb.Table, cols: { name: string; valueSql: string }[], field: string) => commitSchemaEdit(t, () => t.addColumns(cols), field);

// LanceDB's JS alterColumns checks an Arrow type against a list that lacks the large
// variable-width types (a 500 "Unrecognized type id"); their names take its other path, a type
// name handed to the engine as it is, to the same cast.
const BY_NAME: Partial<Record<A.Type, string>> = { [arrow.Type.LargeUtf8]: "large_string", [arrow.Type.LargeBinary]: "large_binary" };
const passable = (a: ColumnAlteration): ColumnAlteration => {
  const name = a.dataType !== undefined && typeof a.dataType !== "string" ? BY_NAME[(a.dataType as A.DataType).typeId] : undefined;
  return name === undefined ? a : { ...a, dataType: name };
};

export const alterColumns = (t: lancedb.Table, alterations: ColumnAlteration[]) => commitSchemaEdit(t, () => t.alterColumns(alterations.map(passable)));

export const dropColumns = (t: lancedb.Table, paths: string[]) => commitSchemaEdit(t, () => t.dropColumns(paths));

export const updateFieldMetadata = (t: lancedb.Table, updates: FieldMetadataUpdate[]) => commitSchemaEdit(t, () => t.updateFieldMetadata(updates));

/** Adds all-null columns (nullable, of the given types, with the given field metadata). */
export const addNullColumns = (t: lancedb.Table, fields: { name: string; type: A.DataType; metadata?: Record<string, string> }[]) =>
  commitSchemaEdit(t, () =>
    t.addColumns(new arrow.Schema(fields.map((f) => new arrow.Field(f.name, f.type, true, f.metadata ? new Map(Object.entries(f.metadata)) : undefined)))),
  );

/**
 * Adds keys to the table's schema metadata. Lance merges a schema's metadata into the table's when
 * columns are added, keeping existing values, so adding no columns commits just the new keys.
 */
export const addSchemaMetadata = (t: lancedb.Table, entries: Record<string, string>) =>
  commitSchemaEdit(t, () => t.addColumns(new arrow.Schema([], new Map(Object.entries(entries)))));
