import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file starts its own server process. The suite needs about 990 s of the machine's CPU
    // (2026-11-27, from /proc/stat); two files at a time took 590 s on a 2-core machine (1,180
    // core-seconds), the rest idle while files waited on jobs, leases and child processes; three at
    // a time fill it.
    maxWorkers: 3,
    minWorkers: 1,
  },
});
