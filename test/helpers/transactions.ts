// Waiting on background work (index builds, backfills, view refreshes) through DescribeTransaction.
import type { Caller } from "./quiver.js";

export const TERMINAL = ["Succeeded", "Failed", "Canceled"];
export const terminal = (s: string) => TERMINAL.includes(s);

export interface Settled {
  status: string;
  properties: Record<string, string>;
  /** Every status seen while polling, in order. */
  seen: string[];
}

/** Poll a transaction until `want(status)`; throws after `timeoutMs`. */
export async function until(q: Caller, tx: string, want: (status: string) => boolean, timeoutMs = 40_000): Promise<Settled> {
  const seen: string[] = [];
  const end = Date.now() + timeoutMs;
  for (;;) {
    const r = await q.call("POST", `/v1/transaction/${tx}/describe`, {});
    if (r.status !== 200) throw new Error(`describe ${tx}: ${r.status} ${r.text}`);
    if (seen[seen.length - 1] !== r.json.status) seen.push(r.json.status);
    if (want(r.json.status)) return { ...r.json, seen };
    if (Date.now() > end) throw new Error(`transaction ${tx} still ${r.json.status}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** Poll a transaction until it ends. */
export const settle = (q: Caller, tx: string, timeoutMs?: number) => until(q, tx, terminal, timeoutMs);
