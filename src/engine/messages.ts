// LanceDB's error texts: the one place they are read and cleaned. Every module that matches an
// engine error (queries, writes, schema changes, refs, indexes) starts from these two functions.

/** The raw text of an engine error. */
export const errorText = (err: unknown): string => String((err as Error)?.message ?? err);

/** Wrappers the engine puts before its reason, possibly several deep. */
const PREFIX =
  /^(Job failed: |Failed to [^:]*: (GenericFailure, )?|lance error: |LanceError\(\w+\): |Invalid (user )?input(, |: )|Query Execution error: )/;

/** The engine's own reason, without call-site prefixes, source paths, schema dumps and "Caused by" tails. */
export function engineReason(err: unknown): string {
  let s = errorText(err)
    .replace(/\s*Caused by:[\s\S]*$/, "")
    .replace(/,? (location: )?\/\S+\.rs:\d+:\d+/g, "")
    .replace(/:? (in schema: ?)?Schema \{[\s\S]*$/, "")
    // The engine parses a filter as `SELECT 1 FROM t WHERE <filter>`; the client only wrote the filter.
    .replace(/SELECT 1 FROM t WHERE /g, "")
    .trim();
  for (let prev = ""; prev !== s; ) [prev, s] = [s, s.replace(PREFIX, "")];
  return s;
}

/** A commit that lost a race with another writer (the caller may retry). */
export const isCommitConflict = (err: unknown) =>
  /[Cc]ommit conflict|Retryable commit|conflicting transaction|CommitConflict/.test(errorText(err));

/** Why Quiver installs no LSM write spec, and refuses merge_insert on a table that has one (src/operations/lsm.ts). */
export const LSM_UNSUPPORTED =
  "LanceDB's LSM write path: this server's engine (LanceDB 0.39, local tables) accepts a write spec but cannot flush, compact or checkpoint its MemWAL, so merge_insert rows would never become visible";

/**
 * A commit the engine gave up on after its own retries (`Too many concurrent writers … retry_timeout`),
 * e.g. replicas creating tables at once on the shared catalog table: the client may retry it.
 */
export const isWriterContention = (err: unknown) => /Too many concurrent writers/.test(errorText(err));

/**
 * The object store refused the engine's requests for load, after its own retries (HTTP 429 or 503:
 * S3's SlowDown, Azure's ServerBusy): the store's request rate limits are reached.
 */
export const isStoreThrottled = (err: unknown) => /non-2xx status code: (429|503)\b|\bSlowDown\b|\bServerBusy\b|\bTooManyRequests\b/.test(errorText(err));

/**
 * The table's data, deletion or index file the engine did not find (`Not found: <path>`), relative
 * to the table directory; null for any other failure.
 */
export function missingTableFile(err: unknown): string | null {
  return /Not found: \S*\/((?:data|_deletions|_indices)\/[^\s,]+)/.exec(errorText(err))?.[1] ?? null;
}

/** Whether the engine failed because a table version it was asked for no longer exists (or never did). */
export const isVersionMissing = (err: unknown) => /Version not found error|_versions\/\d+\.manifest was not found/.test(errorText(err));

/**
 * A store this process cannot write (a full disk, a read-only file system, no permission), from
 * Node's fs (its code) or LanceDB (the OS text it passes on): the operator's to fix, said as such.
 * Null for any other failure.
 */
export function storageFault(err: unknown): string | null {
  const code = (err as NodeJS.ErrnoException)?.code;
  const text = errorText(err);
  if (code === "ENOSPC" || /No space left on device|os error 28\b/.test(text)) return "the data directory's disk is full (no space left on device); writes fail until space is freed";
  if (code === "EROFS" || /Read-only file system|os error 30\b/.test(text)) return "the data directory is on a read-only file system; writes fail until it is writable";
  if (code === "EACCES" || code === "EPERM" || /Permission denied|os error 13\b/.test(text)) return "this server may not write to the data directory (permission denied); writes fail until it may";
  return null;
}
