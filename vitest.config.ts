import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file starts its own server process; two at a time fits a 2-core machine.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
