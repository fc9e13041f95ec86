// Liveness and readiness, for process managers and load balancers: no credentials, no admission slot.
import { publicOp } from "./define.js";
import { json } from "./types.js";

export const healthz = publicOp(async () => json({ status: "ok" }));

/**
 * Not ready while the front end drains for a shutdown, while a directory it must write is not
 * writable (found at start), while serving indexes load at start (up to --warm-timeout-ms), and
 * while every execution slot is taken: balancers send elsewhere.
 */
export const readyz = publicOp(async ({ svc }) => {
  const l = svc.lifecycle;
  if (l.draining) return json({ status: "draining" }, 503, "not_ready");
  if (l.unready !== null) return json({ status: "not_ready", reason: l.unready }, 503, "not_ready");
  if (l.warming > 0 && !l.warmTimedOut) return json({ status: "not_ready", reason: "warming", tables: l.warming }, 503, "not_ready");
  if (l.full) return json({ status: "busy", reason: `every one of --max-in-flight ${svc.config.maxInFlight} execution slots is taken` }, 503, "not_ready");
  return json({ status: "ready" });
});
