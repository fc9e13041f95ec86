// Runs a create_index transaction in a child process (see build-worker.ts for why).
// Cancel kills the child; an index that committed anyway (cancel raced the commit) is dropped.
import { fork } from "node:child_process";
import { setPriority } from "node:os";
import type { Entry } from "../catalog/catalog.js";
import { dropIfPresent, type IndexParams } from "../engine/indexes.js";
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

export interface BuildRequest {
  root: string;
  entry: Entry;
  spec: IndexBuildSpec;
}

export const INDEX_BUILD = "create_index";

const BUILD_NICENESS = 10;
const WORKER = new URL("./build-worker.js", import.meta.url);

export function indexBuildRunner(svc: Services): Runner {
  return async (rec) => {
    const spec = rec.spec as IndexBuildSpec;
    const entry = await requireTable(svc, rec.table);
    const child = fork(WORKER, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    // Builds are background work: requests get the CPU first (query p99 during a build).
    if (child.pid !== undefined) setPriority(child.pid, BUILD_NICENESS);
    const done = new Promise<void>((resolve, reject) => {
      child.once("message", (m: { ok: boolean; message?: string }) => (m.ok ? resolve() : reject(new Error(m.message))));
      child.once("exit", (code, signal) => reject(new Error(`the index build process ended unexpectedly (${signal ?? `exit code ${code}`})`)));
      child.once("error", reject);
    });
    child.send({ root: svc.tables.root, entry, spec } satisfies BuildRequest);
    // The shared handle sees the new index at once instead of after the consistency interval.
    const refresh = () => svc.tables.evict(entry.objectId);
    return {
      done: done.then(refresh),
      async cancel() {
        child.kill("SIGKILL");
        await done.catch(() => undefined);
        await dropIfPresent(await svc.tables.open(entry, { branch: spec.branch }), spec.name);
        refresh();
      },
    };
  };
}
