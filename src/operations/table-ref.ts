// Opening the table a request names, at the requested version or branch, and what a reference to
// it may not do (a view is written only by its refresh).
import type { Entry } from "../catalog/catalog.js";
import { requireTable, tableNotFound } from "../catalog/lookup.js";
import { resolveLocation } from "../catalog/locations.js";
import { hasVersions } from "../engine/datasets.js";
import { errorText } from "../engine/messages.js";
import { refError } from "../engine/refs.js";
import { namedBranch, type TableHandle } from "../engine/tables.js";
import { ApiError, Code, invalid } from "../errors.js";
import { viewOf } from "../compute/views.js";
import type { Services } from "../services.js";

/** A declared table has a catalog entry but no dataset until it is created with data. */
async function declaredOnly(svc: Services, entry: Entry): Promise<ApiError | null> {
  if (!entry.location || (await hasVersions(resolveLocation(svc.tables.root, entry.location)))) return null;
  return new ApiError(Code.TableNotFound, `table ${JSON.stringify(entry.objectId)} is declared, no data yet (create it with data first)`);
}

export interface At {
  version?: number | null;
  branch?: string | null;
}

/** Open a table at a version and/or branch; unknown ones are 404 with upstream's codes. */
export async function openAt(svc: Services, entry: Entry, at: At = {}): Promise<TableHandle> {
  const version = at.version ?? undefined;
  const branch = namedBranch(at.branch);
  if (version !== undefined) svc.readLeases.touch(entry.location ?? entry.objectId, branch ?? null, version);
  try {
    return await svc.tables.open(entry, { version, branch });
  } catch (err) {
    const ref = refError(err, { table: entry.objectId, branch, version });
    if (ref) throw ref;
    if (/was not found|Not found/.test(errorText(err))) throw (await declaredOnly(svc, entry)) ?? tableNotFound(entry.id);
    throw err;
  }
}

/** Writes to a view are 400: its contents come from its source. */
export function refuseView(svc: Services, entry: Entry, what: string): void {
  if (viewOf(svc.views, entry)) throw invalid(`table ${JSON.stringify(entry.objectId)} is a materialized view; ${what} changes it only by a refresh`);
}

/** The table named by `id`, opened at `at`: the pair most operations start from. */
export async function openTable(svc: Services, id: readonly string[], at: At = {}) {
  const entry = await requireTable(svc.catalog, id);
  return { entry, table: await openAt(svc, entry, at) };
}
