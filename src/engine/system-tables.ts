// Quiver's own state, shared by every replica on one data directory: small Lance tables under the
// reserved directory `.system/` of the data directory (beside the tables; on an object store, in
// the same bucket), written only with the engine's conditional commits, so two replicas that race
// agree on one winner. A catalog location may never name this directory (src/catalog/locations.ts),
// so no API table route reaches it, and no listing shows it (it is no `<name>.lance`).
//
// A table is keyed by `key`; a few scalar columns per table carry what conditions test (status,
// lease owner, expiry), and `doc` the whole record as JSON. Reads always see the latest commit
// (consistency interval 0): what one replica wrote, the next read on another sees.
import { mkdir } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import * as lancedb from "@lancedb/lancedb";
import { wallClock } from "../util/clock.js";
import { fileInfo, joinPath, writeIfAbsent } from "../util/store-files.js";
import { arrow } from "./arrow.js";
import { errorText } from "./messages.js";
import { isRemote } from "./storage.js";
import { merged, untilCommitted } from "./writes.js";
import { engineSession } from "./session.js";
import type { SystemColumn, SystemRow, SystemTable, SystemTables } from "../util/system-table.js";

export type { SystemColumn, SystemRow, SystemTable, SystemTables } from "../util/system-table.js";
export { sqlString } from "../util/system-table.js";

const { Field, Float64, Schema, Utf8 } = arrow;

/** The reserved directory of the data directory holding the system tables. */
export const SYSTEM_DIR = ".system";

/** Compact a system table (and drop versions older than this) after this many of its commits here. */
const COMPACT_EVERY = 50;
const KEEP_VERSIONS_MS = 10 * 60_000;
/** How long a replica waits for the one that creates a table; past it, a creator is taken for dead. */
const CREATOR_MS = 30_000;
const WAIT_MS = 100;
/** Where texts whose last answer a table keeps; few poll, and a where with a changing literal (`expires > <now>`) only pushes out the oldest. */
const KEEP_ANSWERS = 8;

export function openSystemTables(root: string, storageOptions: Record<string, string>): SystemTables {
  const dir = joinPath(root, SYSTEM_DIR);
  const conn = lancedb.connect(dir, { storageOptions, readConsistencyInterval: 0, session: engineSession() });
  const compactions: Compactions = { running: new Set(), closed: false };
  return {
    async open(name, columns) {
      const schema = new Schema([
        new Field("key", new Utf8(), false, new Map([["lance-schema:unenforced-primary-key:position", "0"]])),
        ...columns.map((c) => new Field(c.name, c.type === "string" ? new Utf8() : new Float64(), true)),
        new Field("doc", new Utf8(), true),
      ]);
      const db = await conn;
      // Replicas starting at once must not all create it: the engine commits a racing create as an
      // overwrite of the winner's table, and the loser's (or the winner's first write) fails. One
      // replica, the one whose marker `<name>.creator` lands first, creates it; the others wait
      // for its first version, and take over once the marker is older than CREATOR_MS.
      const marker = joinPath(dir, `${name}.creator`);
      const deadline = Date.now() + 2 * CREATOR_MS;
      for (;;) {
        if ((await db.tableNames()).includes(name)) {
          try {
            return systemTable(await db.openTable(name), schema, columns, compactions);
          } catch (err) {
            // Listed a moment before its first version can be read.
            if (Date.now() > deadline || !/not found/i.test(errorText(err))) throw err;
          }
        } else if (await creator(marker)) {
          await db.createEmptyTable(name, schema, { existOk: true });
          continue;
        }
        if (Date.now() > deadline) throw new Error(`system table ${name} was not created within ${(2 * CREATOR_MS) / 1000} s`);
        await sleep(WAIT_MS);
      }
    },
    async close() {
      compactions.closed = true;
      await Promise.all(compactions.running);
    },
  };

  /** Whether this replica creates the table: its marker landed first, or the one there is stale. */
  async function creator(marker: string): Promise<boolean> {
    if (!isRemote(dir)) await mkdir(dir, { recursive: true });
    if (await writeIfAbsent(marker, Buffer.from(new Date().toISOString()))) return true;
    const seen = await fileInfo(marker);
    return seen !== null && wallClock() - seen.mtimeMs > CREATOR_MS;
  }
}

/** The background compactions of one replica's system tables: a closed replica starts none, and its close waits for those running. */
interface Compactions {
  running: Set<Promise<void>>;
  closed: boolean;
}

function systemTable(table: lancedb.Table, schema: InstanceType<typeof Schema>, columns: SystemColumn[], compactions: Compactions): SystemTable {
  const names = ["key", ...columns.map((c) => c.name), "doc"];
  const toArrow = (rows: SystemRow[]) => lancedb.makeArrowTable(rows.map((r) => Object.fromEntries(names.map((n) => [n, r[n] ?? null]))), { schema });
  let commits = 0;
  let compacting = false;
  // Each commit adds a fragment; a table compacted now and then stays one or two fragments to read.
  const committed = () => {
    if (++commits % COMPACT_EVERY !== 0 || compacting || compactions.closed) return;
    const running = table
      .optimize({ cleanupOlderThan: new Date(Date.now() - KEEP_VERSIONS_MS) })
      .then(() => undefined)
      // Another replica's commit may conflict with it; the next round compacts.
      .catch(() => undefined)
      .finally(() => {
        compacting = false;
        compactions.running.delete(running);
      });
    compacting = true;
    compactions.running.add(running);
  };
  // An idle replica polls the same selects (the jobs' active set each second): a version check
  // (a manifest lookup under consistency interval 0) costs a tenth of a scan. An answer is kept
  // under the version read before its scan; the scan reads that version or a later one, so it is
  // served only while the table is still at that version, and never older than the table.
  const answers = new Map<string, { version: number; rows: SystemRow[] }>();
  const copies = (rows: SystemRow[]) => rows.map((r) => ({ ...r }));
  return {
    async select(where = "") {
      const version = await table.version();
      const kept = answers.get(where);
      answers.delete(where);
      if (kept?.version === version) {
        answers.set(where, kept);
        return copies(kept.rows);
      }
      const q = table.query();
      const read = (await (where ? q.where(where) : q).toArray()) as SystemRow[];
      const rows = read.map((r) => Object.fromEntries(names.map((n) => [n, r[n] ?? null])));
      answers.set(where, { version, rows });
      if (answers.size > KEEP_ANSWERS) answers.delete(answers.keys().next().value!);
      return copies(rows);
    },
    async upsert(rows) {
      if (rows.length === 0) return;
      // Unconditional, so a try again after a lost commit may land after another writer's: right
      // for every caller, as each writes rows no one else writes (a claim's own key, a request's
      // idempotency answer), rows whose value is their key (a computed version), or rows where
      // the latest write is the truth (an index's latest build, a view's last refresh).
      await untilCommitted(() => table.mergeInsert("key").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(toArrow(rows)).then(merged("system")));
      committed();
    },
    async insertIfAbsent(rows) {
      if (rows.length === 0) return 0;
      const r = await untilCommitted(() => table.mergeInsert("key").whenNotMatchedInsertAll().execute(toArrow(rows)).then(merged("system")));
      if (r.numInsertedRows > 0) committed();
      return r.numInsertedRows;
    },
    async updateIf(rows, where) {
      if (rows.length === 0) return 0;
      const r = await untilCommitted(() => table.mergeInsert("key").whenMatchedUpdateAll({ where }).execute(toArrow(rows)).then(merged("system")));
      if (r.numUpdatedRows > 0) committed();
      return r.numUpdatedRows;
    },
    async deleteWhere(where) {
      // A delete that matches nothing still commits a version (a table drop forgets views and
      // value versions it mostly never had): a count is cheaper than that commit.
      if ((await table.countRows(where)) === 0) return;
      await table.delete(where);
      committed();
    },
  };
}
