// The build parameters of the indexes Quiver built, kept in the replicas' shared system table
// `index_specs` (one row per table, branch and index name: its latest build), so that maintenance
// can rebuild an index the way it was built. LanceDB's API does not return an index's parameters,
// and job records are pruned.
import { sqlString, type SystemTables } from "../util/system-table.js";
import type { IndexBuildSpec } from "./indexes.js";

export interface IndexSpecs {
  /** Keep `spec` as the build of its index on table `objectId` (after the build committed). */
  record(objectId: string, spec: IndexBuildSpec): Promise<void>;
  /** The recorded builds of a table branch's indexes. */
  of(objectId: string, branch: string | null): Promise<IndexBuildSpec[]>;
}

export async function openIndexSpecs(system: SystemTables): Promise<IndexSpecs> {
  const table = await system.open("index_specs", [{ name: "table_id", type: "string" }]);
  return {
    async record(objectId, spec) {
      await table.upsert([{ key: JSON.stringify([objectId, spec.branch, spec.name]), table_id: objectId, doc: JSON.stringify(spec) }]);
    },
    async of(objectId, branch) {
      const rows = await table.select(`table_id = ${sqlString(objectId)}`);
      return rows.map((r) => JSON.parse(String(r.doc)) as IndexBuildSpec).filter((s) => s.branch === branch);
    },
  };
}
