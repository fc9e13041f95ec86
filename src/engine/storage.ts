// Where the tables live: a local directory (a path or file://, the default) or an object store
// (s3://, gs://, az://), with the storage options every LanceDB call and every job process gets.
// The files Quiver reads and writes beside LanceDB's (markers, manifest files, listings) go
// through util/store-files.ts, on either.
import * as lancedb from "@lancedb/lancedb";
import { isRemote, storageOptions, useStorageOptions } from "../util/store-files.js";

export { isRemote, useStorageOptions };

/** The directory namespace takes storage options only as `storage.`-prefixed properties. */
export const namespaceProperties = (options: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(options).map(([k, v]) => [`storage.${k}`, v]));

/** Split a remote table URI into its parent and its `<name>.lance` stem. */
function splitUri(uri: string): { parent: string; name: string | null } {
  const at = uri.replace(/\/+$/, "").lastIndexOf("/");
  const last = uri.slice(at + 1);
  return { parent: uri.slice(0, at), name: /^[A-Za-z0-9_.-]+\.lance$/.test(last) ? last.slice(0, -".lance".length) : null };
}

const connections = new Map<string, Promise<lancedb.Connection>>();
function connectionTo(parent: string): Promise<lancedb.Connection> {
  let c = connections.get(parent);
  if (!c) {
    c = lancedb.connect(parent, { storageOptions: storageOptions() });
    connections.set(parent, c);
    c.catch(() => connections.delete(parent));
  }
  return c;
}

const NOT_FOUND = /not found|does not exist|NotFound/i;

/** Does the remote table directory hold a committed Lance version (can LanceDB open it)? */
export async function remoteHasVersions(uri: string): Promise<boolean> {
  const { parent, name } = splitUri(uri);
  if (name === null) return false;
  try {
    await (await connectionTo(parent)).openTable(name);
    return true;
  } catch (err) {
    if (NOT_FOUND.test(String((err as Error)?.message ?? err))) return false;
    throw err;
  }
}

/** Remove a remote table's files through LanceDB (nothing there: nothing to do). */
export async function remoteRemove(uri: string): Promise<void> {
  const { parent, name } = splitUri(uri);
  if (name === null) return;
  try {
    await (await connectionTo(parent)).dropTable(name);
  } catch (err) {
    if (!NOT_FOUND.test(String((err as Error)?.message ?? err))) throw err;
  }
}

/** Resolves with `p`, or rejects with `message` after `ms` (a store that never answers). */
export function withDeadline<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
    timer.unref();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
