// The bound on what responses hold for clients that have not taken it yet. Two measures: bytes
// Quiver has written to sockets that the clients have not read (all responses together), and
// results streaming at once; the engine reads ahead of a stalled result (a 35 MB scan held about
// its whole result per stalled client, measured), and no byte count in Quiver sees that memory,
// so a turn is taken before such a result is computed. Past either bound a new result waits for a
// turn (up to a deadline), then is refused.
import type { Refusal } from "./refusals.js";

export interface ResponseBudget {
  /** Take a turn for a result about to be computed: null when granted, else why not. */
  take(signal: AbortSignal): Promise<Refusal | null>;
  /** Give a turn back (the response ended). */
  give(): void;
  /** Bytes buffered for clients changed by `delta` (negative when they read). */
  hold(delta: number): void;
  /** Plain counters, for logs and metrics. */
  state(): { turns: number; bufferedBytes: number; waiting: number };
}

export interface BudgetLimits {
  maxLargeResponses: number;
  maxResponseBufferBytes: number;
  responseWaitMs: number;
}

export function createResponseBudget(limits: BudgetLimits): ResponseBudget {
  let turns = 0;
  let buffered = 0;
  const waiters: (() => void)[] = [];
  const full = () => turns >= limits.maxLargeResponses || buffered >= limits.maxResponseBufferBytes;
  // A woken waiter's turn is counted here, synchronously, so one release wakes one waiter.
  const wake = () => {
    while (waiters.length && !full()) {
      turns++;
      waiters.shift()!();
    }
  };
  const refusal = (): Refusal =>
    turns >= limits.maxLargeResponses
      ? { reason: "large_responses", message: `more than ${limits.maxLargeResponses} query results streaming; retry later`, retryAfterS: 1 }
      : { reason: "response_buffer", message: `responses hold more than ${limits.maxResponseBufferBytes} bytes their clients have not read; retry later`, retryAfterS: 1 };

  return {
    async take(signal) {
      if (!full() && waiters.length === 0) {
        turns++;
        return null;
      }
      const granted = await new Promise<boolean>((resolve) => {
        const go = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", leave);
          resolve(true);
        };
        const leave = () => {
          const i = waiters.indexOf(go);
          if (i >= 0) waiters.splice(i, 1);
          clearTimeout(timer);
          resolve(false);
        };
        const timer = setTimeout(leave, limits.responseWaitMs);
        signal.addEventListener("abort", leave, { once: true });
        waiters.push(go);
      });
      return granted ? null : refusal();
    },
    give() {
      turns--;
      wake();
    },
    hold(delta) {
      buffered += delta;
      if (delta < 0) wake();
    },
    state: () => ({ turns, bufferedBytes: buffered, waiting: waiters.length }),
  };
}
