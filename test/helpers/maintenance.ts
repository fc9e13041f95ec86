// The maintenance test files' rows and calls (test/maintenance*.test.ts: each file its own servers,
// so vitest runs them side by side).
import { Float64, Int64, Table, Utf8, vectorFromArray } from "apache-arrow";
import { expect } from "vitest";
import { toStream } from "./arrow.js";
import { paced } from "./pace.js";
import type { Quiver } from "./quiver.js";
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

