// Table directories being created now, by any replica: claimed in the shared store before the
// directory exists, released once a catalog row names it (or it is gone). Reclaiming orphans skips
// them whatever their age. A claim is renewed while held and lapses a while after its replica
// stopped renewing it (a crash), so a dead replica's directories become reclaimable again.
import { randomUUID } from "node:crypto";
import { log } from "../log.js";
import { wallClock } from "../util/clock.js";
import { sqlString, type SystemTables } from "../util/system-table.js";

/** A claim's life past its last renewal; renewed every third of it. */
const CLAIM_MS = 60_000;

export interface Claims {
  /** Mark `location` as being created; call the returned function once a row names it (or it is gone). */
  hold(location: string): Promise<() => void>;
  /** Locations some replica holds now. */
  held(): Promise<Set<string>>;
  /** Wait for the releases under way (a shutdown: nothing of ours writes the store after it). */
  close(): Promise<void>;
}

export async function openClaims(store: SystemTables): Promise<Claims> {
  const table = await store.open("claims", [
    { name: "location", type: "string" },
    { name: "expires", type: "number" },
  ]);
  const releasing = new Set<Promise<void>>();
  return {
    async hold(location) {
      const key = randomUUID();
      const renew = () => table.upsert([{ key, location, expires: wallClock() + CLAIM_MS, doc: null }]);
      await renew();
      const timer = setInterval(() => renew().catch((err: unknown) => log.warn("claim not renewed", { location, error: String(err) })), CLAIM_MS / 3);
      timer.unref();
      let done = false;
      return () => {
        if (done) return;
        done = true;
        clearInterval(timer);
        // Left behind, the claim lapses by itself.
        const release = table.deleteWhere(`key = ${sqlString(key)}`).catch((err: unknown) => log.warn("claim not released", { location, error: String(err) }));
        releasing.add(release);
        void release.finally(() => releasing.delete(release));
      };
    },
    async held() {
      const rows = await table.select(`expires > ${wallClock()}`);
      return new Set(rows.map((r) => r.location as string));
    },
    async close() {
      await Promise.all(releasing);
    },
  };
}
