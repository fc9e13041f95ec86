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
function pastCap(p: ErrorPolicy, failed: number, total: number): string | null {
  if (p.maxSkipCount !== null && failed > p.maxSkipCount) return `${failed} rows failed, more than error_handling.max_skip_count (${p.maxSkipCount})`;
  if (p.maxSkipFraction !== null && failed > p.maxSkipFraction * total) return `${failed} of ${total} rows failed, more than error_handling.max_skip_fraction (${p.maxSkipFraction})`;
  return null;
}

/** What `underPolicy` needs of an input: its rows, and a part of them. */
export interface Rows<T> {
  numRows: number;
  slice(begin: number, end: number): T;
}

/**
 * Run `work` on `input` under policy `p`: a failure is retried up to max_attempts; under skip, an
 * input that still fails is split in halves until the failing rows stand alone (`split` false: it
 * is skipped whole, for work over a whole partition), and each of those goes to `skip`, whose
 * answers `join` puts back together with the parts that worked.
 */
export async function underPolicy<T extends Rows<T>, R>(
  p: ErrorPolicy,
  input: T,
  work: (part: T) => Promise<R>,
  skip: (part: T, err: unknown) => R,
  join: (parts: R[]) => R,
  split = true,
): Promise<R> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(input);
    } catch (err) {
      if (attempt < p.maxAttempts) continue;
      if (p.mode !== "skip") throw err;
      if (!split || input.numRows <= 1) return skip(input, err);
      const half = Math.ceil(input.numRows / 2);
      const parts = [input.slice(0, half), input.slice(half, input.numRows)];
      return join(await Promise.all(parts.map((part) => underPolicy(p, part, work, skip, join, split))));
    }
  }
}

/** A row (or a partition) a skip policy left out: its key (as JSON) and why. */
export interface FailedRow {
  key: string;
  error: string;
}

/** How many failing rows a job lists (all are counted). */
const FAILED_ROWS_LISTED = 10;

/** The failures a job's skip policy recorded so far, resumed from its last progress. */
export interface Failures {
  rows_failed: number;
  failed_rows: FailedRow[];
}

/**
 * Record `rows` failed rows named by `key` (listed while fewer than FAILED_ROWS_LISTED are); throws
 * the job's error once the failures pass the policy's cap of `total` rows.
 */
export function recordFailure(p: ErrorPolicy, f: Failures, rows: number, key: string, err: unknown, total: number): void {
  f.rows_failed += rows;
  if (f.failed_rows.length < FAILED_ROWS_LISTED) f.failed_rows.push({ key, error: err instanceof Error ? err.message : String(err) });
  const cap = pastCap(p, f.rows_failed, total);
  if (cap) throw new Error(cap);
}
