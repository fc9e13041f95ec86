// Durable job records: an append-only log of JSON lines in Quiver's private directory. A change
// appends the changed record's new state (one line) and fsyncs; it never rewrites the others, so
// a running job can record its progress as often as it needs. Loading replays the log (the last
// line of a record wins; a torn last line, left by a crash mid-append, is skipped). When the log
// holds many superseded lines it is compacted: the live records are written to a temp file,
// fsynced and renamed over it. Chosen over sql.js: sql.js persists only by exporting the whole
// database to a file, the very rewrite this log avoids.
import { existsSync, readFileSync, rmSync } from "node:fs";
import { open, rename, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { log } from "../log.js";
import { serialQueue } from "../util/serial.js";

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

function load(file: string, recs: Map<string, JobRecord>): number {
  if (!existsSync(file)) return 0;
  const lines = readFileSync(file, "utf8").split("\n");
  let count = 0;
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      const r = JSON.parse(line) as JobRecord;
      recs.set(r.id, r);
      count++;
    } catch {
      if (i < lines.length - 2) throw new Error(`cannot read ${file}: line ${i + 1} is not a record`);
      log.warn("skipped a torn last line of the job log", { file });
    }
  });
  return count;
}

export function openStore(dir: string): Store {
  const file = path.join(dir, "transactions.jsonl");
  const recs = new Map<string, JobRecord>();
  let lines = load(file, recs);
  // Records of the earlier whole-file format are carried over once.
  const legacy = path.join(dir, "transactions.json");
  if (existsSync(legacy)) {
    for (const r of JSON.parse(readFileSync(legacy, "utf8")) as JobRecord[]) if (!recs.has(r.id)) recs.set(r.id, r);
  }

  const serial = serialQueue();
  let fh: FileHandle | null = null;
  const dirty = new Set<string>();
  let pending: Promise<void> | null = null;

  const prune = () => {
    const done = [...recs.values()].filter((r) => isTerminal(r.status));
    if (done.length <= RETAIN) return;
    done.sort((a, b) => (a.finishedAt ?? 0) - (b.finishedAt ?? 0));
    for (const r of done.slice(0, done.length - RETAIN)) recs.delete(r.id);
  };

  async function compact(): Promise<void> {
    prune();
    const tmp = `${file}.tmp`;
    const out = await open(tmp, "w", 0o600);
    try {
      await out.writeFile([...recs.values()].map((r) => JSON.stringify(r) + "\n").join(""));
      await out.sync();
    } finally {
      await out.close();
    }
    await fh?.close();
    fh = null;
    await rename(tmp, file);
    const d = await open(dir, "r");
    try {
      await d.sync();
    } finally {
      await d.close();
    }
    lines = recs.size;
    dirty.clear();
    rmSync(legacy, { force: true });
  }

  // Changes coalesce: a write not yet started covers every change made before it starts.
  const flush = () => {
    pending ??= serial(async () => {
      pending = null;
      if (lines > COMPACT_FLOOR + COMPACT_FACTOR * recs.size || existsSync(legacy)) return compact();
      const text = [...dirty].map((id) => recs.get(id)).filter((r) => r !== undefined).map((r) => JSON.stringify(r) + "\n").join("");
      lines += dirty.size;
      dirty.clear();
      if (text === "") return;
      fh ??= await open(file, "a", 0o600);
      await fh.appendFile(text);
      await fh.sync();
    });
    return pending;
  };

  return {
    all: () => [...recs.values()],
    get: (id) => recs.get(id),
    put(rec) {
      recs.set(rec.id, rec);
      dirty.add(rec.id);
      return flush();
    },
    flush,
    async close() {
      await flush();
      await serial(async () => {
        await fh?.close();
        fh = null;
      });
    },
  };
}
