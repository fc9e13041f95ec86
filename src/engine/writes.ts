// Row-level commits through LanceDB: add, merge insert, update, delete, and restoring an old
// version. Each answers LanceDB's result (its version and the rows it touched).
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import { recordCommitRetries } from "../metrics.js";
import type { TableHandle } from "./tables.js";

export const addRows = (t: TableHandle, data: A.Table, mode: "append" | "overwrite") => t.add(data, { mode });

/** What of LanceDB's native table (`LocalTable.inner` in @lancedb/lancedb/dist/table.js) a commit of a file uses. */
interface NativeTable {
  add(buf: Buffer, mode: string): Promise<lancedb.AddResult>;
}

/**
 * Appends or overwrites with the rows of an Arrow IPC file (engine/upload.ts), given as it is to
 * LanceDB's native add, which JavaScript's `add` calls with the file it writes from a table: no
 * write or copy of the rows on the calling thread.
 */
export function addFile(t: TableHandle, file: Uint8Array, mode: "append" | "overwrite"): Promise<lancedb.AddResult> {
  const inner = (t as unknown as { inner?: Partial<NativeTable> }).inner;
  if (typeof inner?.add !== "function") throw new Error("@lancedb/lancedb's table no longer holds its native table as `inner`: see engine/writes.ts addFile");
  return (inner as NativeTable).add(Buffer.from(file.buffer, file.byteOffset, file.byteLength), mode);
}

/** What a merge insert does with matched, unmatched and target-only rows; `where` limits which. */
export interface MergeHow {
  updateMatched?: { where?: string | null };
  insertUnmatched?: boolean;
  deleteNotInSource?: { where?: string | null };
  useIndex?: boolean;
}

const filtered = (o: { where?: string | null }) => (o.where ? { where: o.where } : undefined);

/** Counts the engine's retries of a merge insert that lost commit races (its attempts past the first). */
export const merged =
  (kind: "table" | "system" | "catalog") =>
  (r: lancedb.MergeResult): lancedb.MergeResult => {
    recordCommitRetries(kind, r.numAttempts - 1);
    return r;
  };

/** A merge insert keyed on `on`, built now and committed by the function answered. */
export function mergeRows(t: TableHandle, on: string[], how: MergeHow): (data: A.Table) => Promise<lancedb.MergeResult> {
  let b = t.mergeInsert(on);
  if (how.updateMatched) b = b.whenMatchedUpdateAll(filtered(how.updateMatched));
  if (how.insertUnmatched) b = b.whenNotMatchedInsertAll();
  if (how.deleteNotInSource) b = b.whenNotMatchedBySourceDelete(filtered(how.deleteNotInSource));
  if (how.useIndex !== undefined) b = b.useIndex(how.useIndex);
  return (data) => b.execute(data).then(merged("table"));
}

/** Sets columns to SQL values in the rows `where` selects (all without it). */
export const updateRows = (t: TableHandle, valuesSql: Record<string, string>, where: string | undefined) => t.update({ valuesSql, where });

export const deleteRows = (t: TableHandle, predicate: string) => t.delete(predicate);

/** Commits a new latest version holding the content of the version `t` is checked out at. */
export const restoreVersion = (t: TableHandle) => t.restore();
