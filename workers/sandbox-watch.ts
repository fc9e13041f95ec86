// What the owner of a compute sandbox sees of it from outside, in /proc (Linux): whether it is
// stopped, its threads, its CPU time, its writable memory. Read by the owner, never reported by the sandbox, so escaped
// code cannot lie about it.
import { readFileSync } from "node:fs";

export interface ProcessLook {
  /** One letter: R running, S sleeping, T stopped, t traced, Z zombie... */
  state: string;
  threads: number;
  /** User and system CPU time, ms. */
  cpuMs: number;
}

// Linux reports CPU times in USER_HZ ticks, 100 a second on every architecture Node runs on.
const TICK_MS = 10;

/** Process `pid` as /proc/<pid>/stat shows it; null when it is gone (or there is no /proc). */
export function lookAt(pid: number): ProcessLook | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // The command name is in parentheses and may hold anything: the fields follow its last ")".
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Fields from the third on: state (3), utime (14), stime (15), num_threads (20).
  return { state: f[0], threads: Number(f[17]), cpuMs: (Number(f[11]) + Number(f[12])) * TICK_MS };
}

/** The one child of `pid` (the sandbox's node under unshare), or null. */
export function childOf(pid: number): number | null {
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
    return kids.length === 1 ? kids[0] : null;
  } catch {
    return null;
  }
}

/** Process `pid`'s writable memory (VmData: what RLIMIT_DATA bounds), bytes; null when it is gone. */
export function writableBytes(pid: number): number | null {
  try {
    const kb = /^VmData:\s*(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return kb ? Number(kb[1]) * 1024 : null;
  } catch {
    return null;
  }
}
