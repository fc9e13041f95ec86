// What the after-commit event sets off: follow-up backfills of auto_backfill columns and
// refreshes of auto_refresh views. src/services.ts subscribes each to src/engine/commits.ts.
import type { Catalog, Entry } from "../../catalog/catalog.js";
import { requireTable } from "../../catalog/lookup.js";
import { sameId } from "../../catalog/names.js";
import { fromFieldMetadata, runnable } from "../../compute/virtual-column.js";
import type { Views } from "../../compute/views.js";
import type { Change, CommitSubscriber } from "../../engine/commits.js";
import { backfillKey } from "../../engine/computed-columns.js";
import type { Tables } from "../../engine/tables.js";
import { countRows, tableSchema, tableVersion } from "../../engine/table-info.js";
import type { ApiError } from "../../errors.js";
import { log } from "../../log.js";
import { BACKFILL, backfillExclusive, backfillSpec, type BackfillSpec } from "../kinds/backfill.js";
import { activeRefresh, definerRefusal, lastRefreshJob, refreshExclusive, refreshSpec, VIEW_REFRESH, type ViewRefreshDeps } from "../kinds/view-refresh.js";
import { autoOwner, type Jobs } from "../jobs.js";

export interface Trigger {
  /** Subscribed to the after-commit event (src/engine/commits.ts). */
  committed: CommitSubscriber;
  close(): void;
}

/** Commits that write values an auto_backfill column is computed from. */
const BACKFILL_AFTER: ReadonlySet<Change> = new Set(["insert", "merge_insert", "update"]);

/**
 * Follow-up backfills of `auto_backfill` columns: after a write, wait `delayMs` for more writes,
 * then queue a backfill of each such column (default rows: missing or stale), one at a time per
 * table and branch: two running at once would each find the rows the other just wrote changed
 * since it read them, and leave them for later. While any backfill of the table is active, check
 * again after another delay rather than pile up jobs.
 */
export function autoBackfill(deps: { jobs: Jobs; tables: Tables; workers: number; delayMs: number }): Trigger {
  const timers = new Map<string, NodeJS.Timeout>();
  /** Per table and branch: the auto columns a write since left to backfill. */
  const pending = new Map<string, Set<string>>();
  /** The set for `k`; a write adds to the one a running follow-up holds, never a new one in its place. */
  const pendingOf = (k: string) => pending.get(k) ?? pending.set(k, new Set<string>()).get(k)!;
  /**
   * Per table and branch, a follow-up under way. Two at once each passed the busy check before the
   * other's job was queued (two backfills ran together, seen in CI), and the one that ended last
   * dropped the columns a write had left meanwhile (its rows were never computed).
   */
  const following = new Set<string>();
  const keyOf = (entry: Entry, branch: string | null) => `${entry.objectId}\u0000${branch ?? ""}`;
  const arm = (entry: Entry, branch: string | null) => {
    const k = keyOf(entry, branch);
    if (timers.has(k)) return;
    const timer = setTimeout(() => {
      timers.delete(k);
      follow(entry, branch).catch((err: unknown) => log.warn("auto backfill not started", { table: entry.objectId, error: String(err) }));
    }, deps.delayMs);
    timer.unref();
    timers.set(k, timer);
  };
  const busy = (entry: Entry, branch: string | null) =>
    deps.jobs.active().some((r) => r.operation === BACKFILL && sameId(r.table, entry.id) && (r.spec as BackfillSpec).branch === branch);
  async function follow(entry: Entry, branch: string | null): Promise<void> {
    const k = keyOf(entry, branch);
    if (following.has(k) || busy(entry, branch)) return arm(entry, branch);
    following.add(k);
    try {
      await queueNext(entry, branch, k);
    } finally {
      following.delete(k);
    }
  }
  /** Queue a backfill of the next column left to backfill; arm again while any is left. */
  async function queueNext(entry: Entry, branch: string | null, k: string): Promise<void> {
    const t = await deps.tables.open(entry, { branch, fresh: true });
    const fields = (await tableSchema(t)).fields;
    const todo = pendingOf(k);
    for (const f of fields) {
      if (!todo.delete(f.name)) continue;
      const vc = fromFieldMetadata(f.name, f.metadata);
      if (!vc?.autoBackfill || !runnable(vc)) continue;
      const key = runnable(vc) === "sql" ? null : backfillKey(fields);
      if (runnable(vc) !== "sql" && !key) continue;
      const submitted = await deps.jobs.submit(BACKFILL, entry.id, backfillSpec(vc, branch, key, {}, deps.workers, true), autoOwner(entry.id), backfillExclusive(entry.id, vc.column, branch)).catch((err: unknown) => {
        // Another replica backfills the column now: follow again once it is done.
        if ((err as ApiError).status !== 409) throw err;
        todo.add(f.name);
      });
      if (submitted) break;
    }
    if (todo.size > 0) arm(entry, branch);
    else pending.delete(k);
  }
  return {
    async committed({ table, branch, change }) {
      if (!BACKFILL_AFTER.has(change)) return;
      const fields = (await deps.tables.schemaOf(table, await deps.tables.open(table, { branch }))).fields;
      const auto = fields.filter((f) => fromFieldMetadata(f.name, f.metadata)?.autoBackfill).map((f) => f.name);
      if (auto.length === 0) return;
      const todo = pendingOf(keyOf(table, branch));
      for (const name of auto) todo.add(name);
      arm(table, branch);
    },
    close() {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}

/**
 * Commits that change a source's rows. Inserts, merges and updates are counted afterwards by the
 * rows' last-updated version; the others count their own rows (all of them when unknown).
 */
const REFRESH_AFTER: ReadonlySet<Change> = new Set(["insert", "merge_insert", "update", "delete", "restore", "version", "overwrite"]);
const COUNTED_LATER: ReadonlySet<Change> = new Set(["insert", "merge_insert", "update"]);

/**
 * Refreshes of `auto_refresh` views: after a write to their source, once at least `minRows` source
 * rows changed since the view's last refresh, and at most once per `cooldownMs` per view; while a
 * refresh of the view is active, the check repeats after the cooldown instead of piling up jobs.
 */
export function autoRefresh(deps: {
  jobs: Jobs;
  tables: Tables;
  views: Views;
  catalog: Catalog;
  workers: number;
  minRows: number;
  cooldownMs: number;
  credential: ViewRefreshDeps["credential"];
}): Trigger {
  const timers = new Map<string, NodeJS.Timeout>();
  const lastStart = new Map<string, number>();
  // Rows changed by commits the last-updated versions do not show (deletes, restores), per view.
  const uncounted = new Map<string, number>();
  // Per view, a check under way: two at once each passed the active-refresh check before the
  // other's job was queued, and the second was refused (409), a warning per write.
  const checking = new Set<string>();
  // A view that cannot be refreshed now is looked at again after the cooldown, and no sooner than
  // this: a cooldown of 0 would otherwise look every turn of the event loop while a refresh runs.
  const again = Math.max(deps.cooldownMs, 100);
  const arm = (location: string, delay: number) => {
    if (timers.has(location)) return;
    const timer = setTimeout(() => {
      timers.delete(location);
      if (checking.has(location)) return arm(location, again);
      checking.add(location);
      check(location)
        .catch((err: unknown) => log.warn("auto refresh not started", { view: location, error: String(err) }))
        .finally(() => checking.delete(location));
    }, delay);
    timer.unref();
    timers.set(location, timer);
  };
  async function changedRows(location: string): Promise<number> {
    const v = (await deps.views.get(location))!;
    const since = v.lastRefresh?.sourceVersion;
    if (since === undefined) return Infinity;
    const source = await requireTable(deps.catalog, v.definition.source!.table);
    const t = await deps.tables.open(source, { branch: v.definition.source!.branch, fresh: true });
    if ((await tableVersion(t)) === since) return 0;
    return countRows(t, `_row_last_updated_at_version > ${since}`).catch(() => Infinity);
  }
  async function check(location: string): Promise<void> {
    const v = await deps.views.get(location);
    if (!v) return;
    if (activeRefresh(deps.jobs, v.id)) return arm(location, again);
    // A definer refused once stops the automatic refreshes: one failed job says why, not one per write.
    const refusal = definerRefusal(v, deps.credential);
    if (refusal !== null && (await lastRefreshJob(deps.jobs, v.id))?.error === refusal) return;
    if ((uncounted.get(location) ?? 0) + (await changedRows(location)) < deps.minRows) return;
    uncounted.delete(location);
    lastStart.set(location, Date.now());
    await deps.jobs.submit(VIEW_REFRESH, v.id, refreshSpec({}, deps.workers, true), v.definer?.key ?? autoOwner(v.id), refreshExclusive(v.id)).catch((err: unknown) => {
      // Another replica refreshes the view now: look again after the cooldown.
      if ((err as ApiError).status !== 409) throw err;
      arm(location, again);
    });
  }
  return {
    async committed({ table, branch, change, rows }) {
      if (!REFRESH_AFTER.has(change)) return;
      for (const v of await deps.views.ofSource(table.id)) {
        if (!v.definition.autoRefresh || (v.definition.source!.branch ?? null) !== branch) continue;
        if (!COUNTED_LATER.has(change)) uncounted.set(v.location, (uncounted.get(v.location) ?? 0) + (rows ?? Infinity));
        const wait = Math.max(0, (lastStart.get(v.location) ?? 0) + deps.cooldownMs - Date.now());
        arm(v.location, wait);
      }
    },
    close() {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
