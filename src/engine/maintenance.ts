// Table maintenance with LanceDB's `optimize`: it compacts small fragments and fragments with
// deleted rows, folds rows added since an index was built into the index (vector, scalar, FTS),
// and removes versions older than a cutoff. LanceDB 0.39's Node API runs compaction and index
// upkeep together; the cleanup is skipped by a cutoff no version is older than (the epoch).
// Each fold adds a segment to a vector index, and Lance compacts only fragments that the same
// segments cover, so a vector index past a number of segments is rebuilt whole first.
import type * as lancedb from "@lancedb/lancedb";
import { recordTableFigures } from "../metrics.js";
import { buildIndex, friendlyType, isVectorKind, type IndexBuildSpec, type IndexParams } from "./indexes.js";
import { engineReason, errorText, isCommitConflict } from "./messages.js";
import { listVersions } from "./version-list.js";

/** What maintenance looks at and changes, per table and branch. */
export interface TableFigures {
  fragments: number;
  small_fragments: number;
  rows: number;
  /** Data and index bytes the current version references (deletion files and manifests excluded). */
  bytes: number;
  versions: number;
  /** Rows each index does not cover yet (searched by brute force), by index name. */
  unindexed_rows: Record<string, number>;
  /** Rows deleted but still in their fragments (read past on every scan until a compaction). */
  deleted_rows: number;
  /** Segments of each vector index (one per fold since its build), by index name. */
  index_segments: Record<string, number>;
}

export async function tableFigures(table: lancedb.Table): Promise<TableFigures> {
  const [s, versions, indexes] = await Promise.all([table.stats(), listVersions(table), table.listIndices()]);
  const unindexed: Record<string, number> = {};
  const segments: Record<string, number> = {};
  for (const ix of indexes) {
    const st = await table.indexStats(ix.name);
    unindexed[ix.name] = st?.numUnindexedRows ?? 0;
    if (isVectorKind(friendlyType(ix.indexType))) segments[ix.name] = st?.numIndices ?? 1;
  }
  const f: TableFigures = {
    fragments: s.fragmentStats.numFragments,
    small_fragments: s.fragmentStats.numSmallFragments,
    rows: s.numRows,
    bytes: s.totalBytes,
    versions: versions.length,
    unindexed_rows: unindexed,
    // The manifest's count of rows in deletion files (Lance's own version metadata).
    deleted_rows: Number(versions[versions.length - 1]?.metadata.total_deletion_file_rows ?? 0),
    index_segments: segments,
  };
  return f;
}

/** Whether any index of `table` misses rows (a write committed since its last fold). */
async function hasUnindexedRows(table: lancedb.Table): Promise<boolean> {
  for (const ix of await table.listIndices()) if (((await table.indexStats(ix.name))?.numUnindexedRows ?? 0) > 0) return true;
  return false;
}

/** Keep `f` for /metrics as the latest figures of `table`'s `branch`. */
export function exportFigures(table: string, branch: string | null, f: TableFigures): void {
  recordTableFigures(table, branch, {
    fragments: f.fragments,
    small_fragments: f.small_fragments,
    unindexed_rows: Object.values(f.unindexed_rows).reduce((a, b) => a + b, 0),
    deleted_rows: f.deleted_rows,
    versions: f.versions,
    bytes: f.bytes,
  });
}

export interface OptimizeResult {
  fragments_removed: number;
  fragments_added: number;
  versions_removed: number;
  bytes_removed: number;
}

// A steady stream of writes can outrun the engine's own commit retries (measured: a compaction at
// the lowest priority under back-to-back single-row inserts failed with "Too many concurrent
// writers"); each attempt that commits leaves less for the next.
const ATTEMPTS = 4;
const contended = (err: unknown) => isCommitConflict(err) || /Too many concurrent writers/.test(errorText(err));

/** One `optimize` call, retried while a stream of commits outruns it. */
async function optimizeOnce(table: lancedb.Table, cleanupBefore: Date): Promise<lancedb.OptimizeStats> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await table.optimize({ cleanupOlderThan: cleanupBefore });
    } catch (err) {
      if (!contended(err) || attempt >= ATTEMPTS) throw err;
      await table.checkoutLatest();
    }
  }
}

/**
 * Compact, update indexes and, when `cleanupBefore` is given, remove the versions committed before
 * the time it gives (Lance itself keeps the current version and the versions branches start from).
 * The versions an `optimize` call commits are newer than the cutoff it was given, and keep the
 * files its compaction replaced (measured: a table with half its rows deleted kept 3.3x the bytes
 * of a fresh copy), so a second call with a cutoff taken after the first removes them, unless an
 * index misses rows written in between: the second call would then fold them too, one more
 * fragment and index segment that no later call merges (a stream split the index twice as fast),
 * and the next job removes those files instead.
 */
export async function optimizeTable(table: lancedb.Table, cleanupBefore: (() => Promise<Date>) | null): Promise<OptimizeResult> {
  const s = await optimizeOnce(table, (await cleanupBefore?.()) ?? new Date(0));
  let { oldVersionsRemoved, bytesRemoved } = s.prune;
  if (cleanupBefore !== null && !(await hasUnindexedRows(table))) {
    const again = await optimizeOnce(table, await cleanupBefore());
    oldVersionsRemoved += again.prune.oldVersionsRemoved;
    bytesRemoved += again.prune.bytesRemoved;
  }
  return {
    fragments_removed: s.compaction.fragmentsRemoved,
    fragments_added: s.compaction.fragmentsAdded,
    versions_removed: oldVersionsRemoved,
    bytes_removed: bytesRemoved,
  };
}

/** A vector index rebuilt whole by maintenance. */
export interface RebuiltIndex {
  name: string;
  /** Its segments before. */
  segments: number;
  /** Its own build's parameters (recorded when Quiver built it), or LanceDB's defaults with its distance type. */
  params: "recorded" | "defaults";
  ms: number;
  /** Why the rebuild failed (the index is left as it was). */
  error?: string;
}

/**
 * Rebuild each vector index of `table` that has more than `maxSegments` segments (0: never), with
 * the parameters of its recorded build where the record matches it (same type and column), else
 * LanceDB's defaults with the index's distance type. The rebuilt index replaces the old one in one
 * commit, covering every row with one segment; rows written meanwhile are left for the fold.
 */
export async function rebuildSegmentedIndexes(table: lancedb.Table, maxSegments: number, recorded: readonly IndexBuildSpec[]): Promise<RebuiltIndex[]> {
  if (maxSegments <= 0) return [];
  const rebuilt: RebuiltIndex[] = [];
  for (const ix of await table.listIndices()) {
    const kind = friendlyType(ix.indexType);
    if (!isVectorKind(kind)) continue;
    const st = await table.indexStats(ix.name);
    const segments = st?.numIndices ?? 1;
    if (segments <= maxSegments) continue;
    const column = ix.columns[0];
    const own = recorded.find((s) => s.name === ix.name && s.kind === kind && s.column === column);
    const params: IndexParams = own?.params ?? (st?.distanceType ? { distance_type: st.distanceType } : {});
    const started = performance.now();
    const done = (error?: string): RebuiltIndex => ({ name: ix.name, segments, params: own ? "recorded" : "defaults", ms: Math.round(performance.now() - started), ...(error ? { error } : {}) });
    try {
      await buildIndex(table, column, kind, params, ix.name, true);
      rebuilt.push(done());
    } catch (err) {
      rebuilt.push(done(engineReason(err)));
    }
  }
  return rebuilt;
}

/**
 * The latest cleanup cutoff that keeps every version in `kept`: the commit time of the oldest of
 * them that still exists (Infinity when none does). Versions strictly older than a cutoff are
 * removed; a timestamp truncated to the millisecond never passes the version it came from.
 */
export function keptBound(versions: readonly lancedb.Version[], kept: Iterable<number>): number {
  const keep = new Set(kept);
  let bound = Infinity;
  for (const v of versions) if (keep.has(v.version)) bound = Math.min(bound, v.timestamp.getTime());
  return bound;
}

/**
 * A cleanup cutoff, taken now: the start of the retention window, or later where that keeps only
 * the newest `maxVersions` (0: no such bound), but never later than `bound`. Every commit is a
 * version, and each re-check of a table lists them all: under a write stream a time window alone
 * keeps thousands.
 */
export async function cleanupCutoff(table: lancedb.Table, retainMs: number, bound: number, maxVersions: number): Promise<Date> {
  let from = Date.now() - retainMs;
  if (maxVersions > 0) {
    const newestFirst = (await listVersions(table)).map((v) => v.timestamp.getTime()).sort((a, b) => b - a);
    if (newestFirst.length > maxVersions) from = Math.max(from, newestFirst[maxVersions - 1]);
  }
  return new Date(Math.min(from, bound));
}
