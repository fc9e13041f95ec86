// A read key's count_rows with `levenshtein(rpad(s,1024,'x'), rpad(s,1024,'y')) > 0` on 20,000 rows
// held every tenant's queries for minutes, no query had a time limit, and the engine went on after
// the client hung up. Now levenshtein's work (|a|·|b| a row) is priced before the engine runs it,
// every query has a deadline (--query-timeout-ms, or less by x-request-timeout-ms) answered 503
// with reason `deadline`, and a query whose client leaves pulls no further batch from the engine.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ADMIN_KEY, request, serverForFile, type FileServer } from "../helpers/quiver.js";
import { seedTable } from "../helpers/seed.js";
import { paced } from "../helpers/pace.js";

const ATTACKER = "deadline-attacker";
const OTHER = "deadline-other-tenant";
const KEYS = `${ADMIN_KEY}:admin,${ATTACKER}:read:t1,${OTHER}:read:t2`;

/** 20,000 rows of 1 KiB strings for tenant t1; 100 small rows for tenant t2. */
async function seed(dir: string): Promise<void> {
  const base = "abcdefghijklmnopqrstuvwxyz0123456789".repeat(29);
  await seedTable(dir, ["t1", "big"], Array.from({ length: 20_000 }, (_, i) => ({ id: i, s: `${i}${base}`.slice(0, 1024) })));
  await seedTable(dir, ["t2", "small"], Array.from({ length: 100 }, (_, i) => ({ id: i, name: `n${i}` })));
}

// Allowed (each call compares s with 16 characters, the most --max-expression-copies lets it) and
// slow: 20 of them over 20,000 rows of 1 KiB run for seconds of CPU, 0.2 s or so a batch.
const SLOW = Array.from({ length: 20 }, (_, i) => `levenshtein(s, '${"abcdefghijklmnopqrstuvwxyz".slice(i % 10, (i % 10) + 16)}')`).join(" + ") + " > 0";
const ATTACK = "levenshtein(rpad(s, 1024, 'x'), rpad(s, 1024, 'y')) > 0";

const as = (q: FileServer, key: string, op: string, table: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(`${q.url}/v1/table/${table}/${op}`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json", ...headers }, body: JSON.stringify(body), signal }).then(
    async (r) => ({ status: r.status, ms: 0, text: await r.text() }),
  );

async function timed<T>(p: Promise<T>): Promise<T & { ms: number }> {
  const t0 = performance.now();
  const r = await p;
  return { ...r, ms: performance.now() - t0 };
}

async function metric(q: FileServer, re: RegExp): Promise<number> {
  const text = (await request(`${q.url}/metrics`, "GET", undefined, { "x-api-key": ADMIN_KEY })).text;
  const m = re.exec(text);
  return m ? Number(m[1]) : NaN;
}

/** CPU seconds the server process has used (user + system, all its threads). */
function cpuSeconds(q: FileServer): number {
  const fields = readFileSync(`/proc/${q.proc.pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until the server uses next to no CPU for half a second; the ms that took (at most `most`). */
async function quiet(q: FileServer, most: number): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const c0 = cpuSeconds(q);
    await sleep(500);
    if (cpuSeconds(q) - c0 < 0.05 || performance.now() - t0 > most) return performance.now() - t0;
  }
}
const READS = /^quiver_engine_reads_running\{[^}]*\} (\S+)$/m;

describe("query cost and deadlines", () => {
  const q = serverForFile({ env: { QUIVER_API_KEYS: KEYS }, seed }, 120_000);

  it("(a) the levenshtein attack is 400 at once, naming the filter and the bound; a levenshtein within it is answered", async () => {
    for (const [op, body, field] of [
      ["count_rows", { predicate: ATTACK }, "predicate"],
      ["query", { filter: ATTACK, k: 10, columns: ["id"] }, "filter"],
    ] as const) {
      const r = await timed(as(q, ATTACKER, op, "t1$big", body, {}, AbortSignal.timeout(20_000)));
      expect(r.status, r.text).toBe(400);
      const detail = JSON.parse(r.text).detail as string;
      expect(detail.startsWith(`${field}: levenshtein(…) compares each character of one argument with each of the other: 1048576 steps in one row`), detail).toBe(true);
      expect(detail).toMatch(/past the limit of 1024 \(--max-expression-array\)/);
      expect(r.ms).toBeLessThan(paced(5_000));
    }
    const columns = await as(q, ATTACKER, "count_rows", "t1$big", { predicate: "levenshtein(s, rpad('x', 17, 'x')) > 0" });
    expect(columns.status).toBe(400);
    expect(JSON.parse(columns.text).detail).toMatch(/levenshtein\(…\) compares each character of column "s" with up to 17 others in one row, past the limit of 16 \(--max-expression-copies\)/);
    const two = await as(q, ATTACKER, "count_rows", "t1$big", { predicate: "levenshtein(s, upper(s)) > 0" });
    expect(two.status).toBe(400);
    expect(JSON.parse(two.text).detail).toMatch(/levenshtein\(…\) grows with the product of two stored values; give it a literal/);
    const fine = await as(q, OTHER, "count_rows", "t2$small", { predicate: "levenshtein(name, 'n7') = 0 OR levenshtein(rpad(name, 32, '-'), rpad('n8', 32, '-')) = 0" });
    expect(fine.status, fine.text).toBe(200);
    expect(JSON.parse(fine.text)).toBe(2);
  }, 60_000);

  it("a request may ask for a shorter deadline, not a malformed one", async () => {
    const bad = await as(q, OTHER, "count_rows", "t2$small", { predicate: "id < 5" }, { "x-request-timeout-ms": "soon" });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).detail).toMatch(/^x-request-timeout-ms: must be a whole number of milliseconds/);
    const r = await timed(as(q, ATTACKER, "count_rows", "t1$big", { predicate: SLOW }, { "x-request-timeout-ms": "300" }));
    expect(r.status, r.text).toBe(503);
    expect(JSON.parse(r.text).detail).toMatch(/deadline of 300 ms/);
    expect(r.ms).toBeLessThan(300 + paced(3_000));
  }, 60_000);

  it("(c) a client that leaves mid-query stops the engine's work", async () => {
    const ctl = new AbortController();
    const pending = as(q, ATTACKER, "count_rows", "t1$big", { predicate: SLOW }, {}, ctl.signal).catch((e: Error) => e);
    let running = 0;
    for (const until = performance.now() + 1_500; performance.now() < until; await sleep(100)) running = Math.max(running, await metric(q, READS));
    // The engine was working on it (the gauge saw its batch)…
    expect(running).toBeGreaterThanOrEqual(1);
    ctl.abort();
    expect(await pending).toBeInstanceOf(Error);
    // …and stops within the batch it had started: the gauge goes back to 0, and the CPU stops.
    let reads = NaN;
    for (const until = performance.now() + 8_000; performance.now() < until && reads !== 0; await sleep(100)) reads = await metric(q, READS);
    expect(reads).toBe(0);
    const cpu0 = cpuSeconds(q);
    await sleep(3_000);
    expect(cpuSeconds(q) - cpu0).toBeLessThan(0.3);
  }, 90_000);
});

describe("a server with a small --query-timeout-ms", () => {
  const q = serverForFile({ env: { QUIVER_API_KEYS: KEYS }, seed, args: ["--query-timeout-ms", "500"] }, 120_000);
  const DEADLINES = /^quiver_request_deadline_exceeded_total\{[^}]*operation="CountTableRows"[^}]*\} (\S+)$/m;

  it("(b) a slow but allowed query answers the deadline's 503 in time, counted, while another tenant is answered promptly", async () => {
    const before = await metric(q, DEADLINES);
    const slow = timed(as(q, ATTACKER, "count_rows", "t1$big", { predicate: SLOW }));
    await sleep(50);
    const other = await timed(as(q, OTHER, "count_rows", "t2$small", { predicate: "id < 10" }));
    expect(other.status, other.text).toBe(200);
    expect(JSON.parse(other.text)).toBe(10);
    expect(other.ms).toBeLessThan(paced(2_000));
    const r = await slow;
    expect(r.status, r.text).toBe(503);
    const body = JSON.parse(r.text);
    expect(body.type).toBe("/errors/service-unavailable");
    expect(body.detail).toMatch(/did not finish within its deadline of 500 ms and was stopped \(--query-timeout-ms/);
    expect(r.ms).toBeLessThan(500 + paced(3_000));
    expect(await metric(q, DEADLINES)).toBe((Number.isNaN(before) ? 0 : before) + 1);
    expect(await metric(q, /^quiver_unavailable_total\{[^}]*reason="deadline"[^}]*\} (\S+)$/m)).toBeGreaterThanOrEqual(1);

    // The engine finishes the batches it had started (2.5–3 s of this filter on 2 shared cores, measured), then stops.
    expect(await quiet(q, 20_000)).toBeLessThan(10_000);

    // A scan streamed as a query result stops at its deadline too, before its first byte.
    const scan = await timed(as(q, ATTACKER, "query", "t1$big", { filter: SLOW, k: 20_000, columns: ["id"] }));
    expect(scan.status, scan.text).toBe(503);
    expect(scan.ms).toBeLessThan(500 + paced(3_000));
    expect(await quiet(q, 20_000)).toBeLessThan(10_000);

    const after = await timed(as(q, OTHER, "query", "t2$small", { filter: "id < 3", k: 10, columns: ["id"] }, { accept: "application/json" }));
    expect(after.status, after.text).toBe(200);
    expect(JSON.parse(after.text)).toHaveLength(3);
    expect(after.ms).toBeLessThan(paced(2_000));
  }, 60_000);
});
