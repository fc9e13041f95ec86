// The maintenance test files' rows and calls (test/maintenance*.test.ts: each file its own servers,
// so vitest runs them side by side).
import { Float64, Int64, Table, Utf8, vectorFromArray } from "apache-arrow";
import { expect } from "vitest";
import { toStream } from "./arrow.js";
import { paced } from "./pace.js";
import { serverForFile, type Quiver } from "./quiver.js";
import { settle } from "./transactions.js";

export const rows = (from: number, n: number) =>
  toStream(new Table({
    id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(from + i)), new Int64()),
    x: vectorFromArray(Array.from({ length: n }, (_, i) => (from + i) / 4), new Float64()),
    s: vectorFromArray(Array.from({ length: n }, (_, i) => `w${(from + i) % 7}`), new Utf8()),
  }));

export function calls(s: () => Quiver) {
  const post = (id: string, op: string, body?: unknown, qs = "") => s().call("POST", `/v1/table/${id}/${op}${qs}`, body);
  const insert = async (id: string, from: number, n: number) => {
    const r = await post(id, "insert", rows(from, n));
    expect(r.status, r.text).toBe(200);
  };
  const versions = async (id: string, body: Record<string, unknown> = {}) =>
    ((await post(id, "version/list", body)).json.versions as { version: number }[]).map((v) => v.version).sort((a, b) => a - b);
  const maintain = async (id: string, body: Record<string, unknown> = {}) => {
    const r = await post(id, "optimize", body);
    expect(r.status, r.text).toBe(202);
    const done = await settle(s(), r.json.job_id, 120_000);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    return done.properties;
  };
  return { post, insert, versions, maintain };
}

/** `what()` once `ok` holds of it, or after `ms` (scaled to the machine's load) whatever it is then. */
export async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, ms = 90_000): Promise<T> {
  const end = Date.now() + paced(ms);
  for (;;) {
    const v = await what();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The server of test/maintenance.test.ts and maintenance-jobs.test.ts, and its calls. Retention
 * window 0: every version not kept for another reason is removed. Maintenance runs only when asked
 * (the triggers have their own servers in maintenance-auto.test.ts) or a table's properties say so.
 */
export function askedServer() {
  const q = serverForFile({ args: ["--retain-versions-ms", "0", "--workers", "1", "--auto-maintenance", "off"] });
  const { post, insert, versions, maintain } = calls(() => q);
  const count = async (id: string, body: Record<string, unknown> = {}) => (await post(id, "count_rows", body)).json as number;

  /** Whether an automatic maintenance job of `table` succeeds within a minute (on an idle machine). */
  async function maintainedByItself(table: string): Promise<boolean> {
    for (const end = Date.now() + paced(60_000); Date.now() < end; ) {
      const jobs = (await q.call("POST", "/v1/jobs/list", { table: [table] })).json.jobs as { job_type: string; status: string }[];
      if (jobs.some((j) => j.job_type === "maintenance" && j.status === "Succeeded")) return true;
      await new Promise((res) => setTimeout(res, 100));
    }
    return false;
  }

  let n = 0;
  /** A table made of `commits` small inserts of 10 rows each. */
  async function smallCommits(commits: number): Promise<string> {
    const id = `m${++n}`;
    expect((await post(id, "create", rows(0, 10))).status).toBe(200);
    for (let i = 1; i < commits; i++) await insert(id, i * 10, 10);
    return id;
  }
  return { q, post, insert, versions, maintain, count, maintainedByItself, smallCommits };
}
