// Serving indexes kept in the state directory across restarts: one file per table column, a small
// JSON header (whose table data, which column and cached columns, the version it answers at and that
// version's commit time) then the index memory's bytes as they are. A restart loads the file when
// the table still holds that version (same commit time: not a table recreated under the same name)
// and syncs it from there; otherwise the index is built again while LanceDB serves. At a shutdown
// the saved version is tagged (`servingPin`), so maintenance keeps it and every version after it
// until the restart has brought the index forward (docs/design.md, Serving index).
import { createHash } from "node:crypto";
import { mkdir, open, readdir, rename, rm, type FileHandle } from "node:fs/promises";
import path from "node:path";
import type { Entry } from "../catalog/catalog.js";
import { refresh, savedGraphMemory, usedBytes } from "./graph.js";
import type { CachedColumn } from "./rows.js";
import type { IndexedVectors } from "../engine/serving-source.js";
import { createTag, deleteTag, listTags, servingPin, updateTag } from "../engine/refs.js";
import type { TableHandle } from "../engine/tables.js";
import { dataOf, indexOf, indexRows, type ServingIndex } from "./table-index.js";
import type { ServingPool } from "./pool.js";

const MAGIC = "QVSERVE1";

interface Header {
  objectId: string;
  location: string | null;
  column: string;
  metric: IndexedVectors["metric"];
  version: number;
  /** The commit time of `version`, as the table's version list gives it. */
  committed: number;
  columns: CachedColumn[];
  names: string[];
}

/** The file of an index of `data` (`dataOf`: the table's location, so a renamed table keeps its saved index). */
const fileOf = (stateDir: string, data: string, column: string) =>
  path.join(stateDir, "serving", createHash("sha256").update(`${data}\u0000${column}`).digest("hex").slice(0, 32) + ".qvx");

/** Write `ix` (no writer may run meanwhile): to a temporary file, then renamed over the old one. */
export async function saveIndex(stateDir: string, ix: ServingIndex, committed: number): Promise<void> {
  const file = fileOf(stateDir, dataOf(ix.entry), ix.column);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const header: Header = { objectId: ix.entry.objectId, location: ix.entry.location, column: ix.column, metric: ix.metric, version: ix.version, committed, columns: ix.ref.columns, names: ix.names };
  const json = Buffer.from(JSON.stringify(header));
  const head = Buffer.alloc(Math.ceil((12 + json.length) / 8) * 8);
  head.write(MAGIC, 0, "latin1");
  head.writeUInt32LE(json.length, 8);
  json.copy(head, 12);
  refresh(ix.graph);
  const tmp = `${file}.${process.pid}.tmp`;
  const fh = await open(tmp, "w", 0o600);
  try {
    await fh.write(head);
    await fh.write(new Uint8Array(ix.graph.memory.buffer, 0, usedBytes(ix.graph)));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  ix.dirty = false;
}

/** The header of a saved index open as `fh`, and where its index bytes start; null if it is not one. */
async function headerOf(fh: FileHandle): Promise<{ header: Header; at: number } | null> {
  const head = Buffer.alloc(12);
  await fh.read(head, 0, 12, 0);
  if (head.toString("latin1", 0, 8) !== MAGIC) return null;
  const json = Buffer.alloc(head.readUInt32LE(8));
  await fh.read(json, 0, json.length, 12);
  return { header: JSON.parse(json.toString("utf8")) as Header, at: Math.ceil((12 + json.length) / 8) * 8 };
}

/**
 * A saved index of `entry`'s column whose version still has commit time `committed(version)`, if
 * it fits `maxBytes` (its memory may later grow to `ceiling`); null otherwise. The main thread reads
 * the header only; a pool thread reads the index bytes into their memory.
 */
export async function loadIndex(
  pool: ServingPool,
  stateDir: string,
  entry: Entry,
  column: string,
  maxBytes: number,
  ceiling: number,
  key: string,
  committed: (version: number) => Promise<number | null>,
): Promise<ServingIndex | null> {
  const file = fileOf(stateDir, dataOf(entry), column);
  const fh = await open(file, "r").catch(() => null);
  if (!fh) return null;
  try {
    const saved = await headerOf(fh);
    if (!saved) return null;
    const { header, at } = saved;
    if (header.location !== entry.location || header.column !== column || (await committed(header.version)) !== header.committed) {
      await rm(file, { force: true });
      return null;
    }
    const bytes = (await fh.stat()).size - at;
    if (bytes > maxBytes) return null;
    const memory = savedGraphMemory(bytes, Math.max(maxBytes, ceiling));
    await pool.load({ fd: fh.fd, at, bytes, memory });
    const ix = indexOf(entry, column, header.metric, { key, memory, columns: header.columns }, header.names, header.version);
    indexRows(ix, await pool.rows(ix.ref, ix.version));
    return ix;
  } finally {
    await fh.close();
  }
}

/** Forget a table's saved index (the table was dropped, or its index is no longer wanted). */
export const removeSaved = (stateDir: string, data: string, column: string) => rm(fileOf(stateDir, data, column), { force: true });

/** The tables (their `dataOf`) whose indexes are saved here: what a start warms (docs/operations.md, Readiness). */
export async function savedTables(stateDir: string): Promise<Set<string>> {
  const dir = path.join(stateDir, "serving");
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith(".qvx"));
  const found = new Set<string>();
  for (const n of names) {
    // The header alone: the file holds the whole index.
    const fh = await open(path.join(dir, n), "r").catch(() => null);
    if (!fh) continue;
    try {
      const saved = await headerOf(fh);
      if (saved) found.add(dataOf(saved.header));
    } catch {
      continue;
    } finally {
      await fh.close();
    }
  }
  return found;
}

/** Hold `version` of `t` (the one a saved index answers at) from cleanups, by this replica's pin tag. */
export async function pinSaved(t: TableHandle, replica: string, version: number): Promise<void> {
  const tag = servingPin(replica);
  if (tag in (await listTags(t))) await updateTag(t, tag, version);
  else await createTag(t, tag, version);
}

/** Release this replica's pin of `t`, if it holds one. */
export async function unpinSaved(t: TableHandle, replica: string): Promise<void> {
  const tag = servingPin(replica);
  if (tag in (await listTags(t))) await deleteTag(t, tag);
}
