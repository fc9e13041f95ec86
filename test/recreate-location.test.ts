// A table dropped and made again under its name, through Quiver, is searched in its own rows by
// LanceDB. LanceDB's session keeps what it read of a dataset by its path and version; the new table
// took the dropped one's directory (`<name>.lance`) and reached versions the dropped one had had,
// so its index searches were answered with what the session kept of the dropped table: a stored
// row's own vector did not find that row, or one row was answered twice. A fresh server on the
// same directory answered right. Found by the differential test's 20,000-step run (seed 2027) and
// shrunk to the steps below; now a table made where this process removed one takes another location.
import { expect, it } from "vitest";
import { describe as reproduction, runSteps } from "../bench/fuzz-serving.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";

// LanceDB answers every search (no serving index): the engine path is what is checked.
const q = serverForFile({ args: ["--serving", "off", "--auto-maintenance", "off"] }, 120_000);
const SEED = 2027;
// Table 0 made again by Quiver (step 85: IVF_FLAT l2) and written by Quiver and LanceDB; made again
// (step 103: IVF_FLAT cosine, 2 partitions) and merge-inserted by Quiver (step 105), then searched.
const STEPS = [85, 87, 102, 103, 104, 105, 106];

it("seed 2027's steps that make table 0 again: every search answers what LanceDB answers", async () => {
  const result = await runSteps({ url: q.url, root: q.dataDir, key: ADMIN_KEY }, { seed: SEED, steps: STEPS });
  expect(result.difference && reproduction(SEED, STEPS, result)).toBeUndefined();
  expect(result.steps).toBe(STEPS.length);
  expect(result.ops["recreate:quiver"]).toBe(2);
});
