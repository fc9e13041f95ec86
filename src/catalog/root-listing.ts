// Root compatibility of the directory catalog (the lance-namespace directory catalog's "compatibility mode"): `<name>.lance` datasets in
// the data directory that no manifest row points at (made by LanceDB's plain `connect(root)`,
// for example) are root tables too. A deregistered one carries a marker and is not listed.
import { readdir } from "node:fs/promises";
import path from "node:path";
import { isRemote, joinPath, listNames, removeFile, writeIfAbsent } from "../util/store-files.js";
import { lanceNameOf } from "./locations.js";

/** Marks a directory whose table was deregistered with its data kept. */
export const DEREGISTERED = ".svc-deregistered";

async function names(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

/**
 * Locations (`<name>.lance`) of the root datasets: directories with versions and no deregistered
 * marker. Those in `skip` (the catalog's rows point at them, so they are listed by their rows)
 * are not looked into: two listings a table, each check, made a create's cost grow with the tables.
 */
export async function scanRootDatasets(root: string, skip: ReadonlySet<string | undefined>): Promise<Set<string>> {
  const found = new Set<string>();
  // On an object store only the catalog's rows name tables (docs/configuration.md, "Object storage").
  if (isRemote(root)) return found;
  const dirs = (await names(root)).filter((n) => !skip.has(n) && lanceNameOf(n) !== null);
  await Promise.all(
    dirs.map(async (loc) => {
      const [inside, versions] = await Promise.all([names(path.join(root, loc)), names(path.join(root, loc, "_versions"))]);
      if (versions.some((v) => v.endsWith(".manifest")) && !inside.includes(DEREGISTERED)) found.add(loc);
    }),
  );
  return found;
}

/** Mark a deregistered table's kept data: out of listings, never reclaimed. No directory, nothing to mark. */
export async function markDeregistered(dir: string): Promise<void> {
  if ((await listNames(dir)).length > 0) await writeIfAbsent(joinPath(dir, DEREGISTERED), Buffer.alloc(0));
}

/** Take a deregistration's mark back (a batch commit that failed after it). */
export const unmarkDeregistered = (dir: string) => removeFile(joinPath(dir, DEREGISTERED));
