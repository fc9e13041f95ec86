// Which commits wrote values of a virtual column's definition. A backfill writes a row only if the
// row is unchanged since the backfill read its inputs, so a row whose last update is one of these
// commits holds a value its current inputs give under that definition; any other row with a value
// is stale (written by an older definition, or its inputs changed since). Kept durably in Quiver's
// private directory: one JSON line per commit, keyed by table location, branch, column and
// definition hash (a column's other definitions keep their own lists).
import path from "node:path";
import { openJsonLog } from "../util/json-log.js";

export interface ValuesKey {
  location: string;
  branch: string | null;
  column: string;
  definition: string;
}

export interface ValueVersions {
  get(key: ValuesKey): ReadonlySet<number>;
  add(key: ValuesKey, version: number): Promise<void>;
  /** Forget a table's lists (its data was removed; a new table there starts its versions afresh). */
  forget(location: string): Promise<void>;
  close(): Promise<void>;
}

type Line = { k: string; v: number } | { forget: string };

const keyOf = (k: ValuesKey) => JSON.stringify([k.location, k.branch ?? "", k.column, k.definition]);
const locationOf = (k: string) => (JSON.parse(k) as string[])[0];

export function openValueVersions(dir: string): ValueVersions {
  const log = openJsonLog<Line>(path.join(dir, "computed-versions.jsonl"));
  const lists = new Map<string, Set<number>>();
  const drop = (location: string) => {
    for (const k of [...lists.keys()]) if (locationOf(k) === location) lists.delete(k);
  };
  for (const line of log.loaded) {
    if ("forget" in line) drop(line.forget);
    else (lists.get(line.k) ?? lists.set(line.k, new Set()).get(line.k)!).add(line.v);
  }
  return {
    get: (key) => lists.get(keyOf(key)) ?? new Set(),
    add(key, version) {
      const k = keyOf(key);
      (lists.get(k) ?? lists.set(k, new Set()).get(k)!).add(version);
      return log.append([{ k, v: version }]);
    },
    forget(location) {
      drop(location);
      return log.append([{ forget: location }]);
    },
    close: () => log.close(),
  };
}
