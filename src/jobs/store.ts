// Durable job records: an append-only log of JSON lines in Quiver's private directory
// (src/util/json-log.ts). A change appends the changed record's new state (one line) and fsyncs;
// it never rewrites the others, so a running job can record its progress as often as it needs.
// Loading replays the log (the last line of a record wins). When the log holds many superseded
// lines it is compacted: the live records replace it atomically. Chosen over sql.js: sql.js
// persists only by exporting the whole database to a file, the very rewrite this log avoids.
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { log } from "../log.js";
import { openJsonLog } from "../util/json-log.js";

export const STATUSES = ["Queued", "Running", "Succeeded", "Failed", "Canceled"] as const;
export type JobStatus = (typeof STATUSES)[number];
export const isTerminal = (s: JobStatus) => s === "Succeeded" || s === "Failed" || s === "Canceled";

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
}

/** Finished records kept; older ones are dropped first when the log is compacted. */
const RETAIN = 10_000;
/** Compact once superseded lines outnumber live records by this factor (and a floor). */
const COMPACT_FACTOR = 4;
const COMPACT_FLOOR = 2_000;

export interface Store {
  all(): JobRecord[];
  get(id: string): JobRecord | undefined;
  /** Record the record's current state; resolves when it is on disk. */
  put(rec: JobRecord): Promise<void>;
  /** Resolves when every change made so far is on disk. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export function openStore(dir: string): Store {
  const jsonLog = openJsonLog<JobRecord>(path.join(dir, "transactions.jsonl"), () => log.warn("skipped a torn last line of the job log", { dir }));
  const recs = new Map<string, JobRecord>();
  for (const r of jsonLog.loaded) recs.set(r.id, r);
  // Records of the earlier whole-file format are carried over once (the first write compacts).
  const legacy = path.join(dir, "transactions.json");
  let migrate = existsSync(legacy);
  if (migrate) {
    for (const r of JSON.parse(readFileSync(legacy, "utf8")) as JobRecord[]) if (!recs.has(r.id)) recs.set(r.id, r);
  }
  let lines = jsonLog.loaded.length;

  const prune = () => {
    const done = [...recs.values()].filter((r) => isTerminal(r.status));
    if (done.length <= RETAIN) return;
    done.sort((a, b) => (a.finishedAt ?? 0) - (b.finishedAt ?? 0));
    for (const r of done.slice(0, done.length - RETAIN)) recs.delete(r.id);
  };

  const compact = async () => {
    prune();
    await jsonLog.rewrite([...recs.values()]);
    lines = recs.size;
    if (migrate) rmSync(legacy, { force: true });
    migrate = false;
  };

  return {
    all: () => [...recs.values()],
    get: (id) => recs.get(id),
    put(rec) {
      recs.set(rec.id, rec);
      if (migrate || ++lines > COMPACT_FLOOR + COMPACT_FACTOR * recs.size) return compact();
      return jsonLog.append([rec]);
    },
    flush: () => jsonLog.append([]),
    close: () => jsonLog.close(),
  };
}
