// What LanceDB does not expose about a version: its manifest file's path, size and e_tag, read
// from the table directory. Lance names manifests `{u64::MAX - v}.manifest` (V2, the default)
// or `{v}.manifest` (V1); a branch keeps its own under `tree/<branch>/`.
import { link, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { namedBranch } from "./tables.js";
import path from "node:path";
import type { Entry } from "../catalog/catalog.js";
import { resolveLocation } from "../catalog/locations.js";
import { ApiError, Code } from "../errors.js";

const U64_MAX = 18446744073709551615n;
const REMOTE = /^(s3|gs|az):\/\//i;

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
  // On an object store the manifest's size and e_tag are not read (README, "Object storage").
  if (REMOTE.test(tableDir)) return null;
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

export type NamingScheme = "V1" | "V2";

/** Where `scheme` puts the manifest of `version`, relative to the table directory. */
const manifestPath = (version: number, scheme: NamingScheme, branch?: string) =>
  scheme === "V1" ? `${branchPrefix(branch)}_versions/${version}.manifest` : manifestPathV2(version, branch);

/** The directory holding a branch's manifests, and staged ones waiting to be published. */
export const versionsDir = (tableDir: string, branch?: string) => path.join(tableDir, `${branchPrefix(branch)}_versions`);

/** Versions that have a published manifest on `branch` (either naming scheme), ascending. */
export async function publishedVersions(tableDir: string, branch?: string): Promise<number[]> {
  let names: string[];
  try {
    names = await readdir(versionsDir(tableDir, branch));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const out: number[] = [];
  for (const n of names) {
    const m = /^(\d+)\.manifest$/.exec(n);
    if (!m) continue;
    const v = BigInt(m[1]);
    out.push(Number(m[1].length === 20 ? U64_MAX - v : v));
  }
  return out.sort((a, b) => a - b);
}

/**
 * Publish a staged manifest as `version`: a hard link to its final name, which the file system
 * refuses if that name exists (put-if-not-exists, atomic). Null when the version exists already;
 * otherwise the new manifest and a way to take it back. The staged name stays until dropStaged.
 */
export async function publishManifest(tableDir: string, staged: string, version: number, scheme: NamingScheme, branch?: string) {
  const final = path.join(tableDir, manifestPath(version, scheme, branch));
  try {
    await link(staged, final);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return null;
    throw err;
  }
  return { manifest: (await manifestFile(tableDir, version, branch))!, undo: () => unlink(final) };
}

/**
 * Take the manifest of `version` out of the table's history, reversibly: renamed to a name Lance
 * does not read (like a staged manifest's) until `drop` removes it or `undo` puts it back. Null
 * when the version has no manifest. Data files stay until a cleanup.
 */
export async function setAsideManifest(tableDir: string, version: number, branch?: string) {
  const m = await manifestFile(tableDir, version, branch);
  if (!m) return null;
  const at = path.join(tableDir, m.path);
  const aside = `${at}-deleted`;
  await rename(at, aside);
  return { undo: () => rename(aside, at), drop: () => unlink(aside) };
}

// The e_tag object_store's local file system gives the same file: inode, mtime (µs) and size in hex.
const eTagOf = (ino: bigint, mtimeNs: bigint, size: bigint) =>
  `${ino.toString(16)}-${(mtimeNs / 1000n).toString(16)}-${size.toString(16)}`;

/** The table's directory; a table without a location (declared only) has no versions yet. */
export function tableDir(root: string, entry: Entry): string {
  if (!entry.location) throw new ApiError(Code.TableNotFound, `table ${JSON.stringify(entry.objectId)} has no data yet (declared only)`);
  return resolveLocation(root, entry.location);
}

/** Reads a protobuf varint at `p`; returns [value, next position]. */
function varint(b: Buffer, p: number): [number, number] {
  let v = 0;
  let scale = 1;
  for (;;) {
    const byte = b[p++];
    v += (byte & 0x7f) * scale;
    if (!(byte & 0x80)) return [v, p];
    scale *= 128;
  }
}

// Lance's reader feature flag for move-stable row ids (the table format's `reader_feature_flags`, bit 2).
const FLAG_STABLE_ROW_IDS = 2;
const READER_FEATURE_FLAGS = 9;

/**
 * Was the table created with stable row ids (which also track when each row was last updated)?
 * Read from the manifest of `version`: the file ends with the manifest's position, the format
 * version and "LANC"; the manifest is a length-prefixed protobuf message.
 */
export async function usesStableRowIds(tableDir: string, version: number, branch?: string): Promise<boolean> {
  // Not read from an object store: backfills there recompute every row (README, "Object storage").
  if (REMOTE.test(tableDir)) return false;
  const m = await manifestFile(tableDir, version, branch);
  if (!m) return false;
  const b = await readFile(path.join(tableDir, m.path));
  if (b.length < 16 || b.toString("latin1", b.length - 4) !== "LANC") return false;
  const at = Number(b.readBigInt64LE(b.length - 16));
  const end = at + 4 + b.readUInt32LE(at);
  for (let p = at + 4; p < end; ) {
    let tag: number;
    [tag, p] = varint(b, p);
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (wire === 0) {
      let v: number;
      [v, p] = varint(b, p);
      if (field === READER_FEATURE_FLAGS) return (v & FLAG_STABLE_ROW_IDS) !== 0;
    } else if (wire === 1) p += 8;
    else if (wire === 5) p += 4;
    else if (wire === 2) {
      let len: number;
      [len, p] = varint(b, p);
      p += len;
    } else return false;
  }
  return false;
}

/**
 * A manifest's path as answered: relative to the table directory; with managed versioning, the
 * object-store path LanceDB's client uses for local files (absolute, without the leading slash),
 * which it reads the manifest from.
 */
export const manifestPathOut = (managedVersioning: boolean, dir: string, rel: string) =>
  managedVersioning && !REMOTE.test(dir) ? path.join(dir, rel).replace(/^\//, "") : rel;
