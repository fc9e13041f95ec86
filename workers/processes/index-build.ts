// A child process that runs one index build (started by src/jobs/kinds/index-build.ts). Builds run
// outside the server process because LanceDB's native CPU pool is per process: while a build runs
// there, an insert in the same process waits for the whole build (measured: 3.8-9 s), one in
// another process does not (~70 ms). It also makes stopping real: killing the process stops the
// work, and the build never commits.
import { buildIndex } from "../../src/engine/indexes.js";
import { openTables } from "../../src/engine/tables.js";
import { CHECK_EVERY_READ } from "../../src/util/keep-fresh.js";
import type { BuildMessage, BuildRequest } from "../protocol.js";
import { serveJob } from "./job-process.js";

serveJob<BuildRequest, BuildMessage>(async (m) => {
  const tables = await openTables(m.root, CHECK_EVERY_READ, m.storage);
  const table = await tables.open(m.entry, m.spec.branch ? { branch: m.spec.branch } : {});
  await buildIndex(table, m.spec.column, m.spec.kind, m.spec.params, m.spec.name);
});
