// The process that starts job processes for the server (src/jobs/kinds/background.ts), started
// once while the server is still small. Starting a process forks its parent first, and a fork holds
// the caller for as long as copying its memory map takes: measured on the 2-core machine, 2 ms for
// a 44 MB process, 5 ms at 123 MB, 37–64 ms at 1 GB and 73–134 ms at 3 GB (Node 20 and 22). The
// server holds the serving indexes, so each job start (maintenance's, under a write stream, every
// few seconds) stopped every search in flight for that long; forked from this small process it
// costs the server one message. Each job process's channel ends here; its messages pass through
// unchanged and in order, both ways. When the server goes away the kernel kills this process, and
// it kills the job processes (workers/parent-death.ts); their channels' end is the sign left where
// setpriv is missing (workers/processes/job-process.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { setPriority } from "node:os";
import { diesWithParent } from "../parent-death.js";
import type { LauncherCommand, LauncherEvent } from "../protocol.js";

const NICE = ["/usr/bin/nice", "/bin/nice"].find((p) => existsSync(p));
const children = new Map<number, ChildProcess>();
const tell = (e: LauncherEvent) => {
  if (process.connected) process.send!(e);
};

function start(id: number, entry: string, niceness: number): void {
  const options = { stdio: ["ignore", "inherit", "inherit", "ipc"] as ["ignore", "inherit", "inherit", "ipc"] };
  const argv = diesWithParent(NICE ? [NICE, "-n", String(niceness), process.execPath, entry] : [process.execPath, entry]);
  const child = spawn(argv[0], argv.slice(1), options);
  children.set(id, child);
  // Without nice(1): lowered afterwards (its main thread only; see src/jobs/kinds/background.ts).
  if (!NICE && child.pid !== undefined) setPriority(child.pid, niceness);
  child.on("message", (m) => tell({ t: "message", id, m }));
  child.once("disconnect", () => tell({ t: "disconnect", id }));
  child.once("error", (err) => {
    tell({ t: "error", id, message: String(err) });
    // Never started: no exit follows.
    if (child.pid === undefined) {
      children.delete(id);
      tell({ t: "exit", id, code: null, signal: null });
    }
  });
  child.once("exit", (code, signal) => {
    children.delete(id);
    tell({ t: "exit", id, code, signal });
  });
}

process.on("message", (c: LauncherCommand) => {
  if (c.t === "spawn") return start(c.id, c.entry, c.niceness);
  const child = children.get(c.id);
  if (!child) return;
  if (c.t === "send") {
    if (child.connected) child.send(c.m as object);
  } else child.kill(c.signal);
});
process.on("disconnect", () => process.exit(0));
