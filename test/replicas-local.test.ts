// Two Quiver replicas on one local data directory behind HAProxy (test/helpers/replicas.ts): the
// main paths through the balancer, a create race, concurrent writes, reads through a replica's
// crash, jobs followed, cancelled and taken over across replicas, a restart beside a live job,
// Idempotency-Key retries, versions across replicas and backfills split over them: spread, canceled,
// and a task's replica killed (test/helpers/replica-scenarios.ts).
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
  s.backfillTakeover(bed);
  s.restartLeavesLiveJobs(bed);
  s.idempotencyAcrossReplicas(bed);
  s.versionsAcrossReplicas(bed);
  s.backfillTasksAcrossReplicas(bed);
  s.splitBackfillsAcrossReplicas(bed);
});
