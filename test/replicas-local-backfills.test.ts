// Two Quiver replicas on one local directory behind HAProxy (test/helpers/replicas.ts), backfills
// across them: one taken over after its replica's crash, one split into a task per replica, and
// split backfills canceled and with a task's replica killed (test/helpers/replica-scenarios.ts).
// The other scenarios on this bed: test/replicas-local.test.ts.
import { describe } from "vitest";
import { replicasForFile } from "./helpers/replicas.js";
import * as s from "./helpers/replica-scenarios.js";

const bed = replicasForFile({ replicas: 2, store: "local", args: ["--workers", "1", "--consistency-interval-ms", "0"] });

describe("two replicas on one local directory", () => {
  s.backfillTakeover(bed);
  s.backfillTasksAcrossReplicas(bed);
  s.splitBackfillsAcrossReplicas(bed);
});
