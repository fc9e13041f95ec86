// The namespace and table registry: the `__manifest` table of the Lance directory catalog,
// cached in memory. Reads are served from the cache, re-checked against the table at most once
// per consistency interval (writes by other processes, e.g. LanceDB itself); writes go through
// one in-process queue and the manifest's atomic insert-if-absent. The catalog owns the manifest's
// row type and the storage interface it needs; src/engine/manifest-table.ts implements it on Lance.
import { recordCatalogRefresh, recordFreshnessCheck } from "../metrics.js";
import { ApiError, Code, type ErrorCode } from "../errors.js";
import { log } from "../log.js";
import { serialQueue } from "../util/serial.js";
import { keepFresh, type Freshness } from "../util/keep-fresh.js";
import { lanceNameOf } from "./locations.js";
import { objectIdOf, SEP, tenantOf } from "./names.js";
import { scanRootDatasets } from "./root-listing.js";

/** One row of the directory catalog's `__manifest` table. */
export interface ManifestRow {
  object_id: string;
  object_type: string;
  location: string | null;
  metadata: string | null;
}

/**
 * Run before each commit of a catalog write (each try of it): throws to refuse it, as a request's
 * write past its deadline is refused before its first commit begins (docs/operations.md, Deadlines).
 */
export type CommitCheck = () => void;

/** What the catalog needs from the storage of its manifest. */
export interface ManifestStore {
  readAll(): Promise<{ rows: ManifestRow[]; version: number }>;
  /** Re-read the latest version number (cheap: one manifest read). */
  latestVersion(): Promise<number>;
  /** Insert-if-absent keyed on object_id; false when the id already exists. */
  insertIfAbsent(row: ManifestRow, check?: CommitCheck): Promise<{ inserted: boolean; version: number }>;
  /** Replace the row of `row.object_id` while it is still `was` (null: while there is none); false when it is not. */
  replaceIf(row: ManifestRow, was: ManifestRow | null, check?: CommitCheck): Promise<{ replaced: boolean; version: number }>;
  remove(objectIds: string[], check?: CommitCheck): Promise<number>;
}

export type ObjectType = "namespace" | "table";

export interface Entry {
  id: string[];
  objectId: string;
  type: ObjectType;
  /** Relative to the data directory (tables only). */
  location: string | null;
  properties: Record<string, string>;
  /** Found by listing the data directory, with no manifest row (root compatibility). */
  listed?: boolean;
}

export const MISS_RECHECK_MS = 20;

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function parseProps(metadata: string | null): Record<string, string> {
  if (!metadata) return {};
  try {
    const v = JSON.parse(metadata) as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, string>) : {};
  } catch {
    return {};
  }
}

function toEntry(r: ManifestRow): Entry | null {
  if (r.object_type !== "namespace" && r.object_type !== "table") return null;
  return {
    id: r.object_id.split(SEP),
    objectId: r.object_id,
    type: r.object_type,
    location: r.location,
    properties: parseProps(r.metadata),
  };
}

const toRow = (e: Entry): ManifestRow => ({
  object_id: e.objectId,
  object_type: e.type,
  location: e.location,
  metadata: e.type === "namespace" || Object.keys(e.properties).length ? JSON.stringify(e.properties) : null,
});

export interface Catalog {
  /** Bring the cache within the consistency interval; call once per request before reading. */
  refresh(force?: boolean): Promise<void>;
  /**
   * After a miss, before answering "not found": re-read storage in a check that starts after the
   * miss (another process may have just created the object). Misses share checks, which start at
   * most once per MISS_RECHECK_MS, so a flood of misses costs one check per interval.
   */
  recheck(): Promise<void>;
  get(id: readonly string[]): Entry | undefined;
  namespaceExists(id: readonly string[]): boolean;
  /** Direct children of a namespace, sorted by name. */
  children(id: readonly string[], type: ObjectType): Entry[];
  /** Everything below a namespace (not itself), deepest first. */
  descendants(id: readonly string[]): Entry[];
  /** Every table in the catalog, sorted by object id. */
  allTables(): Entry[];
  /** How many objects of `type` tenant `tenant` (a top-level namespace, "" for the root) holds; counted once per change of the catalog. */
  count(tenant: string, type: ObjectType): number;
  /** Run check-then-write sequences one at a time within this process. */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /** Insert-if-absent; 409 with `conflictCode` when the id is taken (here or by another process). */
  insert(entry: Entry, conflictCode: ErrorCode, check?: CommitCheck): Promise<void>;
  /**
   * Replace `was` (an entry as this catalog answered it) by `entry` (same id) while its row is
   * still as read then; 409 ConcurrentModification when another request (here or in another
   * process) changed or removed it first: of racing replacements one wins, none silently.
   */
  replace(was: Entry, entry: Entry, check?: CommitCheck): Promise<void>;
  remove(entries: Entry[], check?: CommitCheck): Promise<void>;
  /** Stop re-checking in the background. */
  close(): void;
}

export async function openCatalog(table: ManifestStore, freshness: Freshness, root: string): Promise<Catalog> {
  /** The manifest's rows. */
  let manifest = new Map<string, Entry>();
  /** The row each manifest entry was read from (or written as), for replace's condition. */
  const rowOf = new WeakMap<Entry, ManifestRow>();
  /** Root datasets found in the data directory (locations), whether or not a row points at them. */
  let rootDatasets = new Set<string>();
  /** What reads see: the manifest, plus root datasets no row points at (manifest rows win). */
  let entries = new Map<string, Entry>();
  let version = -1;
  /** When reads last asked for the catalog, and when its last check ended. */
  const kept = { usedAt: 0, checkedAt: 0 };
  let pending: Promise<void> | null = null;
  let sortedTables: Entry[] | null = null;
  let counts: Map<string, number> | null = null;

  /** Locations the manifest's rows point at. */
  const referencedBy = (m: Map<string, Entry>) => new Set([...m.values()].map((e) => e.location?.replace(/\/+$/, "")));
  const merge = () => {
    const referenced = referencedBy(manifest);
    entries = new Map(manifest);
    for (const loc of rootDatasets) {
      const name = lanceNameOf(loc)!;
      if (referenced.has(loc) || entries.has(name)) continue;
      entries.set(name, { id: [name], objectId: name, type: "table", location: loc, properties: {}, listed: true });
    }
    sortedTables = null;
    counts = null;
  };

  const load = async () => {
    const { rows, version: v } = await table.readAll();
    // Loads overlap (a check's, a failed insert's): one that read an older version ending last
    // must not take the cache back (a table another replica just created went missing again).
    if (v < version) return;
    const next = new Map<string, Entry>();
    for (const r of rows) {
      const e = toEntry(r);
      if (!e) continue;
      next.set(e.objectId, e);
      rowOf.set(e, r);
    }
    manifest = next;
    version = v;
  };
  const scan = async () => {
    const found = await scanRootDatasets(root, referencedBy(manifest));
    const changed = found.size !== rootDatasets.size || [...found].some((l) => !rootDatasets.has(l));
    rootDatasets = found;
    return changed;
  };
  await Promise.all([load(), scan()]);
  merge();
  kept.checkedAt = Date.now();

  const check = async (ahead = false) => {
    // Counted in the debug log, so the cost of re-checks after misses can be seen.
    log.debug("catalog check", { ahead });
    recordCatalogRefresh();
    recordFreshnessCheck("catalog", ahead);
    const [latest, listed] = await Promise.all([table.latestVersion(), scan()]);
    let listingChanged = listed;
    const manifestChanged = latest !== version;
    if (manifestChanged) {
      await load();
      // A location whose row went is looked into now: the scan before the load skipped it.
      listingChanged = (await scan()) || listingChanged;
    }
    if (manifestChanged || listingChanged) merge();
    kept.checkedAt = Date.now();
  };
  const stopKeeping = keepFresh(freshness, () => [kept], () => {
    pending ??= check(true).finally(() => (pending = null));
    return pending.catch((err: unknown) => log.debug("catalog check failed", { error: String(err) }));
  });

  /** `entry` as this process just wrote it. */
  const written = (entry: Entry) => {
    const e = { ...entry, listed: undefined };
    rowOf.set(e, toRow(e));
    manifest.set(e.objectId, e);
  };
  /** After a conditional write that found the row changed: reads see what is stored, then `err`. */
  const refused = async (err: ApiError): Promise<never> => {
    // What reads see, too: a check that finds this version finds nothing to merge later.
    await load();
    merge();
    throw err;
  };

  /** After our own commit: advance in step, or reload when another writer slipped in between. */
  const committed = async (newVersion: number, apply: () => void) => {
    if (newVersion === version + 1) {
      apply();
      version = newVersion;
    } else await load();
    merge();
  };

  const exclusive = serialQueue();
  let missCheck: Promise<void> | null = null;
  let missCheckAt = 0;

  const catalog: Catalog = {
    refresh(force = false) {
      kept.usedAt = Date.now();
      if (!force && kept.usedAt - kept.checkedAt < freshness.intervalMs) return Promise.resolve();
      pending ??= check().finally(() => (pending = null));
      return pending;
    },
    recheck() {
      missCheck ??= (async () => {
        // Always yields first, so missCheck is set before it is cleared below.
        await new Promise((r) => setTimeout(r, Math.max(0, missCheckAt + MISS_RECHECK_MS - Date.now())));
        // A check already under way may have started before the miss: wait for the next one.
        while (pending) await pending.catch(() => undefined);
        missCheck = null;
        missCheckAt = Date.now();
        await catalog.refresh(true);
      })();
      return missCheck;
    },
    get: (id) => entries.get(objectIdOf(id)),
    namespaceExists: (id) => id.length === 0 || entries.get(objectIdOf(id))?.type === "namespace",
    children(id, type) {
      const out: Entry[] = [];
      for (const e of entries.values()) {
        if (e.type === type && e.id.length === id.length + 1 && id.every((p, i) => e.id[i] === p)) out.push(e);
      }
      return out.sort((a, b) => byName(a.id[a.id.length - 1], b.id[b.id.length - 1]));
    },
    descendants(id) {
      const out: Entry[] = [];
      for (const e of entries.values()) {
        if (e.id.length > id.length && id.every((p, i) => e.id[i] === p)) out.push(e);
      }
      return out.sort((a, b) => b.id.length - a.id.length);
    },
    allTables() {
      sortedTables ??= [...entries.values()].filter((e) => e.type === "table").sort((a, b) => byName(a.objectId, b.objectId));
      return sortedTables;
    },
    count(tenant, type) {
      if (!counts) {
        counts = new Map();
        for (const e of entries.values()) {
          const k = `${e.type}\u0000${tenantOf(e.objectId)}`;
          counts.set(k, (counts.get(k) ?? 0) + 1);
        }
      }
      return counts.get(`${type}\u0000${tenant}`) ?? 0;
    },
    exclusive: (fn) => exclusive(fn),
    async insert(entry, conflictCode, check) {
      const { inserted, version: v } = await table.insertIfAbsent(toRow(entry), check);
      if (!inserted) await refused(new ApiError(conflictCode, `${entry.type} ${JSON.stringify(entry.objectId)} already exists`));
      await committed(v, () => written(entry));
    },
    async replace(was, entry, check) {
      const row = was.listed ? null : rowOf.get(was);
      if (row === undefined) throw new Error(`catalog.replace: ${JSON.stringify(was.objectId)} is not an entry as the catalog answered it`);
      const { replaced, version: v } = await table.replaceIf(toRow(entry), row, check);
      if (!replaced) await refused(new ApiError(Code.ConcurrentModification, `${entry.type} ${JSON.stringify(entry.objectId)} was changed by another request meanwhile; read it again and retry`));
      await committed(v, () => written(entry));
    },
    async remove(list, check) {
      if (list.length === 0) return;
      // A root dataset leaves the listing with its data or its marker (a directory-listed table has no row).
      for (const e of list) if (e.location) rootDatasets.delete(e.location);
      const rows = list.filter((e) => !e.listed);
      if (rows.length === 0) return merge();
      const v = await table.remove(rows.map((e) => e.objectId), check);
      await committed(v, () => rows.forEach((e) => manifest.delete(e.objectId)));
    },
    close: stopKeeping,
  };
  return catalog;
}
