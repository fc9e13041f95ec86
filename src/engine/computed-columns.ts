// LanceDB's side of virtual columns: declaring them (as LanceDB SQL computed columns, or as all-null
// columns that carry their descriptor), refreshing SQL ones, and for JavaScript and WebAssembly
// ones: choosing the rows a backfill computes, reading their inputs, and writing values back
// without overwriting a row that changed since it was read.
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import { arrow } from "./arrow.js";
import { isCommitConflict } from "./messages.js";
import { nativeExecute, type NativeIterator } from "./query.js";
import { commitSchemaEdit, updateFieldMetadata } from "./schema-edit.js";

/** A Lance SQL identifier: backtick-quoted, backticks doubled. */
export const quoteIdent = (name: string) => "`" + name.replace(/`/g, "``") + "`";

/** Declare LanceDB SQL computed columns, each with its descriptor beside LanceDB's own metadata: the version. */
export async function declareSqlColumns(t: lancedb.Table, cols: { name: string; valueSql: string; metadata: Record<string, string> }[], field: string): Promise<number> {
  await commitSchemaEdit(t, () => t.addColumns({ computed: cols.map(({ name, valueSql }) => ({ name, valueSql })) }), field);
  try {
    return await updateFieldMetadata(t, cols.map((c) => ({ path: c.name, metadata: c.metadata })));
  } catch (err) {
    // One request, all or nothing: without their descriptors the columns are not what was asked for.
    await t.dropColumns(cols.map((c) => c.name)).catch(() => undefined);
    throw err;
  }
}

/** Fill a SQL computed column's missing and stale rows (LanceDB's refresh), retrying lost commit races. */
export async function refreshSqlColumn(t: lancedb.Table, column: string, attempts = 5): Promise<{ rowsFilled: number; version: number }> {
  for (let i = 1; ; i++) {
    try {
      return await t.refreshColumn(column);
    } catch (err) {
      if (!isCommitConflict(err) || i >= attempts) throw err;
      await t.checkoutLatest();
      await new Promise((r) => setTimeout(r, 50 * i));
    }
  }
}

/** The merge key of a JS/wasm backfill: the table's primary key, else a top-level `id` column. */
export function backfillKey(fields: readonly A.Field[]): string[] | null {
  const pk = fields
    .map((f) => ({ f, pos: [...(f.metadata ?? new Map())].find(([k]) => k.startsWith("lance-schema:unenforced-primary-key")) }))
    .filter((x) => x.pos !== undefined)
    .sort((a, b) => Number(a.pos![1]) - Number(b.pos![1]))
    .map((x) => x.f.name);
  if (pk.length > 0) return pk;
  return fields.some((f) => f.name === "id" && (f.type.children ?? []).length === 0) ? ["id"] : null;
}

export interface PlanOptions {
  column: string;
  /** An explicit SQL filter: exactly the rows it selects. */
  where: string | null;
  /** Without `where`: rows whose value is null, and rows last updated by a commit not in this set. */
  fresh: ReadonlySet<number> | null;
  /** Rows last updated by these commits are already done (this job's own). */
  done: ReadonlySet<number>;
  /** Only rows in these fragments (num_frags), if set. */
  fragments: ReadonlySet<number> | null;
  /** Other columns whose freshness each planned row carries (see Plan.otherFresh). */
  others: readonly { column: string; fresh: ReadonlySet<number> }[];
}

/** Rows as a backfill read them: ids in row-address order, their addresses and last-update versions then. */
export interface ReadRows {
  ids: bigint[];
  addresses: bigint[];
  versions: bigint[];
}

export interface Plan extends ReadRows {
  /** Per planned row, per `others` column: its value there is null or fresh (a commit that only writes this column's values keeps it so). */
  otherFresh: boolean[][];
}

const fragmentOf = (addr: bigint) => Number(addr >> 32n);

/** The rows a backfill computes, read from `t` (checked out at the read version). */
export async function planRows(t: lancedb.Table, o: PlanOptions): Promise<Plan> {
  const q = t
    .query()
    .select(
      new Map([
        ["missing", `${quoteIdent(o.column)} IS NULL`],
        ["v", "_row_last_updated_at_version"],
        ["a", "_rowaddr"],
        ...o.others.map((c, j) => [`n${j}`, `${quoteIdent(c.column)} IS NULL`] as [string, string]),
      ]),
    )
    .withRowId();
  if (o.where !== null) q.where(o.where);
  const rows = await q.toArrow();
  const missing = rows.getChild("missing")!;
  const versions = rows.getChild("v")!.toArray() as BigUint64Array;
  const addrs = rows.getChild("a")!.toArray() as BigUint64Array;
  const rowIds = rows.getChild("_rowid")!.toArray() as BigUint64Array;
  const picked: number[] = [];
  for (let i = 0; i < rows.numRows; i++) {
    const v = Number(versions[i]);
    if (o.done.has(v)) continue;
    if (o.fragments && !o.fragments.has(fragmentOf(addrs[i]))) continue;
    if (o.where === null && !(missing.get(i) || (o.fresh !== null && !o.fresh.has(v)))) continue;
    picked.push(i);
  }
  picked.sort((a, b) => (addrs[a] < addrs[b] ? -1 : addrs[a] > addrs[b] ? 1 : 0));
  const nulls = o.others.map((_, j) => rows.getChild(`n${j}`)!);
  const otherFresh = picked.map((i) => o.others.map((c, j) => Boolean(nulls[j].get(i)) || c.fresh.has(Number(versions[i]))));
  return { ids: picked.map((i) => rowIds[i]), addresses: picked.map((i) => addrs[i]), versions: picked.map((i) => versions[i]), otherFresh };
}

/** The first `n` fragments (by id) holding rows of a plan. */
export function firstFragments(addresses: bigint[], n: number): Set<number> {
  return new Set([...new Set(addresses.map(fragmentOf))].sort((a, b) => a - b).slice(0, n));
}

/** Read rows by id: `select` maps output names to columns; batches as IPC files, in the ids' order. */
export async function readRows(t: lancedb.Table, ids: bigint[], select: Map<string, string>): Promise<NativeIterator> {
  return nativeExecute(t.takeRowIds(ids).select(select));
}

/**
 * SQL true for exactly the target rows at `addresses` (sorted): runs of consecutive addresses as
 * ranges, the rest listed. An updated row moves to a new fragment, so a row still at an address
 * read earlier is unchanged since.
 */
function addressGuard(addresses: bigint[]): string {
  const parts: string[] = [];
  const single: bigint[] = [];
  for (let i = 0; i < addresses.length; ) {
    let j = i;
    while (j + 1 < addresses.length && addresses[j + 1] === addresses[j] + 1n) j++;
    if (j - i >= 2) parts.push(`target._rowaddr BETWEEN ${addresses[i]} AND ${addresses[j]}`);
    else for (let k = i; k <= j; k++) single.push(addresses[k]);
    i = j + 1;
  }
  if (single.length) parts.push(`target._rowaddr IN (${single.join(", ")})`);
  return parts.join(" OR ");
}

/** Row `i`'s key (the values of `cols`) as one string. */
const keyText = (cols: A.Vector[], i: number) => JSON.stringify(cols.map((c) => String(c.get(i))));

/** Split rows so no merge source holds one key twice (a merge matches each source row by key). */
function uniqueKeyParts(data: A.Table, key: string[]): number[][] {
  const cols = key.map((k) => data.getChild(k)!);
  const parts: { seen: Set<string>; rows: number[] }[] = [];
  for (let i = 0; i < data.numRows; i++) {
    const k = keyText(cols, i);
    let part = parts.find((p) => !p.seen.has(k));
    if (!part) parts.push((part = { seen: new Set(), rows: [] }));
    part.seen.add(k);
    part.rows.push(i);
  }
  return parts.map((p) => p.rows);
}

const take = (data: A.Table, rows: number[]) =>
  new arrow.Table(Object.fromEntries(data.schema.fields.map((f) => [f.name, arrow.vectorFromArray(rows.map((i) => data.getChild(f.name)!.get(i)), f.type)])));

/** What a checkpoint's write did: its commits, and the rows holding their values after it. */
export interface Written {
  versions: number[];
  /** Rows written, with those an earlier commit of the same run had written (see `earlier`). */
  written: number;
  /**
   * Commits before this write that had already written some of its rows the values it computed:
   * one of the run's own whose report was lost (its replica's lease lapsed after the commit was
   * granted, and the run was taken over and resumed from the checkpoint before).
   */
  earlier: number[];
}

/**
 * Write computed values (`data`: the key columns and the value column) into `rows` as they were
 * read, leaving any row that changed since untouched; answers each commit's version and the rows
 * written. Key-less rows (a null key) cannot be matched and are not written. With `tracked` (stable
 * row ids), a row a compaction moved since the read (same last-update version, new address) is
 * found at its new address and written: otherwise a backfill racing a compaction would skip rows
 * that never changed. A row that changed since the read but already holds the value computed for
 * it counts as written (see Written.earlier), so a resumed run's counts stay the rows committed.
 */
export async function writeValues(t: lancedb.Table, key: string[], data: A.Table, rows: ReadRows, tracked: boolean): Promise<Written> {
  const parts = uniqueKeyParts(data, key).map((r) => (r.length === data.numRows ? data : take(data, r)));
  const versions: number[] = [];
  let written = 0;
  let addresses = rows.addresses;
  for (let round = 1; addresses.length > 0; round++) {
    for (const source of parts) {
      const r = await mergeGuarded(t, key, source, addressGuard(addresses));
      versions.push(r.version);
      written += r.numUpdatedRows;
    }
    if (!tracked || written >= data.numRows || round >= 5) break;
    addresses = await movedAddresses(t, rows);
  }
  if (!tracked || written >= data.numRows) return { versions, written, earlier: [] };
  const before = await writtenBefore(t, key, data, rows, new Set(versions));
  return { versions, written: written + before.rows, earlier: before.versions };
}

/** `data`'s non-null values by key, as text (JSON, bigints as digits). */
function valuesByKey(data: A.Table, key: string[], value: string): Map<string, string> {
  const keys = key.map((k) => data.getChild(k)!);
  const vals = data.getChild(value)!;
  const out = new Map<string, string>();
  for (let i = 0; i < data.numRows; i++) {
    const v = vals.get(i);
    if (v !== null) out.set(keyText(keys, i), textOf(v));
  }
  return out;
}

const textOf = (v: unknown) => JSON.stringify(v, (_, x) => (typeof x === "bigint" ? String(x) : x));

/** Rows of `rows` holding the values `data` computed for them, written by commits other than `ours`: how many, and those commits. */
async function writtenBefore(t: lancedb.Table, key: string[], data: A.Table, rows: ReadRows, ours: Set<number>): Promise<{ rows: number; versions: number[] }> {
  const value = data.schema.fields.find((f) => !key.includes(f.name))!.name;
  const want = valuesByKey(data, key, value);
  await t.checkoutLatest();
  const now = await t
    .takeRowIds(rows.ids)
    .select(new Map([...key.map((k) => [k, k] as [string, string]), [value, value], ["_v", "_row_last_updated_at_version"]]))
    .toArrow();
  const held = valuesByKey(now, key, value);
  const at = now.getChild("_v")!;
  const keys = key.map((k) => now.getChild(k)!);
  const versions = new Set<number>();
  let n = 0;
  for (let j = 0; j < now.numRows; j++) {
    const v = Number(at.get(j));
    const k = keyText(keys, j);
    if (ours.has(v) || !held.has(k) || held.get(k) !== want.get(k)) continue;
    n++;
    versions.add(v);
  }
  return { rows: n, versions: [...versions].sort((a, b) => a - b) };
}

async function mergeGuarded(t: lancedb.Table, key: string[], source: A.Table, guard: string) {
  for (let attempt = 1; ; attempt++) {
    try {
      // The guard reads the target's row addresses, which LanceDB's index-driven merge (taken when
      // the key has a scalar index) does not provide: it fails with "_rowaddr not found".
      return await t.mergeInsert(key).whenMatchedUpdateAll({ where: guard }).useIndex(false).execute(source);
    } catch (err) {
      if (!isCommitConflict(err) || attempt >= 5) throw err;
      await t.checkoutLatest();
    }
  }
}

/** The current addresses (sorted) of `rows` that moved without changing since they were read. */
async function movedAddresses(t: lancedb.Table, rows: ReadRows): Promise<bigint[]> {
  await t.checkoutLatest();
  const read = new Map(rows.ids.map((id, i) => [id, i]));
  const now = await t
    .takeRowIds(rows.ids)
    .select(new Map([["a", "_rowaddr"], ["v", "_row_last_updated_at_version"]]))
    .withRowId()
    .toArrow();
  const ids = now.getChild("_rowid")!.toArray() as BigUint64Array;
  const addrs = now.getChild("a")!.toArray() as BigUint64Array;
  const vs = now.getChild("v")!.toArray() as BigUint64Array;
  const moved: bigint[] = [];
  for (let j = 0; j < now.numRows; j++) {
    const i = read.get(ids[j]);
    if (i !== undefined && vs[j] === rows.versions[i] && addrs[j] !== rows.addresses[i]) moved.push(addrs[j]);
  }
  return moved.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
