// Three Quiver replicas on one Azurite container behind HAProxy (test/helpers/replicas.ts),
// backfills across them: one taken over after its replica's crash, and one split into a task per
// replica (test/helpers/replica-scenarios.ts). The other scenarios on this bed:
// test/replicas-azurite.test.ts.
import { describe } from "vitest";
import { replicasForFile } from "./helpers/replicas.js";
import * as s from "./helpers/replica-scenarios.js";

const bed = replicasForFile({ replicas: 3, store: "azurite", args: ["--workers", "1", "--consistency-interval-ms", "0"] });

describe("three replicas on one Azurite container", () => {
  s.backfillTakeover(bed);
  s.backfillTasksAcrossReplicas(bed);
});
