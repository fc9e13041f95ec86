// A child process that maintains one table branch (started by src/jobs/kinds/maintenance.ts) at
// the lowest CPU priority, so compaction and index upkeep yield to the server's queries. Lance's
// commit conflict handling lets the server's writes land while it works: a compaction or index
// update that conflicts with a write is retried by the engine or fails without losing the write.
// Re-running it after a crash is safe: each step commits atomically, and a rerun finds less to do.
import type { Entry } from "../../src/catalog/catalog.js";
import { cleanupCutoff, optimizeTable, tableFigures, type OptimizeResult, type TableFigures } from "../../src/engine/maintenance.js";
import { openTables } from "../../src/engine/tables.js";
import { CHECK_EVERY_READ } from "../../src/util/keep-fresh.js";
import { serveJob } from "./job-process.js";

export interface MaintenanceRequest {
  root: string;
  /** The object store options for `root` (they may hold keys: sent in the request, never in argv or logs). */
  storage?: Record<string, string>;
  entry: Entry;
  branch: string | null;
  /**
   * Remove versions older than `retainMs` (or beyond the newest `maxVersions`, 0: no such bound) and
   * committed before `keptFrom` (ms since the epoch; null: no bound); null: keep every version.
   */
  cleanup: { retainMs: number; maxVersions: number; keptFrom: number | null } | null;
}

export interface MaintenanceProgress {
  phase?: "optimizing" | "done";
  before?: TableFigures;
  after?: TableFigures;
  result?: OptimizeResult;
}

export type MaintenanceMessage = { type: "progress"; progress: MaintenanceProgress };

serveJob<MaintenanceRequest, MaintenanceMessage>(async (req, { send, stopping }) => {
  const tables = await openTables(req.root, CHECK_EVERY_READ, req.storage);
  const table = await tables.open(req.entry, { branch: req.branch, fresh: true });
  await send({ type: "progress", progress: { phase: "optimizing", before: await tableFigures(table) } });
  if (stopping()) return;
  const c = req.cleanup;
  const result = await optimizeTable(table, c === null ? null : () => cleanupCutoff(table, c.retainMs, c.keptFrom ?? Infinity, c.maxVersions));
  await send({ type: "progress", progress: { phase: "done", result, after: await tableFigures(table) } });
});
