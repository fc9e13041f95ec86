// Child processes for background work (index builds, backfills). LanceDB runs its work on native
// threads of the process that calls it, so work started in the server competes with queries on
// equal terms; in a child process started through `nice`, every thread it ever makes runs at the
// lower priority (a priority set on a pid afterwards reaches only the process's main thread).
import { fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { setPriority } from "node:os";
import { fileURLToPath } from "node:url";

const NICE = ["/usr/bin/nice", "/bin/nice"].find((p) => existsSync(p));

/** Start `entry` (a built module) with an IPC channel, at `niceness`. */
export function startBackground(entry: URL, niceness: number): ChildProcess {
  const stdio: ["ignore", "inherit", "inherit", "ipc"] = ["ignore", "inherit", "inherit", "ipc"];
  if (NICE) return spawn(NICE, ["-n", String(niceness), process.execPath, fileURLToPath(entry)], { stdio });
  const child = fork(entry, [], { stdio });
  if (child.pid !== undefined) setPriority(child.pid, niceness);
  return child;
}
