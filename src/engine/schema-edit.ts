// Schema changes through LanceDB: the one place its schema-evolution error texts become API
// errors, and schema-level metadata, for which LanceDB has no call of its own.
import type * as lancedb from "@lancedb/lancedb";
import { invalid, type ApiError } from "../errors.js";
import type * as A from "apache-arrow";
import { arrow } from "./arrow.js";

/** LanceDB's message without the repeated cause, source locations or Rust schema dumps. */
function cleanMessage(err: unknown): string {
  return String((err as Error)?.message ?? err)
    .split("  Caused by:")[0]
    .replace(/, \/[^\s]*\.rs:\d+:\d+.*$/s, "")
    .replace(/ in schema:\s*Schema \{.*$/s, "")
    .replace(/^lance error: (LanceError\(\w+\): )?/, "")
    .replace(/^Invalid input, /, "")
    .replace(/^Not supported: /, "not supported: ")
    .trim()
    .slice(0, 400);
}

// Texts LanceDB uses when the request, not the server, is at fault.
// "Not supported" is an expression the engine cannot evaluate, e.g. an aggregate.
const CLIENT_FAULT = /^(Invalid input, |lance error: LanceError\(Schema\)|lance error: Invalid user input|lance error: Not supported: )/;

export function schemaEditError(err: unknown): ApiError | null {
  const msg = String((err as Error)?.message ?? err);
  return CLIENT_FAULT.test(msg) ? invalid(cleanMessage(err)) : null;
}

/** Runs one schema-changing LanceDB call; returns the version it committed. */
export async function commitSchemaEdit(edit: () => Promise<{ version: number }>): Promise<number> {
  try {
    return (await edit()).version;
  } catch (err) {
    throw schemaEditError(err) ?? err;
  }
}

/** Adds all-null columns (nullable, of the given types). */
export const addNullColumns = (t: lancedb.Table, fields: { name: string; type: A.DataType }[]) =>
  commitSchemaEdit(() => t.addColumns(new arrow.Schema(fields.map((f) => new arrow.Field(f.name, f.type, true)))));

/**
 * Adds keys to the table's schema metadata. Lance merges a schema's metadata into the table's when
 * columns are added, keeping existing values, so adding no columns commits just the new keys.
 */
export const addSchemaMetadata = (t: lancedb.Table, entries: Record<string, string>) =>
  commitSchemaEdit(() => t.addColumns(new arrow.Schema([], new Map(Object.entries(entries)))));
