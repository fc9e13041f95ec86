// Job kind "create_index": one index build, run in a child process (workers/processes/index-build.ts says
// why) through the same runner as backfills. Stop kills the child; an index that committed anyway (the stop raced the commit) is
// dropped. A build interrupted by a restart fails: its work died with the process.
import type { BuildMessage, BuildRequest } from "../../../workers/protocol.js";
import type { Catalog } from "../../catalog/catalog.js";
import { requireTable } from "../../catalog/lookup.js";
import { dropIfPresent, type IndexBuildSpec } from "../../engine/indexes.js";
import { namedBranch, type Tables } from "../../engine/tables.js";
import { objectIdOf } from "../../catalog/names.js";
import { ApiError, Code } from "../../errors.js";
import type { Exclusive, JobKind } from "../jobs.js";
import { runInBackground } from "./background.js";

export const INDEX_BUILD = "create_index";

/** One build of an index name (on a table branch) at a time, across replicas. */
export const indexBuildExclusive = (id: readonly string[], branch: string | null, name: string): Exclusive => ({
  slot: JSON.stringify([INDEX_BUILD, objectIdOf(id), branch, name]),
  busy: (job) =>
    new ApiError(Code.TableIndexAlreadyExists, `index ${JSON.stringify(name)} of table ${JSON.stringify(objectIdOf(id))} is already being built (transaction ${job}); cancel it first to build another`),
});

const BUILD_NICENESS = 10;
// dist/src/jobs/kinds/index-build.js → dist/workers/processes/index-build.js
const BUILD_PROCESS = new URL("../../../workers/processes/index-build.js", import.meta.url);

export function indexBuildKind(deps: { catalog: Catalog; tables: Tables; limit: number }): JobKind<IndexBuildSpec> {
  const { catalog, tables } = deps;
  return {
    name: INDEX_BUILD,
    limit: deps.limit,
    interrupted: "fail",
    async start({ rec }) {
      const spec = rec.spec;
      const entry = await requireTable(catalog, rec.table);
      // Builds are background work: requests get the CPU first (query p99 during a build).
      const run = runInBackground<BuildRequest, BuildMessage>(BUILD_PROCESS, BUILD_NICENESS, { root: tables.root, storage: tables.storageOptions, entry, spec }, async () => undefined, { stop: "kill" });
      // The shared handle sees the new index at once instead of after the consistency interval.
      const refresh = () => tables.commits.announce({ table: entry, branch: namedBranch(spec.branch) ?? null, version: null, change: "index", rows: null, byCachedHandle: false });
      return {
        done: run.done.then(refresh),
        async stop() {
          await run.stop();
          await run.done.catch(() => undefined);
          await dropIfPresent(await tables.open(entry, { branch: spec.branch }), spec.name);
          refresh();
        },
      };
    },
    describe: ({ spec }) => ({ branch: spec.branch ?? undefined, index_name: spec.name, column: spec.column, index_type: spec.kind }),
  };
}
