// When maintenance runs by itself: after a data commit (subscribed to the after-commit event), and on a
// periodic sweep of every table (for tables other processes write). A table branch is maintained
// when its small fragments, the rows its indexes do not cover or its share of deleted rows reach a threshold (deployment
// flags; a table's properties may override them or turn automatic maintenance "off"). At most one
// maintenance job per table branch is active, and one starts at most once per cooldown, so a write
// stream cannot pile up jobs.
import type { Catalog, Entry } from "../../catalog/catalog.js";
import { exportFigures, tableFigures } from "../../engine/maintenance.js";
import type { Change } from "../../engine/commits.js";
import type { Tables } from "../../engine/tables.js";
import { log } from "../../log.js";
import { autoOwner, type Jobs } from "../jobs.js";
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
  sweepMs: number;
}

/** Data writes: maintenance's own commits and index builds do not set it off again. */
const MAINTAIN_AFTER: ReadonlySet<Change> = new Set(["insert", "merge_insert", "update", "delete"]);

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

// A commit arms a check this long after it, so a stream of writes costs one look per interval.
const CHECK_DELAY_MS = 1000;

export function autoMaintenance(deps: { jobs: Jobs; tables: Tables; catalog: Catalog; settings: AutoMaintenanceSettings }): Trigger {
  const timers = new Map<string, NodeJS.Timeout>();
  const lastStart = new Map<string, number>();
  const keyOf = (entry: Entry, branch: string | null) => `${entry.objectId}\u0000${branch ?? ""}`;

  const arm = (entry: Entry, branch: string | null, delay: number) => {
    const k = keyOf(entry, branch);
    if (timers.has(k)) return;
    const timer = setTimeout(() => {
      timers.delete(k);
      check(entry, branch).catch((err: unknown) => log.warn("automatic maintenance not started", { table: entry.objectId, error: String(err) }));
    }, delay);
    timer.unref();
    timers.set(k, timer);
  };

  async function check(entry: Entry, branch: string | null): Promise<void> {
    const current = deps.catalog.get(entry.id) ?? entry;
    const s = settingsFor(current, deps.settings);
    if (!s.enabled || !current.location) return;
    if (activeMaintenance(deps.jobs, current.id, branch)) return arm(current, branch, s.cooldownMs);
    const f = await tableFigures(await deps.tables.open(current, { branch, fresh: true }));
    exportFigures(current.objectId, branch, f);
    const unindexed = Object.values(f.unindexed_rows).reduce((a, b) => a + b, 0);
    const deletedPercent = f.deleted_rows === 0 ? 0 : (100 * f.deleted_rows) / (f.rows + f.deleted_rows);
    const due =
      (s.smallFragments > 0 && f.small_fragments >= s.smallFragments) ||
      (s.unindexedRows > 0 && unindexed >= s.unindexedRows) ||
      (s.deletedPercent > 0 && deletedPercent >= s.deletedPercent);
    if (!due) return;
    lastStart.set(keyOf(current, branch), Date.now());
    const spec: MaintenanceSpec = { branch, cleanup: true, auto: true };
    await deps.jobs.submit(MAINTENANCE, current.id, spec, autoOwner(current.id), maintenanceExclusive(current.id, branch));
  }

  const wait = (entry: Entry, branch: string | null) => Math.max(CHECK_DELAY_MS, (lastStart.get(keyOf(entry, branch)) ?? 0) + deps.settings.cooldownMs - Date.now());

  const sweep = deps.settings.sweepMs > 0
    ? setInterval(() => {
        for (const entry of deps.catalog.allTables()) if (entry.location) arm(entry, null, wait(entry, null));
      }, deps.settings.sweepMs)
    : null;
  sweep?.unref();

  return {
    committed({ table, branch, change }) {
      if (!MAINTAIN_AFTER.has(change) || !settingsFor(table, deps.settings).enabled) return;
      arm(table, branch, wait(table, branch));
    },
    close() {
      if (sweep) clearInterval(sweep);
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
