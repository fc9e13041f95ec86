// When maintenance runs by itself: after a data commit (subscribed to the after-commit event), and on a
// periodic sweep of every table (for tables other processes write). A table branch is maintained
// when its small fragments, the rows its indexes do not cover, its share of deleted rows or the
// segments of a vector index reach a threshold (deployment
// flags; a table's properties may override them or turn automatic maintenance "off"), and after a
// backfill ended when any index misses a row (a backfill rewrites the rows it computes, which its
// indexes then do not cover). At most one maintenance job per table branch is active; the next
// one may start as soon as the last ended while a threshold is still passed, but a table branch
// spends at most --maintenance-max-share of its time in automatic jobs, so a write stream cannot
// keep one busy.
import type { Catalog, Entry } from "../../catalog/catalog.js";
import { spacingKey, type CommitSpacing } from "../../engine/commit-spacing.js";
import { exportFigures, tableFigures, type TableFigures } from "../../engine/maintenance.js";
import type { MaintenanceProgress } from "../../../workers/processes/maintenance.js";
import { tableVersion } from "../../engine/table-info.js";
import type { Change } from "../../engine/commits.js";
import type { Tables } from "../../engine/tables.js";
import { log } from "../../log.js";
import { sameId } from "../../catalog/names.js";
import { recordMaintenanceDue } from "../../metrics.js";
import type { ApiError } from "../../errors.js";
import { autoOwner, type Jobs } from "../jobs.js";
import { BACKFILL, BACKFILL_TASK, type BackfillSpec } from "../kinds/backfill.js";
import { activeMaintenance, maintenanceExclusive, MAINTENANCE, type MaintenanceSpec } from "../kinds/maintenance.js";
import type { Trigger } from "./after-commit.js";

/** Table properties that override the deployment's settings for one table. */
const PROPERTY_SWITCH = "quiver.maintenance";
const PROPERTY_SMALL_FRAGMENTS = "quiver.maintenance.small_fragments";
const PROPERTY_UNINDEXED_ROWS = "quiver.maintenance.unindexed_rows";
const PROPERTY_DELETED_PERCENT = "quiver.maintenance.deleted_percent";

export interface AutoMaintenanceSettings {
  enabled: boolean;
  smallFragments: number;
  unindexedRows: number;
  /** Deleted rows, as a percentage of the rows their fragments hold, that set off maintenance. */
  deletedPercent: number;
  cooldownMs: number;
  /** The most of its time, in percent, a table branch spends in automatic jobs. */
  maxSharePercent: number;
  /** Segments a vector index may have before a job rebuilds it (0: never). */
  maxIndexSegments: number;
  sweepMs: number;
}

/** Data writes: maintenance's own commits and index builds do not set it off again. */
const MAINTAIN_AFTER: ReadonlySet<Change> = new Set(["insert", "merge_insert", "update", "delete", "backfill"]);

/** The settings for one table: its properties over the deployment's. */
function settingsFor(entry: Entry, s: AutoMaintenanceSettings): AutoMaintenanceSettings {
  const p = entry.properties ?? {};
  const int = (v: string | undefined, def: number) => (v !== undefined && /^\d+$/.test(v) ? Number(v) : def);
  const sw = p[PROPERTY_SWITCH];
  return {
    ...s,
    enabled: sw === "off" ? false : sw === "on" ? true : s.enabled,
    smallFragments: int(p[PROPERTY_SMALL_FRAGMENTS], s.smallFragments),
    unindexedRows: int(p[PROPERTY_UNINDEXED_ROWS], s.unindexedRows),
    deletedPercent: int(p[PROPERTY_DELETED_PERCENT], s.deletedPercent),
  };
}

// A commit arms a check this long after it, so a stream of writes costs one look per interval;
// while a job of the table branch is active (maintenance, or the backfill whose end is awaited),
// the check looks again this often, from the job list it already has.
const CHECK_DELAY_MS = 1000;
// While a maintenance job of the table branch runs, its end is looked for this often (in the job
// list this replica holds): under a write stream, every moment between a job's end and the next
// start adds small fragments that every query searches one by one (docs/maintenance.md).
const JOB_END_POLL_MS = 100;

export function autoMaintenance(deps: { jobs: Jobs; tables: Tables; catalog: Catalog; settings: AutoMaintenanceSettings; spacing: CommitSpacing }): Trigger {
  const timers = new Map<string, NodeJS.Timeout>();
  const lastStart = new Map<string, number>();
  /** Per table branch: the last maintenance job seen (its end sets when the next may start). */
  const lastJob = new Map<string, string>();
  /** Per table branch: when the next automatic job may start, by the time share. */
  const notBefore = new Map<string, number>();
  /** Table branches a backfill wrote since their last maintenance. */
  const rewritten = new Set<string>();
  /** Per table branch: since when a threshold is passed. */
  const dueSince = new Map<string, number>();
  /** Per table branch whose last maintenance job changed nothing: the version then (a job runs again only once something was committed since). */
  const leftAt = new Map<string, number>();
  const keyOf = (entry: Entry, branch: string | null) => spacingKey(entry.objectId, branch);
  const share = Math.min(100, Math.max(1, deps.settings.maxSharePercent)) / 100;

  const arm = (entry: Entry, branch: string | null, delay: number) => {
    const k = keyOf(entry, branch);
    if (timers.has(k)) return;
    const timer = setTimeout(() => {
      timers.delete(k);
      check(entry, branch).catch((err: unknown) => {
        // A table dropped since the commit that armed this look has nothing to maintain: no warning.
        const level = deps.catalog.get(entry.id) ? "warn" : "debug";
        log[level]("automatic maintenance not started", { table: entry.objectId, error: String(err) });
      });
    }, delay);
    timer.unref();
    timers.set(k, timer);
  };

  const backfilling = (id: readonly string[], branch: string | null) =>
    deps.jobs.active().some((r) => (r.operation === BACKFILL || r.operation === BACKFILL_TASK) && sameId(r.table, id) && (r.spec as BackfillSpec).branch === branch);

  /**
   * Once the last job seen has ended: the next may start after its duration times (1 - share) /
   * share. Whether it just ended having changed none of the figures a threshold reads.
   */
  async function paced(k: string): Promise<boolean> {
    const id = lastJob.get(k);
    if (id === undefined) return false;
    const r = await deps.jobs.get(id);
    if (!r || r.status === "Queued" || r.status === "Running") return false;
    lastJob.delete(k);
    const { before, after, rebuilt } = (r.progress ?? {}) as MaintenanceProgress;
    // An index rebuild is paced by the folds that split the index (one per --maintenance-max-index-segments of them), not by the share.
    const rebuilding = (rebuilt ?? []).reduce((ms, x) => ms + x.ms, 0);
    if (r.startedAt !== undefined && r.finishedAt !== undefined) notBefore.set(k, r.finishedAt + (Math.max(0, r.finishedAt - r.startedAt - rebuilding) * (1 - share)) / share);
    const unindexed = (f: TableFigures) => Object.values(f.unindexed_rows).reduce((a, b) => a + b, 0);
    const idle = before !== undefined && after !== undefined && before.small_fragments === after.small_fragments && unindexed(before) === unindexed(after) && before.deleted_rows === after.deleted_rows;
    if (!idle) leftAt.delete(k);
    return idle;
  }

  async function check(entry: Entry, branch: string | null): Promise<void> {
    const current = deps.catalog.get(entry.id);
    if (!current) throw new Error("the table was dropped");
    const k = keyOf(current, branch);
    const s = settingsFor(current, deps.settings);
    if (!s.enabled || !current.location) return deps.spacing.seen(k, 0, 0);
    const active = activeMaintenance(deps.jobs, current.id, branch);
    if (active) {
      if ((active.progress as MaintenanceProgress | undefined)?.phase === "rebuilding") deps.spacing.rebuilding(k);
      lastJob.set(k, active.id);
      return arm(current, branch, JOB_END_POLL_MS);
    }
    // Nothing is compacted under a running backfill: a compaction moves the rows it has read, and
    // each of its commits must then find them again (a split backfill on Azurite gave up on a
    // checkpoint's rows after five rounds). Once it ended, the rows it rewrote are folded into the
    // indexes.
    if (backfilling(current.id, branch)) return arm(current, branch, CHECK_DELAY_MS);
    const idle = await paced(k);
    const afterBackfill = rewritten.has(k);
    const table = await deps.tables.open(current, { branch, fresh: true });
    const [f, version] = await Promise.all([tableFigures(table), tableVersion(table)]);
    exportFigures(current.objectId, branch, f);
    // The group commit spaces the table branch's commits while its small fragments are past the threshold.
    deps.spacing.seen(k, f.small_fragments, s.smallFragments);
    if (idle) leftAt.set(k, version);
    const unindexed = Object.values(f.unindexed_rows).reduce((a, b) => a + b, 0);
    const deletedPercent = f.deleted_rows === 0 ? 0 : (100 * f.deleted_rows) / (f.rows + f.deleted_rows);
    const due =
      (s.smallFragments > 0 && f.small_fragments >= s.smallFragments) ||
      (s.maxIndexSegments > 0 && Object.values(f.index_segments).some((n) => n > s.maxIndexSegments)) ||
      (s.unindexedRows > 0 && unindexed >= s.unindexedRows) ||
      (s.deletedPercent > 0 && deletedPercent >= s.deletedPercent) ||
      (afterBackfill && unindexed > 0);
    if (afterBackfill) rewritten.delete(k);
    if (!due) {
      dueSince.delete(k);
      recordMaintenanceDue(current.objectId, branch, null);
      return;
    }
    const since = dueSince.get(k) ?? Date.now();
    dueSince.set(k, since);
    recordMaintenanceDue(current.objectId, branch, since);
    // Past a threshold that the last job could not bring it under (it changed nothing: Lance leaves
    // fragments folded into the index by different jobs uncompacted, docs/maintenance.md), with
    // nothing committed since: another job would do the same again. The lag gauge keeps growing,
    // which is what an operator should see.
    if (!afterBackfill && leftAt.has(k) && version <= leftAt.get(k)!) return;
    const wait = nextStart(k) - Date.now();
    if (wait > 0) {
      if (afterBackfill) rewritten.add(k);
      return arm(current, branch, wait);
    }
    lastStart.set(k, Date.now());
    const spec: MaintenanceSpec = { branch, cleanup: true, auto: true };
    const job = await deps.jobs.submit(MAINTENANCE, current.id, spec, autoOwner(current.id), maintenanceExclusive(current.id, branch)).catch((err: unknown) => {
      // Another replica started one a moment ago: follow that one.
      if ((err as ApiError).status !== 409) throw err;
    });
    if (job) lastJob.set(k, job.id);
    // Looks again once it ended, in case the stream passed a threshold meanwhile.
    arm(current, branch, JOB_END_POLL_MS);
  }

  /** When the next automatic job of table branch `k` may start. */
  const nextStart = (k: string) => Math.max((lastStart.get(k) ?? 0) + deps.settings.cooldownMs, notBefore.get(k) ?? 0);

  // A look decides when a job may start (and keeps the lag gauge): one that must wait arms the next
  // look for then, and commits meanwhile find that look armed.
  const sweep = deps.settings.sweepMs > 0
    ? setInterval(() => {
        for (const entry of deps.catalog.allTables()) if (entry.location) arm(entry, null, CHECK_DELAY_MS);
      }, deps.settings.sweepMs)
    : null;
  sweep?.unref();

  return {
    committed({ table, branch, change }) {
      if (!MAINTAIN_AFTER.has(change) || !settingsFor(table, deps.settings).enabled) return;
      if (change === "backfill") rewritten.add(keyOf(table, branch));
      arm(table, branch, CHECK_DELAY_MS);
    },
    close() {
      if (sweep) clearInterval(sweep);
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
