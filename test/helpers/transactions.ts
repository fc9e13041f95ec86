// Waiting on background work (index builds, backfills, view refreshes) through DescribeTransaction,
// and what a canceled backfill's records must say.
import { expect } from "vitest";
import { paced } from "./pace.js";
import type { Caller } from "./quiver.js";

export const TERMINAL = ["Succeeded", "Failed", "Canceled"];
export const terminal = (s: string) => TERMINAL.includes(s);

export interface Settled {
  status: string;
  properties: Record<string, string>;
  /** Every status seen while polling, in order. */
  seen: string[];
}

/**
 * Poll a transaction until `want(status)`; throws after `timeoutMs` (an idle machine's figure,
 * scaled to its load now). A poll costs the server a read of the job records (~3 ms of CPU, and
 * requests to its object store), so the pause between polls is a tenth of the time waited so far,
 * 20 ms to 250 ms: a state is seen within 10% of the wait for it, a long job polled 4 times a
 * second rather than 50 (docs/performance.md, The test suite).
 */
export async function until(q: Caller, tx: string, want: (status: string) => boolean, timeoutMs = 40_000): Promise<Settled> {
  const seen: string[] = [];
  const start = Date.now();
  const end = start + paced(timeoutMs);
  for (;;) {
    const r = await q.call("POST", `/v1/transaction/${tx}/describe`, {});
    if (r.status !== 200) throw new Error(`describe ${tx}: ${r.status} ${r.text}`);
    if (seen[seen.length - 1] !== r.json.status) seen.push(r.json.status);
    if (want(r.json.status)) return { ...r.json, seen };
    if (Date.now() > end) throw new Error(`transaction ${tx} still ${r.json.status}`);
    await new Promise((res) => setTimeout(res, Math.min(250, Math.max(20, (Date.now() - start) / 10))));
  }
}

/** Poll a transaction until it ends. */
export const settle = (q: Caller, tx: string, timeoutMs?: number) => until(q, tx, terminal, timeoutMs);

/**
 * A split backfill of `column` that ended (canceled, or failed by a canceled task): no commit of it
 * or of its tasks landed after their finished_at, its versions are every commit made to `table`
 * after version `from`, and its counts (and the sum of its tasks') are the rows that got values.
 */
export async function expectCountsAsCommitted(q: Caller, table: string, job: string, column: string, from: number): Promise<void> {
  const describe = async (id: string) => (await q.call("POST", `/v1/transaction/${id}/describe`, {})).json as Settled;
  const parent = await describe(job);
  const tasks = await Promise.all(parent.properties.tasks.split(",").map(describe));
  const listed = (await q.call("POST", `/v1/table/${table}/version/list`, {})).json.versions as { version: number; timestamp_millis: number }[];
  const commits = listed.filter((v) => v.version > from).sort((a, b) => a.version - b.version);
  const at = new Map(commits.map((v) => [v.version, v.timestamp_millis]));
  const versions = (p: Record<string, string>) => (p.versions ? p.versions.split(",").map(Number) : []);
  const said = JSON.stringify({ parent: parent.properties, tasks: tasks.map((t) => [t.status, t.properties]), commits });
  expect(versions(parent.properties), said).toEqual(commits.map((v) => v.version));
  for (const v of commits) expect(v.timestamp_millis, said).toBeLessThanOrEqual(Date.parse(parent.properties.finished_at));
  for (const t of tasks) {
    expect(terminal(t.status), said).toBe(true);
    for (const v of versions(t.properties)) expect(at.get(v), said).toBeLessThanOrEqual(Date.parse(t.properties.finished_at));
  }
  const valued = (await q.call("POST", `/v1/table/${table}/count_rows`, { predicate: `${column} IS NOT NULL` })).json as number;
  expect(Number(parent.properties.rows_done), said).toBe(valued);
  expect(tasks.reduce((n, t) => n + Number(t.properties.rows_done), 0), said).toBe(valued);
}
