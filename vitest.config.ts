import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file starts its own server process. The suite needs about 990 s of the machine's CPU on
    // the 2-core Intel Xeon (2026-11-27, from /proc/stat); two files at a time took 590 s there
    // (1,180 core-seconds), the rest idle while files waited on jobs, leases and child processes;
    // three at a time fill it. On the 2-core AMD EPYC it needs about 2,300 s and three at a time
    // keep both cores busy from start to end (1,130–1,175 s, 2026-11-27).
    maxWorkers: 3,
    minWorkers: 1,
  },
});
