// The files Quiver reads and writes beside LanceDB's in the data directory (a managed version's
// manifest, a declared table's marker, orphan table directories), on a local directory (node:fs)
// or an object store (util/object-stores/, given the storage options LanceDB gets), so those
// features work the same on both. Paths are absolute local paths or `s3://`, `gs://`, `az://` URIs.
// Put-if-absent is the store's own: a hard link locally (the name appears whole or not at all), a
// conditional PUT (`If-None-Match: *`) on an object store.
import { link, lstat, open, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { isRemote } from "../config.js";
import { invalid } from "../errors.js";
import { recordObjectStoreRequest } from "../metrics.js";
import { statusOf, type ObjectStore } from "./object-stores/object-store.js";
import { createContainerIfMissing, openAzure } from "./object-stores/azure.js";
import { openGcs } from "./object-stores/gcs.js";
import { openS3 } from "./object-stores/s3.js";

export { isRemote };

/** The storage options LanceDB gets on this process's data directory (set once the tables open, in the server and in each job process). */
let current: Record<string, string> = {};

export function useStorageOptions(options: Record<string, string> | undefined): void {
  current = { ...(options ?? {}) };
  stores.clear();
}

export interface FileInfo {
  size: number;
  /** The store's entity tag; locally object_store's: inode, mtime (µs) and size in hex. */
  eTag: string;
  mtimeMs: number;
}

/** `rel` (slash-separated) inside `dir`. */
export const joinPath = (dir: string, rel: string) => (isRemote(dir) ? `${dir.replace(/\/+$/, "")}/${rel}` : path.join(dir, rel));

/**
 * `rel` inside `dir`, checked after joining: the result must lie below `dir`, so a name that
 * became part of `rel` (a branch, a tag) cannot reach a sibling table or the catalog even if it
 * passed its own check. On an object store, where a URL library may resolve `..` or the store keep
 * it as text, no segment may be `.`, `..` or empty.
 */
export function joinInside(dir: string, rel: string): string {
  const joined = joinPath(dir, rel);
  if (!isInside(dir, rel, joined)) throw invalid(`${JSON.stringify(rel)} is not a path inside the table's directory`);
  return joined;
}

function isInside(dir: string, rel: string, joined: string): boolean {
  if (rel.includes("\u0000")) return false;
  if (isRemote(dir)) return rel.split("/").every((s) => s !== "" && s !== "." && s !== "..");
  const r = path.relative(path.resolve(dir), path.resolve(joined));
  return r !== "" && r !== ".." && !r.startsWith(`..${path.sep}`) && !path.isAbsolute(r);
}

/** The first of `names` given in the options, or in the environment as `env`. */
function option(names: string[], env: string[] = []): string | undefined {
  for (const n of names) if (current[n] !== undefined) return current[n];
  for (const e of env) if (process.env[e]) return process.env[e];
  return undefined;
}

const OPEN = { az: openAzure, s3: openS3, gs: openGcs };
const stores = new Map<string, Promise<ObjectStore>>();

/** The store of the URI's bucket (opened once) and the object path inside it. */
async function objectOf(uri: string): Promise<{ store: ObjectStore; key: string }> {
  const m = /^([a-z0-9]+):\/\/([^/]+)\/?(.*)$/i.exec(uri)!;
  const [scheme, bucket, key] = [m[1].toLowerCase() as keyof typeof OPEN, m[2], m[3]];
  let open = stores.get(`${scheme}://${bucket}`);
  if (!open) {
    open = OPEN[scheme](bucket, option).then((store) => measured(scheme, store));
    stores.set(`${scheme}://${bucket}`, open);
    open.catch(() => stores.delete(`${scheme}://${bucket}`));
  }
  return { store: await open, key };
}

/** The store with each call timed and counted by operation (quiver_object_store_*, src/metrics.ts). */
function measured(scheme: string, store: ObjectStore): ObjectStore {
  const timed =
    <A extends unknown[], R>(operation: string, call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const started = performance.now();
      const took = () => (performance.now() - started) / 1000;
      try {
        const r = await call(...args);
        recordObjectStoreRequest(scheme, operation, took(), false);
        return r;
      } catch (err) {
        const status = statusOf(err);
        recordObjectStoreRequest(scheme, operation, took(), status === 429 || status === 503 ? "throttled" : "error");
        throw err;
      }
    };
  return {
    children: timed("list_children", store.children),
    objects: timed("list", store.objects),
    head: timed("head", store.head),
    get: timed("get", store.get),
    putIfAbsent: timed("put_if_absent", store.putIfAbsent),
    remove: timed("remove", store.remove),
  };
}

const missingLocally = (err: unknown) => ["ENOENT", "ENOTDIR", "ENAMETOOLONG"].includes((err as NodeJS.ErrnoException).code ?? "");
const dirKey = (key: string) => (key === "" || key.endsWith("/") ? key : `${key}/`);

/**
 * An `az://` data directory's container, created when it does not exist (true then). Buckets of
 * the other stores are left to their owners (creating one picks a region, billing, policies).
 */
export async function createContainerOf(uri: string): Promise<boolean> {
  const m = /^az:\/\/([^/]+)/i.exec(uri);
  return m ? createContainerIfMissing(m[1], option) : false;
}

/** Names directly inside `dir`, a directory's with a trailing slash; none when `dir` does not exist. */
export async function listNames(dir: string): Promise<string[]> {
  if (!isRemote(dir)) {
    try {
      return (await readdir(dir, { withFileTypes: true })).map((e) => (e.isDirectory() ? `${e.name}/` : e.name));
    } catch (err) {
      if (missingLocally(err)) return [];
      throw err;
    }
  }
  const { store, key } = await objectOf(dir);
  return (await store.children(dirKey(key))).filter((n) => n !== "");
}

// The e_tag object_store's local file system gives the same file.
const localETag = (ino: bigint, mtimeNs: bigint, size: bigint) => `${ino.toString(16)}-${(mtimeNs / 1000n).toString(16)}-${size.toString(16)}`;

/** A file's size, e_tag and last change; null when there is none. */
export async function fileInfo(file: string): Promise<FileInfo | null> {
  if (!isRemote(file)) {
    try {
      const st = await stat(file, { bigint: true });
      return { size: Number(st.size), eTag: localETag(st.ino, st.mtimeNs, st.size), mtimeMs: Number(st.mtimeMs) };
    } catch (err) {
      if (missingLocally(err)) return null;
      throw err;
    }
  }
  const { store, key } = await objectOf(file);
  return store.head(key);
}

export async function readBytes(file: string): Promise<Buffer> {
  if (!isRemote(file)) return readFile(file);
  const bytes = await readIfExists(file);
  if (!bytes) throw new Error(`${file} was not found`);
  return bytes;
}

/** A file's bytes; null when there is none. One read, no look before it (a HEAD is a round trip of its own). */
export async function readIfExists(file: string): Promise<Buffer | null> {
  if (isRemote(file)) {
    const { store, key } = await objectOf(file);
    return store.get(key);
  }
  try {
    return await readFile(file);
  } catch (err) {
    if (missingLocally(err)) return null;
    throw err;
  }
}

/** The last `n` bytes of a file (fewer when it is shorter); on an object store the object is read whole. */
export async function readTail(file: string, n: number): Promise<Buffer> {
  if (isRemote(file)) return (await readBytes(file)).subarray(-n);
  const fd = await open(file, "r");
  try {
    const { size } = await fd.stat();
    const out = Buffer.alloc(Math.min(n, size));
    await fd.read(out, 0, out.length, size - out.length);
    return out;
  } finally {
    await fd.close();
  }
}

/** Write `data` at `file` unless something is there already: false when it is. */
export async function writeIfAbsent(file: string, data: Buffer): Promise<boolean> {
  if (!isRemote(file)) {
    try {
      await writeFile(file, data, { flag: "wx" });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw err;
    }
  }
  const { store, key } = await objectOf(file);
  return store.putIfAbsent(key, data);
}

/** Copy `from` to `to` unless `to` exists (false then), atomically: readers see all of it or nothing. */
export async function copyIfAbsent(from: string, to: string): Promise<boolean> {
  if (isRemote(to)) return writeIfAbsent(to, await readBytes(from));
  try {
    await link(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
}

/** Move a file to a name that is free (an object store copies, then removes the original). */
export async function moveFile(from: string, to: string): Promise<void> {
  if (!isRemote(from)) return rename(from, to);
  if (!(await copyIfAbsent(from, to))) throw new Error(`${to} exists already`);
  await removeFile(from);
}

/** Remove a file; none there is nothing to do. */
export async function removeFile(file: string): Promise<void> {
  if (!isRemote(file)) return rm(file, { force: true });
  const { store, key } = await objectOf(file);
  await store.remove([key]);
}

/** Remove a directory and everything under it. */
export async function removeTree(dir: string): Promise<void> {
  if (!isRemote(dir)) return rm(dir, { recursive: true, force: true });
  const { store, key } = await objectOf(dir);
  await store.remove((await store.objects(dirKey(key))).map((o) => o.key));
}

/**
 * The newest change, ms since the epoch, of a directory or of anything directly inside it; on an
 * object store, where directories are only prefixes, of any object under it.
 */
export async function newestChange(dir: string): Promise<number> {
  if (!isRemote(dir)) {
    const inside = await listNames(dir);
    const stats = await Promise.all([dir, ...inside.map((n) => path.join(dir, n))].map((p) => lstat(p).catch(() => null)));
    return Math.max(...stats.map((s) => (s ? s.mtimeMs : Date.now())));
  }
  const { store, key } = await objectOf(dir);
  const times = (await store.objects(dirKey(key))).map((o) => o.mtimeMs);
  return times.length ? Math.max(...times) : Date.now();
}

/** Does anything exist at `p` (a file, or a directory; on an object store, any object under the prefix)? */
export async function exists(p: string): Promise<boolean> {
  if (!isRemote(p)) return lstat(p).then(() => true, () => false);
  return (await fileInfo(p)) !== null || (await listNames(p)).length > 0;
}

/** Bytes of every file under `dir`. */
export async function treeSize(dir: string): Promise<number> {
  if (!isRemote(dir)) {
    let total = 0;
    for (const name of await listNames(dir)) {
      const p = path.join(dir, name);
      total += name.endsWith("/") ? await treeSize(p) : ((await lstat(p).catch(() => null))?.size ?? 0);
    }
    return total;
  }
  const { store, key } = await objectOf(dir);
  return (await store.objects(dirKey(key))).reduce((n, o) => n + o.size, 0);
}
