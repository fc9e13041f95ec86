// Builds the Python interpreter's memory snapshot into dist/native/python-<Pyodide version>.snapshot
// (or into the folder given), where workers/threads/python.ts loads it: `npm run build:python`. An
// interpreter restored from it starts in about 0.5 s of CPU instead of 4-5 (Pyodide's bootstrap,
// measured on the 2-core machine), paid by every compute sandbox thread at its first Python task.
// It is taken right after Pyodide's own bootstrap, in this process: nothing of Quiver's or a user's
// has run in it, and Pyodide's environment is its own (not this process's). Skipped when the file
// for this version exists.
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadPyodide } from "pyodide";

const { version } = createRequire(import.meta.url)("pyodide/package.json");
const out = process.argv[2] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "dist", "native");
const file = path.join(out, `python-${version}.snapshot`);
if (!existsSync(file)) {
  const py = await loadPyodide({ _makeSnapshot: true, stdout: () => undefined, stderr: () => undefined });
  mkdirSync(out, { recursive: true });
  writeFileSync(`${file}.part`, py.makeMemorySnapshot());
  // Whole or absent: a build stopped halfway leaves no file that a sandbox would restore.
  renameSync(`${file}.part`, file);
}
