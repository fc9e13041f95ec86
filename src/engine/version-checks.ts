// Whether a version of a table's main branch can still be read (versions.ts, goneFile), kept per
// table directory and version. A check reads the version's manifest and lists the table's data,
// deletion and index directories: a GET and three LISTs on an object store, and work on the event
// loop that grows with the table's files. A time-travel read checks its version on every request,
// so the answer is kept until the consistency interval (the staleness Quiver allows for other
// processes' writes) has passed since it was checked. While this server's cleanup of the table
// runs, versions are checked against storage every time, and what was kept is forgotten when it
// starts and when it ends (succeeded or not: one that failed part way removed files too), as when
// the table is dropped or its history changes (a version deleted can be published again with
// other files). A cleanup by another process within the interval is met by the read itself: the
// engine's error for the missing file is answered 404 as this check would (query-errors.ts,
// cleanedVersionError).
import { goneFile, storedFiles } from "./versions.js";

/** Tables whose answers are kept, the least recently checked dropped first. */
const MAX_TABLES = 1024;
/** Versions of one table whose answers are kept, the least recently checked dropped first. */
const MAX_VERSIONS = 128;

export interface VersionChecks {
  /**
   * The first file of `version` no longer stored, or null (see goneFile). `recheck`: asked of
   * storage, neither answered from nor kept (a restore: restoring an unreadable version makes a
   * latest version nothing reads).
   */
  gone(dir: string, version: number, recheck?: boolean): Promise<string | null>;
  /** A cleanup of the table at `dir` runs until `ended` settles. */
  cleaning(dir: string, ended: Promise<unknown>): void;
  /** Forget what is kept of the table at `dir` (the table dropped, its history changed). */
  forget(dir: string): void;
}

interface Kept {
  answer: Promise<string | null>;
  /** When the check began: storage was as answered at least from then. */
  at: number;
}

export function createVersionChecks(intervalMs: number, now: () => number = Date.now): VersionChecks {
  // table directory → version → its answer; both maps in the order their entries were checked.
  const tables = new Map<string, Map<number, Kept>>();
  // table directory → cleanups of it running
  const cleanups = new Map<string, number>();
  const check = async (dir: string, version: number) => goneFile(dir, version, await storedFiles(dir));
  return {
    gone(dir, version, recheck = false) {
      if (recheck || intervalMs <= 0 || cleanups.has(dir)) return check(dir, version);
      let versions = tables.get(dir);
      const kept = versions?.get(version);
      const at = now();
      if (kept && at - kept.at < intervalMs) return kept.answer;
      const answer = check(dir, version);
      if (versions) tables.delete(dir);
      else versions = new Map();
      tables.set(dir, versions);
      if (tables.size > MAX_TABLES) tables.delete(tables.keys().next().value!);
      versions.delete(version);
      const entry: Kept = { answer, at };
      versions.set(version, entry);
      if (versions.size > MAX_VERSIONS) versions.delete(versions.keys().next().value!);
      // A check that failed (the store did not answer) is no answer to keep.
      answer.catch(() => versions.get(version) === entry && versions.delete(version));
      return answer;
    },
    cleaning(dir, ended) {
      tables.delete(dir);
      cleanups.set(dir, (cleanups.get(dir) ?? 0) + 1);
      const end = () => {
        const n = cleanups.get(dir)! - 1;
        if (n === 0) cleanups.delete(dir);
        else cleanups.set(dir, n);
        tables.delete(dir);
      };
      ended.then(end, end);
    },
    forget(dir) {
      tables.delete(dir);
    },
  };
}
