// Finding the table a request names, and opening it at the requested version or branch.
import type * as lancedb from "@lancedb/lancedb";
import { namedBranch } from "../engine/tables.js";
import { objectIdOf, type Entry } from "../catalog/catalog.js";
import { ApiError, Code } from "../errors.js";
import { resolveLocation } from "../catalog/locations.js";
import { hasVersions } from "../engine/datasets.js";
import type { Services } from "../services.js";
import { namespaceNotFound } from "./namespace.js";

export const tableNotFound = (id: readonly string[]) =>
  new ApiError(Code.TableNotFound, `table ${JSON.stringify(objectIdOf(id))} not found`);

/** The catalog entry of table `id`: 404 code 1 when its namespace is missing, code 4 when it is. */
export async function requireTable(svc: Services, id: readonly string[]): Promise<Entry> {
  await svc.catalog.refresh();
  if (id.length === 0) throw tableNotFound(id);
  if (!svc.catalog.namespaceExists(id.slice(0, -1))) throw namespaceNotFound(id.slice(0, -1));
  const e = svc.catalog.get(id);
  if (e?.type !== "table") throw tableNotFound(id);
  return e;
}

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
export async function openAt(svc: Services, entry: Entry, at: At = {}): Promise<lancedb.Table> {
  const version = at.version ?? undefined;
  const branch = namedBranch(at.branch);
  try {
    return await svc.tables.open(entry, { version, branch });
  } catch (err) {
    const msg = String((err as Error)?.message ?? err);
    if (branch !== undefined && /tree\/[^ ]*\/_versions(,|\s|$)/.test(msg)) {
      throw new ApiError(Code.TableBranchNotFound, `branch ${JSON.stringify(branch)} of table ${JSON.stringify(entry.objectId)} not found`);
    }
    if (version !== undefined && /_versions\/\d+\.manifest was not found/.test(msg)) {
      throw new ApiError(Code.TableVersionNotFound, `version ${version} of table ${JSON.stringify(entry.objectId)} not found`);
    }
    if (/was not found|Not found/.test(msg)) throw (await declaredOnly(svc, entry)) ?? tableNotFound(entry.id);
    throw err;
  }
}

/** The table named by `id`, opened at `at`: the pair most operations start from. */
export async function openTable(svc: Services, id: readonly string[], at: At = {}) {
  const entry = await requireTable(svc, id);
  return { entry, table: await openAt(svc, entry, at) };
}
