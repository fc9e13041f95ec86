// Pool task "ingest": decode, check and normalise one Arrow IPC request body with the same function
// the main thread uses for small bodies, and hand back only bytes, moved.
import { Piscina } from "piscina";
import { normaliseIpc } from "../../src/engine/ipc-in.js";
import { arrow } from "../../src/engine/arrow.js";
import { ApiError } from "../../src/errors.js";

/** Normalised IPC bytes, or the 400 message for a bad body. */
export type IngestReply = Uint8Array | { error: string };

export function ingest(raw: Uint8Array): IngestReply {
  try {
    const { table, rewritten } = normaliseIpc(raw);
    // Unchanged bodies go back as they came: no re-encode.
    return Piscina.move(rewritten ? arrow.tableToIPC(table, "stream") : raw) as Uint8Array;
  } catch (err) {
    // A bad body is data for a 400, not a worker failure; anything else is a bug and rejects (500).
    if (err instanceof ApiError) return { error: err.message };
    throw err;
  }
}
