// Transactions: describe and alter the durable records of background operations (index builds).
// Only status Canceled can be set (on a Queued or Running record); properties set here sit next
// to the ones Quiver reports (operation, table, timings, error_message), which are read-only.
import { covers, type Principal } from "../auth/principal.js";
import { objectIdOf } from "../catalog/catalog.js";
import { ApiError, Code, invalid } from "../errors.js";
import type { IndexBuildSpec } from "../jobs/index-build.js";
import { isTerminal, STATUSES, type TxRecord, type TxStatus } from "../jobs/store.js";
import { AlterTransaction, DescribeTransaction } from "../schemas/transaction.js";
import type { Services } from "../services.js";
import { jsonOp } from "./define.js";
import { json } from "./types.js";

function requireTransaction(svc: Services, principal: Principal, id: string | undefined): TxRecord {
  const rec = id ? svc.jobs.get(id) : undefined;
  if (!rec) throw new ApiError(Code.TransactionNotFound, `transaction ${JSON.stringify(id ?? "")} not found`);
  if (!covers(principal, rec.table)) {
    throw new ApiError(Code.PermissionDenied, `this credential may not access ${JSON.stringify(objectIdOf(rec.table))}`);
  }
  return rec;
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** What Quiver itself reports about a transaction; these keys cannot be altered. */
function ownProperties(rec: TxRecord): Record<string, string | undefined> {
  const spec = rec.spec as IndexBuildSpec;
  const end = rec.finishedAt ?? (rec.status === "Running" ? Date.now() : undefined);
  return {
    operation: rec.operation,
    table: objectIdOf(rec.table),
    branch: spec.branch ?? undefined,
    index_name: spec.name,
    column: spec.column,
    index_type: spec.kind,
    created_at: iso(rec.createdAt),
    started_at: iso(rec.startedAt),
    finished_at: iso(rec.finishedAt),
    duration_ms: rec.startedAt !== undefined && end !== undefined ? String(end - rec.startedAt) : undefined,
    error_message: rec.error,
  };
}
const RESERVED = ["operation", "table", "branch", "index_name", "column", "index_type", "created_at", "started_at", "finished_at", "duration_ms", "error_message"];

function describe(rec: TxRecord) {
  const own = Object.entries(ownProperties(rec)).filter((e): e is [string, string] => e[1] !== undefined);
  return { status: rec.status, properties: { ...rec.properties, ...Object.fromEntries(own) } };
}

export const describeTransaction = jsonOp(DescribeTransaction, async ({ params, principal, svc }) =>
  json(describe(requireTransaction(svc, principal, params.id))),
);

function statusOf(raw: string): TxStatus {
  const norm = raw.toLowerCase().replace(/_/g, "");
  const s = STATUSES.find((x) => x.toLowerCase() === norm) ?? (norm === "cancelled" ? "Canceled" : undefined);
  if (!s) throw invalid(`actions: unknown status ${JSON.stringify(raw)}; one of ${STATUSES.join(", ")}`);
  return s;
}

export const alterTransaction = jsonOp(AlterTransaction, async ({ params, body, principal, svc }) => {
  const rec = requireTransaction(svc, principal, params.id);
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
    if (RESERVED.includes(key)) throw invalid(`${where}: property ${JSON.stringify(key)} is reported by the server and cannot be changed`);
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
  if (cancel) await svc.jobs.cancel(rec);
  else await svc.jobs.save(rec);
  return json(describe(rec));
});
