// A durable append-only log of JSON lines: appends are coalesced into one write and one fsync; the
// whole log can be replaced atomically (temp file, fsync, rename, fsync of the directory). Loading
// skips a torn last line, which only a crash in the middle of an append can leave.
import { existsSync, readFileSync } from "node:fs";
import { open, rename, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { serialQueue } from "./serial.js";

export interface JsonLog<T> {
  /** The lines read when the log was opened, oldest first. */
  readonly loaded: T[];
  /** Append lines; resolves once they are on disk. Appends made before a pending write join it. */
  append(items: T[]): Promise<void>;
  /** Replace the whole log with `items`, atomically. */
  rewrite(items: T[]): Promise<void>;
  close(): Promise<void>;
}

function load<T>(file: string, onTorn: () => void): T[] {
  if (!existsSync(file)) return [];
  const lines = readFileSync(file, "utf8").split("\n");
  const out: T[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      if (i < lines.length - 2) throw new Error(`cannot read ${file}: line ${i + 1} is not JSON`);
      onTorn();
    }
  });
  return out;
}

const text = <T>(items: T[]) => items.map((r) => JSON.stringify(r) + "\n").join("");

export function openJsonLog<T>(file: string, onTorn: () => void = () => undefined): JsonLog<T> {
  const loaded = load<T>(file, onTorn);
  const serial = serialQueue();
  let fh: FileHandle | null = null;
  let pending: T[] = [];
  let flushing: Promise<void> | null = null;

  const flush = () => {
    flushing ??= serial(async () => {
      flushing = null;
      const batch = pending;
      pending = [];
      if (batch.length === 0) return;
      fh ??= await open(file, "a", 0o600);
      await fh.appendFile(text(batch));
      await fh.sync();
    });
    return flushing;
  };

  return {
    loaded,
    append(items) {
      pending.push(...items);
      return flush();
    },
    rewrite: (items) =>
      serial(async () => {
        const tmp = `${file}.tmp`;
        const out = await open(tmp, "w", 0o600);
        try {
          await out.writeFile(text(items));
          await out.sync();
        } finally {
          await out.close();
        }
        await fh?.close();
        fh = null;
        await rename(tmp, file);
        const dir = await open(path.dirname(file), "r");
        try {
          await dir.sync();
        } finally {
          await dir.close();
        }
      }),
    close: async () => {
      await flush();
      await serial(async () => {
        await fh?.close();
        fh = null;
      });
    },
  };
}

/**
 * A log an earlier release kept in the state directory whose records now live in the shared store:
 * its lines are given to `move` once, then the file is renamed `<file>.migrated`, so a later start
 * moves nothing.
 */
export async function migrateLog<T>(file: string, move: (lines: T[]) => Promise<void>): Promise<void> {
  if (!existsSync(file)) return;
  await move(load<T>(file, () => undefined));
  await rename(file, `${file}.migrated`);
}
