// Row-level commits through LanceDB: add, merge insert, update, delete, and restoring an old
// version. Each answers LanceDB's result (its version and the rows it touched).
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import { setTimeout as sleep } from "node:timers/promises";
import { recordCommitRetries } from "../metrics.js";
import { isCommitConflict, isWriterContention } from "./messages.js";
import type { TableHandle } from "./tables.js";

export const addRows = (t: TableHandle, data: A.Table, mode: "append" | "overwrite") => t.add(data, { mode });

/** LanceDB's native merge builder (NativeMergeInsertBuilder in @lancedb/lancedb/dist/native.d.ts). */
interface NativeMerge {
  whenMatchedUpdateAll(condition?: string): NativeMerge;
  whenNotMatchedInsertAll(): NativeMerge;
  whenNotMatchedBySourceDelete(filter?: string): NativeMerge;
  useIndex(useIndex: boolean): NativeMerge;
  execute(buf: Buffer): Promise<lancedb.MergeResult>;
}

/** What of LanceDB's native table (`LocalTable.inner` in @lancedb/lancedb/dist/table.js) commits of a file use. */
interface NativeTable {
  add(buf: Buffer, mode: string): Promise<lancedb.AddResult>;
  mergeInsert(on: string[]): NativeMerge;
}

/**
 * The native table under `t`. LanceDB's JavaScript `add` and merge `execute` write the Arrow table
 * they are given to an IPC file on the calling thread and call these with it; commits here hand
 * them a file written where the rows were decoded (engine/upload.ts), so the event loop never
 * writes or copies rows.
 */
function native(t: TableHandle): NativeTable {
  const inner = (t as unknown as { inner?: Partial<NativeTable> }).inner;
  if (typeof inner?.add !== "function" || typeof inner.mergeInsert !== "function") throw new Error("@lancedb/lancedb's table no longer holds its native table as `inner`: see engine/writes.ts");
  return inner as NativeTable;
}

const bufferOf = (file: Uint8Array) => Buffer.from(file.buffer, file.byteOffset, file.byteLength);

/** Appends or overwrites with the rows of an Arrow IPC file. */
export const addFile = (t: TableHandle, file: Uint8Array, mode: "append" | "overwrite"): Promise<lancedb.AddResult> => native(t).add(bufferOf(file), mode);

/** What a merge insert does with matched, unmatched and target-only rows; `where` limits which. */
export interface MergeHow {
  updateMatched?: { where?: string | null };
  insertUnmatched?: boolean;
  deleteNotInSource?: { where?: string | null };
  useIndex?: boolean;
}

/** Counts the engine's retries of a merge insert that lost commit races (its attempts past the first). */
export const merged =
  (kind: "table" | "system" | "catalog") =>
  (r: lancedb.MergeResult): lancedb.MergeResult => {
    recordCommitRetries(kind, r.numAttempts - 1);
    return r;
  };

/** A merge insert keyed on `on`, built now and committed by the function answered, given the source rows as an Arrow IPC file. */
export function mergeRows(t: TableHandle, on: string[], how: MergeHow): (file: Uint8Array) => Promise<lancedb.MergeResult> {
  let b = native(t).mergeInsert(on);
  if (how.updateMatched) b = b.whenMatchedUpdateAll(how.updateMatched.where || undefined);
  if (how.insertUnmatched) b = b.whenNotMatchedInsertAll();
  if (how.deleteNotInSource) b = b.whenNotMatchedBySourceDelete(how.deleteNotInSource.where || undefined);
  if (how.useIndex !== undefined) b = b.useIndex(how.useIndex);
  return (file) => b.execute(bufferOf(file)).then(merged("table"));
}

/** Sets columns to SQL values in the rows `where` selects (all without it). */
export const updateRows = (t: TableHandle, valuesSql: Record<string, string>, where: string | undefined) => t.update({ valuesSql, where });

export const deleteRows = (t: TableHandle, predicate: string) => t.delete(predicate);

/** Commits a new latest version holding the content of the version `t` is checked out at. */
export const restoreVersion = (t: TableHandle) => t.restore();

/** Tries of a merge whose commit conflicted with another (see untilCommitted). */
const CONFLICT_TRIES = 5;

/**
 * A merge into a system table or the catalog, tried again when its commit lost to commits of other
 * rows (a task queued, a lease renewed, another replica's create) past LanceDB's own retries on a
 * slow store: on Azurite a cancel of a queuing backfill, and one of 20 racing creates, answered 503
 * in CI. The merge's condition (absent, at a revision, the row as read) is evaluated anew each
 * try, so a race still ends with one winner; an unconditional merge says at its call why the last
 * writer may win.
 */
export async function untilCommitted<T>(merge: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await merge();
    } catch (err) {
      if (attempt >= CONFLICT_TRIES || !(isCommitConflict(err) || isWriterContention(err))) throw err;
      await sleep(attempt * 50 + Math.random() * 50);
    }
  }
}
