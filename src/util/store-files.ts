// The files Quiver reads and writes beside LanceDB's in the data directory (a managed version's
// manifest, a declared table's marker, orphan table directories), on a local directory (node:fs)
// or an object store (Apache OpenDAL, given the storage options LanceDB gets), so those features
// work the same on both. Paths are absolute local paths or `s3://`, `gs://`, `az://` URIs.
// Put-if-absent is the store's own: a hard link locally (the name appears whole or not at all), a
// conditional PUT (`If-None-Match: *`) on an object store.
import { link, lstat, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Operator } from "opendal";
import { isRemote } from "../config.js";

export { isRemote };

/** The storage options LanceDB gets on this process's data directory (set once the tables open, in the server and in each job process). */
let current: Record<string, string> = {};

export function useStorageOptions(options: Record<string, string> | undefined): void {
  current = { ...(options ?? {}) };
  operators.clear();
}

export const storageOptions = (): Record<string, string> => current;

export interface FileInfo {
  size: number;
  /** The store's entity tag; locally object_store's: inode, mtime (µs) and size in hex. */
  eTag: string;
  mtimeMs: number;
}

/** `rel` (slash-separated) inside `dir`. */
export const joinPath = (dir: string, rel: string) => (isRemote(dir) ? `${dir.replace(/\/+$/, "")}/${rel}` : path.join(dir, rel));

/** The first of `names` given in the options, or in the environment as `env`. */
function option(names: string[], env: string[] = []): string | undefined {
  for (const n of names) if (current[n] !== undefined) return current[n];
  for (const e of env) if (process.env[e]) return process.env[e];
  return undefined;
}

/** OpenDAL's configuration for one bucket or container, from object_store's option names as LanceDB takes them. */
function operatorConfig(scheme: string, bucket: string): [string, Record<string, string>] {
  const defined = (o: Record<string, string | undefined>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Record<string, string>;
  if (scheme === "az") {
    const account = option(["account_name", "azure_storage_account_name"], ["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"]);
    const emulator = option(["use_emulator", "azure_storage_use_emulator"], ["AZURE_STORAGE_USE_EMULATOR"]) === "true";
    const endpoint =
      option(["azure_storage_endpoint", "endpoint"], ["AZURE_STORAGE_ENDPOINT"]) ??
      (emulator ? `${process.env.AZURITE_BLOB_STORAGE_URL ?? "http://127.0.0.1:10000"}/${account}` : `https://${account}.blob.core.windows.net`);
    const key = option(["account_key", "azure_storage_account_key", "access_key"], ["AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY"]);
    const sas = option(["sas_token", "azure_storage_sas_token", "sas_key"], ["AZURE_STORAGE_SAS_TOKEN"]);
    return ["azblob", defined({ container: bucket, endpoint, account_name: account, account_key: key, sas_token: sas })];
  }
  if (scheme === "s3") {
    return [
      "s3",
      defined({
        bucket,
        region: option(["aws_region", "region"], ["AWS_REGION", "AWS_DEFAULT_REGION"]) ?? "us-east-1",
        endpoint: option(["aws_endpoint", "endpoint", "aws_endpoint_url"], ["AWS_ENDPOINT", "AWS_ENDPOINT_URL"]),
        access_key_id: option(["aws_access_key_id", "access_key_id"]),
        secret_access_key: option(["aws_secret_access_key", "secret_access_key"]),
        session_token: option(["aws_session_token", "session_token", "token"]),
        enable_virtual_host_style: option(["aws_virtual_hosted_style_request", "virtual_hosted_style_request"]),
      }),
    ];
  }
  return [
    "gcs",
    defined({
      bucket,
      credential_path: option(["google_service_account", "service_account", "google_service_account_path", "service_account_path"], ["GOOGLE_APPLICATION_CREDENTIALS"]),
      credential: option(["google_service_account_key", "service_account_key"]),
    }),
  ];
}

const operators = new Map<string, Operator>();

/**
 * The operator of the URI's bucket and the object path inside it. OpenDAL's native module loads
 * at the first object-store call: processes on a local directory (and job processes) never load it.
 */
async function objectOf(uri: string): Promise<{ op: Operator; key: string }> {
  const m = /^([a-z0-9]+):\/\/([^/]+)\/?(.*)$/i.exec(uri)!;
  const [scheme, bucket, key] = [m[1].toLowerCase(), m[2], m[3]];
  let op = operators.get(`${scheme}://${bucket}`);
  if (!op) {
    const { Operator } = await import("opendal");
    const [service, config] = operatorConfig(scheme, bucket);
    op = new Operator(service, config);
    operators.set(`${scheme}://${bucket}`, op);
  }
  return { op, key };
}

const missingLocally = (err: unknown) => ["ENOENT", "ENOTDIR", "ENAMETOOLONG"].includes((err as NodeJS.ErrnoException).code ?? "");
const missingRemotely = (err: unknown) => /NotFound/.test(String((err as Error)?.message));
const dirKey = (key: string) => (key === "" || key.endsWith("/") ? key : `${key}/`);

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
  const { op, key } = await objectOf(dir);
  const prefix = dirKey(key);
  try {
    return (await op.list(prefix)).map((e) => e.path().slice(prefix.length)).filter((n) => n !== "");
  } catch (err) {
    if (missingRemotely(err)) return [];
    throw err;
  }
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
  const { op, key } = await objectOf(file);
  try {
    const m = await op.stat(key);
    return { size: Number(m.contentLength ?? 0), eTag: (m.etag ?? "").replace(/^"|"$/g, ""), mtimeMs: m.lastModified ? Date.parse(m.lastModified) : Date.now() };
  } catch (err) {
    if (missingRemotely(err)) return null;
    throw err;
  }
}

export async function readBytes(file: string): Promise<Buffer> {
  if (!isRemote(file)) return readFile(file);
  const { op, key } = await objectOf(file);
  return op.read(key);
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
  const { op, key } = await objectOf(file);
  try {
    await op.write(key, data, { ifNotExists: true });
    return true;
  } catch (err) {
    if (/ConditionNotMatch/.test(String((err as Error)?.message))) return false;
    throw err;
  }
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
  const { op, key } = await objectOf(file);
  await op.delete(key);
}

/** Remove a directory and everything under it. */
export async function removeTree(dir: string): Promise<void> {
  if (!isRemote(dir)) return rm(dir, { recursive: true, force: true });
  const { op, key } = await objectOf(dir);
  await op.removeAll(dirKey(key));
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
  const { op, key } = await objectOf(dir);
  const files = (await op.list(dirKey(key), { recursive: true })).filter((e) => !e.path().endsWith("/"));
  const times = await Promise.all(files.map((e) => op.stat(e.path()).then((m) => (m.lastModified ? Date.parse(m.lastModified) : Date.now()))));
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
  const { op, key } = await objectOf(dir);
  const files = (await op.list(dirKey(key), { recursive: true })).filter((e) => !e.path().endsWith("/"));
  const sizes = await Promise.all(files.map(async (e) => Number(e.metadata().contentLength ?? (await op.stat(e.path())).contentLength ?? 0)));
  return sizes.reduce((a, b) => a + b, 0);
}
