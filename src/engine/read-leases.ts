// Versions read at explicitly (time travel, a tag), remembered for a while so a cleanup running
// meanwhile does not remove files a read in progress still needs. A read holds its version for
// READ_LEASE_MS from when it opened the table; reads of the latest version need no lease (the
// current version is never removed).
const READ_LEASE_MS = 10 * 60_000;

export interface ReadLeases {
  /** A read of `version` on `branch` (null: main) of the table at `location` starts now. */
  touch(location: string, branch: string | null, version: number): void;
  /** Versions of `branch` read within the lease. */
  held(location: string, branch: string | null): number[];
}

export function createReadLeases(now: () => number = Date.now): ReadLeases {
  // table and branch → version → when it was last opened
  const reads = new Map<string, Map<number, number>>();
  const keyOf = (location: string, branch: string | null) => `${location}\u0000${branch ?? ""}`;
  return {
    touch(location, branch, version) {
      const k = keyOf(location, branch);
      (reads.get(k) ?? reads.set(k, new Map()).get(k)!).set(version, now());
    },
    held(location, branch) {
      const k = keyOf(location, branch);
      const versions = reads.get(k);
      if (!versions) return [];
      const since = now() - READ_LEASE_MS;
      for (const [v, at] of versions) if (at < since) versions.delete(v);
      if (versions.size === 0) reads.delete(k);
      return [...versions.keys()];
    },
  };
}
