// The after-commit event: every commit Quiver makes or publishes to a table is announced here, once,
// and what must follow a commit (cache eviction, follow-up backfills, view refreshes) subscribes.
import type { Entry } from "../catalog/catalog.js";
import { log } from "../log.js";
import type { Deadline } from "./deadline.js";

/** What a commit changed. */
export type Change =
  | "insert"
  | "merge_insert"
  | "update"
  | "delete"
  | "schema"
  | "index"
  | "restore"
  /** A version published by a managed-versioning writer (or withdrawn when its batch failed). */
  | "version"
  /** Versions deleted from the history. */
  | "history"
  /** A table created again over its old data (mode overwrite). */
  | "overwrite"
  | "backfill"
  | "refresh"
  /** Compaction, index optimisation or cleanup of old versions. */
  | "maintenance";

export interface Commit {
  table: Entry;
  /** null for the main branch. */
  branch: string | null;
  /** The version the commit made, when the engine reports it. */
  version: number | null;
  change: Change;
  /** Rows the commit inserted, updated or deleted, when known. */
  rows: number | null;
  /** The cached handle of the table's latest main made this commit (so it has seen it already). */
  byCachedHandle: boolean;
  /**
   * "append" when the commit is, for certain, Lance's Append (new rows and nothing else, as an
   * insert in mode append is): the serving index then knows the version without reading its manifest.
   */
  operation?: "append";
  /** The deadline of the request whose write this is: what it waits for after its commit is bounded by it. */
  deadline?: Deadline;
}

export type CommitSubscriber = (commit: Commit) => void | Promise<void>;

export interface Commits {
  /** Tell every subscriber; resolves once those the write waits for (subscribeAwaited) are done. */
  announce(commit: Commit): Promise<void>;
  subscribe(subscriber: CommitSubscriber): void;
  /** A subscriber whose work the write waits for before it is answered (the serving index's update). */
  subscribeAwaited(subscriber: CommitSubscriber): void;
}

export function createCommits(): Commits {
  const subscribers: CommitSubscriber[] = [];
  const awaited: CommitSubscriber[] = [];
  return {
    announce(commit) {
      // Synchronously, so that eviction happens before the write is answered. A subscriber's failure
      // is its own: the commit stands and the others still hear of it.
      const failed = (err: unknown) => log.warn("after-commit subscriber failed", { table: commit.table.objectId, change: commit.change, error: String(err) });
      const run = (s: CommitSubscriber) => {
        try {
          return s(commit)?.catch(failed);
        } catch (err) {
          failed(err);
        }
      };
      for (const s of subscribers) void run(s);
      return Promise.all(awaited.map(run)).then(() => undefined);
    },
    subscribe(subscriber) {
      subscribers.push(subscriber);
    },
    subscribeAwaited(subscriber) {
      awaited.push(subscriber);
    },
  };
}
