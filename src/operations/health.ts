// Liveness and readiness, for process managers and load balancers: no credentials, no admission slot.
import { publicOp } from "./define.js";
import { json } from "./types.js";

export const healthz = publicOp(async () => json({ status: "ok" }));

/** Not ready while the front end drains for a shutdown, so balancers stop sending new work. */
export const readyz = publicOp(async ({ svc }) => (svc.lifecycle.draining ? json({ status: "draining" }, 503, "not_ready") : json({ status: "ready" })));
