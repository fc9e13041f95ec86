// What a shared system table offers (src/engine/system-tables.ts makes them): the shape the
// lower layers (jobs, auth, catalog) program against, with the engine handed in by src/services.ts.

/** A scalar column a condition may test; `doc` and `key` are always there. */
export interface SystemColumn {
  name: string;
  type: "string" | "number";
}

export type SystemRow = Record<string, string | number | null>;

export interface SystemTable {
  /** Rows matching `where` (SQL over the columns; all rows without it), at the latest commit. */
  select(where?: string): Promise<SystemRow[]>;
  /** Insert or replace rows by key. */
  upsert(rows: SystemRow[]): Promise<void>;
  /** Insert the rows whose key no row has; how many were inserted (a racing insert of a key loses). */
  insertIfAbsent(rows: SystemRow[]): Promise<number>;
  /**
   * Replace the rows (by key) whose current row matches `where` (SQL over `target.<column>`); how
   * many were replaced. Racing conditional updates of a row: one sees the other's commit and its
   * condition is tested against it.
   */
  updateIf(rows: SystemRow[], where: string): Promise<number>;
  /** Delete the rows matching `where` (nothing is committed when none do). */
  deleteWhere(where: string): Promise<void>;
}

/** A SQL string literal. */
export const sqlString = (s: string) => `'${s.replace(/'/g, "''")}'`;


/** Opens (creating on first use) the system table `name` with these condition columns. */
export interface SystemTables {
  open(name: string, columns: SystemColumn[]): Promise<SystemTable>;
  /** Start no more background compactions and wait for those running: nothing writes after it returns. */
  close(): Promise<void>;
}
