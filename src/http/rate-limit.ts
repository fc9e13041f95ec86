// Per-credential limits: a token bucket for requests per second (bursts up to one second's worth)
// and a count of requests in flight. Decisions are plain data (src/http/refusals.ts).
import type { Refusal } from "./refusals.js";

export interface RateLimits {
  rateLimitRps: number;
  rateLimitConcurrent: number;
}

export type Entry = { refusal: Refusal } | { release: () => void };

export interface RateLimiter {
  /** Let one request of `subject` in: a release to call when it ends, or why not. */
  enter(subject: string): Entry;
}

interface Bucket {
  tokens: number;
  at: number;
  active: number;
}

// Buckets of idle credentials are dropped past this many, so many short-lived JWT subjects cannot grow the map.
const PRUNE_AT = 10_000;

export function createRateLimiter(limits: RateLimits, now: () => number = Date.now): RateLimiter {
  const { rateLimitRps: rps, rateLimitConcurrent: concurrent } = limits;
  const buckets = new Map<string, Bucket>();

  const refill = (b: Bucket, t: number) => {
    if (rps > 0) b.tokens = Math.min(rps, b.tokens + ((t - b.at) / 1000) * rps);
    b.at = t;
  };

  const prune = (t: number) => {
    for (const [k, b] of buckets) {
      refill(b, t);
      if (b.active === 0 && (rps === 0 || b.tokens >= rps)) buckets.delete(k);
    }
  };

  return {
    enter(subject) {
      const t = now();
      let b = buckets.get(subject);
      if (!b) {
        if (buckets.size >= PRUNE_AT) prune(t);
        b = { tokens: rps, at: t, active: 0 };
        buckets.set(subject, b);
      }
      refill(b, t);
      if (concurrent > 0 && b.active >= concurrent) {
        return { refusal: { reason: "concurrency_limit", message: `this credential has ${concurrent} requests in flight, its limit; retry later`, retryAfterS: 1 } };
      }
      if (rps > 0) {
        if (b.tokens < 1) {
          const waitS = Math.max(1, Math.ceil((1 - b.tokens) / rps));
          return { refusal: { reason: "rate_limit", message: `this credential is limited to ${rps} requests per second; retry in ${waitS} s`, retryAfterS: waitS } };
        }
        b.tokens -= 1;
      }
      b.active++;
      const bucket = b;
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          bucket.active--;
        },
      };
    },
  };
}
