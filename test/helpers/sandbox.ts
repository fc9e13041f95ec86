// What the attacks on the compute sandbox share (test/security/sandbox-*.test.ts): two tenants with
// their own write keys, a UDF that escapes the node:vm context to its sandbox's `process` (the
// known import() escape) and runs attack code there, and a look at the server's sandbox processes
// from outside, in /proc.
import { readdirSync, readFileSync } from "node:fs";
import { Float64, Int64, Table, Utf8, vectorFromArray } from "apache-arrow";
import { expect } from "vitest";
import { toStream } from "./arrow.js";
import { processesRunning, processTable, runs } from "./processes.js";
import { ADMIN_KEY, DEFAULT_KEYS, replyOf, requestInit, type Quiver, type Reply } from "./quiver.js";

export const W1 = "k-w1";
export const W2 = "k-w2";
/** The test keys, and a write key for each of ns1 and ns2. */
export const TENANT_KEYS = `${DEFAULT_KEYS},${W1}:write:ns1,${W2}:write:ns2`;

export const rows = (n: number) =>
  toStream(new Table({
    id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(i)), new Int64()),
    x: vectorFromArray(Array.from({ length: n }, (_, i) => i / 2), new Float64()),
    text: vectorFromArray(Array.from({ length: n }, (_, i) => `w${i}`), new Utf8()),
  }));

/** A POST with `key` that gives up after `timeoutMs` (a server that hangs fails the test, not the run). */
export async function post(q: Pick<Quiver, "url">, p: string, body: unknown, key = ADMIN_KEY, timeoutMs = 30_000): Promise<Reply> {
  const res = await fetch(q.url + p, { ...requestInit("POST", body, { "x-api-key": key }), signal: AbortSignal.timeout(timeoutMs) });
  return replyOf(res.status, res.headers, new Uint8Array(await res.arrayBuffer()));
}

/** Namespaces ns1 and ns2, each with table `t` of `n` rows. */
export async function twoTenants(q: Pick<Quiver, "url">, n = 5): Promise<void> {
  for (const ns of ["ns1", "ns2"]) {
    expect((await post(q, `/v1/namespace/${ns}/create`, {})).status).toBe(200);
    expect((await post(q, `/v1/table/${ns}$t/create`, rows(n))).status).toBe(200);
  }
}

export const jsColumn = (udf: string, type = "utf8") => ({ udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: "y", data_type: { type }, nullable: true }] });
export const pyColumn = (udf: string, name?: string) => ({ udf_backend: "python", udf, ...(name ? { udf_name: name } : {}), input_columns: ["x"], outputs: [{ column: "y", data_type: { type: "utf8" }, nullable: true }] });

let columns = 0;
/** add_columns of one virtual column (a fresh name each time) to `table`, with `key`; the column's name, and how long it took, ms. */
export async function addColumn(q: Pick<Quiver, "url">, table: string, vc: { outputs: { column: string }[] }, key: string, timeoutMs?: number): Promise<Reply & { column: string; ms: number }> {
  const started = Date.now();
  const name = `c${++columns}`;
  const virtual_column = { ...vc, outputs: [{ ...vc.outputs[0], column: name }] };
  const r = await post(q, `/v1/table/${table}/add_columns`, { new_columns: [{ name, virtual_column }] }, key, timeoutMs);
  return { ...r, column: name, ms: Date.now() - started };
}

/**
 * A JavaScript UDF whose evaluation escapes to its sandbox's `process` (as `p`, with `fs` its fs
 * module and `B` its Buffer) and runs `attack` there; the function it defines returns what the
 * attack put in `leak`.
 */
export const escaping = (attack: string) =>
  `(() => { let leak = "pending"; import("x").catch((e) => { const p = e.constructor.constructor("return process")(); const fs = p.getBuiltinModule("fs"); const B = p.getBuiltinModule("buffer").Buffer; try { ${attack} } catch (err) { leak = "threw " + String(err); } }); return (x) => String(leak); })()`;

export interface SandboxProcess {
  pid: number;
  state: string;
  cpuMs: number;
}

/** Every compute sandbox process (node running workers/processes/compute.js) whose ancestors include `root`; all of them when `root` is null. */
export function sandboxProcesses(root: number | null): SandboxProcess[] {
  const table = processTable();
  const pids = root === null ? [...table].filter(([, p]) => runs(p.cmd, "compute.js")).map(([pid]) => pid) : processesRunning("compute.js", root, table);
  return pids.filter((pid) => table.get(pid)!.cmd[0] === process.execPath).map((pid) => ({ pid, state: table.get(pid)!.state, cpuMs: table.get(pid)!.cpuMs }));
}

/**
 * Threads of the sandboxes under `root` that are runnable in at least 8 of 10 looks over a second:
 * ones that spin (a loaded machine may not run them, but they stay runnable).
 */
export async function spinningThreads(root: number): Promise<number> {
  const runnable = new Map<string, number>();
  for (let i = 0; i < 10; i++) {
    for (const p of sandboxProcesses(root)) {
      try {
        for (const tid of readdirSync(`/proc/${p.pid}/task`)) {
          if (readFileSync(`/proc/${p.pid}/task/${tid}/stat`, "utf8").split(") ")[1][0] === "R") runnable.set(tid, (runnable.get(tid) ?? 0) + 1);
        }
      } catch {
        // Gone meanwhile.
      }
    }
    await sleep(100);
  }
  return [...runnable.values()].filter((n) => n >= 8).length;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
