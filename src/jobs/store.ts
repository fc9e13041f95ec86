// Durable job records, shared by every replica of one data directory: a system table (one row a
// job: its state as JSON plus the columns conditions test) read at its latest commit. Every change
// is a compare-and-swap on the record's revision, so replicas that race over one record (a claim,
// a cancel, a heartbeat, progress) each see the other's commit and decide again. Exclusive slots
// (one backfill per column, one refresh per view) are rows of a second table taken by
// insert-if-absent, so two replicas submitting at once get one winner.
//
// A mirror of the records this process has seen answers the scheduler's synchronous questions; the
// job loop re-reads the active records every poll, and describe and list read the table.
import { existsSync, readFileSync, renameSync } from "node:fs";
import path from "node:path";
import { objectIdOf } from "../catalog/names.js";
import { wallClock } from "../util/clock.js";
import { sqlString, type SystemRow, type SystemTable, type SystemTables } from "../util/system-table.js";

export const STATUSES = ["Queued", "Running", "Succeeded", "Failed", "Canceled"] as const;
export type JobStatus = (typeof STATUSES)[number];
export const isTerminal = (s: JobStatus) => s === "Succeeded" || s === "Failed" || s === "Canceled";

/** Which replica runs a Running job, until when (renewed by its heartbeats). */
export interface Lease {
  replica: string;
  expires: number;
}

export interface JobRecord {
  id: string;
  status: JobStatus;
  /** The job kind, e.g. "create_index"; selects what runs it. */
  operation: string;
  /** The table (or view) it acts on (path id). */
  table: string[];
  /**
   * Who it runs for: the submitting credential's stable id (src/auth/principal.ts, Principal.key),
   * or `auto:<table>` for follow-up work Quiver queues itself. Absent on records of older versions.
   */
  owner?: string;
  /** The job's own inputs (plain JSON), enough to run it again after a restart. */
  spec: Record<string, unknown>;
  /** What the kind recorded while running (counters, checkpoint), plain JSON. */
  progress?: Record<string, unknown>;
  /** Properties set through AlterTransaction. */
  properties: Record<string, string>;
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  error?: string;
  /** Held while Running: the replica running it. */
  lease?: Lease;
  /** The replica that runs it, or ran it last (its id). */
  replica?: string;
  /**
   * When a cancel was asked of it while Running: its run stops (committing nothing more), and only
   * then does it become Canceled, with its counts as committed and its finishedAt after its last commit.
   */
  cancelAt?: number;
  /** Why Quiver itself asked the cancel (the run passed max-job-seconds): the record then ends Failed with this as its error. */
  cancelReason?: string;
  /** When it was queued again after its replica shut down (createdAt otherwise). */
  queuedAt?: number;
  /** The exclusive slot the job holds while it is not finished (see Store.hold). */
  slot?: string;
  /** Revision, raised by every stored change (the compare-and-swap's token). */
  rev?: number;
}

/** Finished records kept; older ones are deleted when a prune finds more. */
const RETAIN = 10_000;
/** A change that lost this many races in a row gives up (replicas do not change one record that often). */
const MAX_TRIES = 20;

/** How long a slot whose job has no record yet counts as held (its submit stores the record next). */
const SLOT_GRACE_MS = 30_000;

/** Records of one kind and/or one table, and/or only the Queued and Running ones, read without parsing the others. */
export interface JobFilter {
  operation?: string;
  table?: readonly string[];
  active?: boolean;
}

const ACTIVE = "status = 'Queued' OR status = 'Running'";

export interface Store {
  /** Records this process has seen, as last read or written. */
  mirrored(): JobRecord[];
  /** The record as stored now (refreshing the mirror). */
  read(id: string): Promise<JobRecord | undefined>;
  /** Every stored record, or those the filter selects (refreshing the mirror). */
  readAll(of?: JobFilter): Promise<JobRecord[]>;
  /** The Queued and Running records as stored now (refreshing the mirror). */
  readActive(): Promise<JobRecord[]>;
  insert(rec: JobRecord): Promise<void>;
  /**
   * Apply `change` to the stored record (a copy; return undefined to leave it as it is) and store
   * the result if nobody changed the record meanwhile, else read it again and retry. Resolves with
   * what is stored after (undefined: there is no such record).
   */
  update(id: string, change: (r: JobRecord) => JobRecord | undefined): Promise<JobRecord | undefined>;
  /**
   * update() of several records in one commit (each row guarded by its own revision): the records
   * a racing change reached first are read again and changed in the next commit. Resolves with
   * what is stored after, in no order (records not stored are left out).
   */
  updateMany(ids: readonly string[], change: (r: JobRecord) => JobRecord | undefined): Promise<JobRecord[]>;
  /** Take `slot` for job `id`: null when taken, else the id of the live job holding it. */
  hold(slot: string, id: string): Promise<string | null>;
  /** Give `slot` back if job `id` holds it. */
  release(slot: string, id: string): Promise<void>;
  /** Delete finished records past the retention, oldest first. */
  prune(): Promise<void>;
}

const rowOf = (r: JobRecord): SystemRow => ({
  key: r.id,
  status: r.status,
  operation: r.operation,
  table_id: objectIdOf(r.table),
  rev: r.rev ?? 0,
  created_at: r.createdAt,
  finished_at: r.finishedAt ?? null,
  doc: JSON.stringify(r),
});
const recOf = (row: SystemRow): JobRecord => JSON.parse(String(row.doc)) as JobRecord;

export async function openStore(system: SystemTables, stateDir: string): Promise<Store> {
  const [jobs, slots] = await Promise.all([
    system.open("jobs", [
      { name: "status", type: "string" },
      { name: "operation", type: "string" },
      { name: "table_id", type: "string" },
      { name: "rev", type: "number" },
      { name: "created_at", type: "number" },
      { name: "finished_at", type: "number" },
    ]),
    system.open("job_slots", [
      { name: "job", type: "string" },
      { name: "at", type: "number" },
    ]),
  ]);
  const mirror = new Map<string, JobRecord>();
  // A read that began before one of this process's own changes may end after it: the mirror keeps
  // the newer revision.
  const seen = (rows: SystemRow[]) => rows.map((row) => {
    const r = recOf(row);
    const known = mirror.get(r.id);
    if (known && (known.rev ?? 0) > (r.rev ?? 0)) return known;
    mirror.set(r.id, r);
    return r;
  });
  await migrateLocalLog(jobs, stateDir);
  seen(await jobs.select());

  const read = async (id: string) => {
    const [r] = seen(await jobs.select(`key = ${sqlString(id)}`));
    if (!r) mirror.delete(id);
    return r;
  };

  return {
    mirrored: () => [...mirror.values()],
    read,
    async readAll(of = {}) {
      const where = [
        of.operation !== undefined && `operation = ${sqlString(of.operation)}`,
        of.table && `table_id = ${sqlString(objectIdOf(of.table))}`,
        of.active && `(${ACTIVE})`,
      ].filter(Boolean).join(" AND ");
      if (where) return seen(await jobs.select(where));
      const all = seen(await jobs.select());
      const ids = new Set(all.map((r) => r.id));
      for (const id of mirror.keys()) if (!ids.has(id)) mirror.delete(id);
      return all;
    },
    async readActive() {
      const active = seen(await jobs.select(ACTIVE));
      // Records that left the active set elsewhere: read what they became.
      const ids = new Set(active.map((r) => r.id));
      const left = [...mirror.values()].filter((r) => !isTerminal(r.status) && !ids.has(r.id)).map((r) => r.id);
      if (left.length) seen(await jobs.select(`key IN (${left.map(sqlString).join(", ")})`));
      return active;
    },
    async insert(rec) {
      rec.rev = 0;
      await jobs.insertIfAbsent([rowOf(rec)]);
      mirror.set(rec.id, rec);
    },
    async update(id, change) {
      for (let i = 0; i < MAX_TRIES; i++) {
        const now = await read(id);
        if (!now) return undefined;
        const next = change(structuredClone(now));
        if (!next) return now;
        next.rev = (now.rev ?? 0) + 1;
        if ((await jobs.updateIf([rowOf(next)], `target.rev = ${now.rev ?? 0}`)) === 1) {
          mirror.set(id, next);
          return next;
        }
      }
      throw new Error(`job record ${id}: gave up after ${MAX_TRIES} racing changes`);
    },
    async updateMany(ids, change) {
      if (ids.length === 0) return [];
      const where = `key IN (${ids.map(sqlString).join(", ")})`;
      for (let i = 0; i < MAX_TRIES; i++) {
        const now = seen(await jobs.select(where));
        const next = now.flatMap((r) => {
          const n = change(structuredClone(r));
          return n ? [{ ...n, rev: (r.rev ?? 0) + 1 }] : [];
        });
        if (next.length === 0) return now;
        // Each row's own revision: a row whose stored revision moved on is left as it is.
        if ((await jobs.updateIf(next.map(rowOf), "target.rev + 1 = source.rev")) === next.length) {
          for (const n of next) mirror.set(n.id, n);
          return now.map((r) => next.find((n) => n.id === r.id) ?? r);
        }
      }
      throw new Error(`job records ${ids.join(", ")}: gave up after ${MAX_TRIES} racing changes`);
    },
    async hold(slot, id) {
      for (let i = 0; i < MAX_TRIES; i++) {
        const mine = { key: slot, job: id, at: wallClock(), doc: null };
        if ((await slots.insertIfAbsent([mine])) === 1) return null;
        const [row] = await slots.select(`key = ${sqlString(slot)}`);
        if (!row) continue;
        const holder = String(row.job);
        const rec = await read(holder);
        // A holder's record is stored just after its slot is taken: a moment without one is no end.
        if (rec ? !isTerminal(rec.status) : wallClock() - Number(row.at) < SLOT_GRACE_MS) return holder;
        // Its job ended without giving the slot back (its replica died): take the slot over.
        if ((await slots.updateIf([mine], `target.job = ${sqlString(holder)}`)) === 1) return null;
      }
      throw new Error(`job slot ${slot}: gave up after ${MAX_TRIES} racing claims`);
    },
    release: (slot, id) => slots.deleteWhere(`key = ${sqlString(slot)} AND job = ${sqlString(id)}`),
    async prune() {
      const done = (await jobs.select("finished_at IS NOT NULL")).map((row) => Number(row.finished_at)).sort((a, b) => b - a);
      if (done.length <= RETAIN) return;
      await jobs.deleteWhere(`finished_at IS NOT NULL AND finished_at < ${done[RETAIN - 1]}`);
      for (const [id, r] of mirror) if (r.finishedAt !== undefined && r.finishedAt < done[RETAIN - 1]) mirror.delete(id);
    },
  };
}

/** Records of the earlier local log (`transactions.jsonl`, one JSON line a change) move into the table once. */
async function migrateLocalLog(jobs: SystemTable, stateDir: string): Promise<void> {
  const file = path.join(stateDir, "transactions.jsonl");
  if (!existsSync(file)) return;
  const last = new Map<string, JobRecord>();
  for (const line of readFileSync(file, "utf8").split("\n")) {
    try {
      const r = JSON.parse(line) as JobRecord;
      last.set(r.id, r);
    } catch {
      // a blank or torn last line
    }
  }
  await jobs.insertIfAbsent([...last.values()].map(rowOf));
  renameSync(file, `${file}.migrated`);
}
