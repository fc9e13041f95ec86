// Two Quiver replicas on one local directory behind HAProxy (test/helpers/replicas.ts): the main
// paths through the balancer, a create race, concurrent writes, reads through a replica's crash,
// jobs followed and cancelled across replicas, a restart beside a live job, Idempotency-Key retries,
// a table's row writes kept on one replica, and versions across replicas
// (test/helpers/replica-scenarios.ts). Backfills taken over and split across replicas:
// test/replicas-local-backfills.test.ts (a bed of its own, so the two halves run side by side).
import { describe } from "vitest";
import { replicasForFile } from "./helpers/replicas.js";
import * as s from "./helpers/replica-scenarios.js";

const bed = replicasForFile({ replicas: 2, store: "local", args: ["--workers", "1", "--consistency-interval-ms", "0"] });

describe("two replicas on one local directory", () => {
  s.mainPaths(bed);
  s.createRace(bed);
  s.concurrentWrites(bed);
  s.readsThroughAKill(bed);
  s.jobsAcrossReplicas(bed);
  s.restartLeavesLiveJobs(bed);
  s.idempotencyAcrossReplicas(bed);
  s.rowWritesToOneReplica(bed);
  s.versionsAcrossReplicas(bed);
});
