// How a compute sandbox process (workers/processes/compute.ts) is started, so that code that
// escapes the JavaScript or Python sandbox inside it, and holds its `process`, reaches nothing
// (docs/security.md, "Where untrusted code runs"). Through util-linux (setpriv, unshare) and a
// shell step (workers/sandbox-root.ts), it runs
// - in its own PID namespace, as its pid 1: it sees and signals no other process (not even its
//   own pid 1: signals from inside to a namespace's init are dropped, so it cannot stop itself);
// - in its own mount namespace, chrooted to a read-only tmpfs root holding only what Node needs:
//   no host Unix socket, data directory, key file or log is there to open;
// - in its own network and IPC namespaces: no address, not even loopback, no shared memory;
// - as uid/gid 65534 (as root; else as the server's user mapped to root in a user namespace of its
//   own) with no capabilities and no_new_privs;
// - with an empty environment, Node's permission model (reads of dist/ and node_modules/ only,
//   worker threads for its pool; no writes, child processes or addons), and only its channel (fd
//   3) and output pipes inherited: a descriptor the server inherited without close-on-exec is
//   replaced by /dev/null before the sandbox's exec;
// - killed with its parent (the server or a job process): a parent-death signal at each step, and
//   unshare's --kill-child, whose pid 1's end ends the whole namespace;
// - under a kernel bound on its writable memory (util-linux's prlimit: RLIMIT_DATA, which every
//   step inherits and no process without CAP_SYS_RESOURCE raises): heaps, typed arrays,
//   WebAssembly and Python memory all count, while the large PROT_NONE reservations V8 makes for
//   WebAssembly do not (RLIMIT_AS would count those and refuse every interpreter).
// Where that cannot be set up (no unshare, not root and no unprivileged user namespaces, not
// Linux), user code is refused, unless --unsafe-shared-sandbox runs it in a weaker sandbox that
// shares the host's files, processes and signals (one warning line says so).
import { execFile, spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { existsSync, openSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { log } from "../src/log.js";
import { diesWithParent, SETPRIV } from "./parent-death.js";
import { installPaths, mountPoint, rootBinds, ROOT_SCRIPT, type Bind } from "./sandbox-root.js";

const UNPRIVILEGED = 65534;
const find = (names: string[]) => names.find((p) => existsSync(p));
const UNSHARE = find(["/usr/bin/unshare", "/bin/unshare"]);
const NICE = find(["/usr/bin/nice", "/bin/nice"]);
const SH = find(["/bin/sh", "/usr/bin/sh"]);
const PRLIMIT = find(["/usr/bin/prlimit", "/bin/prlimit"]);
const CHAIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin";

/** Node's flags for the sandbox: the permission model (its flag's name depends on the version). */
function sandboxFlags(): string[] {
  const major = Number(process.versions.node.split(".")[0]);
  return [
    major >= 22 ? "--permission" : "--experimental-permission",
    ...installPaths().map((p) => `--allow-fs-read=${path.join(p, "*")}`),
    "--allow-worker",
    // Expected: the permission model (experimental on Node 20) and --allow-worker warn at every start.
    "--disable-warning=ExperimentalWarning",
    "--disable-warning=SecurityWarning",
  ];
}

/** How this host starts sandboxes: isolated (namespaces, `binds` in its root), the weaker unsafe way, or not at all. */
export type Isolation = { mode: "namespaces"; root: boolean; drop: boolean; binds: Bind[]; mountAt: string } | { mode: "unsafe"; drop: boolean } | { mode: "refused"; why: string };

/** Whether uid 65534 can read Quiver's code (not when the install sits under a directory others cannot enter). */
async function canDropPrivileges(): Promise<boolean> {
  const files = [fileURLToPath(import.meta.url), path.join(installPaths()[1], "piscina", "package.json")];
  const probe = `const fs = require("fs"); for (const f of ${JSON.stringify(files)}) fs.accessSync(f, fs.constants.R_OK);`;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["-e", probe], { uid: UNPRIVILEGED, gid: UNPRIVILEGED, stdio: "ignore", env: {} });
    child.once("error", () => resolve(false));
    child.once("exit", (code) => resolve(code === 0));
  });
}

/** The step that lowers the rest's priority, if any. */
const niced = (niceness: number): string[] => (NICE && niceness > 0 ? [NICE, "-n", String(niceness)] : []);

/** setpriv's flags that run the rest as the unprivileged user. */
const AS_UNPRIVILEGED = [`--reuid=${UNPRIVILEGED}`, `--regid=${UNPRIVILEGED}`, "--clear-groups"];

/** The step that bounds the rest's writable memory to `mb` (prlimit execs the rest: no process of its own). */
const bounded = (mb: number, argv: string[]): string[] => [PRLIMIT!, `--data=${mb * 2 ** 20}`, "--", ...argv];

/** The steps before node: memory bound, parent-death signal, priority, namespaces, the root, then the user it runs as. */
function chain(iso: Extract<Isolation, { mode: "namespaces" }>, niceness: number, memoryMb: number): string[] {
  const user = iso.root && iso.drop ? AS_UNPRIVILEGED : [];
  return bounded(memoryMb, diesWithParent([
    ...niced(niceness),
    UNSHARE!, ...(iso.root ? [] : ["--map-root-user"]), "--mount", "--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc", "--",
    SH!, "-c", ROOT_SCRIPT, "sh", iso.mountAt, ...iso.binds.flat(), "--",
    ...diesWithParent([], [...user, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]),
  ]));
}

let probed: Promise<Isolation> | null = null;
/** The memory bound of the probe, which only prints Node's version. */
const PROBE_MEMORY_MB = 256;

/** How sandboxes start here: checked once by starting one that only prints Node's version. */
export function isolation(unsafeShared: boolean): Promise<Isolation> {
  probed ??= (async (): Promise<Isolation> => {
    const root = process.getuid?.() === 0;
    const drop = root && (await canDropPrivileges());
    if (process.platform !== "linux" || !UNSHARE || !SETPRIV || !SH || !PRLIMIT) return { mode: "refused", why: "it needs Linux with util-linux's unshare, setpriv and prlimit" };
    const binds = await rootBinds([process.execPath, SETPRIV]);
    const mountAt = mountPoint(binds);
    if (!mountAt) return { mode: "refused", why: "no folder to mount its root on lies outside the install" };
    const iso = { mode: "namespaces" as const, root, drop, binds, mountAt };
    try {
      const argv = [...chain(iso, 0, PROBE_MEMORY_MB), process.execPath, "--version"];
      await promisify(execFile)(argv[0], argv.slice(1), { env: { PATH: CHAIN_PATH }, cwd: "/", timeout: 30_000 });
    } catch (err) {
      const e = err as { stderr?: string; message?: string };
      return { mode: "refused", why: `starting one failed (${String(e.stderr || e.message).trim().split("\n").slice(-2).join(" ").slice(0, 300)}); it needs root, or unprivileged user namespaces` };
    }
    if (root && !drop) {
      log.warn("compute sandbox: runs as root without capabilities, not as uid 65534, which cannot read the install; make its path readable by others (chmod o+rX)", { install: installPaths()[0] });
    }
    return iso;
  })();
  return probed.then((iso) => {
    if (iso.mode !== "refused") return iso;
    warnOnce(unsafeShared, iso.why);
    return unsafeShared ? { mode: "unsafe", drop: process.getuid?.() === 0 } : iso;
  });
}

let warned = false;
function warnOnce(unsafeShared: boolean, why: string): void {
  if (warned) return;
  warned = true;
  if (unsafeShared) log.warn("compute sandbox: --unsafe-shared-sandbox: user code runs without namespaces; escaped code can reach host files, sockets and processes its user can", { why });
  else log.warn(refusal(why));
}

/** The refusal, in words, of a host that cannot isolate sandboxes. */
export const refusal = (why: string) =>
  `user code is refused: this host cannot isolate the compute sandbox (${why}); start Quiver with --unsafe-shared-sandbox to run it in a weaker sandbox that shares the host's files, processes and signals`;

let devNull: number | null = null;

/**
 * The descriptors a child would inherit besides its stdio: this process's open ones without
 * close-on-exec (Node's own all have it; one inherited by the server may not). Each is replaced
 * by /dev/null in the child.
 */
function stdioWithoutLeaks(stdio: ("ignore" | "pipe")[]): StdioOptions {
  let leaked: number[] = [];
  try {
    leaked = readdirSync("/proc/self/fd").map(Number).filter((fd) => {
      if (fd < stdio.length) return false;
      try {
        const flags = /flags:\s*([0-7]+)/.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"));
        return flags !== null && (parseInt(flags[1], 8) & 0o2000000) === 0;
      } catch {
        return false;
      }
    });
  } catch {
    // No /proc: nothing to look at (and no namespaces either).
  }
  if (leaked.length === 0) return stdio;
  devNull ??= openSync("/dev/null", "r");
  const out: (string | number)[] = [...stdio];
  for (const fd of leaked) {
    while (out.length < fd) out.push("ignore");
    out[fd] = devNull;
  }
  return out as StdioOptions;
}

/**
 * Start `entry` with `args` as a sandbox process: its channel is stdio[3], its stdout and stderr
 * are pipes (the owner reads a bounded amount of them), it leads a process group of its own (a
 * kill of the group ends it all), at `niceness`, its writable memory bounded to `memoryMb` (where
 * prlimit is missing, only in the unsafe mode, without that bound).
 */
export function launchSandbox(iso: Exclude<Isolation, { mode: "refused" }>, entry: URL, args: string[], niceness: number, memoryMb: number): ChildProcess {
  const node = [process.execPath, ...sandboxFlags(), fileURLToPath(entry), ...args];
  const options = { stdio: stdioWithoutLeaks(["ignore", "pipe", "pipe", "pipe"]), detached: true, cwd: "/" };
  if (iso.mode === "namespaces") {
    const argv = [...chain(iso, niceness, memoryMb), ...node];
    return spawn(argv[0], argv.slice(1), { ...options, env: { PATH: CHAIN_PATH } });
  }
  const drop = iso.drop ? [...AS_UNPRIVILEGED, "--no-new-privs"] : [];
  const rest = diesWithParent([...niced(niceness), ...node], drop);
  const argv = PRLIMIT ? bounded(memoryMb, rest) : rest;
  return spawn(argv[0], argv.slice(1), { ...options, env: {} });
}
