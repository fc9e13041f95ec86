// Whether this process can write a local directory, checked at start by writing a file in it.
import { rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/** Why `dir` cannot be written (a read-only file system, a full disk, no permission); null when it can. */
export function writeProblem(dir: string): string | null {
  const probe = path.join(dir, `.quiver-write-check-${process.pid}`);
  try {
    writeFileSync(probe, "x", { flag: "w" });
    rmSync(probe, { force: true });
    return null;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = { EROFS: "it is on a read-only file system", ENOSPC: "its disk is full", EACCES: "permission denied", EPERM: "permission denied" }[e.code ?? ""];
    return `cannot write to ${dir}: ${why ?? e.message}${why ? ` (${e.code})` : ""}`;
  }
}
