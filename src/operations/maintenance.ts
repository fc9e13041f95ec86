// Maintenance on request: `POST /v1/table/{id}/optimize` queues a maintenance job (compaction,
// index upkeep and, unless the body says `cleanup: false`, version cleanup) and answers 202 with
// its id; `stats` shows what maintenance looks at. One maintenance job per table and branch is active at a time: another is a 409 naming it.
import type * as lancedb from "@lancedb/lancedb";
import type { Entry } from "../catalog/catalog.js";
import { requireTable } from "../catalog/lookup.js";
import { sameId } from "../catalog/names.js";
import { bytesOnDisk, tableFigures } from "../engine/maintenance.js";
import { tableDir } from "../engine/versions.js";
import { ApiError, Code } from "../errors.js";
import { activeMaintenance, MAINTENANCE, type MaintenanceSpec } from "../jobs/kinds/maintenance.js";
import { OptimizeTable } from "../schemas/maintenance.js";
import { jsonOp } from "./define.js";
import { mainOr } from "./indexes.js";
import { openAt } from "./table-ref.js";
import type { Services } from "../services.js";
import { json } from "./types.js";

export const optimizeTable = jsonOp(OptimizeTable, async ({ id, body, svc, principal }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch = mainOr(body.branch);
  await openAt(svc, entry, { branch });
  const running = activeMaintenance(svc.jobs, entry.id, branch);
  if (running) throw new ApiError(Code.ConcurrentModification, `table ${JSON.stringify(entry.objectId)} is already being maintained (job ${running.id})`);
  const spec: MaintenanceSpec = { branch, cleanup: body.cleanup ?? true, auto: false };
  const rec = await svc.jobs.submit(MAINTENANCE, entry.id, spec, principal.key);
  return json({ job_id: rec.id }, 202);
});

/** Quiver's maintenance figures of a table branch, shown beside the spec's fields of `stats`. */
export async function maintenanceFigures(svc: Services, entry: Entry, table: lancedb.Table, branch: string | null) {
  const f = await tableFigures(table);
  const last = svc.jobs
    .all()
    .filter((r) => r.operation === MAINTENANCE && r.status === "Succeeded" && sameId(r.table, entry.id) && (r.spec as MaintenanceSpec).branch === branch)
    .reduce<number | undefined>((at, r) => Math.max(at ?? 0, r.finishedAt ?? 0), undefined);
  return {
    small_fragments: f.small_fragments,
    unindexed_rows: f.unindexed_rows,
    versions_kept: f.versions,
    bytes_on_disk: await bytesOnDisk(tableDir(svc.tables.root, entry)),
    last_maintenance: last === undefined ? null : new Date(last).toISOString(),
  };
}
