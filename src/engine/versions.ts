// What LanceDB does not expose about a version: its manifest file's path, size and e_tag, read
// from the table directory. Lance names manifests `{u64::MAX - v}.manifest` (V2, the default)
// or `{v}.manifest` (V1); a branch keeps its own under `tree/<branch>/`.
import { stat } from "node:fs/promises";
import { namedBranch } from "./tables.js";
import path from "node:path";
import type { Entry } from "../catalog/catalog.js";
import { resolveLocation } from "../catalog/locations.js";
import { ApiError, Code } from "../errors.js";

const U64_MAX = 18446744073709551615n;

export interface ManifestFile {
  /** Relative to the table directory. */
  path: string;
  size: number;
  eTag: string;
}

const branchPrefix = (branch: string | undefined) => (namedBranch(branch) ? `tree/${branch}/` : "");

/** Where Lance's default (V2) naming puts the manifest of `version`, relative to the table directory. */
export const manifestPathV2 = (version: number, branch?: string) =>
  `${branchPrefix(branch)}_versions/${(U64_MAX - BigInt(version)).toString().padStart(20, "0")}.manifest`;

/** The manifest of `version` on `branch`, or null when neither naming scheme has it. */
export async function manifestFile(tableDir: string, version: number, branch?: string): Promise<ManifestFile | null> {
  for (const rel of [manifestPathV2(version, branch), `${branchPrefix(branch)}_versions/${version}.manifest`]) {
    try {
      const st = await stat(path.join(tableDir, rel), { bigint: true });
      return { path: rel, size: Number(st.size), eTag: eTagOf(st.ino, st.mtimeNs, st.size) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
  return null;
}

// The e_tag object_store's local file system gives the same file: inode, mtime (µs) and size in hex.
const eTagOf = (ino: bigint, mtimeNs: bigint, size: bigint) =>
  `${ino.toString(16)}-${(mtimeNs / 1000n).toString(16)}-${size.toString(16)}`;

/** The table's directory; a table without a location (declared only) has no versions yet. */
export function tableDir(root: string, entry: Entry): string {
  if (!entry.location) throw new ApiError(Code.TableNotFound, `table ${JSON.stringify(entry.objectId)} has no data yet (declared only)`);
  return resolveLocation(root, entry.location);
}
