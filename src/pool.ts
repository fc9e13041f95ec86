// The ingest pool: Piscina workers that decode and normalise large Arrow IPC request bodies off the
// event loop (workers/ingest.ts). Queries never use it: LanceDB runs them on its own native threads
// and a worker hop only made them slower (README, Design: Queries).
import { Piscina } from "piscina";
import type { Config } from "./config.js";
import { ApiError, Code, invalid } from "./errors.js";

/** What workers/ingest.ts answers: normalised IPC bytes, or the 400 message for a bad body. */
export type IngestReply = Uint8Array | { error: string };

export interface IngestPool {
  /** Normalised IPC stream bytes of `raw` (which is moved to the worker: do not use it afterwards). */
  ingest(raw: Uint8Array): Promise<Uint8Array>;
  destroy(): Promise<void>;
}

export function createIngestPool(config: Pick<Config, "workers" | "maxQueue">): IngestPool {
  const pool = new Piscina<Uint8Array, IngestReply>({
    // dist/src/pool.js → dist/workers/ingest.js
    filename: new URL("../workers/ingest.js", import.meta.url).href,
    // Workers start on the first large body and retire when uploads stop.
    minThreads: 0,
    maxThreads: config.workers,
    idleTimeout: 60_000,
  });
  // Admission is counted here rather than with Piscina's maxQueue: Piscina 5.3 rejects a task it
  // could not hand to a busy worker at maxQueue 0 yet still runs it later, keeping the pool busy.
  const bound = config.workers + config.maxQueue;
  let admitted = 0;
  return {
    async ingest(raw) {
      if (admitted >= bound) {
        throw new ApiError(Code.ServiceUnavailable, `ingest pool is busy (${config.workers} workers, queue of ${config.maxQueue} full); retry later`);
      }
      // Only a buffer the view spans whole can be transferred (small bodies live in Node's shared pool).
      const own = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength ? raw : raw.slice();
      admitted++;
      let reply: IngestReply;
      try {
        reply = await pool.run(Piscina.move(own) as Uint8Array);
      } finally {
        admitted--;
      }
      if (reply instanceof Uint8Array) return reply;
      throw invalid(reply.error);
    },
    destroy: () => pool.destroy(),
  };
}
