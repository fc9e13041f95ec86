// Group commit of appends and merge inserts. Writes to one table branch run one commit at a time
// (Tables.write), and a commit costs the same whether it carries one row or thousands, so writes
// that arrive while a commit is in progress wait together and go into the next commit as one: N
// waiting writers cost one commit, not N. Each writer still gets its own answer: the version of the
// commit that holds its rows (shared by the writers of that commit) once it is committed, and its
// own row counts. Only batches with the same schema (and for merges, the same key and clauses) are
// combined (each was checked against the table before it got here, so a bad batch never joins a
// group); if a combined commit fails anyway, each batch is committed on its own, so one writer's
// failure is never its neighbours'. While a table branch carries too many small fragments, its
// commits start a spacing apart (src/engine/commit-spacing.ts), and groups fill meanwhile.
// Appends and merges are uploads (engine/upload.ts): each commits its own Arrow IPC file and a
// group's files are joined into one in the worker pool, so no commit writes or copies rows on the
// event loop (a merge still reads its keys there, to group).
import { setTimeout as sleep } from "node:timers/promises";
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import type { Entry } from "../catalog/catalog.js";
import { log } from "../log.js";
import { recordCommitRetries } from "../metrics.js";
import { arrow } from "./arrow.js";
import { spacingKey, type CommitSpacing } from "./commit-spacing.js";
import { beginCommit, type Work } from "./deadline.js";
import { quoteIdent } from "./computed-columns.js";
import { namedBranch, type Tables, type TableHandle } from "./tables.js";
import { rowsOf, type Upload } from "./upload.js";
import { isWriterContention } from "./messages.js";
import { addFile, mergeRows, type MergeHow } from "./writes.js";

/** A merge insert's answer to one writer. */
export interface MergeAnswer {
  version: number;
  numInsertedRows: number;
  numUpdatedRows: number;
  numDeletedRows: number;
  /** The writer's own source rows. */
  numRows: number;
  numAttempts: number;
}

export interface GroupCommit {
  /** Append `data` to the table's `branch` through `table` (its handle); resolves to the version that holds it. */
  append(entry: Entry, branch: string | null | undefined, table: TableHandle, data: Upload, work: Work | null): Promise<number>;
  /** Merge `data` keyed on `on`, combined with concurrent merges of the same kind where that keeps each writer's counts exact. */
  merge(entry: Entry, branch: string | null | undefined, table: TableHandle, on: string[], how: MergeHow, data: Upload, work: Work | null): Promise<MergeAnswer>;
}

interface Waiting<W, R> {
  item: W;
  /** The writer's request: one answered while it waited is left out of the commit. */
  work: Work | null;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

/** How one kind of write is committed in groups. */
interface Kind<W, R> {
  change: "insert" | "merge_insert";
  /** Lance's operation for every commit of this kind, where it is one for certain (Commit.operation). */
  operation?: "append";
  rows: (item: W) => number;
  /** One commit for all `items` (inside the table's write queue): its version and one answer per item. */
  together(items: W[]): Promise<{ version: number; answers: R[] }>;
  /** One commit for one item: a group of one, and the fallback after a combined commit failed. */
  alone(item: W): Promise<R>;
  versionOf(answer: R): number;
  /** Whether `item` may join `items`; one that may not commits after them, alone. */
  fits(items: W[], item: W): boolean;
}

/** Batches combine when their columns agree in name, type and nullability, in order. */
const shapeOf = (fields: A.Field[]) => fields.map((f) => `${f.name}:${String(f.type)}:${f.nullable}`).join("\u0001");

/** Thrown inside the write's turn when every writer of a group was answered before its commit: nothing is committed. */
const NOTHING_LEFT = new Error("every writer of the group was answered before its commit");

/** Tries of one write's commit the engine gave up on for contention (commitAlone). */
const CONTENDED_TRIES = 3;

/** Uploads' files of one schema joined into one, and the parts, which were moved to be joined (workers/pool.ts joinFiles). */
export type JoinFiles = (parts: Uint8Array[]) => Promise<{ joined: Uint8Array; parts: Uint8Array[] }>;

export function createGroupCommit(tables: Tables, spacing: CommitSpacing, joinFiles: JoinFiles): GroupCommit {
  /** Per table branch and kind: the group still open to joiners (its commit has not begun). */
  const open = new Map<string, Waiting<unknown, unknown>[]>();

  /** The uploads' files as one, joined in the pool; each upload keeps its own file, moved back from the join. */
  async function joined(uploads: Upload[]): Promise<Uint8Array> {
    const { joined, parts } = await joinFiles(uploads.map((u) => u.file));
    uploads.forEach((u, i) => (u.file = parts[i]));
    return joined;
  }

  /**
   * One item in a commit of its own, queued behind the table's other writes. A commit the engine
   * gave up on after its own retries for other writers' commits (about 30 s: replicas and
   * maintenance committing to the table) was not applied, so it is tried again while its writer
   * still waits (each try begins only within the request's deadline, tables.write), a few times.
   */
  async function commitAlone<W, R>(entry: Entry, branch: string | null | undefined, kind: Kind<W, R>, item: W, work: Work | null, tried = 0): Promise<R> {
    for (let attempt = tried + 1; ; attempt++) {
      try {
        const r = await tables.write(entry, branch, { change: kind.change, operation: kind.operation, rows: kind.rows(item), work }, async () => {
          const answer = await kind.alone(item);
          return { version: kind.versionOf(answer), answer };
        });
        return r.answer;
      } catch (err) {
        if (attempt >= CONTENDED_TRIES || !isWriterContention(err)) throw err;
        recordCommitRetries("contention", 1);
      }
    }
  }

  function submit<W, R>(entry: Entry, branch: string | null | undefined, key: string, kind: Kind<W, R>, item: W, work: Work | null): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const joined = open.get(key) as Waiting<W, R>[] | undefined;
      if (joined && kind.fits(joined.map((w) => w.item), item)) return void joined.push({ item, work, resolve, reject });
      if (joined) {
        // Later writers must not overtake this one (one of them may share its keys): the group closes.
        open.delete(key);
        return void commitAlone(entry, branch, kind, item, work).then(resolve, reject);
      }
      const group: Waiting<W, R>[] = [{ item, work, resolve, reject }];
      open.set(key, group as Waiting<unknown, unknown>[]);
      void run(entry, branch, key, kind, group);
    });
  }

  async function run<W, R>(entry: Entry, branch: string | null | undefined, key: string, kind: Kind<W, R>, all: Waiting<W, R>[]): Promise<void> {
    // The commit queue reached this group: it closes to joiners and commits what it holds.
    const close = () => open.get(key) === all && open.delete(key);
    let group = all;
    let answers: R[];
    const spaced = spacingKey(entry.objectId, namedBranch(branch));
    try {
      const rows = () => group.reduce((n, w) => n + kind.rows(w.item), 0);
      const wait = spacing.wait(spaced, rows());
      if (wait > 0) await sleep(wait);
      // The writers' requests are checked as the commit begins, each on its own (work: null).
      const r = await tables.write(entry, branch, { change: kind.change, operation: kind.operation, rows: rows(), work: null }, () => {
        close();
        group = all.filter((w) => {
          try {
            beginCommit(w.work);
            return true;
          } catch (err) {
            w.reject(err);
            return false;
          }
        });
        if (group.length === 0) throw NOTHING_LEFT;
        spacing.started(spaced);
        return group.length === 1 ? kind.alone(group[0].item).then((a) => ({ version: kind.versionOf(a), answers: [a] })) : kind.together(group.map((w) => w.item));
      });
      answers = r.answers;
    } catch (err) {
      close();
      if (err === NOTHING_LEFT) return;
      if (group.length === 1) {
        const [w] = group;
        if (!isWriterContention(err)) return w.reject(err);
        recordCommitRetries("contention", 1);
        void commitAlone(entry, branch, kind, w.item, w.work, 1).then(w.resolve, w.reject);
        return;
      }
      // One batch may be what the engine refused: each goes on its own, and only its writer hears of its failure.
      recordCommitRetries("group_commit", group.length);
      for (const w of group) await commitAlone(entry, branch, kind, w.item, w.work).then(w.resolve, w.reject);
      return;
    }
    group.forEach((w, i) => w.resolve(answers[i]));
  }

  return {
    append(entry, branch, table, data, work) {
      const kind: Kind<Upload, number> = {
        change: "insert",
        operation: "append",
        rows: (u) => u.numRows,
        fits: () => true,
        alone: async (u) => (await addFile(table, u.file, "append")).version,
        versionOf: (v) => v,
        async together(items) {
          const { version } = await addFile(table, await joined(items), "append");
          return { version, answers: items.map(() => version) };
        },
      };
      const fields = data.schema.fields.filter((f) => !data.nullBools.includes(f.name));
      // Dictionary columns carry a dictionary per batch; such a batch is committed alone.
      if (fields.some((f) => arrow.DataType.isDictionary(f.type))) return commitAlone(entry, branch, kind, data, work);
      return submit(entry, branch, `append\u0000${location(entry, branch)}\u0000${shapeOf(fields)}`, kind, data, work);
    },

    merge(entry, branch, table, on, how, data, work) {
      const answer = (r: lancedb.MergeResult, rows: number): MergeAnswer => ({
        version: r.version,
        numInsertedRows: r.numInsertedRows,
        numUpdatedRows: r.numUpdatedRows,
        numDeletedRows: r.numDeletedRows,
        numRows: rows,
        numAttempts: r.numAttempts,
      });
      const column = on[0];
      // The key's type as the writer sent it (checked against the table's before it got here).
      const keyField = data.schema.fields.find((f) => f.name === column);
      const numeric = keyField !== undefined && arrow.DataType.isInt(keyField.type);
      const kind: Kind<{ data: Upload; keys: Set<string> | null }, MergeAnswer> = {
        change: "merge_insert",
        rows: (w) => w.data.numRows,
        versionOf: (a) => a.version,
        // No key in two writers' rows: the merge matches each source row alone, and each writer's
        // counts follow from which of its keys the table held.
        fits: (items, w) => items.every((o) => ![...w.keys!].some((k) => o.keys!.has(k))),
        alone: async (w) => answer(await mergeRows(table, on, how)(w.data.file), w.data.numRows),
        async together(items) {
          const held = await heldKeys(table, column, numeric, items.flatMap((w) => [...w.keys!]));
          const r = await mergeRows(table, on, how)(await joined(items.map((w) => w.data)));
          const answers = items.map((w) => {
            const matched = [...w.keys!].filter((k) => held.has(k)).length;
            return { ...answer(r, w.data.numRows), numUpdatedRows: how.updateMatched ? matched : 0, numInsertedRows: how.insertUnmatched ? w.keys!.size - matched : 0 };
          });
          const sum = (f: (a: MergeAnswer) => number) => answers.reduce((n, a) => n + f(a), 0);
          // Another process wrote the keys between the look and the merge: the per-writer split is then approximate.
          if (sum((a) => a.numUpdatedRows) !== r.numUpdatedRows || sum((a) => a.numInsertedRows) !== r.numInsertedRows) {
            log.warn("group commit: a combined merge's counts differ from its writers' keys (a concurrent writer elsewhere)", { table: entry.objectId, version: r.version });
          }
          return { version: r.version, answers };
        },
      };
      const keys = combinableKeys(rowsOf(data), on, how);
      if (!keys) return commitAlone(entry, branch, kind, { data, keys }, work);
      const clauses = JSON.stringify([on, how.updateMatched ? 1 : 0, how.insertUnmatched ? 1 : 0, how.useIndex ?? null]);
      return submit(entry, branch, `merge\u0000${location(entry, branch)}\u0000${shapeOf(data.schema.fields)}\u0000${clauses}`, kind, { data, keys }, work);
    },
  };
}

const location = (entry: Entry, branch: string | null | undefined) => `${entry.location ?? entry.objectId}\u0000${namedBranch(branch) ?? ""}`;

/**
 * A merge's keys, when it can share a commit: one integer or string key column, distinct non-null
 * keys, and no clause whose effect depends on the whole source or a condition (by-source deletes,
 * a filtered update); null otherwise.
 */
function combinableKeys(data: A.Table, on: string[], how: MergeHow): Set<string> | null {
  if (on.length !== 1 || how.deleteNotInSource || how.updateMatched?.where || data.schema.fields.some((f) => arrow.DataType.isDictionary(f.type))) return null;
  const col = data.getChild(on[0]);
  if (!col || col.nullCount > 0) return null;
  const t = col.type;
  if (!arrow.DataType.isInt(t) && !arrow.DataType.isUtf8(t) && !arrow.DataType.isLargeUtf8(t)) return null;
  const keys = new Set<string>();
  for (const v of col) keys.add(String(v));
  return keys.size === data.numRows ? keys : null;
}

/** Which of `keys` (as strings; integers when `numeric`) the table holds in `column`. */
async function heldKeys(table: TableHandle, column: string, numeric: boolean, keys: string[]): Promise<Set<string>> {
  const literal = numeric ? (k: string) => k : (k: string) => `'${k.replace(/'/g, "''")}'`;
  const rows = await table.query().where(`${quoteIdent(column)} IN (${keys.map(literal).join(", ")})`).select([column]).toArray();
  return new Set(rows.map((r) => String(r[column])));
}
