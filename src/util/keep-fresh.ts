// Re-checks ahead of need for what is cached within a consistency interval (the catalog, the view
// definitions, open table handles). A read finding its cache older than the interval waits for a
// storage check (on an object store, a listing: a round trip). So while something is still being
// read, it is re-checked in the background once three quarters of an interval old, and a read
// after a pause finds it fresh. Reads keep their own check for when this falls behind: a cache is
// never read older than the interval.

/** How stale a cache may be read, and how long after its last read it is kept fresh (0: not). */
export interface Freshness {
  intervalMs: number;
  keepMs: number;
}

/** What one cached thing tells the re-checker. */
export interface Kept {
  /** When it was last read. */
  usedAt: number;
  /** When it was last checked. */
  checkedAt: number;
}

/** Below this a tick would cost more than the waits it saves: reads check for themselves. */
const SHORTEST_TICK_MS = 25;
/** Background checks under way at once, so many tables read at once cannot flood the store. */
const MOST_AHEAD = 8;

/**
 * Every eighth of an interval, `check` each item read within `keepMs` whose last check is at
 * least three quarters of an interval old (so a check has an eighth of an interval to finish
 * before a read would wait for it). Returns the stop.
 */
export function keepFresh<T extends Kept>(f: Freshness, items: () => Iterable<T>, check: (item: T) => Promise<void>): () => void {
  const tick = f.intervalMs / 8;
  if (f.keepMs <= 0 || tick < SHORTEST_TICK_MS) return () => undefined;
  const running = new Set<T>();
  const timer = setInterval(() => {
    const now = Date.now();
    for (const it of items()) {
      if (running.size >= MOST_AHEAD) return;
      if (running.has(it) || now - it.usedAt > f.keepMs || now - it.checkedAt < (f.intervalMs * 3) / 4) continue;
      running.add(it);
      void check(it).finally(() => running.delete(it));
    }
  }, tick);
  timer.unref();
  return () => clearInterval(timer);
}

/** Job processes: every read checks storage, and nothing is kept fresh in between. */
export const CHECK_EVERY_READ: Freshness = { intervalMs: 0, keepMs: 0 };
