// Root compatibility of the directory catalog (the lance-namespace directory catalog's "compatibility mode"): `<name>.lance` datasets in
// the data directory that no manifest row points at (made by LanceDB's plain `connect(root)`,
// for example) are root tables too. A deregistered one carries a marker and is not listed.
import { readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { lanceNameOf } from "./locations.js";

const REMOTE = /^(s3|gs|az):\/\//i;

/** Marks a directory whose table was deregistered with its data kept. */
export const DEREGISTERED = ".svc-deregistered";

async function names(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

/** Locations (`<name>.lance`) of the root datasets: directories with versions and no deregistered marker. */
export async function scanRootDatasets(root: string): Promise<Set<string>> {
  const found = new Set<string>();
  // On an object store only the catalog's rows name tables (README, "Object storage").
  if (REMOTE.test(root)) return found;
  const dirs = (await names(root)).filter((n) => lanceNameOf(n) !== null);
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
  // Nothing lists or reclaims object store directories, so kept data needs no mark there.
  if (REMOTE.test(dir)) return;
  try {
    await writeFile(path.join(dir, DEREGISTERED), "");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

/** Take a deregistration's mark back (a batch commit that failed after it). */
export const unmarkDeregistered = async (dir: string) => (REMOTE.test(dir) ? undefined : rm(path.join(dir, DEREGISTERED), { force: true }));
