// Child processes for background work (index builds, backfills, view refreshes, maintenance), all speaking the
// job protocol of workers/protocol.ts, started through the launcher (./launcher.ts). LanceDB
// runs its work on native threads of the process that calls it, so work started in the server
// competes with queries on equal terms; in a child process started through `nice`, every thread it
// ever makes runs at the lower priority (a priority set on a pid afterwards reaches only the
// process's main thread).
import { UNUSED_EXIT_MS, type EndMessage, type JobCommand, type MayCommit } from "../../../workers/protocol.js";
import type { Running } from "../jobs.js";
import { launchJob, type JobChild } from "./launcher.js";

/** The niceness of jobs whose work must never slow queries (backfills, refreshes). */
export const LOWEST_PRIORITY = 19;

// A stop lets the step in progress finish; a process still busy after this is killed.
const STOP_DEADLINE_MS = 30_000;

/**
 * Processes started ahead, one per job process module and niceness, for jobs that run often and
 * briefly (maintenance under a write stream, incremental view refreshes): a job takes the one waiting, and the next is started
 * meanwhile, so a job does not wait for a process start (0.3–1.7 s measured on the 2-core machine
 * under load, most of such a job). A waiting process holds no event loop open here, and one left
 * unused ends by itself (workers/processes/job-process.ts); it is taken only well before that.
 */
const spares = new Map<string, { child: JobChild; at: number }>();

function takeSpare(entry: URL, niceness: number): JobChild {
  const key = `${entry.href}\u0000${niceness}`;
  const waiting = spares.get(key);
  spares.set(key, { child: launchJob(entry, niceness), at: Date.now() });
  if (waiting && waiting.child.connected && Date.now() - waiting.at < UNUSED_EXIT_MS / 2) return waiting.child;
  waiting?.child.kill();
  return launchJob(entry, niceness);
}

/** End the processes waiting for a job (the server stops). */
export function stopSpares(): void {
  for (const { child } of spares.values()) child.kill();
  spares.clear();
}

/**
 * Run a job's child process (workers/processes/job-process.ts) at `niceness`: `handle` sees its progress
 * messages one at a time, in order (a step is recorded before the next is handled), and its
 * question before each commit is answered by `mayCommit` after them (false once stopped); `done`
 * settles with the process's end. A stop asks the process to end after its step in progress, or
 * with `stop: "kill"` kills it at once (work that cannot stop halfway, such as an index build).
 * With `spare`, the process is one started ahead, and another is started for the next job.
 */
export function runInBackground<R, M>(
  entry: URL,
  niceness: number,
  request: R,
  handle: (m: M) => Promise<void>,
  opts: { stop?: "after-step" | "kill"; mayCommit?: () => Promise<boolean>; spare?: boolean } = {},
): Running {
  const child = opts.spare ? takeSpare(entry, niceness) : launchJob(entry, niceness);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stopped = false;
  let handled = Promise.resolve();
  const send = (c: JobCommand<R>) => {
    // A process that already went away needs no answer.
    if (child.connected) child.send(c);
  };
  const done = new Promise<void>((resolve, reject) => {
    child.on("message", (m: M | EndMessage | MayCommit) => {
      handled = handled.then(async () => {
        const end = m as EndMessage | MayCommit;
        if (end.type === "done") resolve();
        else if (end.type === "error") reject(new Error(end.message));
        else if (end.type === "may-commit") send({ type: "may-commit", ok: !stopped && (await (opts.mayCommit?.() ?? Promise.resolve(true))) });
        else await handle(m as M);
      });
      handled.catch(reject);
    });
    child.once("exit", (code, signal) => void handled.then(() => reject(new Error(`the job's process ended unexpectedly (${signal ?? `exit code ${code}`})`))));
    child.once("error", reject);
  });
  send({ type: "start", request });
  return {
    done,
    async stop() {
      stopped = true;
      if (opts.stop === "kill") child.kill("SIGKILL");
      else if (child.exitCode === null) send({ type: "stop" });
      const deadline = setTimeout(() => child.kill("SIGKILL"), STOP_DEADLINE_MS);
      await exited;
      clearTimeout(deadline);
      await handled.catch(() => undefined);
    },
  };
}
