// Child processes for background work (index builds, backfills). LanceDB runs its work on native
// threads of the process that calls it, so work started in the server competes with queries on
// equal terms; in a child process started through `nice`, every thread it ever makes runs at the
// lower priority (a priority set on a pid afterwards reaches only the process's main thread).
import { fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { setPriority } from "node:os";
import { fileURLToPath } from "node:url";
import type { EndMessage } from "../../../workers/processes/job-process.js";
import type { Running } from "../jobs.js";

const NICE = ["/usr/bin/nice", "/bin/nice"].find((p) => existsSync(p));

/** The niceness of jobs whose work must never slow queries (backfills, refreshes). */
export const LOWEST_PRIORITY = 19;

/** Start `entry` (a built module) with an IPC channel, at `niceness`. */
export function startBackground(entry: URL, niceness: number): ChildProcess {
  const stdio: ["ignore", "inherit", "inherit", "ipc"] = ["ignore", "inherit", "inherit", "ipc"];
  if (NICE) return spawn(NICE, ["-n", String(niceness), process.execPath, fileURLToPath(entry)], { stdio });
  const child = fork(entry, [], { stdio });
  if (child.pid !== undefined) setPriority(child.pid, niceness);
  return child;
}

// A stop lets the step in progress finish; a process still busy after this is killed.
const STOP_DEADLINE_MS = 30_000;

/**
 * Run a job's child process (workers/processes/job-process.ts) at `niceness`: `handle` sees its progress
 * messages one at a time, in order (a step is recorded before the next is handled); `done`
 * settles with the process's end.
 */
export function runInBackground<M>(entry: URL, niceness: number, request: object, handle: (m: M) => Promise<void>): Running {
  const child = startBackground(entry, niceness);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let handled = Promise.resolve();
  const done = new Promise<void>((resolve, reject) => {
    child.on("message", (m: M | EndMessage) => {
      handled = handled.then(async () => {
        const end = m as EndMessage;
        if (end.type === "done") resolve();
        else if (end.type === "error") reject(new Error(end.message));
        else await handle(m as M);
      });
      handled.catch(reject);
    });
    child.once("exit", (code, signal) => void handled.then(() => reject(new Error(`the job's process ended unexpectedly (${signal ?? `exit code ${code}`})`))));
    child.once("error", reject);
  });
  child.send({ type: "start", request });
  return {
    done,
    async stop() {
      if (child.exitCode === null && child.connected) child.send({ type: "stop" });
      const deadline = setTimeout(() => child.kill("SIGKILL"), STOP_DEADLINE_MS);
      await exited;
      clearTimeout(deadline);
      await handled.catch(() => undefined);
    },
  };
}
