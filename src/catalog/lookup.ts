// Turning an id into a catalog entry, with upstream's not-found errors (code 1 for a missing
// namespace, 4 for a missing table).
import { ApiError, Code } from "../errors.js";
import type { Catalog, Entry } from "./catalog.js";
import { objectIdOf } from "./names.js";

const namespaceNotFound = (id: readonly string[]) =>
  new ApiError(Code.NamespaceNotFound, `namespace ${JSON.stringify(objectIdOf(id))} not found`);

export const tableNotFound = (id: readonly string[]) =>
  new ApiError(Code.TableNotFound, `table ${JSON.stringify(objectIdOf(id))} not found`);

export function requireNamespace(catalog: Catalog, id: readonly string[]): void {
  if (!catalog.namespaceExists(id)) throw namespaceNotFound(id);
}

/** Like requireNamespace, for reads: a miss re-checks storage first (read-your-writes across processes). */
export async function requireNamespaceNow(catalog: Catalog, id: readonly string[]): Promise<void> {
  await catalog.refresh();
  if (catalog.namespaceExists(id)) return;
  await catalog.recheck();
  requireNamespace(catalog, id);
}

/**
 * The entry of table `id` after bringing the catalog within its consistency interval; a miss
 * re-checks storage before it is an error (another process may have created the table just now).
 */
export async function requireTable(catalog: Catalog, id: readonly string[]): Promise<Entry> {
  if (id.length === 0) throw tableNotFound(id);
  await catalog.refresh();
  if (catalog.get(id)?.type !== "table") await catalog.recheck();
  requireNamespace(catalog, id.slice(0, -1));
  const e = catalog.get(id);
  if (e?.type !== "table") throw tableNotFound(id);
  return e;
}
