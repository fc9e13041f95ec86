// The virtual-column test files' server and calls: each file (test/virtual-columns*.test.ts) starts
// its own server with these options, so vitest runs them side by side.
import { Float64, Int64, Table, Utf8, vectorFromArray } from "apache-arrow";
import { expect } from "vitest";
import { toStream } from "./arrow.js";
import { serverForFile } from "./quiver.js";
import { settle } from "./transactions.js";

export function virtualColumnServer() {
  const q = serverForFile({ args: ["--udf-timeout-ms", "1000", "--worker-heap-mb", "128", "--auto-backfill-delay-ms", "200", "--workers", "1"] });
  const post = (id: string, op: string, body?: unknown, qs = "") => q.call("POST", `/v1/table/${id}/${op}${qs}`, body);
  const count = async (id: string, predicate?: string) => (await post(id, "count_rows", predicate ? { predicate } : {})).json as number;
  const version = async (id: string) => (await post(id, "describe", {})).json.version as number;
  let tables = 0;
  const nextId = () => `vc${++tables}`;
  async function fresh(n = 1000): Promise<string> {
    const id = nextId();
    expect((await post(id, "create", rows(0, n))).status).toBe(200);
    return id;
  }
  /** Add virtual column `name`; the descriptor's output (if any) is renamed to it. */
  async function add(t: string, name: string, vc: Record<string, unknown>) {
    const outputs = (vc.outputs as Record<string, unknown>[] | undefined)?.map((o) => ({ ...o, column: name }));
    const r = await post(t, "add_columns", { new_columns: [{ name, virtual_column: { ...vc, ...(outputs ? { outputs } : {}) } }] });
    expect(r.status, r.text).toBe(200);
    return r.json.version as number;
  }
  async function backfill(t: string, body: Record<string, unknown>) {
    const r = await post(t, "backfill_column", body);
    expect(r.status, r.text).toBe(202);
    return settle(q, r.json.job_id, 120_000);
  }
  return { q, post, count, version, nextId, fresh, add, backfill };
}

export const rows = (from: number, n: number) =>
  toStream(new Table({
    id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(from + i)), new Int64()),
    x: vectorFromArray(Array.from({ length: n }, (_, i) => (from + i) / 4), new Float64()),
    s: vectorFromArray(Array.from({ length: n }, (_, i) => `w${(from + i) % 7}`), new Utf8()),
  }));
export const js = (udf: string, type = "float64", extra: Record<string, unknown> = {}) => ({ udf_backend: "js", udf, input_columns: ["x"], ...extra, outputs: [{ column: "y", data_type: { type }, nullable: true }] });
export const n = (v: string | undefined) => Number(v);
