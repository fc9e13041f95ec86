// Rows on their way to a commit, in the form LanceDB's native add and merge take them: an Arrow IPC
// file, written where the rows were decoded (a pool worker for any large body), with what the
// checks before the commit read of them. LanceDB's JavaScript `add` and merge `execute` write the
// Arrow table they are given to an IPC file on the calling thread and copy it twice more; for an
// upload of hundreds of MB that held the event loop for seconds, so commits hand the file straight
// to the native calls instead (writes.ts), and the event loop touches no row or byte of it.
import type * as A from "apache-arrow";
import { ownBuffer } from "../util/own-buffer.js";
import { arrow } from "./arrow.js";
import { schemaFromIpc, schemaToIpc } from "./schema-ipc.js";

export interface Upload {
  /** The columns as sent. */
  schema: A.Schema;
  numRows: number;
  /** Null values in each column of `schema`, in order. */
  nulls: number[];
  /**
   * Bool columns null in every row, left out of `file`: apache-arrow writes them without the
   * values bitmap the engine requires, and an append leaves them to the engine to fill.
   */
  nullBools: string[];
  /** The rows as an Arrow IPC file, without `nullBools`; its own ArrayBuffer, so it can be moved to a worker. */
  file: Uint8Array;
}

/** An Upload as a worker sends it: plain bytes and numbers, the schema as an IPC stream of no rows. */
export type UploadMessage = Omit<Upload, "schema"> & { schema: Uint8Array };

/** `t` as an Upload; O(bytes) (the file is written here), so a worker's work for any large body. */
export function uploadOf(t: A.Table): Upload {
  const nulls = t.schema.fields.map((f) => t.getChild(f.name)!.nullCount);
  const nullBools = t.schema.fields.filter((f, i) => arrow.DataType.isBool(f.type) && t.numRows > 0 && nulls[i] === t.numRows).map((f) => f.name);
  const kept = nullBools.length === 0 ? t : t.select(t.schema.fields.filter((f) => !nullBools.includes(f.name)).map((f) => f.name));
  return { schema: t.schema, numRows: t.numRows, nulls, nullBools, file: ownBuffer(arrow.tableToIPC(kept, "file")) };
}

export const toMessage = (u: Upload): UploadMessage => ({ ...u, schema: schemaToIpc(u.schema) });

export const fromMessage = (m: UploadMessage): Upload => ({ ...m, schema: schemaFromIpc(m.schema) });

/** The rows of an upload holding no all-null bool column, read in place (views of its file, no copy). */
export const rowsOf = (u: Upload): A.Table => arrow.tableFromIPC(u.file);
