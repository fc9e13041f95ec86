// The shared frame of a job's child process (a backfill, a view refresh): it takes one request,
// runs it with a worker pool of its own, reports progress messages, and exits when done, when
// told to stop (after the step in progress), or when the server goes away (its IPC channel closes,
// even on SIGKILL: the job must not outlive it).
import { engineReason } from "../src/engine/messages.js";
import { createWorkerPool, type WorkerPool } from "./pool.js";

/** The end of a run, after any number of progress messages of the job's own shape. */
export type EndMessage = { type: "done" } | { type: "error"; message: string };

export interface JobProcessRequest {
  workers: number;
  workerHeapMb: number;
}

export type Send<M> = (m: M | EndMessage) => Promise<void>;

/**
 * `exitOnStop`, when given and true at the stop, ends the process at once instead: for work that
 * has nothing to finish (it commits only at its end, and a commit under way answers false).
 */
export function serveJob<R extends JobProcessRequest, M>(run: (req: R, pool: WorkerPool, send: Send<M>, stopping: () => boolean) => Promise<void>, exitOnStop?: () => boolean): void {
  process.on("disconnect", () => process.exit(1));
  let stopping = false;
  process.on("message", (m: { type: "start"; request: R } | { type: "stop" }) => {
    if (m.type === "stop") {
      stopping = true;
      if (exitOnStop?.()) process.exit(0);
      return;
    }
    const req = m.request;
    const send: Send<M> = (msg) => new Promise((resolve) => process.send!(msg, () => resolve()));
    const pool = createWorkerPool({ workers: req.workers, maxQueue: 0, ingestInlineMaxBytes: 0, workerHeapMb: req.workerHeapMb });
    void run(req, pool, send, () => stopping)
      .then(
        () => send({ type: "done" }),
        (err: unknown) => send({ type: "error", message: engineReason(err) }),
      )
      .finally(() => pool.destroy().finally(() => process.exit(0)));
  });
}
