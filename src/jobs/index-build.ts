// Runs a create_index transaction: builds on its own table handle (a write through the shared,
// cached handle would otherwise wait for the whole build, see lancedb-index.md §5).
import { dropIfPresent, startBuild, type IndexParams } from "../engine/indexes.js";
import { requireTable } from "../operations/table-ref.js";
import type { Services } from "../services.js";
import type { Runner } from "./scheduler.js";

export interface IndexBuildSpec {
  [k: string]: unknown;
  column: string;
  kind: string;
  name: string;
  params: IndexParams;
  branch: string | null;
}

export const INDEX_BUILD = "create_index";

export function indexBuildRunner(svc: Services): Runner {
  return async (rec) => {
    const spec = rec.spec as IndexBuildSpec;
    const entry = await requireTable(svc, rec.table);
    const table = await svc.tables.open(entry, { branch: spec.branch ?? "main" });
    const build = await startBuild(table, spec.column, spec.kind, spec.params, spec.name);
    // The shared handle sees the new index at once instead of after the consistency interval.
    const refresh = () => svc.tables.evict(entry.objectId);
    return {
      done: build.done.then(refresh),
      async cancel() {
        await build.cancel();
        await build.done.catch(() => undefined);
        await dropIfPresent(table, spec.name);
        refresh();
      },
    };
  };
}
