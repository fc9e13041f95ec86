// Operations on the server's own storage: reclaiming orphan table directories (on start, and on
// request by an admin).
import { authoriseObject } from "../auth/principal.js";
import { reclaimOrphans, type Reclaimed } from "../catalog/orphans.js";
import { log } from "../log.js";
import type { Services } from "../services.js";
import { queryOp } from "./define.js";
import { json } from "./types.js";

export async function reclaim(svc: Services, trigger: "start" | "request"): Promise<Reclaimed> {
  const scope = { root: svc.tables.root, catalog: svc.catalog, claims: svc.claims, minAgeMs: svc.config.orphanMinAgeMs };
  const result = await reclaimOrphans(scope, (location, ageMs) => log.warn("reclaimed orphan table directory", { location, ageMs, trigger }));
  log.info("orphan table directories", { trigger, removed: result.removed.length, tooYoung: result.young.length });
  return result;
}

export const reclaimOrphanDirectories = queryOp(async ({ svc, principal }) => {
  // It acts on (and lists) the whole data directory, every namespace's included.
  authoriseObject(principal, [], "admin", "reclaim acts on the whole data directory, the root namespace");
  const r = await reclaim(svc, "request");
  return json({ removed: r.removed, removed_count: r.removed.length, too_young: r.young, min_age_ms: svc.config.orphanMinAgeMs });
});
