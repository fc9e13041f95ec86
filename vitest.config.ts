import path from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

// The files that take longest, longest first (from a whole run three files at a time on the 2-core
// AMD EPYC, 2026-12-06, and the parts of the files split since, run alone). vitest starts them
// first, so none of them is left running alone at the end; without a results cache (a fresh clone,
// CI) vitest would otherwise order files by size. Files not listed follow in vitest's own order.
const LONGEST_FIRST = [
  "test/backfill-cancel-running.test.ts",
  "test/replicas-azurite.test.ts",
  "test/replicas-local-backfills.test.ts",
  "test/replicas-azurite-backfills.test.ts",
  "test/replicas-local.test.ts",
  "test/rolling-restart.test.ts",
  "test/security/job-shares.test.ts",
  "test/restarts.test.ts",
  "test/maintenance.test.ts",
  "test/maintenance-indexes.test.ts",
  "test/virtual-columns.test.ts",
  "test/virtual-columns-long.test.ts",
  "test/maintenance-auto.test.ts",
  "test/maintenance-jobs.test.ts",
  "test/security/sandbox-escape.test.ts",
  "test/compute-staleness.test.ts",
  "test/security/sandbox-escape-backends.test.ts",
  "test/views.test.ts",
  "test/view-refresh-fixes.test.ts",
  "test/object-storage.test.ts",
  "test/serving.test.ts",
  "test/serving-fuzz.test.ts",
  "test/serving-recall.test.ts",
  "test/loadtest.test.ts",
  "test/python-udfs.test.ts",
  "test/loadtest-report.test.ts",
  "test/metrics.test.ts",
  "test/virtual-columns-rows.test.ts",
  "test/unit/layers.test.ts",
  "test/security/query-deadline.test.ts",
  "test/error-policies.test.ts",
];

// The built code (dist/), which the in-process tier (test/helpers/in-process.ts) and some unit tests
// import: loaded by Node as the server loads it, not transformed and run by vitest's module runner.
// Measured on the 2-core AMD EPYC (2026-12-07, cgroup CPU, load 7-8): 4 files importing it took
// 15.7-16.2 CPU-s inlined and 13.0-14.0 s external.
const BUILT = new RegExp(`^${fileURLToPath(new URL("./dist/", import.meta.url)).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`);

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = LONGEST_FIRST.indexOf(path.relative(f.project.config.root, f.moduleId).split(path.sep).join("/"));
      return i < 0 ? LONGEST_FIRST.length : i;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Generous: a test's own deadlines say what it waits for; these only end a hang, and a busy
    // machine (a second suite beside this one) runs everything several times slower.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    sequence: { sequencer: LongestFirst },
    server: { deps: { external: [BUILT] } },
    // Each file starts its own server process. The suite needs about 990 s of the machine's CPU on
    // the 2-core Intel Xeon (2026-11-27, from /proc/stat); two files at a time took 590 s there
    // (1,180 core-seconds), the rest idle while files waited on jobs, leases and child processes;
    // three at a time fill it. On the 2-core AMD EPYC it needs about 2,300 s and three at a time
    // keep both cores busy from start to end (1,130–1,175 s, 2026-11-27). A fourth would add a
    // server process and its contention, not CPU; the longest files are split instead (the tail).
    maxWorkers: 3,
    minWorkers: 1,
  },
});
