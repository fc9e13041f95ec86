// A table's lifecycle in the catalog and the data directory: a location claimed (never shared by
// concurrent creators), the dataset written there, then the entry; and the way back (deregister
// keeps the data, marked; removal deletes it with what Quiver keeps about it). Operations (table,
// views, namespaces, batch commits) call these; each takes only the services it uses.
import { mkdir } from "node:fs/promises";
import type { Static } from "@sinclair/typebox";
import { roleRank, type Principal, type Role } from "../auth/principal.js";
import type { Catalog, Entry } from "../catalog/catalog.js";
import type { Claims } from "../catalog/claims.js";
import { requireNamespace, requireTable } from "../catalog/lookup.js";
import { newLocation, normaliseLocation, REMOTE_MANIFEST_LOCATION, resolveLocation } from "../catalog/locations.js";
import { objectIdOf } from "../catalog/names.js";
import { requireRoom, type Quotas } from "../catalog/quotas.js";
import { markDeregistered, unmarkDeregistered } from "../catalog/root-listing.js";
import type { ValueVersions } from "../compute/value-versions.js";
import type { Views } from "../compute/views.js";
import type { Config } from "../config.js";
import { creatable, hasVersions, reserve } from "../engine/datasets.js";
import { isRemote } from "../engine/storage.js";
import { catalogCheck, requestCommit, type Work } from "../engine/deadline.js";
import { removeTree } from "../util/store-files.js";
import type { TableHandle, Tables } from "../engine/tables.js";
import { ApiError, Code, invalid } from "../errors.js";
import type { DeclareTable } from "../schemas/table.js";
import type { Jobs } from "../jobs/jobs.js";

export interface LifecycleDeps {
  catalog: Catalog;
  tables: Tables;
  claims: Claims;
  views: Views;
  valueVersions: ValueVersions;
  jobs: Pick<Jobs, "all" | "cancel">;
  config: Pick<Config, "locationRole" | "managedVersioning"> & Quotas;
}

const q = JSON.stringify;

export const dirOf = (deps: LifecycleDeps, e: Entry) => resolveLocation(deps.tables.root, e.location!);
export const alreadyExists = (id: readonly string[], what = "table") =>
  new ApiError(Code.TableAlreadyExists, `${what} ${q(objectIdOf(id))} already exists`);

export function tableName(id: readonly string[]): void {
  if (id.length === 0) throw invalid("id: a table id needs at least a table name");
}

/** The entry at `id` must be free, or hold a table (a namespace there is a conflict). */
export function existingTable(deps: LifecycleDeps, id: readonly string[]): Entry | undefined {
  const e = deps.catalog.get(id);
  if (e?.type === "namespace") throw alreadyExists(id, "a namespace named");
  return e;
}

/** Create the directory unless it exists; false when it does (someone else owns it). */
async function claim(dir: string): Promise<boolean> {
  // An object store has no directories: a location is free when no table is there (and no request
  // here holds it, see claimLocation); creating the dataset is the atomic step (mode "create").
  if (isRemote(dir)) return !dir.endsWith("/" + REMOTE_MANIFEST_LOCATION) && !(await hasVersions(dir));
  try {
    await mkdir(dir);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
}

/**
 * A derived location whose directory this request created, so concurrent creators (and kept data
 * of a deregistered table) never share one: the first gets `<name>.lance`, others a random name.
 */
async function claimLocation(deps: LifecycleDeps, id: readonly string[]): Promise<{ location: string; release: () => void }> {
  // On an object store nothing makes a location exclusive before the dataset is written, and
  // replicas racing to create `<name>.lance` there made one of them remove the winner's data on
  // its failure: there every table gets a random location (the catalog names it; LanceDB's
  // by-name layout is no help there, docs/configuration.md "Object storage").
  // Nor where this process removed a table: its engine session would read the new one as the old.
  const first = newLocation(id, isRemote(deps.tables.root));
  for (let loc = deps.tables.removedHere(first) ? newLocation(id, true) : first; ; loc = newLocation(id, true)) {
    // Held before the directory exists, so reclaiming orphans never sees it unheld.
    const release = await deps.claims.hold(loc);
    if (await claim(resolveLocation(deps.tables.root, loc))) return { location: loc, release };
    release();
  }
}

/** A location lets the client open the files itself (docs/security.md, "Table locations and file
 * permissions"): only roles configured for it get one. */
export const located = (deps: LifecycleDeps, p: Principal) => roleRank[p.role] >= roleRank[deps.config.locationRole as Role];
export const locationFor = (deps: LifecycleDeps, p: Principal, dir: string) => (located(deps, p) ? { location: dir } : {});

/**
 * A new table at a location this request claims: `make` writes its dataset there, then the catalog
 * gets its row; on any failure the directory is removed again. Answers the entry and the table.
 */
export async function createEntry(deps: LifecycleDeps, id: string[], properties: Record<string, string>, make: (location: string) => Promise<TableHandle>, work: Work | null) {
  // Before any data is written; checked again below, where creates are one at a time.
  requireRoom(deps.catalog, id, "table", deps.config);
  const { location, release } = await claimLocation(deps, id);
  const dir = resolveLocation(deps.tables.root, location);
  const entry: Entry = { id, objectId: objectIdOf(id), type: "table", location, properties };
  try {
    const table = await removedOnFailure(dir, async () => {
      const t = await make(location);
      await deps.catalog.exclusive(async () => {
        await deps.catalog.refresh(true);
        requireNamespace(deps.catalog, id.slice(0, -1));
        // The directory listing may already show the dataset just written; the claim made it ours.
        const taken = existingTable(deps, id);
        if (taken && !(taken.listed && taken.location === location)) throw alreadyExists(id);
        if (!taken) requireRoom(deps.catalog, id, "table", deps.config);
        await deps.catalog.insert(entry, Code.TableAlreadyExists, catalogCheck(work));
      });
      return t;
    });
    return { entry, table, dir };
  } finally {
    release();
  }
}

/** `work` on a directory this request made: if it fails, the directory goes too. */
async function removedOnFailure<T>(dir: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    // Unless another creator's dataset is there (on an object store, mode "create" refused it).
    if (!(isRemote(dir) && err instanceof ApiError && err.message.startsWith("a dataset already exists at location"))) await removeTree(dir).catch(() => undefined);
    throw err;
  }
}

/** Remove a table's data and what Quiver keeps about it (a view's definition, computed-value versions). */
export async function removeTableData(deps: LifecycleDeps, entry: Entry): Promise<void> {
  await endJobsOf(deps, entry);
  await deps.tables.removeData(entry);
  if (entry.location) await Promise.all([deps.views.forget(entry.location), deps.valueVersions.forget(entry.location)]);
}

/**
 * Cancels a dropped table's jobs and waits for their runs to stop: a compaction or index build
 * still writing into the directory made its removal fail (500 ENOTEMPTY), or left its files for a
 * table created under the name later. The catalog no longer names the table: no new job starts.
 */
async function endJobsOf(deps: LifecycleDeps, entry: Entry): Promise<void> {
  // Its Queued and Running records only, read once: a cancel reads each again itself, and leaves
  // one that ended meanwhile as it is.
  for (const r of await deps.jobs.all({ table: entry.id, active: true })) await deps.jobs.cancel(r);
}

/**
 * Declare table `id` (the caller holds the catalog's exclusive section). Answers the response body
 * and a way to take the declaration back, for batch commits that fail later.
 */
export async function declareIn(deps: LifecycleDeps, id: string[], body: Static<typeof DeclareTable>, principal: Principal, work: Work | null) {
  tableName(id);
  const properties = body.properties ?? {};
  await deps.catalog.refresh(true);
  requireNamespace(deps.catalog, id.slice(0, -1));
  if (existingTable(deps, id)) throw alreadyExists(id);
  requireRoom(deps.catalog, id, "table", deps.config);
  const given = body.location ? normaliseLocation(deps.tables.root, body.location) : null;
  const { location, release } = given ? { location: given, release: await deps.claims.hold(given) } : await claimLocation(deps, id);
  const dir = resolveLocation(deps.tables.root, location);
  const entry: Entry = { id, objectId: objectIdOf(id), type: "table", location, properties };
  try {
    if (body.location) {
      if (!creatable(location)) throw invalid(`location: ${q(body.location)} must be a "<name>.lance" directory directly in the data directory`);
      if (!(await claim(dir))) throw invalid(`location: ${q(body.location)} is already in use`);
    }
    await removedOnFailure(dir, async () => {
      await reserve(dir);
      await deps.catalog.insert(entry, Code.TableAlreadyExists, catalogCheck(work));
    });
  } finally {
    release();
  }
  return {
    // LanceDB's client writes the data itself, at this (absolute) location.
    response: { ...locationFor(deps, principal, dir), properties, managed_versioning: deps.config.managedVersioning },
    undo: async () => {
      await deps.catalog.remove([entry]);
      await removeTree(dir);
    },
  };
}

/**
 * Remove table `id`'s catalog entry (the caller holds the catalog's exclusive section); the data
 * stays. Answers the entry and a way to put it back, for batch commits that fail later.
 */
export async function deregisterIn(deps: LifecycleDeps, id: string[], work: Work | null) {
  await deps.catalog.refresh(true);
  const entry = await requireTable(deps.catalog, id);
  // Kept data is marked: a directory-listed table would reappear with it, and reclaiming orphans
  // must not take what a deregister deliberately kept. The mark is its first change, so a
  // deregister past its deadline leaves the table as it was.
  await requestCommit(work, () => markDeregistered(dirOf(deps, entry)));
  await deps.catalog.remove([entry], catalogCheck(work));
  const undo = async () => {
    await unmarkDeregistered(dirOf(deps, entry));
    if (!entry.listed) await deps.catalog.insert(entry, Code.TableAlreadyExists);
    await deps.catalog.refresh(true);
  };
  return { entry, undo };
}
