// The state directory's lock: one live process per --state-dir. It is a socket this process
// listens on, so the kernel releases it when the process ends, however it ends (a crash, kill -9,
// a zombie not yet reaped: its descriptors are closed already), and a PID written before (a PID
// file's) means nothing to it. Binding is atomic: of two starts at once, one binds and the other
// is refused. Where it lives:
//   - Linux: the abstract socket namespace (no file), named from the directory's device, inode and
//     birth time, so any path to the directory (a symlink, a bind mount) names one lock, and a
//     directory made where another was removed does not inherit the lock of a process still using
//     the removed one (file systems reuse inode numbers at once). Abstract names belong to the
//     network namespace: containers with their own network must not share a state dir.
//   - Windows: a named pipe, named the same way; released by the kernel too.
//   - Elsewhere (macOS): `.lock.sock` in the directory. Its file outlives a crash; a start finds it
//     dead (nothing accepts a connection) and takes it over, so two starts at the same moment
//     right after a crash could both pass there.
// A start that is refused connects to the holder, which answers its PID, for the error's words.
import { rmSync, statSync } from "node:fs";
import net from "node:net";
import path from "node:path";

/** Where the lock of `dir` lives on this platform. */
export function lockAddress(dir: string): string {
  if (process.platform !== "linux" && process.platform !== "win32") return path.join(dir, ".lock.sock");
  // A file system without birth times reports 0: device and inode alone then.
  const { dev, ino, birthtimeNs } = statSync(dir, { bigint: true });
  const name = `quiver-state-${dev.toString(16)}-${ino.toString(16)}-${birthtimeNs.toString(16)}`;
  return process.platform === "linux" ? `\0${name}` : `\\\\.\\pipe\\${name}`;
}

const listen = (address: string) =>
  new Promise<net.Server>((resolve, reject) => {
    // The holder's PID to whoever asks; the connection is closed at once.
    const server = net.createServer((c) => c.end(`${process.pid}\n`));
    server.once("error", reject);
    server.listen({ path: address, exclusive: true }, () => {
      server.off("error", reject);
      // The lock never keeps the process alive; it lasts as long as the process.
      server.unref();
      resolve(server);
    });
  });

/** What the process holding `address` says it is: its PID, or null when nothing answers (a dead socket file). */
const holderOf = (address: string) =>
  new Promise<string | null>((resolve) => {
    let said = "";
    const c = net.connect({ path: address });
    const timer = setTimeout(() => c.destroy(), 2000);
    c.on("data", (d) => (said += d.toString()));
    c.on("error", () => resolve(null));
    c.on("close", () => {
      clearTimeout(timer);
      resolve(said.trim());
    });
  });

/** Locks this process holds, by address (an in-process test may open services again on one directory). */
const held = new Map<string, net.Server>();

/** Take the lock of `dir` for this process's life; throws, naming the holder, when another live process has it. */
export async function lockStateDir(dir: string): Promise<void> {
  const address = lockAddress(dir);
  if (held.has(address)) return;
  for (let tries = 0; ; tries++) {
    try {
      held.set(address, await listen(address));
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    }
    const holder = await holderOf(address);
    if (holder !== null || tries > 0 || !address.startsWith(dir)) {
      throw new Error(`the state directory ${dir} is in use by ${holder ? `process ${holder}` : "another process"}: give each replica its own --state-dir`);
    }
    // A socket file whose process is gone (only a path socket outlives its process).
    rmSync(address, { force: true });
  }
}
