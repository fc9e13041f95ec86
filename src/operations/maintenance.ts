// Maintenance on request: `POST /v1/table/{id}/optimize` queues a maintenance job (compaction,
// index upkeep and, unless the body says `cleanup: false`, version cleanup) and answers 202 with
// its id; `stats` shows what maintenance looks at. One maintenance job per table and branch is active at a time: another is a 409 naming it.
import { requireTable } from "../catalog/lookup.js";
import { mainOr } from "../engine/tables.js";
import { ApiError, Code } from "../errors.js";
import { maintenanceExclusive, MAINTENANCE, type MaintenanceSpec } from "../jobs/kinds/maintenance.js";
import { OptimizeTable } from "../schemas/maintenance.js";
import { jsonOp } from "./define.js";
import { openAt } from "./table-ref.js";
import { json } from "./types.js";

export const optimizeTable = jsonOp(OptimizeTable, async ({ id, body, svc, principal }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch = mainOr(body.branch);
  await openAt(svc, entry, { branch });
  const spec: MaintenanceSpec = { branch, cleanup: body.cleanup ?? true, auto: false };
  const rec = await svc.jobs.submit(MAINTENANCE, entry.id, spec, principal.key, maintenanceExclusive(entry.id, branch));
  return json({ job_id: rec.id }, 202);
});
