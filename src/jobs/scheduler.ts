// Background operations tracked as transactions: at most `limit` run at once, the rest wait as
// Queued in submission order. Every state change is persisted before it is reported.
// After a restart, records left Running are marked Failed (their work died with the process);
// records left Queued never started, so they are resumed in their original order.
import { randomUUID } from "node:crypto";
import { log } from "../log.js";
import { isTerminal, openStore, type TxRecord } from "./store.js";

/** A started operation: `done` settles when it ends; `cancel` keeps its result from taking effect. */
export interface Running {
  done: Promise<void>;
  cancel(): Promise<void>;
}
/** Starts the operation a record describes; a rejection fails the record with its message. */
export type Runner = (rec: TxRecord) => Promise<Running>;
export type Describe = (err: unknown) => string;

export interface Jobs {
  submit(operation: string, table: string[], spec: Record<string, unknown>): Promise<TxRecord>;
  get(id: string): TxRecord | undefined;
  /** Queued and Running records, oldest first. */
  active(): TxRecord[];
  /** Persist a changed record (properties set through AlterTransaction). */
  save(rec: TxRecord): Promise<void>;
  /** Cancel a Queued or Running record; it is Canceled when this resolves. */
  cancel(rec: TxRecord): Promise<void>;
  /** Mark running work as interrupted (it dies with the process); Queued records resume on restart. */
  close(): Promise<void>;
}

export const RESTART_MESSAGE = "interrupted by a server restart";

export function openJobs(dir: string, limit: number, runners: Record<string, Runner>, describe: Describe): Jobs {
  const store = openStore(dir);
  const running = new Map<string, Running>();
  let closed = false;

  const finish = async (rec: TxRecord, status: "Succeeded" | "Failed" | "Canceled", error?: string) => {
    rec.status = status;
    rec.finishedAt = Date.now();
    if (error !== undefined) rec.error = error;
    await store.put(rec);
  };

  /** `rec` was claimed (set Running) by pump(); it may be canceled at any await below. */
  async function start(rec: TxRecord): Promise<void> {
    await store.put(rec);
    if (rec.status !== "Running") return;
    let handle: Running;
    try {
      const runner = runners[rec.operation];
      if (!runner) throw new Error(`unknown operation ${JSON.stringify(rec.operation)}`);
      handle = await runner(rec);
    } catch (err) {
      if (rec.status === "Running") await finish(rec, "Failed", describe(err));
      return;
    }
    running.set(rec.id, handle);
    // Canceled while it was starting: the handle did not exist yet when cancel() ran.
    if ((rec.status as string) === "Canceled") await handle.cancel();
    try {
      await handle.done;
      if (rec.status === "Running") await finish(rec, "Succeeded");
    } catch (err) {
      if (rec.status === "Running") await finish(rec, "Failed", describe(err));
    }
  }

  function pump(): void {
    if (closed) return;
    const queued = store.all().filter((r) => r.status === "Queued").sort((a, b) => a.createdAt - b.createdAt);
    let slots = limit - [...store.all()].filter((r) => r.status === "Running").length;
    for (const rec of queued) {
      if (slots-- <= 0) break;
      rec.status = "Running"; // claimed now, so a second pump() does not start it too
      rec.startedAt = Date.now();
      void start(rec)
        .catch((err: unknown) => log.error("transaction failed to run", { id: rec.id, error: String(err) }))
        .finally(() => {
          running.delete(rec.id);
          pump();
        });
    }
  }

  // Recover what a previous process left behind.
  const now = Date.now();
  const interrupted = store.all().filter((r) => r.status === "Running");
  for (const r of interrupted) Object.assign(r, { status: "Failed", finishedAt: now, error: RESTART_MESSAGE });
  const ready = interrupted.length ? store.flush() : Promise.resolve();
  void ready.then(pump, (err: unknown) => log.error("cannot persist transactions", { error: String(err) }));

  return {
    async submit(operation, table, spec) {
      const rec: TxRecord = { id: randomUUID(), status: "Queued", operation, table, spec, properties: {}, createdAt: Date.now() };
      await store.put(rec);
      pump();
      return rec;
    },
    get: (id) => store.get(id),
    active: () => store.all().filter((r) => !isTerminal(r.status)).sort((a, b) => a.createdAt - b.createdAt),
    save: (rec) => store.put(rec),
    async cancel(rec) {
      if (isTerminal(rec.status)) return;
      await finish(rec, "Canceled");
      await running.get(rec.id)?.cancel();
    },
    async close() {
      closed = true;
      const now = Date.now();
      for (const r of store.all()) {
        if (r.status === "Running") Object.assign(r, { status: "Failed", finishedAt: now, error: "interrupted by a server shutdown" });
      }
      await store.flush();
    },
  };
}
