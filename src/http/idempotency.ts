// Idempotency-Key on mutations: the first answer under a key (per credential) is kept for a window
// in the shared store (src/util/system-table.ts), written before the answer leaves, so a client's
// retry after a lost answer or a 5xx, on any replica and across restarts, gets that answer instead
// of applying the mutation twice. The same key with a different request is a 409. A request claims
// its key with an insert-if-absent before it runs: of two first attempts on two replicas one runs,
// the other waits for its answer (a claim is renewed while its request runs, so a crashed replica's
// lapses). Only successful answers are kept: a failed mutation changed nothing, so its retry may run.
import { createHash, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiError, Code } from "../errors.js";
import { log } from "../log.js";
import { sqlString, type SystemRow, type SystemTable, type SystemTables } from "../util/system-table.js";

/** A kept answer (JSON or empty bodies: mutations answer nothing else). */
export interface KeptAnswer {
  status: number;
  contentType: string | null;
  body: string;
}

export type Claim =
  | { kind: "replay"; answer: KeptAnswer }
  | { kind: "new"; keep(answer: KeptAnswer | null): Promise<void> };

export interface Idempotency {
  /** Claim `key` for this request, or get the answer kept under it. */
  claim(subject: string, key: string, request: { method: string; path: string; query: string; body: Uint8Array }): Promise<Claim>;
}

const MAX_KEY = 255;
/** A running claim's life past its last renewal; renewed every third of it. */
const RUN_MS = 30_000;
/** How often a request waits to see whether another replica's request under its key finished. */
const POLL_MS = 50;
const sha = (...parts: (string | Uint8Array)[]) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex");
};

export function openIdempotency(store: SystemTables, windowMs: number, now: () => number = Date.now): Idempotency {
  // Rows keyed by the hash of credential and key; `f` hashes method, path, query and body.
  // Opened at start; an open that failed (the store out of reach for a moment) is tried again by
  // the next request under a key, which says why if it fails too.
  let opened: Promise<SystemTable> | null = null;
  const open = () =>
    (opened ??= store
      .open("idempotency", [
        { name: "state", type: "string" },
        { name: "f", type: "string" },
        { name: "owner", type: "string" },
        { name: "exp", type: "number" },
      ])
      .catch((err: unknown) => {
        opened = null;
        throw err;
      }));
  open().catch(() => undefined);
  // Requests under a key running in this process: a retry here waits for the first to finish.
  const running = new Map<string, { f: string; done: Promise<void> }>();
  let kept = 0;

  return {
    async claim(subject, key, req) {
      if (key.length === 0 || key.length > MAX_KEY) throw new ApiError(Code.InvalidInput, `Idempotency-Key: must be 1 to ${MAX_KEY} characters`);
      const table = await open();
      const k = sha(subject, key);
      const f = sha(req.method, req.path, req.query, req.body);
      const owner = randomUUID();
      const row = (state: "running" | "done", exp: number, doc: string | null): SystemRow => ({ key: k, state, f, owner, exp, doc });
      for (;;) {
        const here = running.get(k);
        if (here) {
          if (here.f !== f) throw conflict(key);
          await here.done;
          continue;
        }
        const [r] = await table.select(`key = ${sqlString(k)}`);
        if (r && (r.exp as number) > now()) {
          if (r.f !== f) throw conflict(key);
          if (r.state === "done") return { kind: "replay", answer: JSON.parse(r.doc as string) as KeptAnswer };
          // Running on another replica: its answer, its failure (the row goes) or its lapse ends the wait.
          await sleep(POLL_MS);
          continue;
        }
        const mine = row("running", now() + RUN_MS, null);
        // An expired row is taken over only as it was seen: of two replicas that saw it, one wins.
        if ((r ? await table.updateIf([mine], `target.exp = ${r.exp as number}`) : await table.insertIfAbsent([mine])) === 1) break;
      }
      let finish!: () => void;
      running.set(k, { f, done: new Promise<void>((res) => (finish = res)) });
      const renewal = setInterval(() => {
        table.updateIf([row("running", now() + RUN_MS, null)], `target.owner = ${sqlString(owner)} AND target.state = 'running'`).catch((err: unknown) => log.warn("idempotency claim not renewed", { error: String(err) }));
      }, RUN_MS / 3);
      renewal.unref();
      return {
        kind: "new",
        async keep(answer) {
          // Renewed until the answer is kept: a keep the store holds keeps its retries waiting for it.
          try {
            if (answer) await table.upsert([row("done", now() + windowMs, JSON.stringify(answer))]);
            else await table.deleteWhere(`key = ${sqlString(k)} AND owner = ${sqlString(owner)}`);
            // Expired answers are dropped now and then, by whichever replica keeps the thousandth.
            if (++kept % 1000 === 0) await table.deleteWhere(`exp <= ${now()}`);
          } finally {
            clearInterval(renewal);
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
