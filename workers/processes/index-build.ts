// A child process that runs one index build (forked by src/jobs/kinds/index-build.ts). Builds run
// outside the server process because LanceDB's native CPU pool is per process: while a build runs
// there, an insert in the same process waits for the whole build (measured: 3.8-9 s), one in
// another process does not (~70 ms). It also makes stopping real: killing the process stops the
// work, and the build never commits.
import type { Entry } from "../../src/catalog/catalog.js";
import { buildIndex, type IndexBuildSpec } from "../../src/engine/indexes.js";
import { engineReason } from "../../src/engine/messages.js";
import { openTables } from "../../src/engine/tables.js";

/** What the build process receives from the server. */
export interface BuildRequest {
  root: string;
  entry: Entry;
  spec: IndexBuildSpec;
}

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
    (err: unknown) => reply({ ok: false, message: engineReason(err) }),
  );
});
