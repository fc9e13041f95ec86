// One LanceDB session for all of this process's connections (tables, catalog, system tables), so
// their caches share one bound. Each connection made without one got its own session, whose
// metadata cache (manifests and file footers of every version and fragment read) may grow to
// 1 GiB: measured, every table created kept ~80 KB there for good (docs/performance.md, "Memory
// per table"). The index cache keeps LanceDB's size.
import * as lancedb from "@lancedb/lancedb";

/** For processes that never set it (tools, job processes): the option's default. */
const DEFAULT_METADATA_CACHE_MB = 64;
let session: lancedb.Session | undefined;

/** Set the metadata cache's bound (--engine-metadata-cache-mb), before the first connection. */
export function useMetadataCache(mb: number): void {
  session = new lancedb.Session(undefined, BigInt(mb) << 20n);
}

/** The session every connection of this process is made with. */
export const engineSession = (): lancedb.Session => (session ??= new lancedb.Session(undefined, BigInt(DEFAULT_METADATA_CACHE_MB) << 20n));
