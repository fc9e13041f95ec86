// The serving index's differential test (issue 51), a short seeded run: random writes of every kind
// through Quiver and by LanceDB in this process, each step followed by searches through Quiver
// compared with LanceDB's exact answer on the same directory (bench/fuzz-serving.ts states the
// rule). Long runs: `npm run fuzz:serving -- --steps N --seed S`. Then what its runs found.
import * as lancedb from "@lancedb/lancedb";
import { expect, it } from "vitest";
import { describe as reproduction, firstSteps, runSteps } from "../bench/fuzz-serving.js";
import { seedIndexTable } from "./helpers/index-data.js";
import { ADMIN_KEY, removeDir, serverForFile, startQuiver } from "./helpers/quiver.js";

// Two seeds of 250 steps, run side by side on one server (tables of their own), so CI holds the
// issue's 500 steps in the wall time of 250. 250 steps of seed 51 write each of the 14 kinds at
// least 4 times (drop_index 4, rename 4, recreate 4, alter_column 5, overwrite 6, drop_column 6,
// the rest 15 to 58), each kind by both Quiver and LanceDB, Quiver's one overwrite refused; seed
// 52 adds overwrites by Quiver that go through (2 of 6), every kind at least twice (drop_column 2
// and drop_index 2, by Quiver).
const SEEDS = [51, 52];
const STEPS = 250;
const q = serverForFile();

// Half a minute each on the 2-core machine when it is quiet; the bound leaves room for a loaded one.
for (const seed of SEEDS) {
  it.concurrent(`${STEPS} steps of seed ${seed} answer what LanceDB answers`, async () => {
    const result = await runSteps({ url: q.url, root: q.dataDir, key: ADMIN_KEY }, { seed, steps: firstSteps(STEPS), prefix: `s${seed}` });
    expect(result.difference && reproduction(seed, firstSteps(result.difference.step + 1), result)).toBeUndefined();
    expect(result.steps).toBe(STEPS);
    // The comparison is of the serving path: many searches took it (the others: tables without an
    // index, another metric, rebuilds, LanceDB's commits not yet followed).
    expect(result.paths.serving).toBeGreaterThan(result.searches * 0.3);
  }, 900_000);
}

it("a server stopped while a serving index builds exits cleanly", async () => {
  // Each fuzz run's server stopped so: the failed build told the closed channel, outside any handler.
  const s = await startQuiver({
    seed: async (dir) => {
      const t = await seedIndexTable(dir, "big", 20_000, 32);
      await t.createIndex("vec", { config: lancedb.Index.ivfFlat({ numPartitions: 2 }) });
    },
  });
  try {
    const r = await s.call("POST", "/v1/table/big/query", { k: 1, vector: { single_vector: Array(32).fill(0.5) }, vector_column: "vec" });
    expect(r.headers.get("x-quiver-search-path")).toBe("engine; reason=not_built");
    expect(await s.stop()).toBe(0);
    expect(s.stderr()).not.toContain("BroadcastChannel is closed");
  } finally {
    await s.stop();
    removeDir(s.dataDir);
  }
}, 120_000);
