// A process started through `diesWithParent` gets the kernel's parent-death signal (SIGKILL, set by
// util-linux's setpriv before it execs the rest): it ends the moment the thread that started it
// does, even when that process was SIGKILLed, and however busy or niced its own event loop is. The
// end of its IPC channel is the only other sign of a parent's death, and that one it must be
// scheduled to read: on a loaded machine a niced job process took over 2 s, long enough for a
// sandbox it started to outlive the server. Without setpriv the command runs as given.
import { existsSync } from "node:fs";

export const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));

/**
 * `argv` (a program and its arguments), started so that it is killed with its parent; `setprivFlags`
 * go to the same setpriv call (a sandbox's change of user).
 */
export function diesWithParent(argv: string[], setprivFlags: string[] = []): string[] {
  return SETPRIV ? [SETPRIV, ...setprivFlags, "--pdeathsig", "KILL", "--", ...argv] : argv;
}
