// What is recorded when a request ends: its metrics (src/metrics.ts) and, sampled, one access log
// line carrying the request id and the context headers.
import type { Config } from "../config.js";
import { log, logEnabled } from "../log.js";
import { recordRequest, type UnavailableReason } from "../metrics.js";

export interface Finished {
  /** The route table's operation name ("unmatched" for a 404 or 405). */
  op: string;
  method: string;
  path: string;
  /** Status sent; 0 when the client went away first. */
  status: number;
  ms: number;
  requestId?: string;
  context?: Record<string, string>;
  /** Why a 503 was answered. */
  reason?: UnavailableReason;
}

export function requestFinished(cfg: Pick<Config, "accessLogSample" | "accessLogErrorSample">, f: Finished): void {
  recordRequest(f.op, f.status, f.ms / 1000, f.reason);
  const failed = f.status === 0 || f.status >= 400;
  const rate = logEnabled("debug") ? 1 : failed ? cfg.accessLogErrorSample : cfg.accessLogSample;
  if (rate <= 0 || (rate < 1 && Math.random() >= rate)) return;
  log.info("access", {
    requestId: f.requestId,
    op: f.op,
    method: f.method,
    path: f.path,
    status: f.status === 0 ? "aborted" : f.status,
    ms: Math.round(f.ms * 10) / 10,
    ...(f.reason ? { reason: f.reason } : {}),
    context: f.context ?? {},
  });
}
