// Job kind "backfill_task": one share of a backfill split over the replicas (`--backfill-tasks`;
// ./backfill.ts queues the tasks and follows them). Queued like any job, a task runs on whichever
// replica has a free slot for it, in the same child process as a backfill, over its contiguous
// range of the rows; a task whose replica died is taken over and resumed like a backfill.
import type { JobKind } from "../jobs.js";
import { BACKFILL_TASK, describeBackfill, runBackfill, type BackfillDeps, type BackfillSpec } from "./backfill.js";

const backfillOf = (spec: BackfillSpec) => (typeof spec.backfill === "string" ? spec.backfill : undefined);

export function backfillTaskKind(deps: BackfillDeps): JobKind<BackfillSpec> {
  return {
    name: BACKFILL_TASK,
    limit: deps.limit,
    interrupted: "resume",
    start: (job) => runBackfill(deps, job),
    // The tasks of one backfill spread over the replicas, and end with it when it is canceled.
    group: (rec) => backfillOf(rec.spec),
    partOf: (rec) => backfillOf(rec.spec),
    describe: describeBackfill,
  };
}
