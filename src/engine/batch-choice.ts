// Whether batching searches helps on this machine, measured while it serves: every so often one
// window of batched searches and one of searches sent alone (in turn first), and batching kept only
// where its searches took measurably less time each (on 2 cores it doubled throughput; on 16 the
// engine's own threads ran separate searches faster than one multi-vector call: 0.71x for
// `multi_vector`, docs/design.md, Query batching). A closed loop of n clients answers n / latency
// searches a second, so less time a search is more searches a second, and for an open loop it is
// the latency itself.
import { log } from "../log.js";
import { recordBatchChoice } from "../metrics.js";

export interface BatchChoice {
  /** Whether a search arriving now is batched. */
  batching(now: number): boolean;
  /** A search begun with `batched` took `ms` to its answer. */
  done(batched: boolean, ms: number, now: number): void;
}

export interface ChoiceOptions {
  /** How often the two ways are measured again (0: never; batching stays on). */
  everyMs: number;
  /** How long each is measured. */
  windowMs: number;
  /** Searches each window needs for a decision (fewer: the load is too light to matter; unchanged). */
  samples: number;
  /** Batched searches must take at most this share of the time of searches sent alone. */
  gain: number;
}

export const CHOICE: ChoiceOptions = { everyMs: 30_000, windowMs: 1_000, samples: 50, gain: 0.95 };

interface Window {
  batched: boolean;
  ms: number;
  count: number;
}

export function createBatchChoice(o: ChoiceOptions = CHOICE, start = performance.now()): BatchChoice {
  let chosen = true;
  let next = start + o.everyMs;
  let first = true;
  /** The windows of a measurement under way: the current one is the last. */
  let windows: Window[] = [];
  let until = 0;

  function decide(): void {
    const [a, b] = windows;
    windows = [];
    if (a.count < o.samples || b.count < o.samples) return;
    const [on, off] = a.batched ? [a, b] : [b, a];
    const mean = (w: Window) => w.ms / w.count;
    const batching = mean(on) <= mean(off) * o.gain;
    recordBatchChoice(batching);
    if (batching !== chosen) log.info("search batching", { batching, batchedMs: +mean(on).toFixed(2), aloneMs: +mean(off).toFixed(2) });
    chosen = batching;
  }

  return {
    batching(now) {
      if (o.everyMs === 0) return true;
      if (windows.length === 0 && now >= next) {
        // Alternate which way goes first, so a load that changes within a measurement favours neither.
        windows = [{ batched: first, ms: 0, count: 0 }];
        first = !first;
        until = now + o.windowMs;
      } else if (windows.length > 0 && now >= until) {
        if (windows.length === 1) {
          windows.push({ batched: !windows[0].batched, ms: 0, count: 0 });
          until = now + o.windowMs;
        } else {
          decide();
          next = now + o.everyMs;
        }
      }
      return windows.length > 0 ? windows[windows.length - 1].batched : chosen;
    },
    done(batched, ms, now) {
      const w = windows[windows.length - 1];
      if (!w || w.batched !== batched || now > until) return;
      w.ms += ms;
      w.count++;
    },
  };
}
