// The file system a compute sandbox sees: a tmpfs of its own as `/`, holding read-only bind mounts
// of what Node needs to run Quiver's sandbox code and nothing else: the node binary and its shared
// libraries (and setpriv's, which drops privileges inside), the install's dist/ and node_modules/,
// /dev/null and /dev/urandom, and a /proc of its own PID namespace. No host Unix socket, data
// directory, key file, /tmp or /etc is in it. The mounts are made inside the sandbox's own mount
// namespace by a shell step (util-linux's mount, coreutils' chroot), so the host sees none of them.
import { execFile } from "node:child_process";
import { existsSync, lstatSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The folders the sandbox reads: the built code (dist/) and the install's node_modules/. */
export function installPaths(): string[] {
  // dist/workers/sandbox-root.js → dist/
  const dist = fileURLToPath(new URL("../", import.meta.url));
  const piscina = createRequire(import.meta.url).resolve("piscina");
  const modules = piscina.slice(0, piscina.lastIndexOf(`${path.sep}node_modules${path.sep}`) + "/node_modules/".length);
  // A node_modules/ next to the install that is a symlink (a worktree's, say) is stat-ed by the
  // module resolver before it follows the link: its own path must be there too.
  const beside = path.resolve(dist, "..", "node_modules");
  return beside === modules.replace(/[\\/]$/, "") ? [dist, modules] : [dist, modules, beside];
}

/** A host path and where it appears inside the sandbox's root. */
export type Bind = [source: string, target: string];

/** Shared libraries `binary` loads, as ldd lists them (null where ldd is missing or fails). */
async function librariesOf(binary: string): Promise<string[] | null> {
  try {
    const { stdout } = await promisify(execFile)("ldd", [binary], { env: { PATH: "/usr/bin:/bin" }, timeout: 10_000 });
    return [...stdout.matchAll(/(\/\S+) \(0x[0-9a-f]+\)/g)].map((m) => m[1]);
  } catch {
    return null;
  }
}

/** Everything the sandbox's root holds, for `binaries` (node, setpriv). */
export async function rootBinds(binaries: string[]): Promise<Bind[]> {
  const libraries = await Promise.all(binaries.map(librariesOf));
  // Without ldd, the system's library folders whole.
  const libs = libraries.some((l) => l === null) ? ["/lib", "/lib64", "/usr/lib", "/usr/lib64"].filter(existsSync) : [...new Set(libraries.flat() as string[])];
  const paths = [...binaries, ...libs, "/etc/ld.so.cache", ...installPaths().map((p) => p.replace(/[\\/]$/, "")), "/dev/null", "/dev/urandom"];
  return paths.filter(existsSync).map((p) => [realpathSync(p), p]);
}

const inside = (p: string, dir: string) => p === dir || p.startsWith(dir + "/");

/**
 * A host folder to mount the sandbox's tmpfs root on, inside its own mount namespace: one that no
 * bound path lies under (the mount hides what was there, for that namespace only).
 */
export function mountPoint(binds: Bind[]): string | null {
  return ["/mnt", "/media", "/srv", "/opt", "/run", "/tmp", "/var/tmp"].find((d) => {
    try {
      if (!lstatSync(d).isDirectory()) return false;
    } catch {
      return false;
    }
    return !binds.some(([s, t]) => inside(s, d) || inside(t, d));
  }) ?? null;
}

/**
 * The shell step, run as root of the sandbox's new mount and PID namespaces: `sh -c ROOT_SCRIPT sh
 * <mount point> <source> <target> ... -- <command...>`. Each bind is read-only, nosuid and (but
 * for device nodes) nodev; then the root itself turns read-only, and the command runs chrooted
 * there with an empty environment.
 */
export const ROOT_SCRIPT = `set -eu
root=$1; shift
mount -t tmpfs -o size=1m,mode=755,nosuid,nodev quiver-sandbox "$root"
while [ "$1" != -- ]; do
  if [ -d "$1" ]; then mkdir -p "$root$2"; else mkdir -p "$root\${2%/*}"; : > "$root$2"; fi
  mount --bind "$1" "$root$2"
  if [ -c "$1" ]; then mount -o remount,bind,ro,nosuid "$root$2"; else mount -o remount,bind,ro,nosuid,nodev "$root$2"; fi
  shift 2
done
shift
mkdir "$root/proc"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -o remount,bind,ro "$root"
exec env -i "$(command -v chroot)" "$root" "$@"`;
