// What an open table says about itself (schema, version, rows, statistics), and planning a filter
// without running it, read through LanceDB.
import type { Bound } from "./deadline.js";
import { rowsIn } from "./ipc-out.js";
import { boundedExecute } from "./query.js";
import { orCleaned } from "./query-errors.js";
import { readSchema } from "./schema-ipc.js";
import type { TableHandle } from "./tables.js";

export const tableSchema = readSchema;

/** The version the handle holds. */
export const tableVersion = (t: TableHandle) => t.version();

/** Rows in all, or those `filter` (SQL) selects. */
export const countRows = (t: TableHandle, filter?: string) => t.countRows(filter).catch(orCleaned(t));

/**
 * Rows `filter` selects, counted from a stream of their row ids that stops at `b`'s deadline or
 * when the client leaves: LanceDB's own count takes neither and runs to its end. The stream keeps
 * the engine's batch size, whose filter is the most the engine computes after a stop (at 32,768
 * rows a batch a costly filter ran 12 s past it); its batches cost more than LanceDB's count
 * (300,000 rows by a cheap filter: 28 ms against 11 ms, measured).
 */
export async function countMatching(t: TableHandle, filter: string, b: Bound): Promise<number> {
  try {
    const next = await boundedExecute(t.query().where(filter).withRowId().select([]), b);
    let rows = 0;
    for (let buf = await next(); buf; buf = await next()) rows += rowsIn(buf);
    return rows;
  } catch (err) {
    return orCleaned(t)(err);
  }
}

export const tableStats = (t: TableHandle) => t.stats();

/** Plans `filter` over the table: its SQL errors surface before anything runs or commits. */
export const planFilter = (t: TableHandle, filter: string) => t.query().where(filter).explainPlan();
