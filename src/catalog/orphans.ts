// Orphan table directories: left by a crash between writing a table's data and inserting its
// catalog row (here or in another process using the directory catalog, e.g. LanceDB itself).
// A directory directly in the data directory is reclaimed only when it looks like a table
// directory (empty, or holding Lance's `_versions`/`data`/`_indices`/`_transactions` or a
// reservation marker), nothing names it (no catalog row, not a listed root dataset, not
// deregistered-with-data, not being created here), and neither it nor anything directly inside it
// changed for `minAgeMs`, so a writer between its data and its row is never touched. On an object
// store "directories" are prefixes and the age is that of the newest object under one.
import path from "node:path";
import { isRemote, joinPath, listNames, newestChange, removeTree } from "../util/store-files.js";
import type { Catalog } from "./catalog.js";
import type { Claims } from "./claims.js";
import { CATALOG_DIRS } from "./locations.js";
import { DEREGISTERED } from "./root-listing.js";

const TABLE_PARTS = new Set(["_versions", "data", "_indices", "_transactions", "_deletions", ".svc-reserved"]);

export interface Reclaimed {
  /** Locations removed (relative to the data directory). */
  removed: string[];
  /** Unreferenced table directories left because they are younger than the safety age. */
  young: string[];
}

export interface OrphanScope {
  root: string;
  catalog: Catalog;
  claims: Claims;
  minAgeMs: number;
}

/** Top-level directory a catalog location lives in (locations may be relative, absolute or file://). */
function topOf(root: string, location: string): string | null {
  if (isRemote(root)) return location.split("/")[0] || null;
  const abs = path.resolve(root, location.replace(/^file:\/\//, ""));
  const rel = path.relative(root, abs);
  if (rel === "" || rel.startsWith("..") || path.isAbsolute(rel)) return null;
  return rel.split(path.sep)[0];
}

export async function reclaimOrphans(scope: OrphanScope, onRemoved: (location: string, ageMs: number) => void): Promise<Reclaimed> {
  const { root, catalog, claims, minAgeMs } = scope;
  await catalog.refresh(true);
  const named = new Set<string>(CATALOG_DIRS);
  for (const e of catalog.allTables()) {
    const top = e.location ? topOf(root, e.location) : null;
    if (top) named.add(top);
  }
  const out: Reclaimed = { removed: [], young: [] };
  const claimed = await claims.held();
  for (const entry of await listNames(root)) {
    if (!entry.endsWith("/")) continue;
    const name = entry.slice(0, -1);
    if (name.startsWith(".") || named.has(name) || claimed.has(name)) continue;
    const dir = joinPath(root, name);
    const inside = (await listNames(dir)).map((n) => n.replace(/\/$/, ""));
    if (inside.includes(DEREGISTERED)) continue;
    if (inside.length > 0 && !inside.some((n) => TABLE_PARTS.has(n))) continue;
    const age = Date.now() - (await newestChange(dir));
    if (age < minAgeMs) {
      out.young.push(name);
      continue;
    }
    // Re-check against the catalog as it is now: a row may have arrived since the scan began.
    await catalog.refresh(true);
    if ((await claims.held()).has(name) || catalog.allTables().some((e) => e.location && topOf(root, e.location) === name)) continue;
    await removeTree(dir);
    out.removed.push(name);
    onRemoved(name, Math.round(age));
  }
  return out;
}
