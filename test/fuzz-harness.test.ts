// The differential test's harness (bench/fuzz-serving.ts) itself: a read that fails during a step
// ends the run as a difference with its steps, not as an error that stops the process (the long
// run of seed 2028 died so, its steps lost: docs/design.md).
import { readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { firstSteps, runSteps } from "../bench/fuzz-serving.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";

const q = serverForFile();

it("a table that can no longer be read ends the run as a difference naming the failed read", async () => {
  let broken = false;
  const result = await runSteps({ url: q.url, root: q.dataDir, key: ADMIN_KEY }, {
    seed: 51,
    steps: firstSteps(4),
    prefix: "h",
    // After the first step, every data file of the run's tables is gone (as after a restore to a
    // version a cleanup was removing): the next reads of them fail.
    progress: () => {
      if (broken) return;
      broken = true;
      for (const t of readdirSync(q.dataDir).filter((n) => /ht\d+\.lance$/.test(n))) {
        const data = path.join(q.dataDir, t, "data");
        for (const f of readdirSync(data)) rmSync(path.join(data, f));
      }
    },
  });
  expect(broken).toBe(true);
  expect(result.steps).toBe(1);
  expect(result.difference?.step).toBe(1);
  expect(result.difference?.what).toMatch(/^the search could not be made: .*Not found: .*\/data\/.*\.lance/);
}, 300_000);
