// Opening the table a request names, at the requested version or branch, and what a reference to
// it may not do (a view is written only by its refresh).
import type { Entry } from "../catalog/catalog.js";
import { requireTable, tableNotFound } from "../catalog/lookup.js";
import { resolveLocation } from "../catalog/locations.js";
import { hasVersions } from "../engine/datasets.js";
import { errorText } from "../engine/messages.js";
import { refError } from "../engine/refs.js";
import { tableVersion } from "../engine/table-info.js";
import { namedBranch, type TableHandle } from "../engine/tables.js";
import { cleanedVersion, tableDir } from "../engine/versions.js";
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
  /** The latest main must be at least this version (a client's version token). */
  minVersion?: number;
  /** The version's files are checked against storage, not taken as last checked (a restore's). */
  recheck?: boolean;
}

/** Open a table at a version and/or branch; unknown ones are 404 with upstream's codes. */
export async function openAt(svc: Services, entry: Entry, at: At = {}): Promise<TableHandle> {
  const version = at.version ?? undefined;
  const branch = namedBranch(at.branch);
  if (version !== undefined) svc.readLeases.touch(entry.location ?? entry.objectId, branch ?? null, version);
  let table: TableHandle;
  try {
    table = await svc.tables.open(entry, { version, branch, minVersion: at.minVersion });
  } catch (err) {
    const ref = refError(err, { table: entry.objectId, branch, version });
    if (ref) throw ref;
    if (/was not found|Not found/.test(errorText(err))) throw (await declaredOnly(svc, entry)) ?? tableNotFound(entry.id);
    throw err;
  }
  if (version !== undefined && !branch) await requireReadable(svc, entry, version, at.recheck ?? false);
  return table;
}

/**
 * A version still listed whose files a cleanup removed (engine/versions.ts, goneFile) is not found,
 * as a version the cleanup finished removing is: reading it would fail on a data file (a 500), and
 * restoring it would make a latest version nothing can read. The answer is taken as last checked
 * (engine/version-checks.ts) unless `recheck`.
 */
async function requireReadable(svc: Services, entry: Entry, version: number, recheck: boolean): Promise<void> {
  const gone = await svc.versionChecks.gone(tableDir(svc.tables.root, entry), version, recheck);
  if (gone) throw cleanedVersion(entry.objectId, version, gone);
}

/** Writes to a view are 400: its contents come from its source. */
export async function refuseView(svc: Services, entry: Entry, what: string): Promise<void> {
  if (await viewOf(svc.views, entry)) throw invalid(`table ${JSON.stringify(entry.objectId)} is a materialized view; ${what} changes it only by a refresh`);
}

/** The table named by `id`, opened at `at`: the pair most operations start from. */
export async function openTable(svc: Services, id: readonly string[], at: At = {}) {
  const entry = await requireTable(svc.catalog, id);
  return { entry, table: await openAt(svc, entry, at) };
}

/** The request header carrying a version token: a version this client was answered by a write. */
export const MIN_VERSION_HEADER = "x-quiver-min-version";

/**
 * A client that wrote version `min` through another replica reads it here: the cached handle of
 * table `id`, if older, re-checks storage first. A version storage does not hold yet is 400.
 */
export async function awaitVersion(svc: Services, id: readonly string[], min: number): Promise<void> {
  const entry = await requireTable(svc.catalog, id);
  const t = await openAt(svc, entry, { minVersion: min });
  const known = svc.tables.knownVersion(entry.objectId, t);
  const latest = known !== null && known >= min ? known : await tableVersion(t);
  if (latest < min) throw invalid(`${MIN_VERSION_HEADER}: table ${JSON.stringify(entry.objectId)} has no version ${min} (its latest is ${latest})`);
}
