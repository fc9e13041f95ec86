// Durable transaction records: one JSON file in Quiver's private directory, rewritten whole on
// every change through write-temp + fsync + rename + fsync(dir), so a crash leaves either the old
// or the new file, never a torn one. Chosen over sql.js: sql.js also persists by exporting the
// whole database to a file (it has no journal), so it would add a wasm runtime and a schema for
// the same write pattern; the record count is small (finished ones are pruned past RETAIN).
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import path from "node:path";
import { serialQueue } from "../util/serial.js";

export const STATUSES = ["Queued", "Running", "Succeeded", "Failed", "Canceled"] as const;
export type TxStatus = (typeof STATUSES)[number];
export const isTerminal = (s: TxStatus) => s === "Succeeded" || s === "Failed" || s === "Canceled";

export interface TxRecord {
  id: string;
  status: TxStatus;
  /** What runs, e.g. "create_index"; selects the runner. */
  operation: string;
  /** The table it acts on (path id). */
  table: string[];
  /** The operation's own inputs (plain JSON), enough to run it again after a restart. */
  spec: Record<string, unknown>;
  /** Properties set through AlterTransaction. */
  properties: Record<string, string>;
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  error?: string;
}

/** Finished records kept; older ones are dropped first. */
const RETAIN = 10_000;

export interface Store {
  all(): TxRecord[];
  get(id: string): TxRecord | undefined;
  /** Apply a change in memory and wait until it is on disk. */
  put(rec: TxRecord): Promise<void>;
  flush(): Promise<void>;
}

function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.tmp`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dir = openSync(path.dirname(file), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

export function openStore(dir: string): Store {
  const file = path.join(dir, "transactions.json");
  const recs = new Map<string, TxRecord>();
  try {
    for (const r of JSON.parse(readFileSync(file, "utf8")) as TxRecord[]) recs.set(r.id, r);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new Error(`cannot read ${file}: ${(err as Error).message}`);
  }
  const serial = serialQueue();
  let pending: Promise<void> | null = null;

  const prune = () => {
    const done = [...recs.values()].filter((r) => isTerminal(r.status));
    if (done.length <= RETAIN) return;
    done.sort((a, b) => (a.finishedAt ?? 0) - (b.finishedAt ?? 0));
    for (const r of done.slice(0, done.length - RETAIN)) recs.delete(r.id);
  };

  // Writes coalesce: a write not yet started covers every change made before it starts.
  const flush = () => {
    pending ??= serial(async () => {
      pending = null;
      prune();
      writeAtomic(file, JSON.stringify([...recs.values()]));
    });
    return pending;
  };

  return {
    all: () => [...recs.values()],
    get: (id) => recs.get(id),
    put(rec) {
      recs.set(rec.id, rec);
      return flush();
    },
    flush,
  };
}
