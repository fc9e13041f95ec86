// The `__manifest` Lance table of the directory catalog (upstream V2 layout), read and written
// through LanceDB's ordinary Table API. LanceDB only opens tables named `<x>.lance`, so a private
// folder holds a symlink `__manifest.lance` → `<root>/__manifest` (local disk only). An object
// store has no symlinks: there the catalog is the table `__manifest.lance` at the root
// (docs/configuration.md, "Object storage": LanceDB's directory namespace does not see it).
import { existsSync, mkdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import type { CommitCheck, ManifestRow, ManifestStore } from "../catalog/catalog.js";
import { REMOTE_MANIFEST_LOCATION } from "../catalog/locations.js";
import { arrow } from "./arrow.js";
import { isRemote } from "./storage.js";
import { isCommitConflict } from "./messages.js";
import { merged, untilCommitted } from "./writes.js";
import { engineSession } from "./session.js";

const { Field, List, Schema, Utf8 } = arrow;

// Exactly LanceDB's own schema, so either side can open what the other made.
const schema = new Schema([
  new Field("object_id", new Utf8(), false, new Map([["lance-schema:unenforced-primary-key:position", "0"]])),
  new Field("object_type", new Utf8(), false),
  new Field("location", new Utf8(), true),
  new Field("metadata", new Utf8(), true),
  new Field("base_objects", new List(new Field("object_id", new Utf8(), true)), true),
]);

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * Compact the manifest (dropping versions older than KEEP_VERSIONS_MS) after this many of its
 * commits here. Each create added a fragment and a version: at 700 tables a create read 700
 * fragments twice (its merge's key lookup, the catalog's reload) and took 4 times as long.
 */
const COMPACT_EVERY = 50;
const KEEP_VERSIONS_MS = 10 * 60_000;

async function openRemote(root: string, storageOptions: Record<string, string>): Promise<lancedb.Table> {
  const conn = await lancedb.connect(root, { storageOptions, session: engineSession() });
  try {
    return await conn.openTable("__manifest");
  } catch (err) {
    if (!/not found|does not exist/i.test(String((err as Error)?.message ?? err))) throw err;
    return create(conn);
  }
}

/**
 * Create the manifest table, or open it when another replica's creation won: replicas started
 * together on a new data directory each create it, and all but one commit lose ("preempted by
 * concurrent transaction Overwrite"), which ended their start (seen on Azurite).
 */
async function create(conn: lancedb.Connection): Promise<lancedb.Table> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await conn.createEmptyTable("__manifest", schema, { existOk: true });
    } catch (err) {
      if (!isCommitConflict(err) || attempt >= 3) throw err;
    }
    try {
      return await conn.openTable("__manifest");
    } catch {
      // Not readable yet: its creator has not finished; create again (existOk opens it then).
    }
  }
}

export async function openManifestTable(root: string, privateDir: string, storageOptions: Record<string, string> = {}): Promise<ManifestStore> {
  const table = isRemote(root) ? await openRemote(root, storageOptions) : await openLocal(root, privateDir);
  return storeOn(table);
}

async function openLocal(root: string, privateDir: string): Promise<lancedb.Table> {
  const linkDir = path.join(privateDir, "manifest-link");
  const link = path.join(linkDir, "__manifest.lance");
  const target = path.join(root, "__manifest");
  mkdirSync(linkDir, { recursive: true });
  if (!existsSync(link)) symlinkSync(target, link, "dir");
  const conn = await lancedb.connect(linkDir, { session: engineSession() });
  let table: lancedb.Table;
  if (existsSync(path.join(target, "_versions"))) {
    table = await conn.openTable("__manifest");
  } else {
    mkdirSync(target, { recursive: true });
    table = await create(conn);
  }
  return table;
}

function storeOn(table: lancedb.Table): ManifestStore {
  const toArrow = (rows: ManifestRow[]) =>
    lancedb.makeArrowTable(rows.map((r) => ({ ...r, base_objects: null })), { schema });

  let commits = 0;
  /** After a commit of ours: now and then, compact (another writer's conflicting commit only defers it to the next round). */
  const committed = async <T>(result: T): Promise<T> => {
    if (++commits % COMPACT_EVERY === 0) await table.optimize({ cleanupOlderThan: new Date(Date.now() - KEEP_VERSIONS_MS) }).catch(() => undefined);
    return result;
  };

  const insertIfAbsent = async (row: ManifestRow, check?: CommitCheck) => {
    const r = await untilCommitted(() => {
      check?.();
      return table.mergeInsert("object_id").whenNotMatchedInsertAll().execute(toArrow([row])).then(merged("catalog"));
    });
    return committed({ inserted: r.numInsertedRows === 1, version: r.version });
  };
  /** SQL true of the stored row while it is still `was`, compared as stored (another writer's JSON may be spaced differently). */
  const sameAs = (was: ManifestRow) =>
    (["object_type", "location", "metadata"] as const)
      .map((c) => {
        const v = was[c];
        return v === null ? `target.${c} IS NULL` : `target.${c} = ${quote(v)}`;
      })
      .join(" AND ");

  return {
    async readAll() {
      await table.checkoutLatest();
      const version = await table.version();
      const rows = (await table.query().select(["object_id", "object_type", "location", "metadata"]).toArray()) as ManifestRow[];
      return { rows: rows.map((r) => ({ ...r })), version };
    },
    async latestVersion() {
      await table.checkoutLatest();
      return table.version();
    },
    insertIfAbsent,
    async replaceIf(row, was, check) {
      if (was === null) {
        const { inserted, version } = await insertIfAbsent(row, check);
        return { replaced: inserted, version };
      }
      const r = await untilCommitted(() => {
        check?.();
        return table.mergeInsert("object_id").whenMatchedUpdateAll({ where: sameAs(was) }).execute(toArrow([row])).then(merged("catalog"));
      });
      return committed({ replaced: r.numUpdatedRows === 1, version: r.version });
    },
    async remove(objectIds, check) {
      check?.();
      const r = await table.delete(`object_id IN (${objectIds.map(quote).join(", ")})`);
      return committed(r.version);
    },
  };
}
