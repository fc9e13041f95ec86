// One bucket (or container) of an object store, as Quiver's own files there need it: listing,
// reading, a put-if-absent and removal. One implementation per kind of store
// (azure.ts, s3.ts, gcs.ts beside this file), each on that store's own SDK, loaded at its first use.

export interface StoredObject {
  key: string;
  size: number;
  eTag: string;
  mtimeMs: number;
}

export interface ObjectStore {
  /** Names directly under `prefix` (which ends with "/"): objects, and sub-prefixes ending with "/". */
  children(prefix: string): Promise<string[]>;
  /** Every object under `prefix`. */
  objects(prefix: string): Promise<StoredObject[]>;
  /** The object at `key`; null when there is none. */
  head(key: string): Promise<StoredObject | null>;
  /** The object's bytes; null when there is none. */
  get(key: string): Promise<Buffer | null>;
  /** Write `data` at `key` with the store's conditional put (`If-None-Match: *` or its like): false when an object is there. */
  putIfAbsent(key: string, data: Buffer): Promise<boolean>;
  /** Remove these objects; a missing one is nothing to do. */
  remove(keys: string[]): Promise<void>;
}

/** The first of `names` given in the data directory's storage options (object_store's names, as LanceDB takes them), or of `env` in the environment. */
export type StorageOption = (names: string[], env?: string[]) => string | undefined;

/** An entity tag without the quotes HTTP puts around it. */
export const bareETag = (e: string | undefined | null) => (e ?? "").replace(/^"|"$/g, "");

/** The HTTP status an SDK's error carries, if any. */
export function statusOf(err: unknown): number | undefined {
  const e = err as { statusCode?: number; code?: number | string; $metadata?: { httpStatusCode?: number } };
  return e?.statusCode ?? e?.$metadata?.httpStatusCode ?? (typeof e?.code === "number" ? e.code : undefined);
}
