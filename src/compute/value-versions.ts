// Which commits wrote values of a virtual column's definition. A backfill writes a row only if the
// row is unchanged since the backfill read its inputs, so a row whose last update is one of these
// commits holds a value its current inputs give under that definition; any other row with a value
// is stale (written by an older definition, or its inputs changed since). Kept in the shared store
// (src/util/system-table.ts), one row per commit, keyed by table location, branch, column and
// definition hash (a column's other definitions keep their own lists), and read there on every
// look-up, so a backfill on one replica knows what a backfill on another wrote.
import path from "node:path";
import { migrateLog } from "../util/json-log.js";
import { sqlString, type SystemTables } from "../util/system-table.js";

export interface ValuesKey {
  location: string;
  branch: string | null;
  column: string;
  definition: string;
}

export interface ValueVersions {
  get(key: ValuesKey): Promise<ReadonlySet<number>>;
  add(key: ValuesKey, version: number): Promise<void>;
  /** Forget a table's lists (its data was removed; a new table there starts its versions afresh). */
  forget(location: string): Promise<void>;
}

/** The lines of the local file earlier releases kept. */
type Line = { k: string; v: number } | { forget: string };

const keyOf = (k: ValuesKey) => JSON.stringify([k.location, k.branch ?? "", k.column, k.definition]);
const locationOf = (k: string) => (JSON.parse(k) as string[])[0];

export async function openValueVersions(store: SystemTables, stateDir: string): Promise<ValueVersions> {
  const table = await store.open("value_versions", [
    { name: "list", type: "string" },
    { name: "location", type: "string" },
    { name: "version", type: "number" },
  ]);
  const row = (list: string, version: number) => ({ key: JSON.stringify([list, version]), list, location: locationOf(list), version, doc: null });
  await migrateLog<Line>(path.join(stateDir, "computed-versions.jsonl"), async (lines) => {
    const kept = new Map<string, number>();
    for (const l of lines) {
      if ("forget" in l) for (const [k, v] of kept) if (locationOf(JSON.parse(k)[0]) === l.forget) kept.delete(k);
      if ("k" in l) kept.set(JSON.stringify([l.k, l.v]), l.v);
    }
    await table.upsert([...kept].map(([k, v]) => row(JSON.parse(k)[0], v)));
  });
  return {
    async get(key) {
      const rows = await table.select(`list = ${sqlString(keyOf(key))}`);
      return new Set(rows.map((r) => r.version as number));
    },
    add: (key, version) => table.upsert([row(keyOf(key), version)]),
    forget: (location) => table.deleteWhere(`location = ${sqlString(location)}`),
  };
}
