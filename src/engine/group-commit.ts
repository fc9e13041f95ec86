// Group commit of appends. Writes to one table branch run one commit at a time (Tables.write), and
// a commit costs the same whether it carries one row or thousands, so appends that arrive while a
// commit is in progress wait together and go into the next commit as one: N waiting writers cost
// one commit, not N. Each writer still gets its own answer: the version of the commit that holds
// its rows (shared by the writers of that commit) once it is committed, and its own row count.
// Only batches with the same schema are combined (each was checked against the table before it
// got here, so a bad batch never joins a group); if a combined commit fails anyway, each batch is
// committed on its own, so one writer's failure is never its neighbours'.
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import type { Entry } from "../catalog/catalog.js";
import { arrow } from "./arrow.js";
import { namedBranch, type Tables } from "./tables.js";

interface Waiting {
  data: A.Table;
  resolve: (version: number) => void;
  reject: (err: unknown) => void;
}

export interface GroupCommit {
  /** Append `data` to the table's `branch` through `table` (its handle); resolves to the version that holds it. */
  append(entry: Entry, branch: string | null | undefined, table: lancedb.Table, data: A.Table): Promise<number>;
}

/** Batches combine when their columns agree in name, type and nullability, in order. */
const shapeOf = (s: A.Schema) => s.fields.map((f) => `${f.name}:${String(f.type)}:${f.nullable}`).join("\u0001");

export function createGroupCommit(tables: Tables): GroupCommit {
  /** Per table branch and batch shape: the group still open to joiners (its commit has not begun). */
  const open = new Map<string, Waiting[]>();

  const commit = async (entry: Entry, branch: string | null | undefined, table: lancedb.Table, data: A.Table) =>
    (await tables.write(entry, branch, { change: "insert", rows: data.numRows }, () => table.add(data, { mode: "append" }))).version;

  async function run(entry: Entry, branch: string | null | undefined, table: lancedb.Table, key: string, group: Waiting[]): Promise<void> {
    // The commit queue reached this group: it closes to joiners and commits what it holds.
    let version: number;
    try {
      const r = await tables.write(entry, branch, { change: "insert", rows: group.reduce((n, w) => n + w.data.numRows, 0) }, () => {
        if (open.get(key) === group) open.delete(key);
        const combined = group.length === 1 ? group[0].data : group[0].data.concat(...group.slice(1).map((w) => w.data));
        return table.add(combined, { mode: "append" });
      });
      version = r.version;
    } catch (err) {
      if (open.get(key) === group) open.delete(key);
      if (group.length === 1) return group[0].reject(err);
      // One batch may be what the engine refused: each goes on its own, and only its writer hears of its failure.
      for (const w of group) await commit(entry, branch, table, w.data).then(w.resolve, w.reject);
      return;
    }
    for (const w of group) w.resolve(version);
  }

  return {
    append(entry, branch, table, data) {
      // Dictionary columns carry a dictionary per batch; such a batch is committed alone.
      if (data.schema.fields.some((f) => arrow.DataType.isDictionary(f.type))) return commit(entry, branch, table, data);
      const key = `${entry.location ?? entry.objectId}\u0000${namedBranch(branch) ?? ""}\u0000${shapeOf(data.schema)}`;
      return new Promise<number>((resolve, reject) => {
        const joined = open.get(key);
        if (joined) return void joined.push({ data, resolve, reject });
        const group: Waiting[] = [{ data, resolve, reject }];
        open.set(key, group);
        void run(entry, branch, table, key, group);
      });
    },
  };
}
