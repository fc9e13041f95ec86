// Commit spacing: while a table branch holds at least as many small fragments as automatic
// maintenance's threshold, the commits of its group commit (src/engine/group-commit.ts) start at
// least an interval apart, so the writers that arrive meanwhile share one commit and one fragment.
// Every append is a fragment, and every fragment stays until a maintenance job compacts it; a
// stream of single-row inserts (20 a second) added fragments faster than jobs removed them, and
// while an index rebuild held the table's maintenance slot for seconds they ran away
// (docs/maintenance.md). The interval grows with the small fragments past the threshold, up to
// MAX_FACTOR times the base, so an insert waits at most that long for its commit to start; while a
// maintenance job rebuilds an index (it holds the table branch's maintenance slot for seconds, and
// nothing is compacted meanwhile) the interval is REBUILD_FACTOR times the base. What maintenance
// last saw is counted on by the commits since: each adds at most one fragment. A group of
// BULK_ROWS rows or more is a bulk load's, whose fragments are few: it is never held back.

/** The interval grows in proportion to the small fragments over the threshold, up to this many times the base. */
const MAX_FACTOR = 2;
const REBUILD_FACTOR = 5;
const BULK_ROWS = 1000;

export interface CommitSpacing {
  /** What automatic maintenance saw of table branch `key`: its small fragments, and its threshold (0: no spacing). */
  seen(key: string, smallFragments: number, threshold: number): void;
  /** Automatic maintenance saw a job rebuilding an index of table branch `key` (until the next `seen`). */
  rebuilding(key: string): void;
  /** How long the next commit of table branch `key`, of `rows` rows, waits before it starts (ms), now. */
  wait(key: string, rows: number): number;
  /** A commit of table branch `key` starts. */
  started(key: string): void;
}

/** The key of a table branch (a table's object id and its branch, null for main). */
export const spacingKey = (objectId: string, branch: string | null | undefined) => `${objectId}\u0000${branch ?? ""}`;

/** Spacing of `baseMs` (0: none) at the threshold, growing with the small fragments past it. */
export function createCommitSpacing(baseMs: number): CommitSpacing {
  const state = new Map<string, { small: number; threshold: number; commits: number; lastStart: number; rebuilding: boolean }>();
  return {
    seen(key, smallFragments, threshold) {
      if (threshold <= 0 || baseMs <= 0) return void state.delete(key);
      const s = state.get(key);
      state.set(key, { small: smallFragments, threshold, commits: 0, lastStart: s?.lastStart ?? 0, rebuilding: false });
    },
    rebuilding(key) {
      const s = state.get(key);
      if (s) s.rebuilding = true;
    },
    wait(key, rows) {
      const s = state.get(key);
      if (!s || rows >= BULK_ROWS) return 0;
      const small = s.small + s.commits;
      if (small < s.threshold) return 0;
      const interval = baseMs * (s.rebuilding ? REBUILD_FACTOR : Math.min(MAX_FACTOR, small / s.threshold));
      return Math.max(0, s.lastStart + interval - Date.now());
    },
    started(key) {
      const s = state.get(key);
      if (!s) return;
      s.commits++;
      s.lastStart = Date.now();
    },
  };
}
