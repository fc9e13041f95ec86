// What LanceDB does not expose about a version: its manifest file's path, size and e_tag, read
// from the table directory (local or on an object store, util/store-files.ts). Lance names
// manifests `{u64::MAX - v}.manifest` (V2, the default) or `{v}.manifest` (V1); a branch keeps its
// own under `tree/<branch>/`.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { namedBranch } from "./tables.js";
import type { Entry } from "../catalog/catalog.js";
import { resolveLocation } from "../catalog/locations.js";
import { ApiError, Code } from "../errors.js";
import { branchTreePath } from "../util/ref-names.js";
import { copyIfAbsent, fileInfo, isRemote, joinInside, joinPath, listNames, moveFile, readBytes, readIfExists, readTail, removeFile } from "../util/store-files.js";

const U64_MAX = 18446744073709551615n;

export interface ManifestFile {
  /** Relative to the table directory. */
  path: string;
  size: number;
  eTag: string;
}

const branchPrefix = (branch: string | undefined) => (namedBranch(branch) ? `${branchTreePath(branch!)}/` : "");

/** Where Lance's default (V2) naming puts the manifest of `version`, relative to the table directory. */
export const manifestPathV2 = (version: number, branch?: string) =>
  `${branchPrefix(branch)}_versions/${(U64_MAX - BigInt(version)).toString().padStart(20, "0")}.manifest`;

/** Where the manifest of `version` may lie, relative to the table directory: the default (V2) naming first, then V1. */
const manifestPaths = (version: number, branch?: string) => [manifestPathV2(version, branch), `${branchPrefix(branch)}_versions/${version}.manifest`];

/** The manifest of `version` on `branch`, or null when neither naming scheme has it. */
export async function manifestFile(tableDir: string, version: number, branch?: string): Promise<ManifestFile | null> {
  for (const rel of manifestPaths(version, branch)) {
    const info = await fileInfo(joinInside(tableDir, rel));
    if (info) return { path: rel, size: info.size, eTag: info.eTag };
  }
  return null;
}

export type NamingScheme = "V1" | "V2";

/** Where `scheme` puts the manifest of `version`, relative to the table directory. */
const manifestPath = (version: number, scheme: NamingScheme, branch?: string) =>
  scheme === "V1" ? `${branchPrefix(branch)}_versions/${version}.manifest` : manifestPathV2(version, branch);

/** The directory holding a branch's manifests, and staged ones waiting to be published. */
export const versionsDir = (tableDir: string, branch?: string) => joinInside(tableDir, `${branchPrefix(branch)}_versions`);

/** Versions that have a published manifest on `branch` (either naming scheme), ascending. */
export async function publishedVersions(tableDir: string, branch?: string): Promise<number[]> {
  const out: number[] = [];
  for (const n of await listNames(versionsDir(tableDir, branch))) {
    const m = /^(\d+)\.manifest$/.exec(n);
    if (!m) continue;
    const v = BigInt(m[1]);
    out.push(Number(m[1].length === 20 ? U64_MAX - v : v));
  }
  return out.sort((a, b) => a - b);
}

/**
 * Publish a staged manifest as `version`: copied to its final name with the store's
 * put-if-not-exists, which refuses the name if another writer took it. Null when the version
 * exists already; otherwise the new manifest and a way to take it back. The staged name stays.
 */
export async function publishManifest(tableDir: string, staged: string, version: number, scheme: NamingScheme, branch?: string) {
  const final = joinInside(tableDir, manifestPath(version, scheme, branch));
  if (!(await copyIfAbsent(staged, final))) return null;
  return { manifest: (await manifestFile(tableDir, version, branch))!, undo: () => removeFile(final) };
}

/**
 * Take the manifest of `version` out of the table's history, reversibly: renamed to a name Lance
 * does not read (like a staged manifest's) until `drop` removes it or `undo` puts it back. Null
 * when the version has no manifest. Data files stay until a cleanup.
 */
export async function setAsideManifest(tableDir: string, version: number, branch?: string) {
  const m = await manifestFile(tableDir, version, branch);
  if (!m) return null;
  const at = joinInside(tableDir, m.path);
  const aside = `${at}-deleted`;
  await moveFile(at, aside);
  return { undo: () => moveFile(aside, at), drop: () => removeFile(aside) };
}

/** The table's directory; a table without a location (declared only) has no versions yet. */
export function tableDir(root: string, entry: Entry): string {
  if (!entry.location) throw new ApiError(Code.TableNotFound, `table ${JSON.stringify(entry.objectId)} has no data yet (declared only)`);
  return resolveLocation(root, entry.location);
}

/** What every Lance manifest file ends with. */
const MANIFEST_MAGIC = "LANC";

/** Does the file end as a Lance manifest does? */
export const isManifestFile = async (file: string) => (await readTail(file, MANIFEST_MAGIC.length)).toString("latin1") === MANIFEST_MAGIC;

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
// Fields of the table format's Manifest message (protos/table.proto in Lance's repository).
const READER_FEATURE_FLAGS = 9;
const TRANSACTION_FILE = 12;
const TRANSACTION_SECTION = 21;
// The operation a version's Transaction message (protos/transaction.proto) holds is the field of
// its `operation` oneof that is present; those the serving index reasons about, by field number
// (LanceDB's add_columns commits a merge, drop_columns a project, update and merge_insert an update).
const OPERATIONS: Record<number, LanceOperation> = {
  100: "append",
  101: "delete",
  102: "overwrite",
  103: "create_index",
  104: "rewrite",
  105: "merge",
  106: "restore",
  107: "reserve_fragments",
  108: "update",
  109: "project",
  110: "update_config",
};

/** What made a version, as its transaction says: the operations named here, or "other". */
export type LanceOperation = "append" | "delete" | "overwrite" | "create_index" | "rewrite" | "merge" | "restore" | "reserve_fragments" | "update" | "project" | "update_config" | "other";

export interface VersionOperation {
  operation: LanceOperation;
  /** The table has stable row ids (a compaction keeps them; row addresses move). */
  stableRowIds: boolean;
}

/** A protobuf message's fields from `from` to `to`: numbers, varint values, and where length-delimited ones lie. */
function* protoFields(b: Buffer, from: number, to: number): Generator<{ field: number; value: number; at: number }> {
  for (let p = from; p < to; ) {
    let tag: number;
    [tag, p] = varint(b, p);
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    let value = 0;
    const at = p;
    if (wire === 0) [value, p] = varint(b, p);
    else if (wire === 1) p += 8;
    else if (wire === 5) p += 4;
    else if (wire === 2) {
      [value, p] = varint(b, p);
      yield { field, value, at: p };
      p += value;
      continue;
    } else return;
    yield { field, value, at };
  }
}

/**
 * The manifest of `version` read whole, and where its Manifest message lies: the file ends with the
 * message's position, the format version and "LANC"; the message is length-prefixed. Read without a
 * look first (one GET on an object store, where a HEAD and a GET were two round trips a version to
 * a serving index's sync).
 */
async function readManifest(tableDir: string, version: number, branch?: string): Promise<{ bytes: Buffer; from: number; to: number } | null> {
  for (const rel of manifestPaths(version, branch)) {
    const bytes = await readIfExists(joinInside(tableDir, rel));
    if (!bytes) continue;
    if (bytes.length < 16 || bytes.toString("latin1", bytes.length - 4) !== MANIFEST_MAGIC) return null;
    const at = Number(bytes.readBigInt64LE(bytes.length - 16));
    return { bytes, from: at + 4, to: at + 4 + bytes.readUInt32LE(at) };
  }
  return null;
}

/** Was the table created with stable row ids (which also track when each row was last updated)? Read from the manifest of `version`. */
export async function usesStableRowIds(tableDir: string, version: number, branch?: string): Promise<boolean> {
  const m = await readManifest(tableDir, version, branch);
  if (!m) return false;
  for (const f of protoFields(m.bytes, m.from, m.to)) if (f.field === READER_FEATURE_FLAGS) return (f.value & FLAG_STABLE_ROW_IDS) !== 0;
  return false;
}

/**
 * The operation that made `version` and whether the table has stable row ids, from its manifest:
 * the transaction is inside it (a u32 length, then the message) or, from older writers, in
 * `_transactions/<name>`. Null when the version or its transaction is no longer there.
 */
export async function versionOperation(tableDir: string, version: number, branch?: string): Promise<VersionOperation | null> {
  const m = await readManifest(tableDir, version, branch);
  if (!m) return null;
  let stableRowIds = false;
  let txn: { bytes: Buffer; from: number; to: number } | null = null;
  let file = "";
  for (const f of protoFields(m.bytes, m.from, m.to)) {
    if (f.field === READER_FEATURE_FLAGS) stableRowIds = (f.value & FLAG_STABLE_ROW_IDS) !== 0;
    else if (f.field === TRANSACTION_SECTION) txn = { bytes: m.bytes, from: f.value + 4, to: f.value + 4 + m.bytes.readUInt32LE(f.value) };
    else if (f.field === TRANSACTION_FILE) file = m.bytes.toString("utf8", f.at, f.at + f.value);
  }
  if (!txn && file) {
    // A name that would leave the table directory (joinInside refuses it) reads as no transaction.
    const bytes = await Promise.resolve()
      .then(() => readBytes(joinInside(tableDir, `${branchPrefix(branch)}_transactions/${file}`)))
      .catch(() => null);
    if (bytes) txn = { bytes, from: 0, to: bytes.length };
  }
  if (!txn) return null;
  for (const f of protoFields(txn.bytes, txn.from, txn.to)) if (f.field >= 100) return { operation: OPERATIONS[f.field] ?? "other", stableRowIds };
  return null;
}

/** A varint read whole as a BigInt (a deletion file's id is a random u64, past a double's precision). */
function bigVarint(b: Buffer, p: number): bigint {
  let v = 0n;
  for (let shift = 0n; ; shift += 7n) {
    const byte = b[p++];
    v |= BigInt(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
}

// Fields of Manifest, DataFragment, DataFile, DeletionFile, IndexSection and IndexMetadata
// (protos/table.proto in Lance's repository). A file with a base_id lies outside the table
// directory (a shallow clone's source): not looked for here.
const FRAGMENTS = 2;
const INDEX_SECTION = 6;
const FRAGMENT_ID = 1;
const FRAGMENT_FILES = 2;
const FRAGMENT_DELETION = 3;
const FILE_PATH = 1;
const FILE_BASE_ID = 7;
const DELETION_TYPE = 1;
const DELETION_READ_VERSION = 2;
const DELETION_ID = 3;
const DELETION_BASE_ID = 7;
const DELETION_BITMAP = 1n;
const INDEXES = 1;
const INDEX_UUID = 1;
const INDEX_FILES = 10;
const INDEX_BASE_ID = 9;

/**
 * What a version reads, relative to the table directory: its fragments' data and deletion files
 * (`_deletions/{fragment}-{read_version}-{id}.{arrow|bin}`, Lance's naming) and the directories of
 * its indexes that have files. Null when it has no manifest.
 */
async function versionFiles(tableDir: string, version: number): Promise<string[] | null> {
  const m = await readManifest(tableDir, version);
  if (!m) return null;
  const out: string[] = [];
  let indexSection: number | null = null;
  for (const f of protoFields(m.bytes, m.from, m.to)) {
    if (f.field === INDEX_SECTION) indexSection = f.value;
    if (f.field !== FRAGMENTS) continue;
    let id = 0n;
    for (const g of protoFields(m.bytes, f.at, f.at + f.value)) {
      if (g.field === FRAGMENT_ID) id = bigVarint(m.bytes, g.at);
      else if (g.field === FRAGMENT_FILES) {
        let file = "";
        let elsewhere = false;
        for (const h of protoFields(m.bytes, g.at, g.at + g.value)) {
          if (h.field === FILE_PATH) file = m.bytes.toString("utf8", h.at, h.at + h.value);
          else if (h.field === FILE_BASE_ID) elsewhere = true;
        }
        if (file && !elsewhere) out.push(`data/${file}`);
      } else if (g.field === FRAGMENT_DELETION) {
        // Every field a varint; proto3 leaves out zeros.
        const d = new Map<number, bigint>();
        for (const h of protoFields(m.bytes, g.at, g.at + g.value)) d.set(h.field, bigVarint(m.bytes, h.at));
        const name = `${id}-${d.get(DELETION_READ_VERSION) ?? 0n}-${d.get(DELETION_ID) ?? 0n}.${d.get(DELETION_TYPE) === DELETION_BITMAP ? "bin" : "arrow"}`;
        if (!d.has(DELETION_BASE_ID)) out.push(`_deletions/${name}`);
      }
    }
  }
  if (indexSection !== null) {
    const from = indexSection + 4;
    for (const ix of protoFields(m.bytes, from, from + m.bytes.readUInt32LE(indexSection))) {
      if (ix.field !== INDEXES) continue;
      let uuid = "";
      let hasFiles = false;
      let elsewhere = false;
      for (const g of protoFields(m.bytes, ix.at, ix.at + ix.value)) {
        if (g.field === INDEX_UUID) for (const u of protoFields(m.bytes, g.at, g.at + g.value)) uuid = m.bytes.toString("hex", u.at, u.at + u.value);
        else if (g.field === INDEX_FILES) hasFiles = true;
        else if (g.field === INDEX_BASE_ID) elsewhere = true;
      }
      if (uuid.length === 32 && hasFiles && !elsewhere) out.push(`_indices/${uuid.slice(0, 8)}-${uuid.slice(8, 12)}-${uuid.slice(12, 16)}-${uuid.slice(16, 20)}-${uuid.slice(20)}`);
    }
  }
  return out;
}

/** What a table directory holds, listed once for checks of several versions. */
export type StoredFiles = Set<string>;

/** The names under the table's data, deletion and index directories, relative to it. */
export async function storedFiles(tableDir: string): Promise<StoredFiles> {
  const out: StoredFiles = new Set();
  for (const sub of ["data", "_deletions", "_indices"]) for (const n of await listNames(joinInside(tableDir, sub))) out.add(`${sub}/${n.replace(/\/$/, "")}`);
  return out;
}

/**
 * The first file of `version` on main that is no longer stored, or null (all there, or no manifest:
 * the caller's "not found"). A cleanup removes the files only old versions read before it removes
 * their manifests (Lance's order), so a cleanup stopped or still running in between leaves versions
 * listed that cannot be read; reading one fails on a data file, and restoring one makes a latest
 * version that cannot be read. Only main's versions are read here. `stored` comes from
 * storedFiles, listed after the version was listed (a file a later commit wrote is not missed).
 */
export async function goneFile(tableDir: string, version: number, stored: StoredFiles): Promise<string | null> {
  return (await versionFiles(tableDir, version))?.find((f) => !stored.has(f)) ?? null;
}

/** A version whose files a cleanup removed is not found, as one whose manifest it removed too. */
export const cleanedVersion = (table: string, version: number, file: string) =>
  new ApiError(Code.TableVersionNotFound, `version ${version} not found in table ${JSON.stringify(table)}: a cleanup removed its files (${file})`);

/** `scheme://bucket` of an object-store URI. */
const BUCKET = /^[a-z0-9]+:\/\/[^/]+/i;

/**
 * A manifest's path as answered: relative to the table directory; with managed versioning, the
 * object-store path LanceDB's client reads the manifest from: the key inside the bucket, or for
 * local files the absolute path without its leading slash.
 */
export function manifestPathOut(managedVersioning: boolean, dir: string, rel: string): string {
  if (!managedVersioning) return rel;
  const full = joinPath(dir, rel);
  return isRemote(full) ? full.replace(BUCKET, "").replace(/^\//, "") : full.replace(/^\//, "");
}

/**
 * Where a client-given manifest path may point, most likely first: an object-store path (the key
 * inside the bucket, or for local files the absolute path without its leading slash), a full URI
 * or absolute path, or a path relative to the table directory.
 */
export function manifestCandidates(dir: string, given: string): string[] {
  if (isRemote(dir)) {
    if (given.split("/").some((s) => s === "." || s === "..")) return [];
    return isRemote(given) ? [given] : [`${BUCKET.exec(dir)![0]}/${given.replace(/^\//, "")}`, joinPath(dir, given)];
  }
  if (given.startsWith("file://")) return [fileURLToPath(given)];
  return path.isAbsolute(given) ? [given] : [path.resolve("/", given), path.resolve(dir, given)];
}
