// Opening Lance tables by catalog entry, with a cache of open handles.
// Tables whose location LanceDB can open by name go through a plain connection to the data
// directory; others (e.g. LanceDB's own `<hash>_ns$t` layout) through its directory namespace.
import { setTimeout as sleep } from "node:timers/promises";
import * as lancedb from "@lancedb/lancedb";
import type { Entry } from "../catalog/catalog.js";
import { lanceNameOf, resolveLocation } from "../catalog/locations.js";
import { keyedSerial } from "../util/serial.js";
import { createCommits, type Change, type Commit, type Commits } from "./commits.js";
import { readSchema } from "./schema-ipc.js";
import { beginCommit, type Work } from "./deadline.js";
import { isRemote, namespaceProperties, useStorageOptions } from "./storage.js";
import { engineSession } from "./session.js";
import { removeTree } from "../util/store-files.js";
import { checkedRef } from "../util/ref-names.js";
import { keepFresh, type Freshness } from "../util/keep-fresh.js";
import { log } from "../log.js";
import { recordFreshnessCheck } from "../metrics.js";

/**
 * An open LanceDB table. Outside src/engine/ it is only held and handed back to engine functions:
 * this layer is the only code that calls LanceDB.
 */
export type TableHandle = lancedb.Table;

/** A version as LanceDB lists it: number, time and metadata. */
export type Version = lancedb.Version;

/** A table's schema as LanceDB gives it: shared by callers, never changed. */
export type TableSchema = Awaited<ReturnType<lancedb.Table["schema"]>>;

/**
 * Cached latest-main handles at most: past it the least recently used is dropped (its holders keep
 * it; the next open makes a new one), so a client reading many tables does not grow the process
 * for good (each handle holds its dataset's manifest).
 */
const MAX_CACHED_HANDLES = 1024;

/** Commits that change rows only: the schema after one is the schema before. */
const KEEPS_SCHEMA: ReadonlySet<Change> = new Set(["insert", "merge_insert", "update", "delete"]);

export interface OpenOptions {
  version?: number;
  branch?: string | null;
  /** A handle of its own (e.g. to check out a tag) even for the latest main. */
  fresh?: boolean;
  /** For the cached latest main: re-check storage first if the handle is older than this version. */
  minVersion?: number;
}

/** The branch a request names, or undefined for the main branch (absent, empty or "main"). */
export const namedBranch = (branch: string | null | undefined): string | undefined =>
  branch && branch !== "main" ? branch : undefined;

/** The branch as job specs store it: JSON, where the main branch is null. */
export const mainOr = (branch: string | null | undefined) => namedBranch(branch) ?? null;

/** What a write tells the after-commit event besides its table, branch and version. */
export interface WriteOf {
  change: Change;
  /** Rows touched, when the engine's result does not say (an append's). */
  rows?: number;
  /** false when the write went through a handle of its own (e.g. a restore of an old version). */
  byCachedHandle?: boolean;
  /** What the engine's commit is, when the writer knows it (Commit.operation). */
  operation?: Commit["operation"];
  /**
   * The request whose commit this is, refused once it was answered (deadline.ts, beginCommit);
   * null for a job's commit or one of several requests' rows. Passed, not read from async context:
   * that would give every promise of the process a hook (a search's main-thread time, docs/performance.md).
   */
  work: Work | null;
}

/** The version an engine result says its commit made, when it says. */
function versionOf(r: unknown): number | null {
  const v = (r as { version?: unknown } | undefined)?.version;
  return typeof v === "number" ? v : null;
}

/** Rows an engine result says its commit touched (update, delete and merge results do). */
function rowsOf(r: unknown): number | null {
  const o = (r ?? {}) as Record<string, unknown>;
  const n = ["rowsUpdated", "numDeletedRows", "numInsertedRows", "numUpdatedRows"].map((k) => o[k]).filter((v): v is number => typeof v === "number");
  return n.length ? n.reduce((a, b) => a + b, 0) : null;
}

export interface Tables {
  root: string;
  /** The data directory is on an object store. */
  remote: boolean;
  /** What LanceDB gets for the object store (job processes get them in their requests). */
  storageOptions: Record<string, string>;
  /** The latest version of the main branch, cached; other versions, branches and fresh handles opened per call. */
  open(entry: Entry, opts?: OpenOptions): Promise<TableHandle>;
  evict(objectId: string): void;
  /** Handles held in the cache (the latest main of each table opened). */
  openHandles(): number;
  /**
   * Run one commit on a table's branch at a time in this process. LanceDB reports the version its
   * handle holds after a write, which under concurrent writes can be another write's; one at a
   * time, on a handle that re-checks storage only when told to (below), it is the write's own (and
   * LanceDB's commit-conflict retries are spared).
   */
  write<T>(entry: Entry, branch: string | null | undefined, of: WriteOf, commit: () => Promise<T>): Promise<T>;
  /** Writes to a table's main branch queued, committing or not yet answered (their after-commit work running). */
  writesInFlight(objectId: string): number;
  /**
   * The version cached handle `t` of a table holds, as last read (at its open, re-checks and this
   * process's commits), without asking the engine; null for another handle or before it is known.
   */
  knownVersion(objectId: string, t: TableHandle): number | null;
  /**
   * The schema of `t`, a handle `open` gave for `entry`. The cached latest main's is read once per
   * version and kept over this process's commits that change rows only: a write used to read it
   * three times on the event loop (its check, the after-commit event, its search's filter), each
   * a decode of the engine's IPC schema.
   */
  schemaOf(entry: Entry, t: TableHandle): Promise<TableSchema>;
  /** The after-commit event: writes announce themselves; jobs and version publishing announce theirs. */
  commits: Commits;
  /** Delete a table's data directory (never outside the data directory). */
  removeData(entry: Entry): Promise<void>;
  /** Be told of each table whose data is removed (a drop), after the removal. */
  onRemoved(listener: (entry: Entry) => void): void;
  /**
   * Be told when a background check (--keep-fresh-ms) is about to move a cached table to its
   * newest version, and given up to an eighth of the interval to catch up first (undefined: nothing
   * to do): the serving index syncs then, so a search after the move finds it there already
   * instead of waiting for the sync.
   */
  beforeMove(listener: (entry: Pick<Entry, "objectId" | "location">) => Promise<void> | undefined): void;
  /**
   * Whether this process removed a table's data at `location`. LanceDB's session keeps what it read
   * of a dataset by its path and version, so a new dataset at that path was searched with the
   * removed one's index (rows of another table answered, found by the differential test): a new
   * table takes another location.
   */
  removedHere(location: string): boolean;
  /** Stop re-checking cached handles in the background. */
  close(): void;
  plain: lancedb.Connection;
  namespaced: lancedb.Connection;
}

/** Handles opened at a version of the main branch a request named: the table's id and the version. */
const pinned = new WeakMap<lancedb.Table, { table: string; version: number }>();

/** The table and version `t` was opened at, when a request named the version (main branch only). */
export const pinnedVersion = (t: TableHandle) => pinned.get(t);

/** Locations of removed tables remembered (`removedHere`). */
const MAX_REMOVED_LOCATIONS = 65_536;

export async function openTables(root: string, freshness: Freshness, objectStore: Record<string, string> = {}): Promise<Tables> {
  useStorageOptions(objectStore);
  // Tables Quiver creates get stable row ids: materialized views need them on their source, and
  // they record when each row was last updated, which tells a backfill which values are stale.
  const storageOptions = { ...objectStore, new_table_enable_stable_row_ids: "true" };
  // Handles never re-check storage on their own: LanceDB's interval re-check also runs between a
  // commit and the version an add reports, which then names a later commit by another process
  // (measured: 4 processes appending at interval 0 were answered 108 distinct versions for 120
  // commits). Cached handles are re-checked here instead, before use when older than the interval,
  // and before every commit (a stale handle's merge inserts a key another process added, and its
  // delete misses rows).
  const plain = await lancedb.connect(root, { storageOptions, session: engineSession() });
  // The directory namespace reads object store options only as `storage.` properties.
  const namespaced = await lancedb.connectNamespace(
    "dir",
    { root, extraProperties: namespaceProperties(objectStore) },
    { storageOptions, session: engineSession() },
  );
  /** A cached latest main: when it was last read, when storage was last checked for newer commits, and the check running. */
  interface Cached {
    objectId: string;
    /** The data it was opened on: a name renamed away and taken by a new table names other data. */
    location: string | null;
    handle: Promise<lancedb.Table>;
    /** The handle once open, and the version it holds as last read (-1 until read). */
    table: lancedb.Table | null;
    version: number;
    /** The schema at a version the handle held. */
    schema: { version: number; value: TableSchema } | null;
    usedAt: number;
    checkedAt: number;
    checking: Promise<void> | null;
  }
  const cache = new Map<string, Cached>();
  const movers: ((entry: Pick<Entry, "objectId" | "location">) => Promise<void> | undefined)[] = [];
  /** Before a background check moves `c`: its followers' catch-up, bounded so that a read is rarely left to wait for the check. */
  const catchUp = async (c: Cached) => {
    const ups = movers.map((m) => m(c)).filter((p) => p !== undefined);
    if (ups.length > 0) await Promise.race([Promise.all(ups).catch(() => undefined), sleep(freshness.intervalMs / 8, undefined, { ref: false })]);
  };
  const recheck = (c: Cached, t: lancedb.Table, ahead = false) =>
    (c.checking ??= (async () => {
      const at = Date.now();
      recordFreshnessCheck("table", ahead);
      if (ahead) await catchUp(c);
      await t.checkoutLatest();
      c.version = await t.version();
      c.checkedAt = at;
    })().finally(() => (c.checking = null)));
  /**
   * Tables whose main branch is committing: not re-checked ahead, since a check between a commit
   * and the version the engine reports for it can make that another process's later commit.
   */
  const committing = new Set<string>();
  const checkAhead = async (c: Cached) => {
    if (committing.has(c.objectId)) return;
    await c.handle.then((t) => recheck(c, t, true)).catch((err: unknown) => log.debug("table check failed", { table: c.objectId, error: String(err) }));
  };
  const stopKeeping = keepFresh(freshness, () => cache.values(), checkAhead);
  async function latest(entry: Entry, minVersion: number | undefined): Promise<lancedb.Table> {
    let c = cache.get(entry.objectId);
    // Opened for the entry the name had before (by a read in flight across a rename): not this table.
    if (c && c.location !== entry.location) c = undefined;
    if (!c) {
      const handle = openRaw(entry, {});
      const fresh: Cached = { objectId: entry.objectId, location: entry.location, handle, table: null, version: -1, schema: null, usedAt: 0, checkedAt: Date.now(), checking: null };
      cache.set(entry.objectId, (c = fresh));
      if (cache.size > MAX_CACHED_HANDLES) dropLeastUsed();
      handle.then(async (t) => {
        const v = await t.version();
        if (fresh.version < 0) fresh.version = v;
        fresh.table = t;
      }, () => cache.get(entry.objectId) === fresh && cache.delete(entry.objectId));
    }
    const t = await c.handle;
    c.usedAt = Date.now();
    // A handle only moves on: one known to be at the version asked for needs no engine call to say so.
    const behind = async (min: number) => c!.version < min && (await t.version()) < min;
    if (c.usedAt - c.checkedAt >= freshness.intervalMs || (minVersion !== undefined && (await behind(minVersion)))) await recheck(c, t);
    return t;
  }
  function dropLeastUsed(): void {
    let oldest: Cached | undefined;
    for (const c of cache.values()) if (!committing.has(c.objectId) && c.usedAt > 0 && (!oldest || c.usedAt < oldest.usedAt)) oldest = c;
    if (oldest) cache.delete(oldest.objectId);
  }
  /**
   * A request opens its handle before it commits. When the cache replaced that handle in between
   * (an eviction after a job's commit), the replacement may predate this commit and would answer
   * reads without it until the interval ran out: it is dropped before the write is answered.
   */
  async function dropIfBehind(objectId: string, version: number | null): Promise<void> {
    const c = cache.get(objectId);
    if (!c) return;
    // A commit that does not say its version (an index drop, a restore) is rare: drop the handle.
    const known = version === null ? -1 : await c.handle.then((t) => t.version()).catch(() => -1);
    if (known < (version ?? 0) && cache.get(objectId) === c) cache.delete(objectId);
    else c.version = Math.max(c.version, known);
  }
  const writes = keyedSerial();
  const commits = createCommits();
  const inFlight = new Map<string, number>();
  const removed: ((entry: Entry) => void)[] = [];
  const removedLocations = new Set<string>();

  /** One commit in the table branch's turn, then the after-commit event (see `write`). */
  async function writeOf<T>(entry: Entry, branch: string | null | undefined, of: WriteOf, commit: () => Promise<T>): Promise<T> {
    const { work } = of;
    const r = await writes(`${entry.location ?? entry.objectId}\u0000${namedBranch(branch) ?? ""}`, async () => {
      if (namedBranch(branch)) {
        beginCommit(work);
        return commit();
      }
      committing.add(entry.objectId);
      try {
        const c = cache.get(entry.objectId);
        if (c) await recheck(c, await c.handle);
        const kept = c?.schema && c.schema.version === c.version && KEEPS_SCHEMA.has(of.change) ? c.schema : null;
        // A request answered while it waited for this turn (its deadline, its client gone) commits nothing.
        beginCommit(work);
        const r = await commit();
        await dropIfBehind(entry.objectId, versionOf(r));
        // The next version is this commit's (no other came between): it has the same schema.
        if (kept && versionOf(r) === kept.version + 1 && c!.version === kept.version + 1) c!.schema = { version: kept.version + 1, value: kept.value };
        return r;
      } finally {
        committing.delete(entry.objectId);
      }
    });
    const version = versionOf(r);
    await commits.announce({
      table: entry,
      branch: namedBranch(branch) ?? null,
      version,
      change: of.change,
      rows: of.rows ?? rowsOf(r),
      byCachedHandle: of.byCachedHandle ?? true,
      operation: of.operation,
      deadline: work?.bound.deadline,
    });
    return r;
  }

  const openRaw = (entry: Entry, options: { version?: number; branch?: string }) => {
    const name = entry.location ? lanceNameOf(entry.location) : null;
    return name
      ? plain.openTable(name, [], options)
      : namespaced.openTable(entry.id[entry.id.length - 1], entry.id.slice(0, -1), options);
  };

  return {
    root,
    remote: isRemote(root),
    storageOptions: objectStore,
    plain,
    namespaced,
    open(entry, opts = {}) {
      // LanceDB joins a branch into `tree/<branch>` unchecked: every name reaching it is checked here too.
      const branch = namedBranch(opts.branch) === undefined ? undefined : checkedRef("branch", opts.branch!);
      const version = opts.version;
      if (version !== undefined && branch === undefined) return openRaw(entry, { version }).then((t) => (pinned.set(t, { table: entry.objectId, version }), t));
      if (version !== undefined || branch !== undefined || opts.fresh) return openRaw(entry, { version, branch });
      return latest(entry, opts.minVersion);
    },
    evict(objectId) {
      cache.delete(objectId);
    },
    openHandles: () => cache.size,
    commits,
    writesInFlight: (objectId) => inFlight.get(objectId) ?? 0,
    knownVersion(objectId, t) {
      const c = cache.get(objectId);
      return c && c.table === t && c.version >= 0 ? c.version : null;
    },
    async schemaOf(entry, t) {
      const c = cache.get(entry.objectId);
      if (!c || c.table !== t || c.version < 0) return readSchema(t);
      // While a commit or a check moves the handle on, its version as last read names the schema
      // read before: the one a caller a moment earlier got, before the move was answered to anyone.
      const version = c.version;
      if (c.schema?.version === version) return c.schema.value;
      const value = await readSchema(t);
      if (c.version === version) c.schema = { version, value };
      return value;
    },
    async write(entry, branch, of, commit) {
      if (namedBranch(branch)) return writeOf(entry, branch, of, commit);
      inFlight.set(entry.objectId, (inFlight.get(entry.objectId) ?? 0) + 1);
      try {
        return await writeOf(entry, branch, of, commit);
      } finally {
        const n = inFlight.get(entry.objectId)! - 1;
        if (n === 0) inFlight.delete(entry.objectId);
        else inFlight.set(entry.objectId, n);
      }
    },
    async removeData(entry) {
      cache.delete(entry.objectId);
      if (entry.location) await removeTree(resolveLocation(root, entry.location));
      // A read that named the table before the drop (a search in flight, the serving index releasing
      // its pin after a save) may have opened it again during the removal: that handle holds the
      // removed dataset's manifest, and a table made again at the location was read through it (500:
      // the old index's files not found).
      cache.delete(entry.objectId);
      if (entry.location) {
        removedLocations.add(entry.location);
        // Bounded: by the time this many tables are dropped, the oldest's entries have long left
        // the session's bounded caches.
        if (removedLocations.size > MAX_REMOVED_LOCATIONS) removedLocations.delete(removedLocations.values().next().value!);
      }
      for (const l of removed) l(entry);
    },
    removedHere: (location) => removedLocations.has(location),
    beforeMove(listener) {
      movers.push(listener);
    },
    onRemoved(listener) {
      removed.push(listener);
    },
    close: stopKeeping,
  };
}
