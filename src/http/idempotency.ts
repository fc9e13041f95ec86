// Idempotency-Key on mutations: the first answer under a key (per credential) is kept for a window,
// durably (a JSON-lines log in the private directory, fsynced before the answer leaves), so a
// client's retry after a lost answer or a 5xx, even across a restart, gets that answer instead of
// applying the mutation twice. The same key with a different request is a 409. Only successful
// answers are kept: a failed mutation changed nothing, so its retry may run.
import { createHash } from "node:crypto";
import path from "node:path";
import { ApiError, Code } from "../errors.js";
import { openJsonLog, type JsonLog } from "../util/json-log.js";

/** A kept answer (JSON or empty bodies: mutations answer nothing else). */
export interface KeptAnswer {
  status: number;
  contentType: string | null;
  body: string;
}

interface Row extends KeptAnswer {
  /** Hash of credential and key. */
  k: string;
  /** Hash of method, path, query and body. */
  f: string;
  /** Expiry, ms since the epoch. */
  exp: number;
}

export type Claim =
  | { kind: "replay"; answer: KeptAnswer }
  | { kind: "new"; keep(answer: KeptAnswer | null): Promise<void> };

export interface Idempotency {
  /** Claim `key` for this request, or get the answer kept under it. */
  claim(subject: string, key: string, request: { method: string; path: string; query: string; body: Uint8Array }): Promise<Claim>;
}

const MAX_KEY = 255;
const sha = (...parts: (string | Uint8Array)[]) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex");
};

export function openIdempotency(privateDir: string, windowMs: number, now: () => number = Date.now): Idempotency {
  const log: JsonLog<Row> = openJsonLog<Row>(path.join(privateDir, "idempotency.jsonl"));
  const kept = new Map<string, Row>();
  for (const r of log.loaded) if (r.exp > now()) kept.set(r.k, r);
  // Requests under a key still running: a retry waits for the first to finish.
  const running = new Map<string, { f: string; done: Promise<void> }>();
  let appended = 0;

  const expire = () => {
    const t = now();
    for (const [k, r] of kept) if (r.exp <= t) kept.delete(k);
  };

  return {
    async claim(subject, key, req) {
      if (key.length === 0 || key.length > MAX_KEY) throw new ApiError(Code.InvalidInput, `Idempotency-Key: must be 1 to ${MAX_KEY} characters`);
      const k = sha(subject, key);
      const f = sha(req.method, req.path, req.query, req.body);
      for (;;) {
        const r = kept.get(k);
        if (r && r.exp > now()) {
          if (r.f !== f) throw conflict(key);
          return { kind: "replay", answer: { status: r.status, contentType: r.contentType, body: r.body } };
        }
        const other = running.get(k);
        if (!other) break;
        if (other.f !== f) throw conflict(key);
        await other.done;
      }
      let finish!: () => void;
      running.set(k, { f, done: new Promise<void>((res) => (finish = res)) });
      return {
        kind: "new",
        async keep(answer) {
          try {
            if (!answer) return;
            const row: Row = { k, f, exp: now() + windowMs, ...answer };
            await log.append([row]);
            kept.set(k, row);
            // The log is rewritten with only live rows once it holds twice as many as are live.
            if (++appended > 1000 && appended > 2 * kept.size) {
              expire();
              appended = kept.size;
              await log.rewrite([...kept.values()]);
            }
          } finally {
            running.delete(k);
            finish();
          }
        },
      };
    },
  };
}

const conflict = (key: string) =>
  new ApiError(Code.ConcurrentModification, `Idempotency-Key ${JSON.stringify(key)} was used for a different request; use a new key for a new request`);
