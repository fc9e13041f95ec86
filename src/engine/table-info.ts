// What an open table says about itself (schema, version, rows, statistics), and planning a filter
// without running it, read through LanceDB.
import type { TableHandle } from "./tables.js";

export const tableSchema = (t: TableHandle) => t.schema();

/** The version the handle holds. */
export const tableVersion = (t: TableHandle) => t.version();

/** Rows in all, or those `filter` (SQL) selects. */
export const countRows = (t: TableHandle, filter?: string) => t.countRows(filter);

export const tableStats = (t: TableHandle) => t.stats();

/** Plans `filter` over the table: its SQL errors surface before anything runs or commits. */
export const planFilter = (t: TableHandle, filter: string) => t.query().where(filter).explainPlan();
