// Why a request was turned away before it ran: one plain record per decision, counted by reason,
// so the access log and (later) metrics read the same data. Every refusal is a 503 "Slow down".
import { ApiError, Code } from "../errors.js";

export type RefusalReason =
  | "draining"
  | "in-flight"
  | "body-readers"
  | "address-body-readers"
  | "credential-body-readers"
  | "identity-body-readers"
  | "large-responses"
  | "response-buffer"
  | "rate-limit"
  | "concurrency-limit";

export interface Refusal {
  reason: RefusalReason;
  message: string;
  /** Whole seconds until a retry can succeed, for Retry-After. */
  retryAfterS: number;
}

const counts: Record<RefusalReason, number> = {
  draining: 0,
  "in-flight": 0,
  "body-readers": 0,
  "address-body-readers": 0,
  "credential-body-readers": 0,
  "identity-body-readers": 0,
  "large-responses": 0,
  "response-buffer": 0,
  "rate-limit": 0,
  "concurrency-limit": 0,
};

/** Refusals so far, by reason (a copy). */
export const refusalCounts = (): Record<RefusalReason, number> => ({ ...counts });

/** Count a refusal and turn it into the 503 the client gets. */
export function refusalError(r: Refusal): ApiError {
  counts[r.reason]++;
  return new ApiError(Code.ServiceUnavailable, r.message, 503, { retryAfterS: r.retryAfterS, reason: r.reason.replaceAll("-", "_") });
}
