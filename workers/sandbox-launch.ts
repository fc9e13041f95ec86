// How the compute sandbox process (workers/processes/compute.ts) is started, so that an escape from
// the JavaScript sandbox inside it gains nothing (docs/security.md, "Where untrusted code runs"):
// - an empty environment: no QUIVER_* variable, no key, nothing of the server's;
// - Node's permission model: reads only of Quiver's own code (dist/ and node_modules/ of the
//   install, not the data directory, key files or configuration), worker threads for its pool,
//   and nothing else: no file writes, no child processes, no native addons;
// - as root: under uid/gid 65534 (nobody), in a network namespace of its own (`unshare -n`), so it
//   reaches no address, not even loopback; where either is unavailable (no unshare, or an install
//   that uid 65534 cannot read, such as one under a 0700 directory), one log line says so.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { log } from "../src/log.js";

const UNPRIVILEGED = 65534;
const find = (names: string[]) => names.find((p) => existsSync(p));
const UNSHARE = find(["/usr/bin/unshare", "/bin/unshare"]);
const SETPRIV = find(["/usr/bin/setpriv", "/bin/setpriv"]);

/** The folders the sandbox may read: the built code (dist/) and the install's node_modules/. */
function readablePaths(): string[] {
  // dist/workers/sandbox-launch.js → dist/
  const dist = fileURLToPath(new URL("../", import.meta.url));
  const piscina = createRequire(import.meta.url).resolve("piscina");
  const modules = piscina.slice(0, piscina.lastIndexOf(`${path.sep}node_modules${path.sep}`) + "/node_modules/".length);
  // A node_modules/ next to the install that is a symlink (a worktree's, say) is stat-ed by the
  // module resolver before it follows the link: its own path must be readable too.
  const beside = path.resolve(dist, "..", "node_modules");
  return beside === modules.replace(/[\\/]$/, "") ? [dist, modules] : [dist, modules, beside];
}

/** Node's flags for the sandbox: the permission model (its flag's name depends on the version). */
function sandboxFlags(): string[] {
  const major = Number(process.versions.node.split(".")[0]);
  return [
    major >= 22 ? "--permission" : "--experimental-permission",
    ...readablePaths().map((p) => `--allow-fs-read=${path.join(p, "*")}`),
    "--allow-worker",
    // Expected: the permission model (experimental on Node 20) and --allow-worker warn at every start.
    "--disable-warning=ExperimentalWarning",
    "--disable-warning=SecurityWarning",
  ];
}

let netnsChecked: boolean | null = null;
/** Whether `unshare -n` works here (root, and a kernel that allows it); checked once, logged once if not. */
function netns(): boolean {
  if (netnsChecked !== null) return netnsChecked;
  const root = process.getuid?.() === 0;
  netnsChecked = root && !!UNSHARE && !!SETPRIV && spawnSync(UNSHARE!, ["-n", "true"], { stdio: "ignore", env: {} }).status === 0;
  if (!netnsChecked) {
    log.warn("compute sandbox: network isolation is off (needs root and unshare -n from util-linux); user code can open connections", {
      root,
      unshare: UNSHARE ?? null,
    });
  }
  return netnsChecked;
}

let dropChecked: boolean | null = null;
/**
 * Whether uid 65534 can run Quiver's code (node, dist/, node_modules/): not when the install sits
 * under a directory others cannot enter. Checked once by trying; logged once if not.
 */
function canDropPrivileges(): boolean {
  if (dropChecked !== null) return dropChecked;
  const files = [fileURLToPath(import.meta.url), createRequire(import.meta.url).resolve("piscina")];
  const probe = `const fs = require("fs"); for (const f of ${JSON.stringify(files)}) fs.accessSync(f, fs.constants.R_OK);`;
  dropChecked = spawnSync(process.execPath, ["-e", probe], { uid: UNPRIVILEGED, gid: UNPRIVILEGED, stdio: "ignore", env: {} }).status === 0;
  if (!dropChecked) {
    log.warn("compute sandbox: runs as root, not as uid 65534, which cannot read the install; make its path readable by others (chmod o+rX) to drop privileges", {
      install: readablePaths()[0],
    });
  }
  return dropChecked;
}

/** Start `entry` as a sandbox process with `args`, an IPC channel (advanced serialization) and stderr inherited. */
export function launchSandbox(entry: URL, args: string[]): ChildProcess {
  const node = [process.execPath, ...sandboxFlags(), fileURLToPath(entry), ...args];
  const options = { env: {}, stdio: ["ignore", "ignore", "inherit", "ipc"] as ["ignore", "ignore", "inherit", "ipc"], serialization: "advanced" as const };
  const root = process.getuid?.() === 0;
  if (root && netns()) {
    const drop = canDropPrivileges() ? [SETPRIV!, `--reuid=${UNPRIVILEGED}`, `--regid=${UNPRIVILEGED}`, "--clear-groups", "--no-new-privs", "--"] : [];
    return spawn(UNSHARE!, ["-n", "--", ...drop, ...node], options);
  }
  if (root && canDropPrivileges()) return spawn(node[0], node.slice(1), { ...options, uid: UNPRIVILEGED, gid: UNPRIVILEGED });
  netns();
  return spawn(node[0], node.slice(1), options);
}
