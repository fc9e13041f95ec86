// Job processes started through the launcher (workers/processes/launcher.ts), a small process the
// server starts first, so that no job start forks the server itself (a fork holds the caller in
// proportion to its memory: tens of milliseconds a gigabyte, every search in flight waiting). A job
// process is seen here as its channel and its end, the parts of a ChildProcess that
// ./background.ts uses. The launcher gets the server's environment without its
// QUIVER_* variables (API keys, JWT secrets), and so do the job processes it starts; an object
// store's credentials (AWS_*, AZURE_*, ...) must still reach LanceDB.
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { fileURLToPath } from "node:url";
import { diesWithParent } from "../../../workers/parent-death.js";
import type { LauncherCommand, LauncherEvent } from "../../../workers/protocol.js";

/** A job process: `message`, `exit` (code, signal) and `error` events; its channel's state; send and kill. */
export type JobChild = EventEmitter & {
  connected: boolean;
  exitCode: number | null;
  send(m: unknown): void;
  kill(signal?: NodeJS.Signals): void;
};

// dist/src/jobs/kinds/launcher.js → dist/workers/processes/launcher.js
const LAUNCHER = new URL("../../../workers/processes/launcher.js", import.meta.url);

let launcher: { proc: ChildProcess; children: Map<number, JobChild> } | null = null;
let nextId = 1;

/** The server's environment without Quiver's own variables. */
function jobEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !k.toUpperCase().startsWith("QUIVER_")));
}

/** Start the launcher now, while this process is small (else the first job start does). */
export function startLauncher(): void {
  running();
}

function running(): NonNullable<typeof launcher> {
  if (launcher?.proc.connected) return launcher;
  // Killed by the kernel with the server, and the job processes with it (workers/parent-death.ts).
  const argv = diesWithParent([process.execPath, ...process.execArgv, fileURLToPath(LAUNCHER)]);
  const proc = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "inherit", "inherit", "ipc"], env: jobEnvironment() });
  // It never holds the server's event loop open; the server's own handles do while jobs run.
  proc.unref();
  proc.channel?.unref();
  const children = new Map<number, JobChild>();
  const l = { proc, children };
  proc.on("message", (e: LauncherEvent) => {
    const child = children.get(e.id);
    if (!child) return;
    if (e.t === "message") child.emit("message", e.m);
    else if (e.t === "disconnect") child.connected = false;
    // A spare waiting for a job listens to nothing yet: its failure shows when it is taken.
    else if (e.t === "error") child.listenerCount("error") > 0 && child.emit("error", new Error(e.message));
    else ended(child, e.id, e.code, e.signal);
  });
  // A launcher that went away took its job processes' channels with it (they end): each ends here too.
  proc.once("exit", () => {
    if (launcher === l) launcher = null;
    for (const [id, child] of children) ended(child, id, null, "SIGKILL");
  });
  launcher = l;
  return l;

  function ended(child: JobChild, id: number, code: number | null, signal: NodeJS.Signals | null) {
    children.delete(id);
    child.connected = false;
    child.exitCode = code;
    child.emit("exit", code, signal);
  }
}

/** Start `entry` (a built job process module) at `niceness`, through the launcher. */
export function launchJob(entry: URL, niceness: number): JobChild {
  const l = running();
  const id = nextId++;
  const command = (c: LauncherCommand) => {
    if (l.proc.connected) l.proc.send(c);
  };
  const child: JobChild = Object.assign(new EventEmitter(), {
    connected: true,
    exitCode: null,
    send: (m: unknown) => command({ t: "send", id, m }),
    kill: (signal: NodeJS.Signals = "SIGTERM") => command({ t: "kill", id, signal }),
  });
  l.children.set(id, child);
  command({ t: "spawn", id, entry: fileURLToPath(entry), niceness });
  return child;
}

/** End the launcher (the server stops, after its jobs did). */
export function stopLauncher(): void {
  launcher?.proc.kill();
  launcher = null;
}
