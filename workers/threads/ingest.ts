// Pool task "ingest": decode, check and normalise one Arrow IPC request body with the same function
// the main thread uses for small bodies, and hand back only bytes, moved.
import { Piscina } from "piscina";
import { normaliseIpc } from "../../src/engine/ipc-in.js";
import { arrow } from "../../src/engine/arrow.js";
import type { DecodeLimits } from "../../src/engine/rows-in.js";
import { ApiError } from "../../src/errors.js";
import { ownBuffer } from "../../src/util/own-buffer.js";

/** A request body, the most bytes it may decode to (--max-decoded-body) and one value may hold (--max-value-bytes). */
export interface IngestTask extends DecodeLimits {
  body: Uint8Array;
}

/** Normalised IPC bytes, or the 400 message for a bad body. */
export type IngestReply = Uint8Array | { error: string };

export function ingest({ body, ...limits }: IngestTask): IngestReply {
  try {
    const { table, stream } = normaliseIpc(body, limits);
    // A stream that needed no change goes back as it is (the body, or its decompressed form): no
    // re-encode. A small decompressed stream sits in Node's buffer pool, which cannot be moved.
    return Piscina.move(ownBuffer(stream ?? arrow.tableToIPC(table, "stream"))) as Uint8Array;
  } catch (err) {
    // A bad body is data for a 400, not a worker failure; anything else is a bug and rejects (500).
    if (err instanceof ApiError) return { error: err.message };
    throw err;
  }
}
