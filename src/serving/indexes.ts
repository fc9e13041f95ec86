// The serving indexes: for a table's indexed vector column, an HNSW index in one shared memory,
// searched in the pool's threads (src/serving/pool.ts), kept at the table's latest version by
// the after-commit event (before the write is answered) and by re-checks, with LanceDB as the
// store of record answering every search the index cannot: another version or a branch, an option
// it does not honour, a table not (yet) indexed or over the memory budget. Each search says which
// path answered it, and why (`quiver_search_path_total`, the response headers, explain).
import { BroadcastChannel } from "node:worker_threads";
import type { Entry } from "../catalog/catalog.js";
import type { Config } from "../config.js";
import type { Commit } from "../engine/commits.js";
import { arrow } from "../engine/arrow.js";
import type { Schema } from "apache-arrow";
import { isVersionMissing } from "../engine/messages.js";
import { settlesBy, type Deadline } from "../engine/deadline.js";
import { jsonAnswer } from "../engine/query.js";
import type { QuerySpec, QueryVector } from "../engine/query-spec.js";
import { calibration, slotCount, tombstones } from "./graph.js";
import { mappedRows } from "./row-slots.js";
import { columnLayout, takenAnswer, type AnswerPlan, type Source } from "./rows.js";
import { filterTypes } from "./predicate.js";
import { answerSchema, indexCoversRows, indexedVectors, schemaOf, takeRows, versionTime, type IndexedVectors } from "../engine/serving-source.js";
import { tableVersion } from "../engine/table-info.js";
import type { TableHandle, Tables } from "../engine/tables.js";
import { publishedVersions, tableDir, versionOperation, type VersionOperation } from "../engine/versions.js";
import { log } from "../log.js";
import { recordSearchPath, recordServingBuild, recordServingEviction, recordServingSync, recordServingSyncVersion, watchServing, type ServingSample } from "../metrics.js";
import { tenantOf } from "../catalog/names.js";
import { PAST_GRANT, setLimit, usedBytes } from "./graph.js";
import { reclaim, type Held } from "./shares.js";
import { countRows } from "../engine/table-info.js";
import { createFilters, type FilterBits } from "./filters.js";
import { AWAITED_ROWS, buildIndex, calibrate, changesSince, connected, dataOf, EF_CONSTRUCTION, estimate, GRAPH_M, figures, planSync, TooBig, uncalibrated, wontFit, wornOut, type Claim, type OperationOf, type ServingIndex } from "./table-index.js";
import { createServingPool, type ServingPool } from "./pool.js";
import { loadIndex, pinSaved, removeSaved, savedTables, saveIndex, unpinSaved } from "./store.js";
import type { FoundRows, SearchQuery } from "./thread.js";
import { concatNumbers } from "../util/typed-concat.js";


/** A search's answer from the serving index, or why LanceDB answers it (null: not a vector search). */
export type Served = { chunks: Uint8Array[] | AsyncIterable<Uint8Array> } | { reason: string | null };

export interface ServingIndexes {
  /** Answer a search from the serving index, or say why not. `at`: the version and branch it names. */
  search(entry: Entry, table: TableHandle, spec: QuerySpec, at: At, format: "arrow" | "json" | "ndjson"): Promise<Served>;
  /** One line for explain: which path a search takes, and why. */
  explain(entry: Entry, table: TableHandle, spec: QuerySpec, at: At): Promise<string | null>;
  /** After-commit subscriber the write waits for: the table's index brought to the commit's version. */
  committed(commit: Commit): Promise<void>;
  /** A table was dropped: its index and its saved file go. */
  forget(entry: Entry): void;
  /** A background check is about to move the table on: the index syncs to its newest version first (see Tables.beforeMove); undefined when it has nothing to do. */
  beforeMove(entry: Pick<Entry, "objectId" | "location">): Promise<void> | undefined;
  /** The tables whose indexes were saved here (their data: `dataOf`), which a start warms. */
  saved(): Promise<Set<string>>;
  /** Load or build `entry`'s index now, as its first search would; resolves once it serves at the table's latest version, or LanceDB serves the table. */
  warm(entry: Entry): Promise<void>;
  close(): Promise<void>;
}

export interface At {
  version?: number | null;
  branch?: string | null;
  /** The version the request's token asks to see (x-quiver-min-version). */
  minVersion?: number | null;
  /** The request's deadline: a search waits for a sync for half the time it has left, at most. */
  deadline?: Deadline;
}

/**
 * `memory`: it does not fit, or grew past what was left; `evicted`: another tenant reclaimed its
 * room (src/serving/shares.ts); `rebuilding`: a version no sync follows exactly (a restore, an
 * overwrite, a column change, the vector index replaced) is built again while LanceDB answers.
 */
type Status = "checking" | "building" | "rebuilding" | "ready" | "memory" | "evicted" | "disabled" | "failed" | "none";

/** One table's state: the index, its writes (one at a time), its answer plans. */
interface TableState {
  entry: Entry;
  status: Status;
  /** The float vector columns of the table (to name the one a search without vector_column means). */
  vectorColumns: string[];
  vector: IndexedVectors | null;
  ix: ServingIndex | null;
  /** Syncs and rebuild swaps, one after another. */
  writer: Promise<void>;
  /** The highest version a sync was asked for. */
  target: number;
  /**
   * Versions this process committed whose writes wait for the index before they are answered, with
   * what the commit is where its writer knew it (an append's version needs no read of its manifest).
   */
  awaiting: Map<number, Commit["operation"]>;
  rebuilding: boolean;
  /** The highest version of this process's writes that were answered (a large one before its sync ended). */
  told: number;
  /** The latest sync asked for: done when the index holds `version`, or once its rows are found too many to wait for. */
  pending: { version: number; done: Promise<void> } | null;
  /** A sync of more than AWAITED_ROWS rows runs: searches that find the index behind are LanceDB's, not held for it. */
  large: boolean;
  /** An index's width being calibrated again (after it doubled), beside its syncs. */
  calibrating: boolean;
  plans: Map<string, Promise<Plan>>;
  /** When the state was decided (a failed or over-budget table is looked at again later). */
  since: number;
  /** Bytes of the budget granted to a build or sync in progress, beyond what the index holds. */
  reserved: number;
  /** When it was last searched (`clock`): the least recently searched go first when a tenant's room is reclaimed. */
  searched: number;
  /** The load or build `start` began: settled once the index serves, or LanceDB serves the table. */
  started: Promise<void>;
  /** Whether LanceDB's vector index covered any row at `version` (it then gives a search its metric). */
  covers: { version: number; yes: boolean } | null;
  /** The version found without a vector index (status `none`): at a later one it is looked for again. */
  noneAt: number;
}

interface Plan extends AnswerPlan {
  /** Columns the index does not cache: answers take them from the engine by row id. */
  hitsOnly: boolean;
  /** For hitsOnly: the engine's schema, and the table columns to take. */
  schema: Uint8Array;
  take: string[];
}

const MIB = 1 << 20;
/** An append's operation as the serving index reads it (row ids' stability matters to a rewrite alone). */
const APPENDED: VersionOperation = { operation: "append", stableRowIds: false };
/**
 * Whether every query vector has the index's dimension and values float32 holds: one it cannot is
 * LanceDB's to answer (its distances are NaN, its rows still k). A plain loop: `some` with a
 * callback boxed each of a search's numbers, garbage of every search.
 */
function searchable(vectors: QueryVector[], dim: number): boolean {
  for (const v of vectors) {
    if (v.length !== dim) return false;
    for (let i = 0; i < dim; i++) if (!Number.isFinite(Math.fround(v[i]))) return false;
  }
  return true;
}

/** Most rows (k + offset) a search answered from the index may ask for. */
const MOST_ROWS = 10_000;
/** A failed or over-budget table is looked at again after this long. */
const RETRY_MS = 60_000;
/** A build is granted up to this many times its estimate (cached columns and their values are not in it), as far as the budget goes. */
const BUILD_GRANT = 4;
/** A changed index is saved at most this often (and when the server closes). */
const SAVE_MS = 10 * 60_000;
/** LanceDB's default probes: a request above them asks for more recall. */
const ENGINE_PROBES = 20;
/** A search whose rows moved while its filter and plan were made starts again this often before LanceDB answers it. */
const MOVED_RETRIES = 2;
const PROPERTY = "quiver.serving";

// The pool's threads keep each index's memory by its key until told it was dropped: a key is never
// used twice in a process, or a table dropped and made again under its name could be searched in
// its predecessor's memory (seen: answers from a dropped table's graph while the new index was empty).
let memories = 0;
const memoryKey = (entry: Entry, column: string) => `${entry.objectId}\u0000${column}\u0000${++memories}`;

export function createServingIndexes(config: Pick<Config, "serving" | "servingMemoryMb" | "servingEf" | "workers" | "workerHeapMb" | "stateDir">, tables: Tables, replica: string): ServingIndexes {
  const states = new Map<string, TableState>();
  // Workers drop their views of an index that was replaced or dropped (its memory is then freed).
  const channel = new BroadcastChannel("quiver-serving");
  let pool: ServingPool | null = null;
  const poolOf = () => (pool ??= createServingPool(config.workers, config.workerHeapMb));
  let closed = false;
  // A build that fails because close() destroyed the pool tells no thread (none is left), and the
  // closed channel would throw outside any handler: the process died on SIGTERM mid-build.
  const dropped = {
    postMessage(key: string): void {
      if (!closed) channel.postMessage(key);
    },
  };

  const budget = () => config.servingMemoryMb * MIB;
  /** What a table's index holds of the budget, with what a build or sync in progress was granted. */
  const held = (s: TableState) => (s.ix ? figures(s.ix).bytes : 0) + s.reserved;
  const used = () => [...states.values()].reduce((n, s) => n + held(s), 0);
  const filters = createFilters(() => budget() - used(), { filterPlan: (s) => poolOf().filterPlan(s), filter: (t) => poolOf().filter(t) });
  let clock = 0;

  /**
   * Grant `st` `need` bytes more of the budget, reclaiming room from other tenants above their
   * share when it is short (src/serving/shares.ts); TooBig when it cannot be had.
   */
  function claim(st: TableState, need: number): void {
    const tables: Held[] = [];
    for (const s of states.values()) {
      const bytes = held(s);
      if (bytes > 0) tables.push({ table: dataOf(s.entry), tenant: tenantOf(s.entry.objectId), bytes, searched: s.ix && s.status === "ready" ? s.searched : Infinity });
    }
    const evict = reclaim(tables, tenantOf(st.entry.objectId), need, budget());
    if (evict === null) throw new TooBig(`${need} bytes more, past what is left of --serving-memory-mb (${budget() - used()} bytes) and the tenant's share`);
    for (const id of evict) evicted(states.get(id)!);
    st.reserved += need;
  }

  /** Another tenant took the table's room: its index is dropped and LanceDB answers it (looked at again after RETRY_MS). */
  function evicted(st: TableState): void {
    log.info("serving index: evicted, its tenant is past its share of --serving-memory-mb and another asked for room; LanceDB serves the table's searches", { table: st.entry.objectId, bytes: held(st) });
    handBack(st, "evicted");
  }

  function handBack(st: TableState, status: "evicted" | "memory"): void {
    st.status = status;
    st.since = Date.now();
    drop(st);
    recordServingEviction(status === "evicted" ? "share" : "growth");
  }

  /** After a build or sync: the index holds what it used, and may grow no further without a claim. */
  function settle(st: TableState, ix: ServingIndex, granted: number): void {
    st.reserved -= granted;
    setLimit(ix.graph, usedBytes(ix.graph));
  }

  /**
   * Room for a build or load of `st`'s index from `t`: its estimate claimed, then what is free up
   * to BUILD_GRANT times it. An index no budget holds is refused before any other is handed back.
   */
  async function buildRoom(st: TableState, t: TableHandle): Promise<number> {
    const rows = await countRows(t);
    const refused = wontFit(rows, st.vector!.dim, budget());
    if (refused) throw new TooBig(refused);
    const need = estimate(rows, st.vector!.dim, 0);
    claim(st, need);
    const more = Math.max(0, Math.min(budget() - used(), (BUILD_GRANT - 1) * need));
    st.reserved += more;
    return need + more;
  }

  const enabled = (entry: Entry) => {
    const p = entry.properties?.[PROPERTY];
    return p === "on" || (p !== "off" && config.serving === "on" && config.servingMemoryMb > 0);
  };

  const unwatch = watchServing(() =>
    [...states.values()]
      .filter((s) => s.status !== "none" && s.status !== "checking")
      .map((s): ServingSample => ({ table: s.entry.objectId, state: s.status, ...(s.ix ? figures(s.ix) : { bytes: 0, columnBytes: 0, filterBytes: 0, rows: 0, tombstones: 0, relinked: 0, calibratedEf: 0, calibratedRecall: 0 }) })),
  );

  const at = (entry: Entry) => (version: number) => tables.open(entry, { version });
  /**
   * What made a version: an append of this process's that waits for the index is known (its writer
   * said so); any other version's manifest is read (another replica's commit, a job's).
   */
  const operationOf =
    (st: TableState): OperationOf =>
    (version) => {
      const known = st.awaiting.get(version) === "append";
      recordServingSyncVersion(known);
      if (known) return Promise.resolve(APPENDED);
      return Promise.resolve()
        .then(() => versionOperation(tableDir(tables.root, st.entry), version))
        .catch(() => null);
    };

  function drop(s: TableState): void {
    if (s.ix) dropped.postMessage(s.ix.ref.key);
    s.ix = null;
  }

  /** Whether `err` is the budget's refusal: a claim refused, or a memory grown past its grant or its maximum. */
  const overBudget = (err: unknown) => err instanceof TooBig || String(err).includes(PAST_GRANT) || /Memory\.grow/.test(String(err));

  /** Look at a table the first time a search names it: load its saved index or build one, LanceDB serving meanwhile. */
  function start(entry: Entry, table: TableHandle, s?: TableState): TableState {
    const st: TableState = s ?? { entry, status: "checking", vectorColumns: [], vector: null, ix: null, writer: Promise.resolve(), target: 0, awaiting: new Map(), rebuilding: false, calibrating: false, told: 0, pending: null, large: false, plans: new Map(), since: Date.now(), reserved: 0, searched: clock, started: Promise.resolve(), covers: null, noneAt: -1 };
    st.status = "checking";
    st.since = Date.now();
    // Planned for the index this state held, at its version: the table may have another schema now
    // (another process overwrote it, then indexed it again).
    st.plans.clear();
    states.set(dataOf(entry), st);
    let granted = 0;
    let key = "";
    st.started = (async () => {
      const version = await tableVersion(table);
      const vectors = await vectorsOf(st, table);
      if (!enabled(entry)) return void (st.status = "disabled");
      if (vectors.length === 0) {
        st.noneAt = version;
        return void (st.status = "none");
      }
      st.vector = vectors[0];
      st.status = "building";
      const started = performance.now();
      const t = await at(entry)(await tableVersion(table));
      granted = await buildRoom(st, t);
      key = memoryKey(entry, st.vector.column);
      // A saved version that cleanup removed (no pin: the replica was killed) is no longer the table's: built again, the file removed.
      const committed = (v: number) => at(entry)(v).then((t) => versionTime(t, v), (err: unknown) => (isVersionMissing(err) ? null : Promise.reject(err)));
      const loaded = await loadIndex(poolOf(), config.stateDir, entry, st.vector.column, granted, budget(), key, committed).catch((err: unknown) => {
        log.warn("serving index: the saved index could not be read; building it again", { table: entry.objectId, error: String(err) });
        return null;
      });
      if (loaded && figures(loaded).bytes > granted) {
        dropped.postMessage(key);
        throw new TooBig(`the saved index takes ${figures(loaded).bytes} bytes, past the ${granted} granted`);
      }
      const ix = loaded ?? (await buildIndex(poolOf(), entry, t, st.vector, granted, budget(), key));
      // A saved index may be from a build that left rows no walk reaches, or from before calibration.
      if (loaded) await connected(poolOf(), ix);
      if (loaded && uncalibrated(ix)) await calibrate(poolOf(), ix);
      recordServingBuild((performance.now() - started) / 1000, loaded !== null);
      log.info(loaded ? "serving index loaded" : "serving index built", { table: entry.objectId, column: ix.column, version: ix.version, rows: mappedRows(ix.rowSlots), relinked: ix.relinked, bytes: figures(ix).bytes, seconds: Math.round(performance.now() - started) / 1000 });
      if (closed) return;
      st.ix = ix;
      settle(st, ix, granted);
      granted = 0;
      key = "";
      st.status = "ready";
      if (!loaded) void persist(st);
      void requestSync(st, await tableVersion(table).catch(() => ix.version));
      // Brought forward (or built): the version a shutdown pinned is no longer needed.
      await st.writer;
      await unpin(entry);
    })().catch((err: unknown) => {
      st.reserved -= granted;
      if (key) dropped.postMessage(key);
      if (overBudget(err)) {
        st.status = "memory";
        log.warn("serving index: the table does not fit --serving-memory-mb; LanceDB serves its searches", { table: entry.objectId, memoryMb: config.servingMemoryMb, need: (err as Error).message });
      } else {
        st.status = "failed";
        log.warn("serving index: build failed; LanceDB serves the table's searches", { table: entry.objectId, error: String((err as Error)?.stack ?? err) });
      }
      drop(st);
      return unpin(entry);
    });
    return st;
  }

  /** Release this replica's pin of the table's saved version (a cleanup may remove it again). */
  const unpin = (entry: Entry) =>
    tables
      .open(entry)
      .then((t) => unpinSaved(t, replica))
      .catch((err: unknown) => log.warn("serving index: could not release the saved version's pin", { table: entry.objectId, error: String(err) }));

  /** After the last save: hold the saved version from cleanups until the restart brought the index forward. */
  async function pin(st: TableState): Promise<void> {
    const ix = st.ix;
    // A save that failed left the file at an older version (or none): nothing to hold.
    if (!ix || ix.dirty || st.status !== "ready") return;
    await pinSaved(await tables.open(st.entry), replica, ix.version).catch((err: unknown) =>
      log.warn("serving index: could not pin the saved version; a restart after maintenance removed it builds the index again", { table: st.entry.objectId, version: ix.version, error: String(err) }),
    );
  }

  /** The table's float vector columns (kept in `st`) and those with a vector index. */
  async function vectorsOf(st: TableState, t: TableHandle): Promise<IndexedVectors[]> {
    const schema = await schemaOf(t);
    st.vectorColumns = schema.fields.filter((f) => (f.type as { typeId: number }).typeId === arrow.Type.FixedSizeList).map((f) => f.name);
    return indexedVectors(t);
  }

  /** Save a changed index, in its writer's turn (no rows are written meanwhile). */
  function persist(st: TableState): Promise<void> {
    const job = st.writer.then(async () => {
      const ix = st.ix;
      if (!ix || !ix.dirty) return;
      const committed = await versionTime(await at(st.entry)(ix.version), ix.version);
      if (committed !== null) await saveIndex(config.stateDir, ix, committed);
    });
    st.writer = job.catch((err: unknown) => log.warn("serving index: save failed", { table: st.entry.objectId, error: String(err) }));
    return st.writer;
  }

  /**
   * Bring the index to version x (or the latest) in the writer's turn. Resolves when it is there,
   * or at once when the change is large (its rows are read and linked after: searches go to
   * LanceDB meanwhile).
   */
  function requestSync(st: TableState, x: number | null): Promise<void> {
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    const job = st.writer.then(async () => {
      const ix = st.ix;
      if (!ix || st.status !== "ready" || closed) return;
      const want = Math.max(st.target, x ?? (await tableVersion(await tables.open(st.entry))));
      st.target = want;
      if (ix.version >= want) return;
      let granted = 0;
      const grant: Claim = (bytes) => {
        claim(st, bytes);
        granted += bytes;
      };
      let again = false;
      const syncTo = async (version: number) => {
        const t0 = performance.now();
        const { t, since } = await followed(st, ix, version);
        if (since === null) return void (again = true);
        const plan = await planSync(poolOf(), ix, t, version, since === "added", grant);
        const t1 = performance.now();
        if (plan.rows > AWAITED_ROWS) {
          st.large = true;
          release();
        }
        const read = await plan.run();
        recordServingSync(read, (performance.now() - t0) / 1000);
        if (log.enabled("debug")) log.debug("serving index synced", { table: st.entry.objectId, version, rows: plan.rows, read, planMs: +(t1 - t0).toFixed(1), runMs: +(performance.now() - t1).toFixed(1) });
      };
      try {
        await syncTo(want);
      } catch (err) {
        // A version maintenance already removed (the sync ran behind a stream of commits): the
        // latest, read afresh, holds its rows and every change after it.
        if (!isVersionMissing(err)) throw err;
        st.target = Math.max(want, await tableVersion(await tables.open(st.entry, { fresh: true })));
        await syncTo(st.target);
      } finally {
        st.large = false;
        settle(st, ix, granted);
      }
      if (again) {
        log.info("serving index: a version no sync follows exactly (restore, overwrite, column or vector index change); it is built again while LanceDB serves", { table: st.entry.objectId, from: ix.version, to: st.target });
        // A rebuild of a worn index under way is not waited for: its swap finds the same version.
        if (!st.rebuilding) return void rebuild(st, false);
        drop(st);
        st.status = "rebuilding";
        return;
      }
      // The index holds the version: the write is answered before the repair pass, which changes
      // links only (still in the writer's turn).
      release();
      await connected(poolOf(), ix, true);
      if (uncalibrated(ix) && !st.calibrating) void recalibrate(st, ix);
      if (wornOut(ix) && !st.rebuilding) void rebuild(st, true);
    });
    st.writer = job.catch((err: unknown) => {
      // An index that grows past what is left of the budget stops growing: LanceDB answers its
      // table (the sync's rows, half written, are dropped with it).
      if (overBudget(err)) {
        log.warn("serving index: the table grew past what is left of --serving-memory-mb; LanceDB serves its searches", { table: st.entry.objectId, error: String(err) });
        if (st.ix) handBack(st, "memory");
        return;
      }
      log.warn("serving index: sync failed; it is built again while LanceDB serves", { table: st.entry.objectId, error: String(err) });
      void rebuild(st, false);
    });
    const done = Promise.race([st.writer, released]);
    if (x !== null && (!st.pending || st.pending.version <= x)) st.pending = { version: x, done };
    return done;
  }

  /**
   * Calibrate the width of an index that has doubled since it was: it only searches, so syncs go on,
   * and in one pool thread, so searches keep the others.
   */
  async function recalibrate(st: TableState, ix: ServingIndex): Promise<void> {
    st.calibrating = true;
    try {
      await calibrate(poolOf(), ix, 1);
    } catch (err) {
      log.warn("serving index: calibration failed; the index keeps its width", { table: st.entry.objectId, error: String(err) });
    } finally {
      st.calibrating = false;
    }
  }

  /**
   * A new index built and brought to the table's version, then swapped in. One worn out by
   * tombstones (`worn`) keeps serving meanwhile, and stays if the new one cannot be built; one that
   * cannot follow the table (a sync failed: it is consistent at its version, but stuck there) gives
   * its memory to the new one at once.
   */
  async function rebuild(st: TableState, worn: boolean): Promise<void> {
    if (st.rebuilding || !st.vector || closed) return;
    st.rebuilding = true;
    if (!worn) {
      drop(st);
      st.status = "rebuilding";
    }
    let granted = 0;
    let key = "";
    let again = false;
    const grant: Claim = (bytes) => {
      claim(st, bytes);
      granted += bytes;
    };
    try {
      // Read afresh: the cached handle's latest may be a version maintenance has removed since.
      const latest = await tables.open(st.entry, { fresh: true });
      const version = await tableVersion(latest);
      const t = await at(st.entry)(version);
      // The vector index may have been replaced (another metric) or dropped since.
      const vectors = await vectorsOf(st, t);
      const vector = vectors.find((v) => v.column === st.vector!.column) ?? vectors[0];
      if (!vector) {
        drop(st);
        st.status = "none";
        st.noneAt = version;
        return;
      }
      st.vector = vector;
      const started = performance.now();
      const room = await buildRoom(st, t);
      granted += room;
      key = memoryKey(st.entry, st.vector.column);
      const fresh = await buildIndex(poolOf(), st.entry, t, st.vector, room, budget(), key);
      recordServingBuild((performance.now() - started) / 1000, false);
      const swap = st.writer.then(async () => {
        // Handed back or evicted meanwhile: the new index is not kept either.
        if (st.status !== "ready" && st.status !== "rebuilding") return;
        const want = Math.max(st.target, st.ix?.version ?? 0, fresh.version);
        if (fresh.version < want) {
          const { t, since } = await followed(st, fresh, want);
          // Another restore, overwrite or index replacement meanwhile: built again from there.
          if (since === null) return void (again = true);
          await (await planSync(poolOf(), fresh, t, want, since === "added", grant)).run();
        }
        drop(st);
        st.ix = fresh;
        key = "";
        settle(st, fresh, granted);
        granted = 0;
        st.status = "ready";
        st.plans.clear();
      });
      st.writer = swap.catch(() => undefined);
      await swap;
      void persist(st);
    } catch (err) {
      if (worn && st.ix) {
        log.warn("serving index: rebuild failed; the current index keeps serving", { table: st.entry.objectId, error: String(err) });
      } else {
        st.status = overBudget(err) ? "memory" : "failed";
        st.since = Date.now();
        drop(st);
        log.warn("serving index: rebuild failed; LanceDB serves the table's searches", { table: st.entry.objectId, error: String(err) });
      }
    } finally {
      st.reserved -= granted;
      if (key) dropped.postMessage(key);
      st.rebuilding = false;
    }
    if (again) void rebuild(st, false);
  }

  /** Drop a table's index, its state and its saved file, once its writes are done; its next search starts again. */
  function forget(st: TableState): void {
    states.delete(dataOf(st.entry));
    // A rebuild under way does not swap its index in (nor save it) once the state is forgotten.
    st.status = "none";
    st.writer = st.writer.then(() => {
      drop(st);
      return removeSaved(config.stateDir, dataOf(st.entry), st.vector?.column ?? "");
    });
  }

  /**
   * After a schema or index change: whether `ix` still is the table's at handle `t`, i.e. its column
   * is still indexed with its distance and every cached column is still there with its type (a
   * scalar or full-text index changes nothing here).
   */
  async function stillFits(ix: ServingIndex, t: TableHandle): Promise<boolean> {
    const now = (await indexedVectors(t)).find((v) => v.column === ix.column);
    if (!now || now.metric !== ix.metric || now.dim !== ix.graph.dim) return false;
    const { columns } = columnLayout((await schemaOf(t)).fields, ix.column);
    return ix.ref.columns.every((c) => columns.some((n) => n.name === c.name && n.kind === c.kind && n.width === c.width && n.size === c.size));
  }

  /**
   * The table opened at version x (`t`), and how a sync brings `ix` there (`since`): only rows
   * added, or rows changed; null when no sync follows it exactly (`changesSince`), or an index commit
   * replaced the vector index (another metric or column): the index is then built again. After a
   * column added or an index commit the answers' shapes are planned again.
   */
  async function followed(st: TableState, ix: ServingIndex, x: number): Promise<{ t: TableHandle; since: "added" | "changed" | null }> {
    // Opened while the versions' operations are read: each is a round trip or more to the store.
    const [t, since] = await Promise.all([at(st.entry)(x), changesSince(ix, x, operationOf(st))]);
    if (since.kind === "rebuild" || (since.reshaped && !(await stillFits(ix, t)))) return { t, since: null };
    if (since.reshaped) st.plans.clear();
    return { t, since: since.kind };
  }

  const saver = setInterval(() => {
    for (const st of states.values()) if (st.ix?.dirty) void persist(st);
  }, SAVE_MS);
  saver.unref();

  // ---- deciding the path -----------------------------------------------------------------------

  interface Route {
    st: TableState;
    ix: ServingIndex;
    version: number;
    /** The index's moves when the search began (see ServingIndex.moves). */
    moves: number;
    k: number;
    ef: number;
  }

  /**
   * Whether the versions after the index's up to `current` are commits of writes this process has
   * not answered yet (they wait for the index): a search may then still be answered at the index's
   * version, as none of their clients has been told of them. A write answered before its sync
   * ended (`told`: one of more than AWAITED_ROWS rows) is not. A version another process
   * committed, which a write's re-check may have brought in, is no later than a read without a
   * token may see (the consistency interval); a token's version is checked by the caller.
   */
  function unanswered(st: TableState, version: number, current: number): boolean {
    if (st.told > version) return false;
    if (tables.writesInFlight(st.entry.objectId) > 0) return true;
    for (let v = version + 1; v <= current; v++) if (!st.awaiting.has(v)) return false;
    return true;
  }

  /** The reason LanceDB answers `spec` whatever the index's state, or null. */
  function optionReason(spec: QuerySpec, at: At): string | null {
    if (at.branch && at.branch !== "main") return "branch";
    if (spec.fastSearch) return "option:fast_search";
    if (spec.columns !== null && !Array.isArray(spec.columns)) return "option:columns";
    if (spec.k === 0) return "option:k";
    if ((spec.k ?? 10) + spec.offset > MOST_ROWS) return "option:k";
    return null;
  }

  /**
   * The metric LanceDB ranks a search without distance_type by (docs/design.md): the index's where
   * it searches with the index, L2 where it measures every row (an exact search, or an index that
   * covers none of the rows left). Known without a turn of the event loop where it can be (an L2
   * index, or its coverage read at this version already): a promise awaited by every search was
   * part of the main thread's garbage a search (docs/performance.md).
   */
  function defaultMetric(st: TableState, entry: Entry, table: TableHandle, spec: QuerySpec, at: At): string | Promise<string> {
    const ix = st.ix!;
    if (spec.bypassVectorIndex) return "l2";
    if (ix.metric === "l2") return ix.metric;
    const version = at.version ?? tables.knownVersion(entry.objectId, table);
    if (version !== null && st.covers?.version === version) return st.covers.yes ? ix.metric : "l2";
    return coveredMetric(st, table, version);
  }

  async function coveredMetric(st: TableState, table: TableHandle, known: number | null): Promise<string> {
    const ix = st.ix!;
    const version = known ?? (await tableVersion(table));
    if (st.covers?.version !== version) st.covers = { version, yes: await indexCoversRows(table, ix.column) };
    return st.covers.yes ? ix.metric : "l2";
  }

  /** Until when a search, or a committed write, waits for a sync: half the time its deadline leaves (none given: the sync's end). */
  const waitUntil = (d: Deadline | undefined) => (d ? performance.now() + (d.at - performance.now()) / 2 : Infinity);

  async function route(entry: Entry, table: TableHandle, spec: QuerySpec, at: At): Promise<Route | { reason: string | null }> {
    if (spec.vectors === null || spec.fts !== null) return { reason: null };
    if (!enabled(entry)) return { reason: "disabled" };
    const optional = optionReason(spec, at);
    if (optional) return { reason: optional };
    let st = states.get(dataOf(entry));
    // Renamed: its opens and figures follow the name it has now.
    if (st) st.entry = entry;
    if (!st || ((st.status === "failed" || st.status === "memory" || st.status === "evicted" || st.status === "disabled") && Date.now() - st.since > RETRY_MS)) st = start(entry, table, st);
    else if (st.status === "none") {
      // Another process may have made a vector index since (this process's own index commits
      // start the table again): looked for once a version. Never looked for again, the table
      // stayed with LanceDB after a LanceDB client indexed it (seed 2 of the differential test).
      const version = tables.knownVersion(entry.objectId, table) ?? (await tableVersion(table));
      if (version !== st.noneAt) {
        const found = (await vectorsOf(st, table)).length > 0;
        // Another search may have started it meanwhile.
        if (st.status === "none") {
          if (found) st = start(entry, table, st);
          else st.noneAt = version;
        }
      }
    }
    st.searched = ++clock;
    if (st.status !== "ready" || !st.ix) {
      const reasons: Record<Status, string> = { checking: "not_built", building: "not_built", rebuilding: "rebuilding", ready: "not_built", memory: "memory", evicted: "evicted", disabled: "disabled", failed: "failed", none: "not_indexed" };
      return { reason: reasons[st.status] };
    }
    const ix = st.ix;
    const column = spec.vectorColumn ?? (st.vectorColumns.length === 1 ? st.vectorColumns[0] : null);
    if (column !== ix.column) return { reason: "option:vector_column" };
    const metric = spec.distanceType ?? defaultMetric(st, entry, table, spec, at);
    if ((typeof metric === "string" ? metric : await metric) !== ix.metric) return { reason: "option:distance_type" };
    if (!searchable(spec.vectors, ix.graph.dim)) return { reason: "option:vector" };
    if (ix.remapped) {
      await ix.remapped;
      return route(entry, table, spec, at);
    }
    const current = at.version ?? tables.knownVersion(entry.objectId, table) ?? (await tableVersion(table));
    if (current !== ix.version) {
      if (at.version != null) return { reason: "version" };
      if (ix.version < (at.minVersion ?? 0)) {
        void requestSync(st, current);
        return { reason: "stale" };
      }
      // The handle LanceDB would answer with (re-checked at --consistency-interval-ms) holds a
      // version a client may know of: a write answered, another process's commit. The search waits
      // for the sync to it, or LanceDB answers while a sync too large to wait for runs (its rows
      // past AWAITED_ROWS). Answered at the index's version, such a search missed rows for as long
      // as the commit was old (3 s seen) and then for up to an interval more.
      if (current > ix.version && !unanswered(st, ix.version, current)) {
        if (!st.large) {
          const synced = st.pending && st.pending.version >= current ? st.pending.done : requestSync(st, current);
          // A sync held up (a slow or stalled store, a long turn before it) leaves LanceDB the other
          // half: unbounded, such a search answered 503 at its deadline where LanceDB could answer.
          if (!(await settlesBy(synced, waitUntil(at.deadline)))) return { reason: "stale" };
        } else if (st.target < current) void requestSync(st, current);
        if (st.ix !== ix || ix.version < current) return { reason: "stale" };
      }
    }
    const k = spec.k ?? 10;
    // Past this a walk is about as wide as the rows; the heaps it allocates stay bounded.
    return { st, ix, version: ix.version, moves: ix.moves, k, ef: Math.min(widthOf(ix, spec, k + spec.offset), MOST_ROWS) };
  }

  /**
   * A search's width (HNSW's ef): the request's `ef` where it sends one, else `nprobes` over
   * LanceDB's 20 times the index's default (the wider of its calibrated width and --serving-ef),
   * else that default; at least `refine_factor` times the rows wanted, and the rows wanted.
   */
  function widthOf(ix: ServingIndex, spec: QuerySpec, wanted: number): number {
    const width = Math.max(config.servingEf, calibration(ix.graph).ef);
    const probes = spec.maxNprobes ?? spec.minNprobes;
    const ef = spec.ef ? spec.ef : probes ? Math.ceil((width * probes) / ENGINE_PROBES) : width;
    return Math.max(ef, wanted, wanted * (spec.refineFactor ?? 0));
  }

  /** The answer's shape for this projection: the engine's own output schema, each field's source. */
  /**
   * `keep`: the plan is kept for the searches after. Not while the index is ahead of the cached
   * handle it is planned from (synced before a re-check moved the handle, see beforeMove): a column
   * another process added would be missing from it after the move, as the sync cleared the plans
   * before this one was made.
   */
  function planOf(st: TableState, ix: ServingIndex, table: TableHandle, spec: QuerySpec, keep: boolean): Promise<Plan> {
    // One vector has no query_index, sent as multi_vector or not (as the engine path answers it).
    const multi = spec.multi && spec.vectors!.length > 1;
    const key = JSON.stringify([spec.columns, spec.withRowId, multi]);
    let p = st.plans.get(key);
    if (!p) {
      p = (async (): Promise<Plan> => {
        const schemaFile = await answerSchema(table, { ...spec, multi, vectors: spec.vectors!.slice(0, multi ? 2 : 1) }, st.entry.objectId);
        const fields = arrow.tableFromIPC(schemaFile).schema.fields;
        const sources: Source[] = [];
        const take: string[] = [];
        for (const f of fields) {
          if (f.name === "_distance") sources.push({ from: "distance" });
          else if (f.name === "_rowid") sources.push({ from: "rowid" });
          else if (f.name === "query_index") sources.push({ from: "query" });
          else if (f.name === ix.column) sources.push({ from: "vector" });
          else {
            const c = ix.ref.columns.findIndex((x) => x.name === f.name);
            if (c >= 0) sources.push({ from: "column", column: c });
            take.push(f.name);
          }
        }
        const hitsOnly = take.some((n) => !ix.ref.columns.some((c) => c.name === n));
        return { key: `${ix.ref.key}\u0000${key}`, schema: schemaFile, sources, hitsOnly, take: hitsOnly ? fields.map((f) => f.name).filter((n) => !["_distance", "_rowid", "query_index"].includes(n)) : [] };
      })();
      if (!keep) return p;
      st.plans.set(key, p);
      p.catch(() => st.plans.get(key) === p && st.plans.delete(key));
    }
    return p;
  }

  /**
   * An answer from rows found whose columns the index does not cache: the columns are taken from
   * the engine by row id (at the search's version: a take that ran at another is not used). The
   * cached handle may move on meanwhile (a check for newer commits), to a version without a column
   * the plan takes (another process's overwrite or drop): that take fails, and LanceDB answers at
   * the new version (seed 3 of the differential test: 500 "No field named x53").
   */
  async function completed(table: TableHandle, version: number, plan: Plan, found: FoundRows): Promise<Uint8Array | null> {
    const schema = arrow.tableFromIPC(plan.schema).schema;
    const ids = [...new Set(found.rowIds)];
    const parts: import("apache-arrow").Table[] = [];
    try {
      for await (const b of takeRows(table, ids, plan.take)) parts.push(arrow.tableFromIPC(b));
    } catch (err) {
      if ((await tableVersion(table)) !== version) return null;
      throw err;
    }
    if ((await tableVersion(table)) !== version) return null;
    const rowOf = new Map<bigint, { t: number; i: number }>();
    parts.forEach((t, ti) => {
      const col = t.getChild("_rowid")!;
      for (let i = 0; i < t.numRows; i++) rowOf.set(col.get(i) as bigint, { t: ti, i });
    });
    const at = Array.from(found.rowIds, (id) => rowOf.get(id));
    if (at.some((x) => x === undefined)) return null;
    return takenAnswer(schema, parts, at as { t: number; i: number }[], found);
  }

  /** A search through the index, again (up to `retries` times) when rows moved while its filter and plan were made. */
  async function serve(entry: Entry, table: TableHandle, spec: QuerySpec, at: At, format: "arrow" | "json" | "ndjson", retries: number): Promise<Served> {
    const r = await route(entry, table, spec, at);
    if ("reason" in r) {
      if (r.reason !== null) recordSearchPath("engine", r.reason);
      return r;
    }
    const { st, ix, version } = r;
    let bits: FilterBits | null = null;
    let plan: Plan;
    try {
      if (spec.filter !== null) {
        const open = (v: number) => tables.open(entry, { version: v });
        // The request's handle at the index's version has its schema cached (a new filter each search, each write).
        const schema = async (v: number) => (tables.knownVersion(entry.objectId, table) === v ? ((await tables.schemaOf(entry, table)) as unknown as Schema) : schemaOf(await open(v)));
        bits = await filters.bitsFor(ix, spec.filter, { table: open, schema });
      }
      const known = tables.knownVersion(entry.objectId, table);
      plan = await planOf(st, ix, table, spec, known === null || known >= version);
    } catch (err) {
      // The engine answers (and words any error in the filter or columns as it always does).
      log.debug("serving index: engine answers", { table: entry.objectId, error: String(err) });
      const reason = err instanceof TooBig ? "memory" : spec.filter !== null ? "filter" : "plan";
      recordSearchPath("engine", reason);
      return { reason };
    }
    // A sync that moved rows (new row ids in place) may have run meanwhile: the search starts
    // again (the filter's bitmap is then of the new version), or after that LanceDB answers.
    // Rows added or retired since are no matter: the search reads the index at its version.
    if (ix.remapped || ix.moves !== r.moves || st.ix !== ix) {
      if (retries > 0) return serve(entry, table, spec, at, format, retries - 1);
      recordSearchPath("engine", "stale");
      return { reason: "stale" };
    }
    const query: SearchQuery = {
      // Copied straight in: Float32Array.from over flat()'s iterator was a tenth of the main thread's time a search.
      vectors: concatNumbers(spec.vectors!, Float32Array),
      k: r.k,
      offset: spec.offset,
      ef: r.ef,
      exact: spec.bypassVectorIndex,
      version,
      bits: bits?.bits ?? null,
      passing: bits?.passing ?? 0,
      postfilter: !spec.prefilter,
      lower: spec.lowerBound ?? -Infinity,
      upper: spec.upperBound ?? Infinity,
    };
    ix.searching++;
    let answer: Uint8Array | FoundRows;
    try {
      answer = await poolOf().search(ix.ref, plan, query, plan.hitsOnly);
    } catch (err) {
      // A search that failed in its thread is a bug to fix, not the client's failure: LanceDB answers.
      log.error("serving index: search failed; LanceDB answers", { table: entry.objectId, error: String((err as Error)?.stack ?? err) });
      recordSearchPath("engine", "error");
      return { reason: "error" };
    } finally {
      if (--ix.searching === 0 && ix.drained) {
        ix.drained();
        ix.drained = null;
      }
    }
    const bytes = answer instanceof Uint8Array ? answer : await completed(table, version, plan, answer);
    if (bytes === null) {
      recordSearchPath("engine", "stale");
      return { reason: "stale" };
    }
    recordSearchPath("serving", "");
    return { chunks: format === "arrow" ? [bytes] : jsonAnswer(bytes, format === "ndjson") };
  }

  return {
    search: (entry, table, spec, at, format) => serve(entry, table, spec, at, format, MOVED_RETRIES),

    async explain(entry, table, spec, at) {
      const r = await route(entry, table, spec, at);
      // Where no serving index is in play the plan is the engine's alone, as LanceDB's clients expect.
      if ("reason" in r) return r.reason === null || r.reason === "disabled" || r.reason === "not_indexed" ? null : `QuiverSearchPath: engine (reason: ${r.reason})`;
      const { ix } = r;
      const cal = calibration(ix.graph);
      const how = spec.bypassVectorIndex ? "exact (every row measured)" : `HNSW m=${GRAPH_M} ef_construction=${EF_CONSTRUCTION} ef=${r.ef}, calibrated ef=${cal.ef} (recall@10 ${cal.recall.toFixed(3)} of rows held out), --serving-ef ${config.servingEf}`;
      const by = spec.filter !== null && (await poolOf().filterPlan({ filter: spec.filter, types: filterTypes((await schemaOf(table)).fields), columns: ix.ref.columns })) !== null ? "over the index's cached columns" : "by LanceDB";
      const filter = spec.filter === null ? "" : `, filter ${spec.prefilter ? "before" : "after"} the search (a row bitmap evaluated ${by})`;
      return `QuiverSearchPath: serving index (${how}, metric=${ix.metric}, column=${JSON.stringify(ix.column)}, version=${ix.version}, rows=${mappedRows(ix.rowSlots)}, slots=${slotCount(ix.graph)}, tombstones=${tombstones(ix.graph)}${filter}, k=${r.k}, offset=${spec.offset})`;
    },

    async committed(c) {
      const st = states.get(dataOf(c.table));
      if (!st || c.branch !== null) return;
      st.entry = c.table;
      if (c.change === "schema" || c.change === "index" || c.change === "overwrite") {
        st.plans.clear();
        if (c.change === "overwrite" || !st.ix || !(await stillFits(st.ix, await tables.open(st.entry)))) {
          // The index's column, its distance or a cached column's type is no longer the table's: start again.
          forget(st);
          return;
        }
      }
      if (c.version === null) return requestSync(st, null);
      st.awaiting.set(c.version, c.operation);
      try {
        // A sync held up (a slow or stalled store) keeps the committed write from its answer for half
        // the time its deadline leaves, no more: unbounded, it answered 503 though committed.
        await settlesBy(requestSync(st, c.version), waitUntil(c.deadline));
        // Answered now, whether the index holds it or not (a large or held-up sync runs on: searches
        // find the index behind a version a client knows of and wait for it, or LanceDB answers).
        st.told = Math.max(st.told, c.version);
      } finally {
        st.awaiting.delete(c.version!);
      }
    },

    forget(entry) {
      const st = states.get(dataOf(entry));
      if (st) forget(st);
    },

    beforeMove(entry) {
      const st = states.get(dataOf(entry));
      const ix = st?.ix;
      // A large sync already runs while LanceDB answers: nothing to wait for.
      if (!st || !ix || st.status !== "ready" || st.large) return undefined;
      return (async () => {
        // One listing of the table's manifests: the version the check would move the handle to.
        const newest = (await publishedVersions(tableDir(tables.root, st.entry))).at(-1);
        if (newest !== undefined && newest > ix.version) await requestSync(st, newest);
      })();
    },

    saved: () => savedTables(config.stateDir),

    async warm(entry) {
      if (!enabled(entry)) return;
      const st = states.get(dataOf(entry)) ?? start(entry, await tables.open(entry));
      await st.started;
      await st.writer;
    },

    async close() {
      closed = true;
      unwatch();
      clearInterval(saver);
      await Promise.all([...states.values()].map((st) => persist(st).then(() => pin(st))));
      channel.close();
      await pool?.destroy();
    },
  };
}
