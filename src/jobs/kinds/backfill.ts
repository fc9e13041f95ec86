// Job kind "backfill": compute a virtual column's values. SQL columns are LanceDB's own refresh.
// JavaScript and WebAssembly ones: plan the rows (missing or stale, or those `where` selects) at
// the read version, read their inputs in tasks of `task_size` rows, compute them in the worker pool
// (`concurrency` tasks in flight, IPC bytes moved both ways), and commit every `checkpoint_size`
// rows, writing only rows unchanged since they were read. Each commit is recorded (its version, in
// the job's progress and in the column's list of value versions) before the next starts, so a stop,
// a failure or a crash loses at most the checkpoint in progress, and a run that resumes skips every
// row already written.
import type * as A from "apache-arrow";
import type { Catalog, Entry } from "../../catalog/catalog.js";
import { requireTable } from "../../catalog/lookup.js";
import { resolveLocation } from "../../catalog/locations.js";
import type { UdfDefinition } from "../../compute/udf.js";
import type { ValueVersions, ValuesKey } from "../../compute/value-versions.js";
import { definitionHash, fromFieldMetadata, runnable, type VirtualColumn } from "../../compute/virtual-column.js";
import type { Config } from "../../config.js";
import { arrow } from "../../engine/arrow.js";
import { backfillKey, firstFragments, planRows, readRows, refreshSqlColumn, writeValues, type Plan } from "../../engine/computed-columns.js";
import { ipcFile } from "../../engine/ipc-out.js";
import { namedBranch, type Tables } from "../../engine/tables.js";
import { usesStableRowIds } from "../../engine/versions.js";
import type { UdfRequest, UdfTaskReply } from "../../../workers/udf.js";
import type { WorkerPool } from "../../../workers/pool.js";
import { sameId } from "../../catalog/names.js";
import { log } from "../../log.js";
import type { JobContext, JobKind, Jobs } from "../jobs.js";
import type { JobRecord } from "../store.js";

export const BACKFILL = "backfill";

export interface BackfillSpec {
  [k: string]: unknown;
  column: string;
  /** null for the main branch. */
  branch: string | null;
  /** The definition the backfill was asked for; a different one at start fails the job. */
  definition: string;
  where: string | null;
  readVersion: number | null;
  taskSize: number;
  concurrency: number;
  checkpointSize: number;
  numFrags: number | null;
  /** Commit a partial checkpoint once this long has passed since the last commit. */
  flushSeconds: number | null;
  /** The merge key (JavaScript and WebAssembly columns). */
  key: string[] | null;
  /** Queued by a write to a table with auto_backfill columns. */
  auto: boolean;
}

interface Progress {
  rows_total?: number;
  rows_done?: number;
  rows_computed?: number;
  rows_skipped?: number;
  versions?: number[];
  read_version?: number;
  fragments?: number[];
}

export interface BackfillDeps {
  catalog: Catalog;
  tables: Tables;
  pool: WorkerPool;
  versions: ValueVersions;
  config: Pick<Config, "backfillJobs" | "udfTimeoutMs" | "udfWasmMemoryMb" | "workerHeapMb">;
}

/** The virtual column `name` among a schema's fields, or null. */
export function virtualColumnOf(fields: readonly A.Field[], name: string): VirtualColumn | null {
  const f = fields.find((x) => x.name === name);
  return f ? fromFieldMetadata(name, f.metadata) : null;
}

const inputAlias = (i: number) => `__in${i}`;

/** What a worker runs for this column. */
export function udfDefinition(vc: VirtualColumn, config: BackfillDeps["config"]): UdfDefinition {
  return {
    key: definitionHash(vc),
    backend: runnable(vc) as "js" | "wasm",
    source: vc.udf,
    batch: vc.batch,
    inputs: vc.inputs.map((_, i) => inputAlias(i)),
    output: { name: vc.column, type: vc.dataType!, nullable: vc.nullable, structField: vc.structField },
    timeoutMs: config.udfTimeoutMs,
    wasmMaxPages: config.udfWasmMemoryMb * 16,
  };
}

/** A pool failure in words: a heap past the limit is the UDF's doing. */
function poolError(err: unknown, config: BackfillDeps["config"]): Error {
  const e = err as { code?: string; message?: string };
  if (e?.code === "ERR_WORKER_OUT_OF_MEMORY" || /out of memory|memory limit/i.test(String(e?.message))) {
    return new Error(`the UDF exceeded the worker heap limit (--worker-heap-mb ${config.workerHeapMb}); its worker was replaced`);
  }
  return err instanceof Error ? err : new Error(String(err));
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of it) parts.push(c);
  // One fresh buffer the view spans whole, so it can be moved to the worker.
  return new Uint8Array(Buffer.concat(parts));
}

export function backfillKind(deps: BackfillDeps): JobKind<BackfillSpec> {
  const { catalog, tables, pool, versions, config } = deps;

  async function runSql(entry: Entry, spec: BackfillSpec, job: JobContext<BackfillSpec>): Promise<void> {
    const t = await tables.open(entry, { branch: spec.branch, fresh: true });
    const r = await tables.write(entry, spec.branch, () => refreshSqlColumn(t, spec.column));
    await job.report({ rows_total: r.rowsFilled, rows_done: r.rowsFilled, rows_computed: r.rowsFilled, versions: [r.version] });
    if (!namedBranch(spec.branch)) tables.evict(entry.objectId);
  }

  async function runUdf(entry: Entry, vc: VirtualColumn, spec: BackfillSpec, job: JobContext<BackfillSpec>, stopping: () => boolean): Promise<void> {
    const progress = (job.rec.progress ?? {}) as Progress;
    const writer = await tables.open(entry, { branch: spec.branch, fresh: true });
    const readVersion = spec.readVersion ?? (await writer.version());
    const reader = await tables.open(entry, { branch: spec.branch, version: readVersion });
    const dir = resolveLocation(tables.root, entry.location!);
    const valuesKey: ValuesKey = { location: entry.location!, branch: spec.branch, column: spec.column, definition: spec.definition };
    const tracked = await usesStableRowIds(dir, readVersion, namedBranch(spec.branch));
    const done = new Set(progress.versions ?? []);
    let plan: Plan = await planRows(reader, {
      column: spec.column,
      where: spec.where,
      fresh: tracked ? versions.get(valuesKey) : null,
      done,
      fragments: progress.fragments ? new Set(progress.fragments) : null,
    });
    if (spec.numFrags !== null && !progress.fragments) {
      const frags = firstFragments(plan.addresses, spec.numFrags);
      const keep = plan.addresses.map((a) => frags.has(Number(a >> 32n)));
      plan = { ids: plan.ids.filter((_, i) => keep[i]), addresses: plan.addresses.filter((_, i) => keep[i]) };
      await job.report({ fragments: [...frags] });
    }
    const counts = { rows_done: progress.rows_done ?? 0, rows_computed: progress.rows_computed ?? 0, rows_skipped: progress.rows_skipped ?? 0 };
    await job.report({ read_version: readVersion, rows_total: counts.rows_done + counts.rows_skipped + plan.ids.length });

    const udf = udfDefinition(vc, config);
    const key = spec.key!;
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
        throw poolError(err, config);
      }
      if (!(reply instanceof Uint8Array)) throw new Error(reply.error ?? "the UDF failed");
      return arrow.tableFromIPC(reply);
    }

    let lastCommit = Date.now();
    for (let start = 0; start < plan.ids.length && !stopping(); ) {
      let end = Math.min(start + spec.checkpointSize, plan.ids.length);
      const outputs: A.Table[] = [];
      // Tasks of this checkpoint, `concurrency` at a time; a flush interval may cut it short.
      let next = start;
      while (next < end && !stopping()) {
        const batch: Promise<A.Table>[] = [];
        while (batch.length < spec.concurrency && next < end) {
          const upTo = Math.min(next + spec.taskSize, end);
          batch.push(task(plan.ids.slice(next, upTo)));
          next = upTo;
        }
        outputs.push(...(await Promise.all(batch)));
        if (spec.flushSeconds !== null && Date.now() - lastCommit >= spec.flushSeconds * 1000) end = next;
      }
      if (stopping()) break;
      const computed = outputs.reduce((n, t) => n + t.numRows, 0);
      const data = new arrow.Table(outputs.flatMap((t) => t.batches));
      const addresses = plan.addresses.slice(start, end).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const w = computed > 0 ? await tables.write(entry, spec.branch, () => writeValues(writer, key, data, addresses)) : { versions: [], written: 0 };
      for (const v of w.versions) {
        done.add(v);
        if (tracked) await versions.add(valuesKey, v);
      }
      counts.rows_done += w.written;
      counts.rows_computed += computed;
      counts.rows_skipped += end - start - w.written;
      await job.report({ ...counts, versions: [...done] });
      if (!namedBranch(spec.branch)) tables.evict(entry.objectId);
      lastCommit = Date.now();
      start = end;
    }
  }

  return {
    name: BACKFILL,
    limit: config.backfillJobs,
    interrupted: "resume",
    async start(job) {
      const spec = job.rec.spec;
      let stop = false;
      const done = (async () => {
        const entry = await requireTable(catalog, job.rec.table);
        const t = await tables.open(entry, { branch: spec.branch, fresh: true });
        const vc = virtualColumnOf((await t.schema()).fields, spec.column);
        if (!vc) throw new Error(`column ${JSON.stringify(spec.column)} is no longer a virtual column`);
        if (definitionHash(vc) !== spec.definition) throw new Error(`the definition of column ${JSON.stringify(spec.column)} changed since this backfill was submitted; submit a new backfill`);
        if (runnable(vc) === "sql") await runSql(entry, spec, job);
        else await runUdf(entry, vc, spec, job, () => stop);
      })();
      return {
        done,
        async stop() {
          stop = true;
          await done.catch(() => undefined);
        },
      };
    },
    describe({ spec, progress, startedAt, finishedAt, status }) {
      const p = (progress ?? {}) as Progress;
      const end = finishedAt ?? (status === "Running" ? Date.now() : undefined);
      const seconds = startedAt !== undefined && end !== undefined ? (end - startedAt) / 1000 : 0;
      const str = (v: number | undefined) => (v === undefined ? undefined : String(v));
      return {
        column: spec.column,
        branch: spec.branch ?? undefined,
        where: spec.where ?? undefined,
        read_version: str(p.read_version),
        rows_total: str(p.rows_total),
        rows_done: str(p.rows_done ?? 0),
        rows_computed: str(p.rows_computed ?? 0),
        rows_skipped: str(p.rows_skipped ?? 0),
        versions: (p.versions ?? []).join(","),
        rows_per_second: seconds > 0 ? String(Math.round((p.rows_computed ?? 0) / seconds)) : undefined,
        auto: spec.auto ? "true" : undefined,
      };
    },
  };
}

export const DEFAULT_TASK_SIZE = 2048;
export const DEFAULT_CHECKPOINT = 10_000;

/** Backfill parameters a request may give (lance-namespace `AlterTableBackfillColumnsRequest`). */
export interface BackfillParams {
  where?: string | null;
  read_version?: number | null;
  task_size?: number | null;
  concurrency?: number | null;
  intra_applier_concurrency?: number | null;
  checkpoint_size?: number | null;
  min_checkpoint_size?: number | null;
  max_checkpoint_size?: number | null;
  num_frags?: number | null;
  batch_checkpoint_flush_interval_seconds?: number | null;
}

/** The job spec of a backfill of `vc` (checked by the caller), with the defaults filled in. */
export function backfillSpec(vc: VirtualColumn, branch: string | null, key: string[] | null, p: BackfillParams, workers: number, auto = false): BackfillSpec {
  const lo = p.min_checkpoint_size ?? 1;
  const hi = p.max_checkpoint_size ?? Infinity;
  return {
    column: vc.column,
    branch,
    definition: definitionHash(vc),
    where: p.where ?? null,
    readVersion: p.read_version ?? null,
    taskSize: p.task_size ?? DEFAULT_TASK_SIZE,
    concurrency: (p.concurrency ?? workers) * (p.intra_applier_concurrency ?? 1),
    checkpointSize: Math.max(lo, Math.min(p.checkpoint_size ?? DEFAULT_CHECKPOINT, hi)),
    numFrags: p.num_frags ?? null,
    flushSeconds: p.batch_checkpoint_flush_interval_seconds ?? null,
    key,
    auto,
  };
}

/** A backfill of `column` already Queued or Running on this table and branch. */
export function activeBackfill(jobs: Jobs, id: readonly string[], column: string, branch: string | null): JobRecord | undefined {
  return jobs.active().find((r) => {
    const s = r.spec as BackfillSpec;
    return r.operation === BACKFILL && sameId(r.table, id) && s.column === column && s.branch === branch;
  });
}

export interface AutoBackfill {
  /** A write landed on `entry` (on `branch`): its auto_backfill columns get a follow-up backfill. */
  written(entry: Entry, branch: string | null): void;
  close(): void;
}

/**
 * Follow-up backfills of `auto_backfill` columns: after a write, wait `delayMs` for more writes,
 * then queue one backfill per such column (default rows: missing or stale). While a backfill of the
 * column is still active, check again after another delay rather than pile up jobs.
 */
export function autoBackfill(deps: { jobs: Jobs; tables: Tables; workers: number; delayMs: number }): AutoBackfill {
  const timers = new Map<string, NodeJS.Timeout>();
  const arm = (entry: Entry, branch: string | null) => {
    const k = `${entry.objectId}\u0000${branch ?? ""}`;
    if (timers.has(k)) return;
    const timer = setTimeout(() => {
      timers.delete(k);
      follow(entry, branch).catch((err: unknown) => log.warn("auto backfill not started", { table: entry.objectId, error: String(err) }));
    }, deps.delayMs);
    timer.unref();
    timers.set(k, timer);
  };
  async function follow(entry: Entry, branch: string | null): Promise<void> {
    const t = await deps.tables.open(entry, { branch, fresh: true });
    const fields = (await t.schema()).fields;
    for (const f of fields) {
      const vc = fromFieldMetadata(f.name, f.metadata);
      if (!vc?.autoBackfill || !runnable(vc)) continue;
      if (activeBackfill(deps.jobs, entry.id, vc.column, branch)) {
        arm(entry, branch);
        continue;
      }
      const key = runnable(vc) === "sql" ? null : backfillKey(fields);
      if (runnable(vc) !== "sql" && !key) continue;
      await deps.jobs.submit(BACKFILL, entry.id, backfillSpec(vc, branch, key, {}, deps.workers, true));
    }
  }
  return {
    written: (entry, branch) => arm(entry, branch),
    close() {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
