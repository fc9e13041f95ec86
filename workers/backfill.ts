// A child process that runs one backfill (started by src/jobs/kinds/backfill.ts) at the lowest CPU
// priority: its LanceDB reads and writes then yield to the server's queries (measured on 2 cores:
// query p99 2.0x idle with a backfill writing in a process at normal priority, 1.35x at nice 19).
// SQL columns are LanceDB's own refresh. JavaScript and WebAssembly ones: plan the rows (missing
// or stale, or those `where` selects) at the read version, read their inputs in tasks of
// `task_size` rows, compute them in this process's worker pool (`concurrency` tasks in flight,
// IPC bytes moved both ways), and commit every `checkpoint_size` rows, writing only rows
// unchanged since they were read. Each commit is reported to the server, which records it before
// the job's next report; a stop ends the run after the commit in progress.
import type * as A from "apache-arrow";
import type { Entry } from "../src/catalog/catalog.js";
import { resolveLocation } from "../src/catalog/locations.js";
import { inputAlias, udfDefinition, type UdfLimits } from "../src/compute/udf.js";
import { runnable, virtualColumnOf } from "../src/compute/virtual-column.js";
import { arrow } from "../src/engine/arrow.js";
import { firstFragments, planRows, readRows, refreshSqlColumn, writeValues, type Plan } from "../src/engine/computed-columns.js";
import { ipcFile } from "../src/engine/ipc-out.js";
import { namedBranch, openTables } from "../src/engine/tables.js";
import { usesStableRowIds } from "../src/engine/versions.js";
import { serveJob, type JobProcessRequest, type Send as JobSend } from "./job-process.js";
import type { WorkerPool } from "./pool.js";
import type { UdfRequest, UdfTaskReply } from "./udf.js";

/** The job's spec as the server keeps it (see BackfillSpec in src/jobs/kinds/backfill.ts). */
export interface BackfillRun {
  column: string;
  branch: string | null;
  where: string | null;
  readVersion: number | null;
  taskSize: number;
  concurrency: number;
  checkpointSize: number;
  numFrags: number | null;
  flushSeconds: number | null;
  key: string[] | null;
}

export interface BackfillProgress {
  rows_total?: number;
  rows_done?: number;
  rows_computed?: number;
  rows_skipped?: number;
  versions?: number[];
  read_version?: number;
  fragments?: number[];
}

/** What the server sends: the job, where it stands, and the commits that wrote current values. */
export interface BackfillRequest extends JobProcessRequest {
  root: string;
  entry: Entry;
  run: BackfillRun;
  progress: BackfillProgress;
  /** Commits that wrote values of this definition (rows last updated by one are not stale). */
  fresh: number[];
  /** The table's other UDF columns that do not read this one, with their own lists of such commits. */
  others: { column: string; fresh: number[] }[];
  limits: UdfLimits;
}

/**
 * What the process reports after each commit: its progress, the commits it made, and the other
 * columns for which those commits are fresh too (every row they wrote had a fresh or no value there).
 */
export type BackfillMessage = { type: "progress"; progress: BackfillProgress; committed: number[]; tracked: boolean; freshFor: string[] };

/** A pool failure in words: a heap past the limit is the UDF's doing. */
function poolError(err: unknown, heapMb: number): Error {
  const e = err as { code?: string; message?: string };
  if (e?.code === "ERR_WORKER_OUT_OF_MEMORY" || /out of memory|memory limit/i.test(String(e?.message))) {
    return new Error(`the UDF exceeded the worker heap limit (--worker-heap-mb ${heapMb}); its worker was replaced`);
  }
  return err instanceof Error ? err : new Error(String(err));
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of it) parts.push(c);
  // One fresh buffer the view spans whole, so it can be moved to the worker.
  return new Uint8Array(Buffer.concat(parts));
}

type Send = JobSend<BackfillMessage>;

async function runSql(req: BackfillRequest, send: Send): Promise<void> {
  const tables = await openTables(req.root, 0);
  const t = await tables.open(req.entry, { branch: req.run.branch, fresh: true });
  // LanceDB's refresh reports only at its end: until then the total is every row it may fill.
  const read_version = await t.version();
  await send({ type: "progress", progress: { read_version, rows_total: await t.countRows(), rows_done: 0 }, committed: [], tracked: false, freshFor: [] });
  const r = await refreshSqlColumn(t, req.run.column);
  const n = r.rowsFilled;
  await send({ type: "progress", progress: { read_version, rows_total: n, rows_done: n, rows_computed: n, versions: [r.version] }, committed: [r.version], tracked: false, freshFor: [] });
}

async function runUdf(req: BackfillRequest, pool: WorkerPool, send: Send, stopping: () => boolean): Promise<void> {
  const { run, progress } = req;
  const tables = await openTables(req.root, 0);
  const writer = await tables.open(req.entry, { branch: run.branch, fresh: true });
  const vc = virtualColumnOf((await writer.schema()).fields, run.column)!;
  const readVersion = run.readVersion ?? (await writer.version());
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
    const keep = plan.addresses.map((a) => frags.has(Number(a >> 32n)));
    plan = { ids: plan.ids.filter((_, i) => keep[i]), addresses: plan.addresses.filter((_, i) => keep[i]), otherFresh: plan.otherFresh.filter((_, i) => keep[i]) };
    report.fragments = [...frags];
  }
  const counts = { rows_done: progress.rows_done ?? 0, rows_computed: progress.rows_computed ?? 0, rows_skipped: progress.rows_skipped ?? 0 };
  report.rows_total = counts.rows_done + counts.rows_skipped + plan.ids.length;
  await send({ type: "progress", progress: { ...report, ...counts }, committed: [], tracked, freshFor: [] });

  const udf = udfDefinition(vc, req.limits);
  const key = run.key!;
  const select = new Map<string, string>([...key.map((k) => [k, k] as [string, string]), ...vc.inputs.map((p, i) => [inputAlias(i), p] as [string, string])]);

  /** Read, move to a worker, compute: one task's output rows. */
  async function task(ids: bigint[]): Promise<A.Table> {
    const it = await readRows(reader, ids, select);
    const first = await it.next();
    if (!first) return new arrow.Table();
    const input = await collect(ipcFile(first, () => it.next()));
    let reply: UdfTaskReply;
    try {
      reply = await pool.run<UdfTaskReply>("udf", { op: "run", udf, input, keep: key } satisfies UdfRequest, [input.buffer as ArrayBuffer]);
    } catch (err) {
      throw poolError(err, req.workerHeapMb);
    }
    if (!(reply instanceof Uint8Array)) throw new Error(reply.error ?? "the UDF failed");
    return arrow.tableFromIPC(reply);
  }

  let lastCommit = Date.now();
  for (let start = 0; start < plan.ids.length && !stopping(); ) {
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
    if (stopping()) break;
    const computed = outputs.reduce((n, t) => n + t.numRows, 0);
    const data = new arrow.Table(outputs.flatMap((t) => t.batches));
    const addresses = plan.addresses.slice(start, end).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const w = computed > 0 ? await writeValues(writer, key, data, addresses) : { versions: [], written: 0 };
    w.versions.forEach((v) => done.add(v));
    counts.rows_done += w.written;
    counts.rows_computed += computed;
    counts.rows_skipped += end - start - w.written;
    const rowsFresh = plan.otherFresh.slice(start, end);
    const freshFor = req.others.filter((_, j) => rowsFresh.every((r) => r[j])).map((o) => o.column);
    await send({ type: "progress", progress: { ...counts, versions: [...done] }, committed: w.versions, tracked, freshFor });
    lastCommit = Date.now();
    start = end;
  }
}

serveJob<BackfillRequest, BackfillMessage>(async (req, pool, send, stopping) => {
  const t = await (await openTables(req.root, 0)).open(req.entry, { branch: req.run.branch, fresh: true });
  const vc = virtualColumnOf((await t.schema()).fields, req.run.column);
  if (runnable(vc!) === "sql") await runSql(req, send);
  else await runUdf(req, pool, send, stopping);
});
