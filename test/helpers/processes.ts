// Live processes read from /proc, for tests that find a server's job processes and sandboxes.
// A job process is a server's grandchild: started by its launcher (src/jobs/kinds/launcher.ts).
import { readdirSync, readFileSync } from "node:fs";

/** A live process: its parent, state (R, S, T, …), CPU time used and command line. */
export interface ProcessInfo {
  ppid: number;
  state: string;
  cpuMs: number;
  cmd: string[];
}

/** Each live process, by pid. */
export function processTable(): Map<number, ProcessInfo> {
  const out = new Map<number, ProcessInfo>();
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      // The command's name may hold spaces and parentheses; the fields after its last ")" do not.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(pid, { ppid: Number(f[1]), state: f[0], cpuMs: (Number(f[11]) + Number(f[12])) * 10, cmd: readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0") });
    } catch {
      // Ended while being read.
    }
  }
  return out;
}

/** Whether a command line runs `script` (a file name, e.g. "backfill.js"). */
export const runs = (cmd: string[], script: string) => cmd.some((a) => a.endsWith(`/${script}`));

/** Pids of the live processes running `script` that descend from `root`. */
export function processesRunning(script: string, root: number, table = processTable()): number[] {
  const below = (pid: number) => {
    for (let p = table.get(pid)?.ppid, depth = 0; p !== undefined && p > 1 && depth < 8; p = table.get(p)?.ppid, depth++) if (p === root) return true;
    return false;
  };
  return [...table].filter(([pid, p]) => runs(p.cmd, script) && below(pid)).map(([pid]) => pid);
}
