// Table directories this process is creating: claimed on disk, not yet named by a catalog row.
// Reclaiming orphans skips them whatever their age.

export interface Claims {
  /** Mark `location` as being created; call the returned function once a row names it (or it is gone). */
  hold(location: string): () => void;
  has(location: string): boolean;
}

export function createClaims(): Claims {
  const held = new Map<string, number>();
  return {
    hold(location) {
      held.set(location, (held.get(location) ?? 0) + 1);
      let done = false;
      return () => {
        if (done) return;
        done = true;
        const n = held.get(location)! - 1;
        if (n === 0) held.delete(location);
        else held.set(location, n);
      };
    },
    has: (location) => held.has(location),
  };
}
