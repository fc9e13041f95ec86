// This replica's wall clock, where readings are compared with other replicas' (job leases, a job's
// times) or with the store's (the skew check at start). QUIVER_TEST_CLOCK_OFFSET_MS, for tests
// only, shifts these readings by that many milliseconds, as a host whose clock is off would
// (docs/operations.md, Leases and clocks); durations use performance.now(), which it leaves alone.
import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { fileInfo, isRemote, joinPath, removeFile, writeIfAbsent } from "./store-files.js";

const offsetMs = Number(process.env.QUIVER_TEST_CLOCK_OFFSET_MS ?? 0) || 0;

/** Milliseconds since the epoch, as this replica's clock reads them. */
export const wallClock = () => Date.now() + offsetMs;

/**
 * Last-Modified has whole seconds on object stores: the store's time of a write lies within this
 * of its stamp, either way (a store may round rather than truncate).
 */
const STAMP_MS = 1000;

/**
 * How far this replica's clock is off the store's (positive: ahead), at least: a file written in
 * `dir` and its stamp read back (an object's Last-Modified; on local disk the file's mtime, the
 * kernel's clock), the write bracketed by this clock's readings before and after. Only what the
 * stamp's resolution and the round trip cannot explain counts, so a clock in step measures 0.
 */
export async function measureSkew(dir: string): Promise<number> {
  if (!isRemote(dir)) await mkdir(dir, { recursive: true });
  const probe = joinPath(dir, `clock-check-${randomUUID()}`);
  const before = wallClock();
  await writeIfAbsent(probe, Buffer.from(new Date(before).toISOString()));
  const info = await fileInfo(probe);
  const after = wallClock();
  await removeFile(probe);
  if (!info) throw new Error(`${probe} was written but cannot be read back`);
  if (before - STAMP_MS > info.mtimeMs) return Math.round(before - STAMP_MS - info.mtimeMs);
  if (after + STAMP_MS < info.mtimeMs) return Math.round(after + STAMP_MS - info.mtimeMs);
  return 0;
}
