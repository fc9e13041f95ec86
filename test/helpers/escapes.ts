// The sandbox-escape test files' server, attempts and checks (test/security/sandbox-escape*.test.ts:
// each file its own server, so vitest runs them side by side).
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Float64, Int64, Table, Utf8, vectorFromArray } from "apache-arrow";
import { afterAll, expect } from "vitest";
import { toStream } from "./arrow.js";
import { ADMIN_KEY, DEFAULT_KEYS, serverForFile } from "./quiver.js";
import { settle } from "./transactions.js";

/** The exploit, verbatim. */
export const EXPLOIT = '(() => { let leak = "?"; import("x").catch((e) => { const p = e.constructor.constructor("return process")(); leak = JSON.stringify({ keys: p.env.QUIVER_API_KEYS, id: p.getBuiltinModule("child_process").execSync("id").toString() }); }); return (id) => leak; })()';

/** From the host `Function` reached through `via` (an expression of `e`, `src`), try everything and report it. */
export const attempt = (file: string) =>
  `const p = F("return process")(); const r = []; const t = (f) => { try { r.push(String(f())); } catch (err) { r.push("denied"); } };` +
  ` t(() => JSON.stringify(p.env)); t(() => JSON.stringify(p.argv)); t(() => p.getBuiltinModule("child_process").execSync("id").toString());` +
  ` t(() => p.getBuiltinModule("fs").writeFileSync(${JSON.stringify(file)}, "x")); leak = r.join("|");`;

/** Does a value from the sandbox hold anything it must never reach? */
export function assertClean(text: string, file?: string) {
  for (const [key] of DEFAULT_KEYS.split(",").map((k) => k.split(":"))) expect(text).not.toContain(key);
  expect(text).not.toContain("uid=");
  if (file) expect(existsSync(file)).toBe(false);
}

const rows = (n: number) =>
  toStream(new Table({
    id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(i)), new Int64()),
    x: vectorFromArray(Array.from({ length: n }, (_, i) => i / 2), new Float64()),
    text: vectorFromArray(Array.from({ length: n }, (_, i) => `w${i} v${i}`), new Utf8()),
  }));
export const jsColumn = (udf: string, type = "utf8") => ({ udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: "y", data_type: { type }, nullable: true }] });

/** A server for one file, a folder for the files an escape might write, and the calls on them. */
export function escapeServer() {
  const q = serverForFile({ args: ["--udf-timeout-ms", "1000", "--workers", "1"] });
  const marks = mkdtempSync(path.join(tmpdir(), "quiver-escape-"));
  afterAll(() => rmSync(marks, { recursive: true, force: true }));

  const post = (p: string, body?: unknown, key = ADMIN_KEY) => q.call("POST", p, body, { "x-api-key": key });
  let tables = 0;
  async function table(n = 20): Promise<string> {
    const id = `esc${++tables}`;
    expect((await post(`/v1/table/${id}/create`, rows(n))).status).toBe(200);
    return id;
  }
  async function addColumn(t: string, vc: object) {
    return post(`/v1/table/${t}/add_columns`, { new_columns: [{ name: "y", virtual_column: vc }] });
  }
  async function backfill(t: string) {
    const r = await post(`/v1/table/${t}/backfill_column`, { column: "y", task_size: 5, concurrency: 1 });
    expect(r.status, r.text).toBe(202);
    return settle(q, r.json.job_id, 120_000);
  }
  async function columnText(t: string): Promise<string> {
    const r = await post(`/v1/table/${t}/query`, { k: 1000, columns: { column_names: ["y"] } }, undefined);
    expect(r.status).toBe(200);
    return Buffer.from(r.bytes).toString("latin1");
  }
  return { q, marks, post, table, addColumn, backfill, columnText };
}
