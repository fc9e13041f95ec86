// Three Quiver replicas on one Azurite container (Azure Blob Storage's emulator) behind HAProxy
// (test/helpers/replicas.ts): the main paths through the balancer, a create race, concurrent
// writes, jobs followed and cancelled across replicas, Idempotency-Key retries and versions across
// replicas (test/helpers/replica-scenarios.ts). Backfills taken over and split across replicas:
// test/replicas-azurite-backfills.test.ts (a bed of its own, so the two halves run side by side).
import { describe } from "vitest";
import { replicasForFile } from "./helpers/replicas.js";
import * as s from "./helpers/replica-scenarios.js";

const bed = replicasForFile({ replicas: 3, store: "azurite", args: ["--workers", "1", "--consistency-interval-ms", "0"] });

describe("three replicas on one Azurite container", () => {
  s.mainPaths(bed);
  s.createRace(bed);
  s.concurrentWrites(bed);
  s.jobsAcrossReplicas(bed);
  s.idempotencyAcrossReplicas(bed);
  s.versionsAcrossReplicas(bed);
});
