// A seeded differential test of the serving index (issue 51): random writes of every kind, through
// Quiver's HTTP API or by LanceDB in this process (another writer of the same directory), each step
// followed by searches through Quiver compared with LanceDB's exact answer on the same directory.
// `npm run fuzz:serving -- --steps N --seed S` runs it against a fresh server; on a difference it
// shrinks the steps to a minimal list that still differs, prints it and exits 1.
//
// What is compared (docs/design.md, "The serving index", states the rule):
// - every answered row is a row of LanceDB's exact answer at that version, with the same values,
//   and passes the filter; the answer's columns and types are LanceDB's;
// - distances within float tolerance, in non-decreasing order, wherever the answer is exact (the
//   serving path computes exact distances; LanceDB does for exact searches and flat indexes);
// - which rows: where exact and approximate answers must agree: `bypass_vector_index`, or k above
//   the table's rows (every passing row), or a stored row's own vector (the top hit);
// - ties by `_rowid`, as LanceDB's exact search orders them (row 15 of issue 51): rows answered at
//   one distance in `_rowid` order, wherever ties are decided on exact distances (an exact search,
//   the serving path), and where k cuts through rows tied at the k-th distance, the lowest `_rowid`s
//   kept (under l2 and dot, whose distances are exact for this test's vectors: multiples of 1/32);
//   checked in searches that name the latest version (below);
// - `_rowid`, asked for in about 30% of the searches that name the latest version (row 14 of issue
//   51), compared as a value: a search sent again names the version it is compared at (naming the
//   version before, it was answered at that one, as asked: seed 51's moved rows' old `_rowid`s);
// - searches of a table another writer committed to since Quiver's last write name LanceDB's
//   latest version in `x-quiver-min-version` (rows 7 and 11: freshness without it), while those
//   after Quiver's own writes name none (acknowledged means visible). A maintenance job is another
//   writer: one queued or running at Quiver's write, or made after it, may commit after it.
// `--auto-maintenance off|on` is passed to the server (default on, the server's own default);
// `--seconds S` starts no step after S seconds (the steps run are reported).
import * as lancedb from "@lancedb/lancedb";
import type { Table as ArrowTable, Schema, Field, DataType } from "apache-arrow";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { arrow } from "../src/engine/arrow.js";
import { rng } from "./dataset.js";
import { startQuiver } from "./quiver-process.js";

const DIM = 4;
const BIG = 100_000;
const BASE_TS = Date.UTC(2025, 0, 1);

export interface Server {
  url: string;
  /** The data directory the server serves (LanceDB's directory namespace). */
  root: string;
  key: string;
}

export interface Difference {
  step: number;
  /** The search, as sent. */
  search: Record<string, unknown>;
  table: string;
  path: string;
  what: string;
}

export interface RunResult {
  steps: number;
  searches: number;
  /** Searches by `x-quiver-search-path`. */
  paths: Record<string, number>;
  /** Steps by operation and writer (`insert:quiver`, `restore:lancedb`, `skip:…`). */
  ops: Record<string, number>;
  /** What each step did, in order (for a reproduction). */
  log: string[];
  difference?: Difference;
}

/** One step's own random numbers: a step's choices depend on its index and the seed, not on the steps kept before it (shrinking drops steps). */
const stepRng = (seed: number, i: number) => rng((Math.imul(seed, 0x9e3779b1) ^ Math.imul(i + 1, 0x85ebca77)) >>> 0);

const listOf = (t: DataType) => new arrow.List(new arrow.Field("item", t, true));
const BASE_SCHEMA: Schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int32(), false),
  new arrow.Field("vector", new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true)), true),
  new arrow.Field("i64", new arrow.Int64(), true),
  new arrow.Field("f", new arrow.Float64(), true),
  new arrow.Field("s", new arrow.Utf8(), true),
  new arrow.Field("b", new arrow.Bool(), true),
  new arrow.Field("ts", new arrow.TimestampMillisecond(), true),
  new arrow.Field("tags", listOf(new arrow.Utf8()), true),
  new arrow.Field("st", new arrow.Struct([new arrow.Field("a", new arrow.Int32(), true), new arrow.Field("l", listOf(new arrow.Float64()), true)]), true),
  new arrow.Field("fsl", new arrow.FixedSizeList(2, new arrow.Field("item", new arrow.Int32(), true)), true),
]) as unknown as Schema;
const STRINGS = ["", "a", "b", "red", "x y", "é"];

type R = () => number;
const pick = <T>(r: R, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: R, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
/** Quarters: exact in float32 and float64, so sums and casts stay exact. */
const quarter = (r: R) => int(r, -40, 40) / 4;
const vec = (r: R) => Array.from({ length: DIM }, () => (int(r, 1, 64) / 32) * (r() < 0.5 ? -1 : 1));

/** A value of `type` (never a null vector or id). */
function valueOf(r: R, name: string, type: DataType, nullable: boolean, vectors: number[][]): unknown {
  if (name === "vector") return vectors.length && r() < 0.1 ? pick(r, vectors) : vec(r);
  // apache-arrow's builder writes no child values for a null fixed-size list (a batch LanceDB refuses): nulls only inside one.
  if (nullable && !arrow.DataType.isFixedSizeList(type) && r() < 0.15) return null;
  const t = type as DataType & { bitWidth?: number; listSize?: number; children?: Field[] };
  if (arrow.DataType.isInt(t)) return t.bitWidth === 64 ? BigInt(int(r, -50, 50)) : int(r, -50, 50);
  if (arrow.DataType.isFloat(t)) return quarter(r);
  if (arrow.DataType.isUtf8(t)) return pick(r, STRINGS);
  if (arrow.DataType.isBool(t)) return r() < 0.5;
  if (arrow.DataType.isTimestamp(t)) return BASE_TS + int(r, -20, 20) * 86_400_000;
  if (arrow.DataType.isList(t)) return Array.from({ length: int(r, 0, 3) }, () => valueOf(r, "", t.children![0].type, true, vectors));
  if (arrow.DataType.isFixedSizeList(t)) return Array.from({ length: t.listSize! }, () => valueOf(r, "", t.children![0].type, t.children![0].nullable, vectors));
  if (arrow.DataType.isStruct(t)) return Object.fromEntries(t.children!.map((c) => [c.name, valueOf(r, c.name, c.type, c.nullable, vectors)]));
  throw new Error(`no generator for ${String(t)}`);
}

/** Rows of `schema` with the given ids. */
function rowsOf(r: R, schema: Schema, ids: number[], vectors: number[][]): ArrowTable {
  const children = schema.fields.map((f) => {
    const values: unknown[] = f.name === "id" ? ids : ids.map(() => valueOf(r, f.name, f.type, f.nullable, vectors));
    // apache-arrow writes no value bits for a boolean column of nulls only (a batch LanceDB refuses).
    if (arrow.DataType.isBool(f.type) && !values.some((x) => x !== null)) values[0] = false;
    const v = arrow.vectorFromArray(values as never, f.type as never);
    // A few rows make one chunk; the batch below takes each column's only one.
    if (v.data.length !== 1) throw new Error(`${f.name}: ${v.data.length} chunks`);
    return v.data[0];
  });
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields as never), length: ids.length, nullCount: 0, children: children as never });
  return new arrow.Table([new arrow.RecordBatch(schema as never, data as never)]) as unknown as ArrowTable;
}

const ipc = (t: ArrowTable) => arrow.tableToIPC(t as never, "stream");

/**
 * What one run holds: the tables, the next id and name, and the tables another writer committed to
 * since Quiver last did (their searches name LanceDB's latest version in `x-quiver-min-version`:
 * without one, the index's version may answer for `--consistency-interval-ms`, rows 7 and 11 of
 * issue 51).
 */
interface State {
  server: Server;
  prefix: string;
  tables: string[];
  nextId: number;
  nextName: number;
  otherWrote: Set<string>;
  /** When Quiver's last write to each table was sent (a maintenance job made after it commits after it). */
  wroteAt: Map<string, number>;
  /** Names a rename freed that a new table took. */
  reused: Set<string>;
}

async function http(s: Server, p: string, body: unknown, headers: Record<string, string> = {}) {
  const h: Record<string, string> = { "x-api-key": s.key, ...headers };
  let payload: BodyInit;
  if (body instanceof Uint8Array) payload = body as BodyInit;
  else {
    payload = JSON.stringify(body);
    h["content-type"] = "application/json";
  }
  const res = await fetch(s.url + p, { method: "POST", headers: h, body: payload });
  return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) };
}

/** The table's maintenance jobs (newest first), as `/v1/jobs/list` answers them. */
async function maintenanceJobs(st: State, table: string): Promise<{ status: string; created_at_millis: number }[]> {
  const r = await http(st.server, "/v1/jobs/list", { table });
  if (r.status !== 200) throw new Error(`jobs/list ${table}: ${r.status} ${Buffer.from(r.bytes).toString().slice(0, 200)}`);
  return (JSON.parse(Buffer.from(r.bytes).toString()).jobs as { job_type: string; status: string; created_at_millis: number }[]).filter((j) => j.job_type === "maintenance");
}

const running = (j: { status: string }) => j.status === "Queued" || j.status === "Running";

/**
 * Whether a maintenance job (another process's commits to the test: a compaction, an index fold)
 * may have committed to the table since Quiver's last write to it: one queued or running now, or
 * one made after that write (`--auto-maintenance on` queues them after commits).
 */
async function maintainedSince(st: State, table: string): Promise<boolean> {
  const since = st.wroteAt.get(table) ?? 0;
  return (await maintenanceJobs(st, table)).some((j) => running(j) || j.created_at_millis >= since);
}

/** A Quiver write; a refusal is the step's outcome, a 5xx a difference. */
async function quiver(st: State, table: string, op: string, body: unknown, qs = ""): Promise<string | undefined> {
  // A commit of the request's own (not a job's, a rename's or a drop's).
  const commits = !["optimize", "create_index", "rename", "drop"].includes(op);
  // A maintenance job queued or running before the write may commit after it.
  const busy = commits && (await maintenanceJobs(st, table)).some(running);
  const sent = Date.now();
  const r = await http(st.server, `/v1/table/${table}/${op}${qs}`, body);
  if (r.status >= 500) throw new Difference500(`${op} answered ${r.status}: ${Buffer.from(r.bytes).toString().slice(0, 300)}`);
  if (r.status >= 300) return `refused ${r.status}: ${Buffer.from(r.bytes).toString().slice(0, 160)}`;
  // Quiver's own commit follows any other writer's: its answers from then on must be at least it.
  // Not a compaction or an index build: jobs, their answer no commit of the request's own; a
  // compaction's job commits later, as another process (new `_rowid`s without stable row ids, and
  // an index fold that makes an index cover rows changes a search's default metric: seed 2 with
  // --auto-maintenance off, step 122, a search after Quiver's insert compared at the fold's version).
  if (op === "optimize" || busy) st.otherWrote.add(table);
  else if (commits) {
    st.otherWrote.delete(table);
    st.wroteAt.set(table, sent);
  }
  if (op === "create_index") await settle(st, JSON.parse(Buffer.from(r.bytes).toString()).transaction_id);
  return undefined;
}

class Difference500 extends Error {}

async function settle(st: State, tx: string | undefined): Promise<void> {
  if (!tx) return;
  const end = Date.now() + 120_000;
  for (;;) {
    const r = await http(st.server, `/v1/transaction/${tx}/describe`, {});
    const status = JSON.parse(Buffer.from(r.bytes).toString()).status as string;
    if (["Succeeded", "Failed", "Canceled"].includes(status)) return;
    if (Date.now() > end) throw new Error(`index build ${tx} still ${status}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

const connect = (st: State) => lancedb.connectNamespace("dir", { root: st.server.root });
/** The table's data opened by LanceDB itself where Quiver says it lies (a renamed table keeps its directory). */
async function open(st: State, name: string): Promise<lancedb.Table> {
  const r = await http(st.server, `/v1/table/${name}/describe`, {});
  if (r.status !== 200) throw new Error(`describe ${name}: ${r.status} ${Buffer.from(r.bytes).toString().slice(0, 200)}`);
  const location = JSON.parse(Buffer.from(r.bytes).toString()).location as string;
  return (await lancedb.connect(path.dirname(location))).openTable(path.basename(location, ".lance"));
}

/** A table's live rows' ids and vectors (LanceDB's scan). */
async function scan(t: lancedb.Table): Promise<{ ids: number[]; vectors: number[][] }> {
  const rows = (await t.query().select(["id", "vector"]).toArray()) as { id: number; vector: { toArray(): Float32Array } }[];
  return { ids: rows.map((x) => x.id), vectors: rows.map((x) => Array.from(x.vector.toArray())) };
}

const freshIds = (st: State, n: number) => Array.from({ length: n }, () => st.nextId++);
const newName = (st: State) => `${st.prefix}t${st.nextName++}`;
/** Each element a float literal (`1.0`, not `1`): LanceDB refuses an array of integers and floats. */
const sqlVector = (v: number[]) => `[${v.map((x) => (Number.isInteger(x) ? x.toFixed(1) : String(x))).join(", ")}]`;

/** Makes a table named `name` of `n` base rows with a vector index, through Quiver or LanceDB. */
async function create(st: State, r: R, name: string, byQuiver: boolean): Promise<string> {
  const data = rowsOf(r, BASE_SCHEMA, freshIds(st, int(r, 20, 60)), []);
  if (byQuiver) {
    const refused = await quiver(st, name, "create", ipc(data));
    if (refused) return refused;
  } else {
    await (await connect(st)).createTable(name, data as never, []);
    st.otherWrote.add(name);
  }
  const indexed = await index(st, r, name, byQuiver);
  return `create ${name} by ${byQuiver ? "quiver" : "lancedb"}; ${indexed}${await warm(st, name)}`;
}

/**
 * Searches until the serving index answers (its first search starts its build), for at most 30 s:
 * so that the steps after a table's creation find the index built, whatever the machine's load.
 */
async function warm(st: State, name: string): Promise<string> {
  const t = await open(st, name);
  const headers = { "x-quiver-min-version": String(await t.version()) };
  const end = Date.now() + 30_000;
  for (;;) {
    const r = await http(st.server, `/v1/table/${name}/query`, { vector: { single_vector: vec(Math.random) }, vector_column: "vector", k: 1 }, headers);
    const path = r.headers.get("x-quiver-search-path") ?? "";
    if (path === "serving") return "";
    if (Date.now() > end || !/not_built|stale|rebuilding/.test(path)) return ` (not served: ${path || r.status})`;
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** A vector index of a random kind and metric, replacing any other. */
async function index(st: State, r: R, name: string, byQuiver: boolean): Promise<string> {
  const metric = pick(r, ["l2", "l2", "cosine", "dot"] as const);
  const hnsw = r() < 0.2;
  const parts = int(r, 1, 2);
  const what = `index ${hnsw ? "IVF_HNSW_SQ" : "IVF_FLAT"} ${metric} partitions ${parts}`;
  if (byQuiver) return (await quiver(st, name, "create_index", { column: "vector", index_type: hnsw ? "IVF_HNSW_SQ" : "IVF_FLAT", distance_type: metric, num_partitions: parts })) ?? what;
  const config = hnsw ? lancedb.Index.hnswSq({ numPartitions: parts, distanceType: metric }) : lancedb.Index.ivfFlat({ numPartitions: parts, distanceType: metric });
  await (await open(st, name)).createIndex("vector", { config, replace: true });
  st.otherWrote.add(name);
  return what;
}

/** The newest versions a cleanup keeps, with room: half the server's default --maintenance-max-versions. */
const KEPT_VERSIONS = 50;

const OPS = [
  ["insert", 20], ["update", 12], ["delete", 9], ["merge_insert", 10], ["overwrite", 3], ["restore", 5], ["rename", 2], ["recreate", 2],
  ["add_column", 5], ["alter_column", 4], ["drop_column", 3], ["optimize", 5], ["index", 5], ["drop_index", 1],
] as const;
type Op = (typeof OPS)[number][0];
const TOTAL = OPS.reduce((a, [, w]) => a + w, 0);
function opOf(r: R): Op {
  let x = r() * TOTAL;
  for (const [op, w] of OPS) if ((x -= w) < 0) return op;
  return "insert";
}

const extraColumns = (schema: Schema) => schema.fields.filter((f) => /^x\d/.test(f.name));
const has = (schema: Schema, name: string) => schema.fields.some((f) => f.name === name);

/** A predicate over the columns `schema` has, that selects some rows. */
function predicate(r: R, schema: Schema): string {
  const options = [`id % ${int(r, 2, 6)} = ${int(r, 0, 1)}`, `id < ${int(r, 0, 400)}`];
  if (has(schema, "s")) options.push("s = ''", `s IN ('a', '')`, "s IS NULL");
  if (has(schema, "i64")) options.push(`i64 > ${int(r, -50, 50)}`);
  if (has(schema, "b")) options.push("b");
  return pick(r, options);
}

/** Column updates as SQL (column, expression), of columns `schema` has. */
function updates(r: R, schema: Schema): [string, string][] {
  const options: [string, string][] = [["vector", sqlVector(vec(r))]];
  if (has(schema, "s")) options.push(["s", `'${pick(r, STRINGS)}'`], ["s", "NULL"]);
  if (has(schema, "i64")) options.push(["i64", "i64 + 1"]);
  if (has(schema, "f")) options.push(["f", "f * 2"]);
  if (has(schema, "b")) options.push(["b", "NOT b"]);
  if (has(schema, "tags")) options.push(["tags", "make_array('red', '')"]);
  for (const f of extraColumns(schema)) if (arrow.DataType.isInt(f.type)) options.push([f.name, `${f.name} + 1`]);
  const chosen = new Map<string, string>();
  for (let n = int(r, 1, 2); n > 0; n--) {
    const [c, e] = pick(r, options);
    chosen.set(c, e);
  }
  return [...chosen];
}

/** Applies one random write to a random table; says what it did. */
async function write(st: State, r: R, op: Op, byQuiver: boolean): Promise<string> {
  const name = pick(r, st.tables);
  const via = byQuiver ? "quiver" : "lancedb";
  const t = await open(st, name);
  const schema = (await t.schema()) as unknown as Schema;
  const live = await scan(t);
  if (live.ids.length < 8 && ["delete", "drop_column", "alter_column"].includes(op)) op = "insert";
  if (live.ids.length > 150 && ["insert", "merge_insert"].includes(op)) op = "delete";
  const other = () => st.otherWrote.add(name);
  const say = (what: string, refused?: string) => `${op} ${name} by ${via}: ${what}${refused ? ` (${refused})` : ""}`;
  switch (op) {
    case "insert": {
      const data = rowsOf(r, schema, freshIds(st, int(r, 1, 6)), live.vectors);
      if (byQuiver) return say(`${data.numRows} rows`, await quiver(st, name, "insert", ipc(data)));
      await t.add(data as never);
      other();
      return say(`${data.numRows} rows`);
    }
    case "update": {
      const where = predicate(r, schema);
      const set = updates(r, schema);
      const what = `where ${where} set ${set.map(([c, e]) => `${c} = ${e}`).join(", ")}`;
      if (byQuiver) return say(what, await quiver(st, name, "update", { predicate: where, updates: set }));
      await t.update({ where, valuesSql: Object.fromEntries(set) });
      other();
      return say(what);
    }
    case "delete": {
      const where = predicate(r, schema);
      if (byQuiver) return say(where, await quiver(st, name, "delete", { predicate: where }));
      await t.delete(where);
      other();
      return say(where);
    }
    case "merge_insert": {
      const ids = [...live.ids.filter(() => r() < 0.15).slice(0, 6), ...freshIds(st, int(r, 0, 3))];
      const data = rowsOf(r, schema, ids, live.vectors);
      const what = `ids ${ids.join(",")}`;
      if (byQuiver) return say(what, await quiver(st, name, "merge_insert", ipc(data), "?on=id&when_matched_update_all=true&when_not_matched_insert_all=true"));
      await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(data as never);
      other();
      return say(what);
    }
    case "overwrite": {
      // Sometimes as many rows as before: the row count alone does not tell an overwrite.
      const n = r() < 0.5 ? live.ids.length : int(r, 20, 60);
      const data = rowsOf(r, BASE_SCHEMA, freshIds(st, n), []);
      let refused: string | undefined;
      if (byQuiver) refused = await quiver(st, name, "insert", ipc(data), "?mode=overwrite");
      else {
        await t.add(data as never, { mode: "overwrite" });
        other();
      }
      return say(`${n} rows${!refused && r() < 0.8 ? `; ${await index(st, r, name, byQuiver)}` : ""}`, refused);
    }
    case "restore": {
      // LanceDB restores only versions the server's cleanups keep: another process restoring a
      // version a running cleanup removes makes a latest version whose files the cleanup then
      // removes (Lance's cleanup chose them from the manifests it listed; docs/maintenance.md).
      // Quiver refuses such a restore, so it is asked for any version.
      const listed = (await t.listVersions()).map((v) => v.version);
      const versions = byQuiver ? listed : listed.slice(-KEPT_VERSIONS);
      const version = pick(r, versions.slice(0, -1).length ? versions.slice(0, -1) : versions);
      if (byQuiver) return say(`version ${version}`, await quiver(st, name, "restore", { version }));
      try {
        await t.checkout(version);
        await t.restore();
      } catch (e) {
        return say(`version ${version}`, `LanceDB refused: ${String(e).slice(0, 120)}`);
      }
      other();
      return say(`version ${version}`);
    }
    case "rename": {
      // Through Quiver: LanceDB's directory namespace client does not rename. Sometimes a new table
      // takes the old name, made through Quiver (LanceDB's namespace still finds the old name taken).
      const to = newName(st);
      // The renamed table's jobs are listed under the name they were made for.
      const carried = st.otherWrote.has(name) || (await maintainedSince(st, name));
      const refused = await quiver(st, name, "rename", { new_table_name: to });
      if (refused) return say(`to ${to}`, refused);
      st.tables[st.tables.indexOf(name)] = to;
      if (carried) st.otherWrote.add(to);
      if (r() < 0.6) {
        if (st.tables.length >= 3) {
          const gone = st.tables.find((x) => x !== to)!;
          st.tables.splice(st.tables.indexOf(gone), 1);
          const dropped = st.reused.has(gone) ? "not dropped: a name a rename freed" : await quiver(st, gone, "drop", {});
          st.reused.add(name);
          return say(`to ${to}; drop ${gone}${dropped ? ` (${dropped})` : ""}; ${await create(st, r, name, true)}`);
        }
        st.tables.push(name);
        st.reused.add(name);
        return say(`to ${to}; ${await create(st, r, name, true)}`);
      }
      return say(`to ${to}`);
    }
    case "recreate": {
      // Dropped through Quiver; made again by either. Not a name a rename freed and a new table
      // took: dropping it (through Quiver or LanceDB's namespace) removed the renamed table's
      // directory too (a finding of this test, outside the serving index: re-enable when fixed).
      if (st.reused.has(name)) return say("not dropped: a name a rename freed");
      const refused = await quiver(st, name, "drop", {});
      if (refused) return say("drop", refused);
      return say(`drop; ${await create(st, r, name, byQuiver)}`);
    }
    case "add_column": {
      const col = `x${st.nextName++}`;
      const options = ["id * 2", "CAST(id AS DOUBLE) / 4"];
      if (has(schema, "s")) options.push("s");
      if (has(schema, "i64")) options.push("i64 IS NULL");
      const expression = pick(r, options);
      const what = `${col} = ${expression}`;
      if (byQuiver) return say(what, await quiver(st, name, "add_columns", { new_columns: [{ name: col, expression }] }));
      await t.addColumns([{ name: col, valueSql: expression }]);
      other();
      return say(what);
    }
    case "alter_column": {
      const extra = extraColumns(schema);
      if (!extra.length) return write(st, r, "add_column", byQuiver);
      const f = pick(r, extra);
      if (byQuiver && arrow.DataType.isInt(f.type) && r() < 0.5) return say(`${f.name} to float64`, await quiver(st, name, "alter_columns", { alterations: [{ path: f.name, data_type: { type: "float64" } }] }));
      const to = `x${st.nextName++}`;
      if (byQuiver) return say(`rename ${f.name} to ${to}`, await quiver(st, name, "alter_columns", { alterations: [{ path: f.name, rename: to }] }));
      await t.alterColumns([{ path: f.name, rename: to }]);
      other();
      return say(`rename ${f.name} to ${to}`);
    }
    case "drop_column": {
      const droppable = schema.fields.filter((f) => !["id", "vector"].includes(f.name));
      if (!droppable.length) return write(st, r, "insert", byQuiver);
      const c = pick(r, droppable).name;
      if (byQuiver) return say(c, await quiver(st, name, "drop_columns", { columns: [c] }));
      await t.dropColumns([c]);
      other();
      return say(c);
    }
    case "optimize": {
      if (byQuiver) return say("compaction", await quiver(st, name, "optimize", {}));
      await t.optimize();
      other();
      return say("compaction");
    }
    case "index":
      return say(await index(st, r, name, byQuiver));
    case "drop_index": {
      const ix = (await t.listIndices()).find((x) => x.columns.includes("vector"));
      if (!ix) return say("none");
      if (byQuiver) return say(ix.name, await quiver(st, name, `index/${ix.name}/drop`, {}));
      await t.dropIndex(ix.name);
      other();
      return say(ix.name);
    }
  }
}

/** A filter over the columns `schema` has: one or two comparisons. */
function filterOf(r: R, schema: Schema): string {
  const atoms = [`id % ${int(r, 2, 5)} = 0`, `id < ${int(r, 0, 400)}`, `id IN (${int(r, 0, 200)}, ${int(r, 0, 200)}, ${int(r, 0, 200)})`];
  if (has(schema, "i64")) atoms.push(`i64 > ${int(r, -50, 50)}`, `i64 = ${int(r, -50, 50)}`, "i64 IS NULL");
  if (has(schema, "f")) atoms.push(`f < ${quarter(r)}`, "f IS NOT NULL");
  if (has(schema, "s")) atoms.push("s = ''", "s IN ('a', '')", "s != 'b'", "s IS NULL", `s = '${pick(r, STRINGS)}'`);
  if (has(schema, "b")) atoms.push("b = true", "NOT b");
  if (has(schema, "ts")) atoms.push(`ts > TIMESTAMP '2025-01-${String(int(r, 1, 28)).padStart(2, "0")} 00:00:00'`);
  if (has(schema, "tags")) atoms.push("array_has(tags, 'red')", "array_length(tags) = 0");
  if (has(schema, "st")) atoms.push(`st.a > ${int(r, -50, 50)}`);
  for (const f of extraColumns(schema)) if (arrow.DataType.isInt(f.type) || arrow.DataType.isFloat(f.type)) atoms.push(`${f.name} > ${int(r, -20, 200)}`);
  const one = pick(r, atoms);
  return r() < 0.3 ? `${one} ${pick(r, ["AND", "OR"])} ${pick(r, atoms)}` : one;
}

interface Row {
  id: number;
  /** Its values as JSON, without `_distance` (and without `_rowid` unless the search asked for it). */
  json: string;
  d: number;
  /** `_rowid`, where the answer has it. */
  rowid: bigint | null;
}

interface Exact {
  /** Every passing row by id. */
  rows: Map<number, Row>;
  /** Passing rows' distances, ascending. */
  ds: number[];
  /** Every row's distances, ascending (for a postfilter's k nearest). */
  all: number[];
  fields: string[];
}

const json = (row: Record<string, unknown>) => JSON.stringify(row, (_k, v) => (typeof v === "bigint" ? String(v) : v));
const fieldsOf = (t: ArrowTable) => t.schema.fields.map((f) => `${f.name}:${String(f.type)}`);
/** `withRowId`: whether `_rowid` is one of the values compared (LanceDB's answer has it for the tie order). */
function rowsById(t: ArrowTable, withRowId: boolean): Row[] {
  return t.toArray().map((row) => {
    const { _distance, ...rest } = row.toJSON() as Record<string, unknown>;
    const rowid = (rest._rowid as bigint | undefined) ?? null;
    if (!withRowId) delete rest._rowid;
    return { id: rest.id as number, json: json(rest), d: _distance as number, rowid };
  });
}

/** LanceDB's exact answer: every passing row with its distance, measured. */
async function exact(t: lancedb.Table, v: number[], metric: string, filter: string | undefined, columns: string[] | undefined, postfilter: boolean, withRowId: boolean): Promise<Exact> {
  let q = t.vectorSearch(v).bypassVectorIndex().distanceType(metric as "l2").limit(BIG).withRowId();
  if (filter) q = q.where(filter);
  if (columns) q = q.select([...columns, "_distance"]);
  const answer = (await q.toArrow()) as unknown as ArrowTable;
  // An empty answer's Arrow table has no columns: the plan's output schema names them.
  // `_rowid` for the tie order, and a value compared where the search asked for it.
  const fields = (await q.outputSchema()).fields.filter((f) => withRowId || f.name !== "_rowid").map((f) => `${f.name}:${String(f.type)}`);
  const rows = rowsById(answer, withRowId);
  const all = filter && postfilter ? ((await t.vectorSearch(v).bypassVectorIndex().distanceType(metric as "l2").limit(BIG).select(["_distance"]).toArray()) as { _distance: number }[]).map((x) => x._distance) : rows.map((x) => x.d);
  return { rows: new Map(rows.map((x) => [x.id, x])), ds: rows.map((x) => x.d), all, fields };
}

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-4 * Math.max(1, Math.abs(b));

/**
 * The vector index LanceDB searches the column with: its metric (a search's default), and whether
 * its distances are exact. An index that covers none of the rows left (its rows all deleted or
 * rewritten by updates) is not used: LanceDB searches every row exactly, by L2 unless told.
 */
async function indexOf(t: lancedb.Table): Promise<{ metric: string; flat: boolean }> {
  const ix = (await t.listIndices()).find((x) => x.columns.includes("vector"));
  if (!ix || !(await t.indexStats(ix.name))?.numIndexedRows) return { metric: "l2", flat: true };
  const details = (ix as unknown as { indexDetails?: { metric_type?: string } }).indexDetails;
  return { metric: (details?.metric_type ?? "l2").toLowerCase(), flat: ix.indexType === "IvfFlat" };
}

/** Most times a search is sent because a commit landed while it ran. */
const SENT = 5;

/**
 * Quiver's answer to a search, and a handle of the version it was answered at: sent again while a
 * commit lands during it (Quiver's own maintenance commits in the background, and a compaction gives
 * rows new `_rowid`s), so that LanceDB's answer is of the same version. `named`: each send names the
 * version of the handle it is compared with in `x-quiver-min-version` (a search sent again naming
 * the version before the commit may be answered at it, as it asked: seed 51's moved `_rowid`s).
 */
async function answerOf(st: State, name: string, t: lancedb.Table, body: Record<string, unknown>, named: boolean) {
  for (let sent = 1; ; sent++) {
    const version = await t.version();
    const res = await http(st.server, `/v1/table/${name}/query`, body, named ? { "x-quiver-min-version": String(version) } : {});
    const now = await open(st, name);
    if (res.status !== 200 || (await now.version()) === version || sent === SENT) return { res, at: t };
    t = now;
  }
}

/** One search through Quiver against LanceDB's exact answer; a string says how they differ. */
async function search(st: State, r: R, name: string): Promise<{ body: Record<string, unknown>; path: string; what?: string }> {
  const t = await open(st, name);
  const schema = (await t.schema()) as unknown as Schema;
  const live = await scan(t);
  const ix = await indexOf(t);
  const drawn = pick(r, ["exact", "exact", "all", "self"] as const);
  // Under dot a row's own vector need not be its nearest.
  const kind = drawn === "self" && ix.metric === "dot" ? "all" : drawn;
  const filter = kind !== "self" && r() < 0.6 ? filterOf(r, schema) : undefined;
  const others = schema.fields.map((f) => f.name).filter((n) => n !== "id");
  const columns = r() < 0.2 ? ["id", ...others.filter(() => r() < 0.3)] : undefined;
  const v = kind === "self" && live.vectors.length ? pick(r, live.vectors) : vec(r);
  const body: Record<string, unknown> = { vector: { single_vector: v }, vector_column: "vector", k: kind === "exact" ? pick(r, [1, 3, 10, 1000]) : kind === "all" ? 1000 : 3 };
  if (filter) body.filter = filter;
  if (columns) body.columns = { column_names: columns };
  const prefilter = kind === "self" || r() < 0.8;
  body.prefilter = prefilter;
  let metric = ix.metric;
  if (kind === "exact") {
    body.bypass_vector_index = true;
    // Without distance_type an exact search is LanceDB's L2, whatever the index's metric; mostly
    // the index's metric (another is LanceDB's to answer).
    metric = r() < 0.7 ? ix.metric : pick(r, ["l2", "cosine", "dot"]);
    if (metric !== "l2" || r() < 0.5) body.distance_type = metric;
  }
  // Ties are compared at the version named: Quiver's own maintenance commits in the background (a
  // compaction moves rows' `_rowid`s), and without the token a search may be answered before it.
  if (!st.otherWrote.has(name) && (await maintainedSince(st, name))) st.otherWrote.add(name);
  const named = st.otherWrote.has(name);
  // `_rowid` where the version is named (a compaction moves rows' `_rowid`s in the background).
  if (named && r() < 0.3) body.with_row_id = true;
  const { res, at } = await answerOf(st, name, t, body, named);
  const path = res.headers.get("x-quiver-search-path") ?? "";
  if (res.status !== 200) return { body, path, what: `status ${res.status}: ${Buffer.from(res.bytes).toString().slice(0, 300)}` };
  const want = await exact(at, v, metric, filter, columns, !prefilter, body.with_row_id === true);
  const gotTable = arrow.tableFromIPC(res.bytes) as unknown as ArrowTable;
  const ties = named && (kind === "exact" || path === "serving");
  const what = compare(rowsById(gotTable, true), fieldsOf(gotTable), want, {
    k: body.k as number,
    postfilter: !!filter && !prefilter,
    // The serving path measures exact distances; so does LanceDB on a flat index or none.
    exactDistances: kind === "exact" || path === "serving" || ix.flat,
    rows: kind === "exact" || (kind === "all" && (path === "serving" || ix.flat)),
    top: kind === "self" && (path === "serving" || ix.flat),
    ties,
    cut: ties && metric !== "cosine",
  });
  return { body, path, what };
}

interface Rule {
  k: number;
  postfilter: boolean;
  exactDistances: boolean;
  /** Which rows must be answered (an exact answer, up to ties at the k-th distance). */
  rows: boolean;
  /** The nearest row must be answered first. */
  top: boolean;
  /** Rows answered at one distance come in `_rowid` order. */
  ties: boolean;
  /** Where k cuts through rows tied at the k-th distance, those of the lowest `_rowid`s are kept. */
  cut: boolean;
}

function compare(got: Row[], gotFields: string[], want: Exact, rule: Rule): string | undefined {
  if (gotFields.join() !== want.fields.join()) return `columns ${gotFields.join(", ")} where LanceDB answers ${want.fields.join(", ")}`;
  const seen = new Set<number>();
  for (const [i, g] of got.entries()) {
    const w = want.rows.get(g.id);
    if (!w) return `row id ${g.id} answered: LanceDB has no such row passing the filter`;
    if (w.json !== g.json) return `row id ${g.id}: ${g.json} where LanceDB has ${w.json}`;
    if (seen.has(g.id)) return `row id ${g.id} answered twice`;
    seen.add(g.id);
    if (rule.exactDistances && !close(g.d, w.d)) return `row id ${g.id}: distance ${g.d} where LanceDB measures ${w.d}`;
    if (rule.exactDistances && i > 0 && g.d < got[i - 1].d - 1e-4 * Math.max(1, Math.abs(g.d))) return `row id ${g.id} at ${i}: distance ${g.d} after ${got[i - 1].d}`;
    const before = i > 0 ? want.rows.get(got[i - 1].id)! : null;
    if (rule.ties && before && g.d === got[i - 1].d && w.rowid! < before.rowid!) return `row id ${g.id} (_rowid ${w.rowid}) after row id ${before.id} (_rowid ${before.rowid}) at the same distance ${g.d}: LanceDB orders ties by _rowid`;
  }
  if (rule.top && want.ds.length && (!got.length || !close(want.rows.get(got[0].id)!.d, want.ds[0]))) return `nearest row (distance ${want.ds[0]}) not answered first (${got[0] ? `id ${got[0].id} at ${want.rows.get(got[0].id)!.d}` : "no rows"})`;
  if (!rule.rows) return undefined;
  // The k-th distance: among passing rows (prefilter), or among all rows (postfilter: the k nearest, then the filter).
  const pool = rule.postfilter ? want.all : want.ds;
  if (!pool.length) return got.length ? `${got.length} rows answered where LanceDB answers none` : undefined;
  const edge = pool[Math.min(rule.k, pool.length) - 1];
  const tol = 1e-4 * Math.max(1, Math.abs(edge));
  for (const g of got) if (want.rows.get(g.id)!.d > edge + tol) return `row id ${g.id} at distance ${want.rows.get(g.id)!.d} is past the k-th (${edge})`;
  for (const [id, w] of want.rows) if (w.d < edge - tol && !seen.has(id)) return `row id ${id} (distance ${w.d}, within the k nearest) not answered`;
  const within = [...want.rows.values()].filter((w) => w.d <= edge + tol).length;
  const need = rule.postfilter ? [...want.rows.values()].filter((w) => w.d < edge - tol).length : Math.min(rule.k, want.ds.length);
  if (got.length < need || got.length > Math.min(rule.k, within)) return `${got.length} rows answered where LanceDB answers ${need}${need === within ? "" : `–${Math.min(rule.k, within)}`}`;
  if (!rule.cut || rule.postfilter || got.length < rule.k) return undefined;
  // k cut through the rows at the last distance answered: LanceDB keeps the lowest row ids of them.
  const last = want.rows.get(got[got.length - 1].id)!.d;
  const kept = got.map((g) => want.rows.get(g.id)!).filter((w) => w.d === last);
  const highest = kept.reduce((a, b) => (b.rowid! > a.rowid! ? b : a));
  const passed = [...want.rows.values()].find((w) => w.d === last && !seen.has(w.id) && w.rowid! < highest.rowid!);
  if (passed) return `row id ${passed.id} (_rowid ${passed.rowid}) at the k-th distance ${last} not answered, where row id ${highest.id} (_rowid ${highest.rowid}) is: LanceDB keeps the lowest _rowid of rows tied`;
  return undefined;
}

export interface RunOptions {
  seed: number;
  /** The steps to run, by index (a run's steps are 0..n-1; a reproduction keeps some). */
  steps: number[];
  /** Searches after each step. */
  searches?: number;
  /** Table names start with it (each run on a server its own). */
  prefix?: string;
  progress?: (done: number, result: RunResult) => void;
  /** No step starts after this time (ms since the epoch): a long run bounded by a deadline. */
  deadline?: number;
}

/** Runs the steps against a server; stops at the first difference. */
export async function runSteps(server: Server, opts: RunOptions): Promise<RunResult> {
  const prefix = opts.prefix ?? "f";
  const st: State = { server, prefix, tables: [], nextId: 0, nextName: 0, otherWrote: new Set(), wroteAt: new Map(), reused: new Set() };
  const result: RunResult = { steps: 0, searches: 0, paths: {}, ops: {}, log: [] };
  const setup = stepRng(opts.seed, -1);
  for (const byQuiver of [true, false]) {
    const name = newName(st);
    st.tables.push(name);
    result.log.push(`setup: ${await create(st, setup, name, byQuiver)}`);
  }
  for (const i of opts.steps) {
    if (opts.deadline !== undefined && Date.now() > opts.deadline) break;
    const r = stepRng(opts.seed, i);
    const op = opOf(r);
    const byQuiver = r() < 0.5;
    try {
      const did = await write(st, r, op, byQuiver);
      result.log.push(`step ${i}: ${did}`);
      const key = `${did.split(" ")[0]}:${byQuiver ? "quiver" : "lancedb"}${did.includes("(refused") || did.includes("(LanceDB refused") ? ":refused" : ""}`;
      result.ops[key] = (result.ops[key] ?? 0) + 1;
    } catch (e) {
      if (e instanceof Difference500) {
        result.log.push(`step ${i}: ${op} by quiver`);
        result.difference = { step: i, search: {}, table: "", path: "", what: e.message };
        return result;
      }
      // LanceDB (the other writer) refused: the step wrote nothing, as a refused request does.
      result.log.push(`step ${i}: ${op} by lancedb (LanceDB refused: ${String(e).slice(0, 160)})`);
      result.ops[`${op}:lancedb:refused`] = (result.ops[`${op}:lancedb:refused`] ?? 0) + 1;
    }
    for (let s = 0; s < (opts.searches ?? 2); s++) {
      const name = pick(r, st.tables);
      let searched: Awaited<ReturnType<typeof search>>;
      try {
        searched = await search(st, r, name);
      } catch (e) {
        // A read that fails (LanceDB's of the table, or Quiver's answer) ends the run as a
        // difference, with the steps that led to it, rather than the process.
        result.difference = { step: i, search: {}, table: name, path: "", what: `the search could not be made: ${String(e).slice(0, 500)}` };
        return result;
      }
      const { body, path, what } = searched;
      result.searches++;
      const p = path.replace(/^engine; reason=/, "engine:");
      result.paths[p] = (result.paths[p] ?? 0) + 1;
      if (what) {
        result.difference = { step: i, search: body, table: name, path, what };
        return result;
      }
    }
    result.steps++;
    opts.progress?.(result.steps, result);
  }
  return result;
}

/**
 * The fewest steps (of `steps`) that still give a difference: the prefix up to the difference, then
 * chunks dropped (halving) while a difference remains, within `budgetMs`. Each try runs on the same
 * server under table names of its own.
 */
export async function shrink(server: Server, seed: number, steps: number[], budgetMs: number, log: (s: string) => void = () => {}): Promise<{ steps: number[]; result: RunResult }> {
  let tries = 0;
  const attempt = async (candidate: number[]) => runSteps(server, { seed, steps: candidate, prefix: `s${tries++}_` });
  let best = await attempt(steps);
  if (!best.difference) return { steps, result: best };
  let current = steps.slice(0, steps.indexOf(best.difference.step) + 1);
  const end = Date.now() + budgetMs;
  for (let chunk = Math.ceil(current.length / 2); chunk >= 1 && Date.now() < end; chunk = chunk === 1 ? 0 : Math.ceil(chunk / 2)) {
    for (let at = 0; at < current.length && Date.now() < end; ) {
      const candidate = [...current.slice(0, at), ...current.slice(at + chunk)];
      const tried = candidate.length ? await attempt(candidate) : undefined;
      if (tried?.difference) {
        current = candidate.slice(0, candidate.indexOf(tried.difference.step) + 1);
        best = tried;
        log(`shrunk to ${current.length} steps`);
      } else at += chunk;
    }
  }
  return { steps: current, result: best };
}

/** The steps `0..n-1`. */
export const firstSteps = (n: number) => Array.from({ length: n }, (_, i) => i);

/** How a difference reads, with what led to it. */
export function describe(seed: number, steps: number[], result: RunResult): string {
  const d = result.difference!;
  return [
    `difference at step ${d.step} (seed ${seed}), table ${d.table}, search path ${d.path || "-"}:`,
    `  ${d.what}`,
    `  search: ${JSON.stringify(d.search)}`,
    `steps (${steps.length}):`,
    ...result.log.map((l) => `  ${l}`),
    `rerun: npm run fuzz:serving -- --seed ${seed} --only ${steps.join(",")}`,
  ].join("\n");
}

async function main(): Promise<void> {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i < 0 ? undefined : process.argv[i + 1];
  };
  const seed = Number(arg("seed") ?? 1);
  const only = arg("only");
  const steps = only ? only.split(",").map(Number) : firstSteps(Number(arg("steps") ?? 1000));
  const searches = Number(arg("searches") ?? 2);
  const shrinkMs = Number(arg("shrink-seconds") ?? 900) * 1000;
  const seconds = arg("seconds");
  const root = mkdtempSync(path.join(tmpdir(), "quiver-fuzz-"));
  const key = "fuzz-admin-key";
  const maintenance = arg("auto-maintenance");
  const q = await startQuiver(root, key, [...(process.argv.includes("--serving-off") ? ["--serving", "off"] : []), ...(maintenance ? ["--auto-maintenance", maintenance] : [])]);
  const server = { url: q.url, root, key };
  const started = Date.now();
  let code = 0;
  try {
    const result = await runSteps(server, {
      seed,
      steps,
      searches,
      deadline: seconds === undefined ? undefined : started + Number(seconds) * 1000,
      progress: (n, r) => {
        if (n % 100 === 0) console.log(`${n} steps, ${r.searches} searches, ${((Date.now() - started) / 1000).toFixed(0)} s; paths ${JSON.stringify(r.paths)}`);
      },
    });
    console.log(JSON.stringify({ seed, autoMaintenance: maintenance ?? "on", steps: result.steps, searches: result.searches, differences: result.difference ? 1 : 0, seconds: (Date.now() - started) / 1000, loadavg: (await import("node:os")).loadavg(), paths: result.paths, ops: result.ops }));
    if (result.difference) {
      code = 1;
      console.log(describe(seed, steps.slice(0, steps.indexOf(result.difference.step) + 1), result));
      console.log("shrinking…");
      const small = await shrink(server, seed, steps.slice(0, steps.indexOf(result.difference.step) + 1), shrinkMs, console.log);
      console.log(small.result.difference ? describe(seed, small.steps, small.result) : "the difference did not come again on a fresh run (timing): the steps above are the reproduction");
    }
  } finally {
    await q.stop();
    rmSync(root, { recursive: true, force: true });
  }
  process.exit(code);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
