// Transactions: describe and alter the durable records of background work (index builds and the
// other job kinds). Only status Canceled can be set (on a Queued or Running record); properties set
// here sit next to the ones Quiver reports (operation, table, timings, error_message and each
// kind's own progress), which are read-only.
import { covers, type Principal } from "../auth/principal.js";
import { objectIdOf } from "../catalog/names.js";
import { ApiError, Code, invalid } from "../errors.js";
import { isTerminal, STATUSES, type JobRecord, type JobStatus } from "../jobs/store.js";
import { matchMode } from "../schemas/mode.js";
import { AlterTransaction, DescribeTransaction, JobRef, ListJobs } from "../schemas/transaction.js";
import { SEP } from "../catalog/names.js";
import { MAX_PAGE } from "./pagination.js";
import type { Services } from "../services.js";
import { jsonOp } from "./define.js";
import { json } from "./types.js";

/**
 * A record the credential may see (its table lies inside the credential's prefixes). A record of a
 * table it may not reach is "not found", exactly as an unknown id: ids are opaque, and the answer
 * must not say that a job of another tenant exists.
 */
async function requireTransaction(svc: Services, principal: Principal, id: string | undefined): Promise<JobRecord> {
  const rec = id ? await svc.jobs.get(id) : undefined;
  if (!rec || !covers(principal, rec.table)) throw new ApiError(Code.TransactionNotFound, `transaction ${JSON.stringify(id ?? "")} not found`);
  return rec;
}

function describe(svc: Services, rec: JobRecord) {
  const own = Object.entries(svc.jobs.reported(rec)).filter((e): e is [string, string] => e[1] !== undefined);
  return { status: rec.status, properties: { ...rec.properties, ...Object.fromEntries(own) } };
}

export const describeTransaction = jsonOp(DescribeTransaction, async ({ params, principal, svc }) =>
  json(describe(svc, await requireTransaction(svc, principal, params.id))),
);

function statusOf(raw: string): JobStatus {
  const s = matchMode(raw, STATUSES) ?? (matchMode(raw, ["cancelled"]) ? "Canceled" : undefined);
  if (!s) throw invalid(`actions: unknown status ${JSON.stringify(raw)}; one of ${STATUSES.join(", ")}`);
  return s;
}

export const alterTransaction = jsonOp(AlterTransaction, async ({ params, body, principal, svc }) => {
  const rec = await requireTransaction(svc, principal, params.id);
  const reserved = Object.keys(svc.jobs.reported(rec));
  // Check every action against a draft first: all or nothing.
  const props = { ...rec.properties };
  let cancel = false;
  body.actions.forEach((a, i) => {
    const where = `actions[${i}]`;
    const set = [a.setStatusAction, a.setPropertyAction, a.unsetPropertyAction].filter((x) => x != null);
    if (set.length !== 1) throw invalid(`${where}: must set exactly one of setStatusAction, setPropertyAction, unsetPropertyAction`);
    if (a.setStatusAction) {
      const s = statusOf(a.setStatusAction.status);
      if (s === rec.status) return;
      if (s !== "Canceled") throw invalid(`${where}.setStatusAction.status: only Canceled can be set, got ${JSON.stringify(a.setStatusAction.status)}`);
      if (isTerminal(rec.status)) {
        throw new ApiError(Code.ConcurrentModification, `transaction ${JSON.stringify(rec.id)} is already ${rec.status} and cannot be canceled`);
      }
      cancel = true;
      return;
    }
    const key = (a.setPropertyAction ?? a.unsetPropertyAction)!.key;
    if (reserved.includes(key)) throw invalid(`${where}: property ${JSON.stringify(key)} is reported by the server and cannot be changed`);
    if (a.setPropertyAction) {
      const mode = a.setPropertyAction.mode ?? "overwrite";
      if (key in props && mode === "fail") throw new ApiError(Code.ConcurrentModification, `${where}: property ${JSON.stringify(key)} is already set`);
      if (!(key in props) || mode === "overwrite") props[key] = a.setPropertyAction.value;
    } else {
      if (!(key in props) && a.unsetPropertyAction!.mode === "fail") throw invalid(`${where}: property ${JSON.stringify(key)} is not set`);
      delete props[key];
    }
  });
  rec.properties = props;
  return json(describe(svc, cancel ? await svc.jobs.cancel(rec) : await svc.jobs.save(rec)));
});

// LanceDB's job states, as its clients parse them.
const JOB_STATE: Record<JobStatus, string> = { Queued: "IN_PROGRESS", Running: "IN_PROGRESS", Succeeded: "DONE", Failed: "FAILED", Canceled: "CANCELLED" };

/** Background work the credential may see, newest first; `table` narrows it to one table. */
export const listJobs = jsonOp(ListJobs, async ({ body, principal, svc }) => {
  const table = typeof body.table === "string" ? body.table.split(SEP) : body.table;
  const recs = (await svc.jobs.all(table ? { table } : {}))
    .filter((r) => covers(principal, r.table))
    .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? -1 : 1));
  // The token is the last id returned; newest-first order is stable for records that exist throughout.
  const after = body.page_token ? recs.findIndex((r) => r.id === body.page_token) + 1 : 0;
  const limit = Math.min(body.limit ?? MAX_PAGE, MAX_PAGE);
  const items = recs.slice(after, after + limit);
  const more = after + limit < recs.length;
  return json({ jobs: items.map(jobOf), page_token: more ? items[items.length - 1].id : null });
});

function jobOf(r: JobRecord) {
  const state = JOB_STATE[r.status];
  return { job_id: r.id, table: objectIdOf(r.table), job_type: r.operation, state, job_state: state, status: r.status, created_at_millis: r.createdAt };
}

/** LanceDB's `openJob` / `job.status()`: one job, as in the list. */
export const describeJob = jsonOp(JobRef, async ({ body, principal, svc }) => json(jobOf(await requireTransaction(svc, principal, body.job_id))));

/** LanceDB's `cancelJob`: cancelling a job that already ended changes nothing (its answer says so). */
export const cancelJob = jsonOp(JobRef, async ({ body, principal, svc }) => {
  const rec = await requireTransaction(svc, principal, body.job_id);
  const cancelled = !isTerminal(rec.status);
  return json({ cancelled, ...jobOf(cancelled ? await svc.jobs.cancel(rec) : rec) });
});
