// Which versions of a table branch a cleanup must keep, beyond the retention window: promises
// Quiver made elsewhere. Lance itself keeps the current version and the versions branches start
// from; it refuses a cleanup that would remove a tagged version, so tags are kept here. A
// materialized view's last refreshed source version (and a version it is pinned to) is kept so its next refresh stays incremental,
// and a version read at explicitly within the read lease is kept for the read in progress. While
// other work runs on the table (a backfill, an index build, a refresh of a view it feeds), nothing
// is removed: such a job may read any version it started from. A replica's serving pin (the
// version its saved serving index answers at) is kept for --serving-pin-ms after that version's
// commit, then deleted: a replica that never comes back holds no versions for ever.
import type { Entry } from "../catalog/catalog.js";
import { sameId } from "../catalog/names.js";
import { deleteTag, isServingPin, listTags, tagBranch } from "../engine/refs.js";
import { listVersions } from "../engine/version-list.js";
import { log } from "../log.js";
import { namedBranch, type TableHandle } from "../engine/tables.js";
import type { ReadLeases } from "../engine/read-leases.js";
import type { Views } from "./views.js";

/** What a cleanup needs to know of another job (a job record has these fields). */
export interface ActiveJob {
  id: string;
  operation: string;
  table: string[];
}

export interface RetentionInputs {
  views: Views;
  leases: ReadLeases;
  /** Queued and Running jobs other than maintenance. */
  otherJobs: () => ActiveJob[];
  /** How long after its version's commit a replica's serving pin holds (--serving-pin-ms). */
  servingPinMs: number;
}

export type Kept = { versions: number[] } | { busy: string };

/** The versions of `entry` on `branch` a cleanup keeps, or why no cleanup may run now. */
export async function keptVersions(inputs: RetentionInputs, entry: Entry, tableDir: string, table: TableHandle, branch: string | null): Promise<Kept> {
  const feeds = await inputs.views.ofSource(entry.id);
  const busy = inputs
    .otherJobs()
    .find((r) => sameId(r.table, entry.id) || feeds.some((v) => sameId(r.table, v.id)));
  if (busy) return { busy: `job ${busy.id} (${busy.operation}) is active on the table` };
  const on = namedBranch(branch);
  const kept: number[] = [];
  const tags = await listTags(table);
  let committed: Map<number, number> | null = null;
  for (const [name, t] of Object.entries(tags)) {
    if (isServingPin(name)) {
      committed ??= new Map((await listVersions(table)).map((v) => [v.version, v.timestamp.getTime()]));
      if ((committed.get(t.version) ?? 0) < Date.now() - inputs.servingPinMs) {
        log.info("a replica's serving pin is past --serving-pin-ms: deleted", { table: entry.objectId, tag: name, version: t.version });
        await deleteTag(table, name).catch((err: unknown) => log.warn("could not delete a serving pin", { table: entry.objectId, tag: name, error: String(err) }));
        continue;
      }
    }
    if ((await tagBranch(tableDir, name)) === on) kept.push(t.version);
  }
  for (const v of feeds) {
    const source = v.definition.source!;
    if (namedBranch(source.branch) !== on) continue;
    if (v.lastRefresh) kept.push(v.lastRefresh.sourceVersion);
    if (source.version !== null) kept.push(source.version);
  }
  kept.push(...inputs.leases.held(entry.location ?? entry.objectId, on ?? null));
  return { versions: kept };
}
