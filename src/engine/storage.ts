// Where the tables live: a local directory (a path or file://, the default) or an object store
// (s3://, gs://, az://), with the storage options every LanceDB call and every job process gets.
// The files Quiver reads and writes beside LanceDB's (markers, manifest files, listings) go
// through util/store-files.ts, on either.
import { isRemote, useStorageOptions } from "../util/store-files.js";

export { isRemote, useStorageOptions };

/** The directory namespace takes storage options only as `storage.`-prefixed properties. */
export const namespaceProperties = (options: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(options).map(([k, v]) => [`storage.${k}`, v]));

/** Resolves with `p`, or rejects with `message` after `ms` (a store that never answers). */
export function withDeadline<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
    timer.unref();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
