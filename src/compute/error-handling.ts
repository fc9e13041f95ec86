// Per-row error policies of a backfill (`error_handling`): fail the job on the first failing row
// (the default), retry a failing task, or skip the rows that still fail (their value stays null;
// the job counts and lists them) up to a cap past which the job fails anyway. Geneva's serialized
// ErrorHandlingConfig keys are accepted where they map: `fault_isolation` ("fail_batch" is fail,
// "skip_rows" is skip), `max_skip_count`, `max_skip_fraction`; `log_errors` changes nothing here.
import { invalid } from "../errors.js";

export interface ErrorPolicy {
  mode: "fail" | "retry" | "skip";
  /** Runs of a failing task (or row) before it counts as failed: 1 unless mode is retry or skip with attempts. */
  maxAttempts: number;
  /** skip: the most rows that may fail, as a count and as a fraction of the rows to compute. */
  maxSkipCount: number | null;
  maxSkipFraction: number | null;
}

export interface ErrorHandlingBody {
  mode?: "fail" | "retry" | "skip";
  max_attempts?: number;
  max_skip_count?: number;
  max_skip_fraction?: number;
  fault_isolation?: "fail_batch" | "skip_rows";
  log_errors?: boolean;
}

export const FAIL: ErrorPolicy = { mode: "fail", maxAttempts: 1, maxSkipCount: null, maxSkipFraction: null };

/** The policy a request gives (the body is already checked for types); 400 when its parts disagree. */
export function errorPolicy(b: ErrorHandlingBody | null | undefined): ErrorPolicy {
  if (!b) return FAIL;
  const isolation = b.fault_isolation === "skip_rows" ? "skip" : b.fault_isolation === "fail_batch" ? "fail" : undefined;
  if (b.mode !== undefined && isolation !== undefined && (b.mode === "skip") !== (isolation === "skip")) {
    throw invalid(`error_handling: mode ${JSON.stringify(b.mode)} contradicts fault_isolation ${JSON.stringify(b.fault_isolation)}`);
  }
  const mode = b.mode ?? isolation ?? "fail";
  if (mode === "fail" && (b.max_attempts ?? 1) > 1) throw invalid("error_handling.max_attempts: applies to mode retry or skip");
  if (mode !== "skip" && (b.max_skip_count !== undefined || b.max_skip_fraction !== undefined)) throw invalid("error_handling.max_skip_count, max_skip_fraction: apply to mode skip");
  return {
    mode,
    maxAttempts: b.max_attempts ?? (mode === "retry" ? 3 : 1),
    maxSkipCount: b.max_skip_count ?? null,
    maxSkipFraction: b.max_skip_fraction ?? null,
  };
}

/** The rows failed so far exceed the policy's cap: the job's error, else null. */
export function pastCap(p: ErrorPolicy, failed: number, total: number): string | null {
  if (p.maxSkipCount !== null && failed > p.maxSkipCount) return `${failed} rows failed, more than error_handling.max_skip_count (${p.maxSkipCount})`;
  if (p.maxSkipFraction !== null && failed > p.maxSkipFraction * total) return `${failed} of ${total} rows failed, more than error_handling.max_skip_fraction (${p.maxSkipFraction})`;
  return null;
}
