// Why a request was turned away before it ran: one plain record per decision, whose reason the
// access log and the quiver_unavailable_total metric both report. Every refusal is a 503 "Slow down".
import { ApiError, Code } from "../errors.js";
import type { UnavailableReason } from "../metrics.js";

export interface Refusal {
  reason: UnavailableReason;
  message: string;
  /** Whole seconds until a retry can succeed, for Retry-After. */
  retryAfterS: number;
}

/** Turn a refusal into the 503 the client gets. */
export function refusalError(r: Refusal): ApiError {
  return new ApiError(Code.ServiceUnavailable, r.message, 503, { retryAfterS: r.retryAfterS, reason: r.reason });
}
