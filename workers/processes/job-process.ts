// The shared frame of a job's child process (a backfill, a view refresh, an index build): it takes
// one request, runs it, reports progress messages, asks before each commit whether it may still
// commit, and exits when done, when told to stop (after the step in progress), or when the server
// goes away (its IPC channel closes, even on SIGKILL: the job must not outlive it).
import { engineReason } from "../../src/engine/messages.js";
import { createCompute, type Compute } from "../compute-client.js";
import type { ComputeSize, EndMessage, JobCommand, MayCommit } from "../protocol.js";

export type Send<M> = (m: M | EndMessage | MayCommit) => Promise<void>;

/** What a job's run gets besides its request: how to report, whether to stop, whether it may commit now. */
export interface JobControl<M> {
  send: Send<M>;
  /** Told to stop: end after the step in progress. */
  stopping(): boolean;
  /**
   * Asked right before each commit: false once the job was canceled or is no longer this replica's
   * (then commit nothing more and end). The server answers after recording the progress sent before.
   */
  mayCommit(): Promise<boolean>;
}

/**
 * `exitOnStop`, when given and true at the stop, ends the process at once instead: for work that
 * has nothing to finish (it commits only at its end, and a commit under way answers false).
 */
export function serveJob<R, M>(run: (req: R, job: JobControl<M>) => Promise<void>, exitOnStop?: () => boolean): void {
  process.on("disconnect", () => process.exit(1));
  let stopping = false;
  let answer: ((ok: boolean) => void) | null = null;
  const send: Send<M> = (msg) => new Promise((resolve) => process.send!(msg, () => resolve()));
  const mayCommit = () =>
    stopping
      ? Promise.resolve(false)
      : new Promise<boolean>((resolve) => {
          answer = resolve;
          void send({ type: "may-commit" });
        });
  process.on("message", (m: JobCommand<R>) => {
    if (m.type === "may-commit") {
      answer?.(m.ok === true);
      answer = null;
      return;
    }
    if (m.type === "stop") {
      stopping = true;
      if (exitOnStop?.()) process.exit(0);
      return;
    }
    void run(m.request, { send, stopping: () => stopping, mayCommit })
      .then(
        () => send({ type: "done" }),
        (err: unknown) => send({ type: "error", message: engineReason(err) }),
      )
      .finally(() => process.exit(0));
  });
}

/** Run `work` with a compute sandbox of `size` (starting while `work` reads its first rows), closed afterwards. */
export async function withCompute<T>(size: ComputeSize, work: (compute: Compute) => Promise<T>): Promise<T> {
  const compute = createCompute(size);
  compute.warm();
  try {
    return await work(compute);
  } finally {
    await compute.close();
  }
}
