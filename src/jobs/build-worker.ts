// A child process that runs one index build. Builds run outside the server process because
// LanceDB's native CPU pool is per process: while a build runs there, an insert in the same
// process waits for the whole build (measured: 3.8-9 s), one in another process does not (~70 ms).
// It also makes cancel real: killing the process stops the work, and the build never commits.
import { buildIndex, engineMessage } from "../engine/indexes.js";
import { openTables } from "../engine/tables.js";
import type { BuildRequest } from "./index-build.js";

// The server died (even by SIGKILL): its IPC channel closes, and the build must not outlive it.
process.on("disconnect", () => process.exit(1));

process.once("message", (m: BuildRequest) => {
  const reply = (msg: { ok: boolean; message?: string }) => process.send!(msg, () => process.exit(0));
  void (async () => {
    const tables = await openTables(m.root, 0);
    const table = await tables.open(m.entry, m.spec.branch ? { branch: m.spec.branch } : {});
    await buildIndex(table, m.spec.column, m.spec.kind, m.spec.params, m.spec.name);
  })().then(
    () => reply({ ok: true }),
    (err: unknown) => reply({ ok: false, message: engineMessage(err) }),
  );
});
