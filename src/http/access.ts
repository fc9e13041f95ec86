// What is recorded when a request ends: its metrics (src/metrics.ts) and, sampled, one access log
// line carrying the request id and the context headers. A 401 costs its sender nothing (no key),
// so its lines are bounded: no context headers, a cut path, at most UNAUTHENTICATED_LINES_PER_S a
// second, and a count of the ones left out.
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

/** Access lines of 401 answers logged per second at most; the rest are counted in one line. */
export const UNAUTHENTICATED_LINES_PER_S = 10;
/** Longest path an unauthenticated request's line carries. */
const UNAUTHENTICATED_PATH_CHARS = 200;

const unauthenticated = { windowStart: 0, logged: 0, leftOut: 0, flush: null as ReturnType<typeof setTimeout> | null };

function logLeftOut(): void {
  log.info("unauthenticated requests not logged", { count: unauthenticated.leftOut, limitPerSecond: UNAUTHENTICATED_LINES_PER_S });
  unauthenticated.leftOut = 0;
  unauthenticated.flush = null;
}

function logUnauthenticated(f: Finished): void {
  const now = Date.now();
  const w = unauthenticated;
  if (now - w.windowStart >= 1000) {
    w.windowStart = now;
    w.logged = 0;
  }
  if (w.logged >= UNAUTHENTICATED_LINES_PER_S) {
    w.leftOut++;
    // Said once the second is over, so a flood that stops is still counted.
    w.flush ??= setTimeout(logLeftOut, 1000 - (now - w.windowStart)).unref();
    return;
  }
  w.logged++;
  const path = f.path.length > UNAUTHENTICATED_PATH_CHARS ? `${f.path.slice(0, UNAUTHENTICATED_PATH_CHARS)}…` : f.path;
  log.info("access", { requestId: f.requestId, op: f.op, method: f.method, path, status: f.status, ms: Math.round(f.ms * 10) / 10 });
}

export function requestFinished(cfg: Pick<Config, "accessLogSample" | "accessLogErrorSample">, f: Finished): void {
  recordRequest(f.op, f.status, f.ms / 1000, f.reason);
  const failed = f.status === 0 || f.status >= 400;
  const rate = logEnabled("debug") ? 1 : failed ? cfg.accessLogErrorSample : cfg.accessLogSample;
  if (rate <= 0 || (rate < 1 && Math.random() >= rate)) return;
  if (f.status === 401) return logUnauthenticated(f);
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
