// A child process that runs one backfill (started by src/jobs/kinds/backfill.ts) at the lowest CPU
// priority: its LanceDB reads and writes then yield to the server's queries (measured on 2 cores:
// query p99 2.0x idle with a backfill writing in a process at normal priority, 1.35x at nice 19).
// SQL columns are LanceDB's own refresh. JavaScript and WebAssembly ones: plan the rows (missing
// or stale, or those `where` selects) at the read version, read their inputs in tasks of
// `task_size` rows, compute them in the compute sandbox (`concurrency` tasks in flight, IPC bytes
// both ways, each answer checked), and commit every `checkpoint_size` rows, writing only rows
// unchanged since they were read. Each commit is reported to the server, which records it before
// the job's next report; a stop ends the run after the commit in progress, and the server's answer
// to the question asked right before each commit (still this replica's job, no cancel asked?) ends
// it before the next one.
import { FAIL, recordFailure, underPolicy } from "../../src/compute/error-handling.js";
import { fromJsonType } from "../../src/engine/json-arrow.js";
import type * as A from "apache-arrow";
import { resolveLocation } from "../../src/catalog/locations.js";
import type { UdfDefinition } from "../../src/compute/udf.js";
import { arrow } from "../../src/engine/arrow.js";
import { firstFragments, planRows, readRows, refreshSqlColumn, writeValues, type Plan } from "../../src/engine/computed-columns.js";
import { ipcFileBytes } from "../../src/engine/ipc-out.js";
import { countRows, tableVersion } from "../../src/engine/table-info.js";
import { namedBranch, openTables, type TableHandle, type Tables } from "../../src/engine/tables.js";
import { CHECK_EVERY_READ } from "../../src/util/keep-fresh.js";
import { usesStableRowIds } from "../../src/engine/versions.js";
import { udfInSandbox } from "../compute-answers.js";
import type { Compute } from "../compute-client.js";
import type { BackfillMessage, BackfillProgress, BackfillRequest } from "../protocol.js";
import { serveJob, withCompute, type JobControl } from "./job-process.js";

/** A key value as JSON holds it: 64-bit integers as numbers while exact, as strings beyond. */
const jsonKey = (v: unknown) => (typeof v === "bigint" ? (v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : String(v)) : v);

/** Tables of the same columns as one, under the first's schema (a skipped row's table may differ in field flags). */
function joined(tables: A.Table[]): A.Table {
  const withRows = tables.filter((t) => t.numRows > 0);
  if (withRows.length === 0) return new arrow.Table();
  const schema = withRows[0].schema;
  return new arrow.Table(withRows.flatMap((t) => t.batches.map((b) => new arrow.RecordBatch(schema, b.data))));
}

/** The plan's rows whose address `keep` takes. */
function only(plan: Plan, keep: (address: bigint) => boolean): Plan {
  const kept = plan.addresses.map(keep);
  const pick = <T>(xs: T[]) => xs.filter((_, i) => kept[i]);
  return { ids: pick(plan.ids), addresses: pick(plan.addresses), versions: pick(plan.versions), otherFresh: pick(plan.otherFresh) };
}

/** Task `k` of `n`'s address range [from, to) over sorted `addresses` (to null: the end), as strings. */
function shareOf(addresses: bigint[], [k, n]: [number, number]): [string, string | null] {
  const at = (i: number) => (i < addresses.length ? String(addresses[i]) : null);
  const from = Math.floor((k * addresses.length) / n);
  return [k === 0 ? "0" : (at(from) ?? String(1n << 63n)), k === n - 1 ? null : at(Math.floor(((k + 1) * addresses.length) / n))];
}

async function runSql(req: BackfillRequest, writer: TableHandle, { send, mayCommit }: JobControl<BackfillMessage>): Promise<void> {
  // LanceDB's refresh reports only at its end: until then the total is every row it may fill.
  const read_version = await tableVersion(writer);
  await send({ type: "progress", progress: { read_version, rows_total: await countRows(writer), rows_done: 0 }, committed: [], tracked: false, freshFor: [] });
  // The refresh commits inside LanceDB's call: asked before it starts.
  if (!(await mayCommit())) return;
  const r = await refreshSqlColumn(writer, req.run.column);
  const n = r.rowsFilled;
  await send({ type: "progress", progress: { read_version, rows_total: n, rows_done: n, rows_computed: n, versions: [r.version] }, committed: [r.version], tracked: false, freshFor: [] });
}

async function runUdf(req: BackfillRequest, udf: UdfDefinition, tables: Tables, writer: TableHandle, compute: Compute, job: JobControl<BackfillMessage>): Promise<void> {
  const { run, progress } = req;
  const { send, stopping, mayCommit } = job;
  const readVersion = run.readVersion ?? (await tableVersion(writer));
  const reader = await tables.open(req.entry, { branch: run.branch, version: readVersion });
  const tracked = await usesStableRowIds(resolveLocation(req.root, req.entry.location!), readVersion, namedBranch(run.branch));
  const done = new Set(progress.versions ?? []);
  let plan: Plan = await planRows(reader, {
    column: run.column,
    where: run.where,
    fresh: tracked ? new Set(req.fresh) : null,
    done,
    fragments: progress.fragments ? new Set(progress.fragments) : null,
    others: tracked ? req.others.map((o) => ({ column: o.column, fresh: new Set(o.fresh) })) : [],
  });
  const report: BackfillProgress = { ...progress, read_version: readVersion };
  if (run.numFrags !== null && !progress.fragments) {
    const frags = firstFragments(plan.addresses, run.numFrags);
    plan = only(plan, (a) => frags.has(Number(a >> 32n)));
    report.fragments = [...frags];
  }
  if (run.part) {
    // This task's share: a contiguous run of the plan's addresses, fixed by its first plan (every
    // task of one backfill plans the same rows at the same read version) and kept across resumes.
    const range = progress.range ?? shareOf(plan.addresses, run.part);
    plan = only(plan, (a) => a >= BigInt(range[0]) && (range[1] === null || a < BigInt(range[1])));
    report.range = range;
  }
  const counts = { rows_done: progress.rows_done ?? 0, rows_computed: progress.rows_computed ?? 0, rows_skipped: progress.rows_skipped ?? 0 };
  // At a read version fixed before the run (a task's, or the client's), rows this job already wrote
  // still look missing there: a resumed run skips the part of the same plan its commits covered,
  // and keeps the plan's total. Otherwise the plan, read at the latest version, leaves them out.
  const fixed = run.readVersion !== null && progress.planned === plan.ids.length;
  const first = fixed ? (progress.position ?? 0) : 0;
  if (run.readVersion !== null) report.planned = plan.ids.length;
  report.rows_total = fixed && progress.rows_total !== undefined ? progress.rows_total : counts.rows_done + counts.rows_skipped + plan.ids.length - first;
  await send({ type: "progress", progress: { ...report, ...counts }, committed: [], tracked, freshFor: [] });

  const key = run.key!;
  const select = new Map<string, string>([...key.map((k) => [k, k] as [string, string]), ...udf.sources.map((p, i) => [udf.inputs[i], p] as [string, string])]);

  const policy = run.errors ?? FAIL;
  const failed = { rows_failed: progress.rows_failed ?? 0, failed_rows: progress.failed_rows ?? [] };

  /** Read, compute in the sandbox, check: one task's output rows, under the error policy (a skipped row's value is null). */
  async function task(ids: bigint[]): Promise<A.Table> {
    const bytes = await ipcFileBytes(await readRows(reader, ids, select));
    if (!bytes) return new arrow.Table();
    const input = arrow.tableFromIPC(bytes);
    const run = (part: A.Table) => udfInSandbox(compute, udf, part === input ? bytes : arrow.tableToIPC(part, "stream"), part, key);
    return underPolicy(policy, input, run, skipped, joined);
  }

  function skipped(row: A.Table, err: unknown): A.Table {
    const k = Object.fromEntries(key.map((c) => [c, jsonKey(row.getChild(c)!.get(0))]));
    recordFailure(policy, failed, 1, JSON.stringify(k), err, report.rows_total!);
    const type = fromJsonType(udf.output.type, udf.output.name);
    return new arrow.Table({ ...Object.fromEntries(key.map((c) => [c, row.getChild(c)!])), [udf.output.name]: arrow.vectorFromArray([null], type) });
  }

  let lastCommit = Date.now();
  for (let start = first; start < plan.ids.length && !stopping(); ) {
    let end = Math.min(start + run.checkpointSize, plan.ids.length);
    const outputs: A.Table[] = [];
    // This checkpoint's tasks, `concurrency` at a time; a flush interval may cut it short.
    let next = start;
    while (next < end && !stopping()) {
      const batch: Promise<A.Table>[] = [];
      while (batch.length < run.concurrency && next < end) {
        const upTo = Math.min(next + run.taskSize, end);
        batch.push(task(plan.ids.slice(next, upTo)));
        next = upTo;
      }
      outputs.push(...(await Promise.all(batch)));
      if (run.flushSeconds !== null && Date.now() - lastCommit >= run.flushSeconds * 1000) end = next;
    }
    // Asked last, right before the commit: a cancel or a takeover since then leaves nothing committed.
    if (stopping() || !(await mayCommit())) break;
    const computed = outputs.reduce((n, t) => n + t.numRows, 0);
    const data = joined(outputs);
    const read = { ids: plan.ids.slice(start, end), addresses: plan.addresses.slice(start, end), versions: plan.versions.slice(start, end) };
    const w = computed > 0 ? await writeValues(writer, key, data, read, tracked) : { versions: [], written: 0, earlier: [] };
    // A commit of this run whose report was lost is the run's too (a resume skips its rows).
    [...w.versions, ...w.earlier].forEach((v) => done.add(v));
    counts.rows_done += w.written;
    counts.rows_computed += computed;
    counts.rows_skipped += end - start - w.written;
    const rowsFresh = plan.otherFresh.slice(start, end);
    const freshFor = req.others.filter((_, j) => rowsFresh.every((r) => r[j])).map((o) => o.column);
    const at = run.readVersion !== null ? { position: end } : {};
    await send({ type: "progress", progress: { ...counts, ...failed, ...at, versions: [...done] }, committed: w.versions, tracked, freshFor });
    lastCommit = Date.now();
    start = end;
  }
}

serveJob<BackfillRequest, BackfillMessage>(async (req, job) => {
  const tables = await openTables(req.root, CHECK_EVERY_READ, req.storage);
  const writer = await tables.open(req.entry, { branch: req.run.branch, fresh: true });
  const c = req.compute;
  if (c.kind === "sql") await runSql(req, writer, job);
  else await withCompute(req, req.entry.objectId, (compute) => runUdf(req, c.udf, tables, writer, compute, job));
});
