// Unread responses: 100 clients ask for a ~36 MB result and never read. Each response holds about
// one write, results stream a few at a time (--max-large-responses), the rest wait then get 503,
// the stalled clients are cut after --response-idle-ms, and the memory comes back.
import { readFileSync } from "node:fs";
import { afterAll, expect, it } from "vitest";
import { BIG_ROWS as ROWS, seedBig } from "./helpers/big-table.js";
import { ADMIN_KEY, logLine, serverForFile, type Quiver } from "./helpers/quiver.js";
import { nonReading, type RawClient } from "./helpers/raw-http.js";

const q = serverForFile(
  {
    args: ["--max-large-responses", "2", "--response-wait-ms", "1000", "--response-idle-ms", "3000"],
    seed: seedBig,
  },
  120_000,
);
const clients: RawClient[] = [];
afterAll(() => clients.forEach((c) => c.socket.destroy()));

const rssMb = (p: Quiver) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p.proc.pid}/status`, "utf8"))![1]) / 1024;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.9) - 1];

async function countLatencies(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await q.call("POST", "/v1/table/big/count_rows", {});
    out.push(performance.now() - t);
    expect(r.status).toBe(200);
    expect(r.json).toBe(ROWS);
  }
  return out;
}

it("100 non-reading clients of a 36 MB result keep RSS under base + 300 MB and count_rows p90 within max(2x idle, 1.5 s) while they hold (a blocked one would wait for the 3 s cut), and memory returns (under base + 150 MB) after they are cut", async () => {
  const whole = await q.call("POST", "/v1/table/big/query", {});
  expect(whole.status).toBe(200);
  expect(whole.bytes.byteLength).toBeGreaterThan(35e6);
  await new Promise((r) => setTimeout(r, 1500));
  const idle = await countLatencies(100);
  const base = rssMb(q);

  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(q))), 50);
  const body = JSON.stringify({});
  for (let i = 0; i < 100; i++) clients.push(nonReading(q.port, "/v1/table/big/query", body, { "x-api-key": ADMIN_KEY }));
  await new Promise((r) => setTimeout(r, 300));
  // A reading client waits for a turn, then is told to slow down while 2 results are stalled.
  const refused = await q.call("POST", "/v1/table/big/query", {});
  expect(refused.status).toBe(503);
  expect(refused.json.detail).toBe("more than 2 query results streaming; retry later");
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  const loaded = await countLatencies(100);
  // The stalled ones are cut after 3 s without progress; the log says so.
  await logLine(q, (l) => l.includes("client took no response bytes"), 15_000);
  clearInterval(sampler);
  expect(peak - base).toBeLessThan(300);
  expect(p90(loaded)).toBeLessThanOrEqual(Math.max(2 * p90(idle), 1500));

  for (const c of clients) c.socket.destroy();
  let after = rssMb(q);
  for (let i = 0; i < 100 && after - base >= 150; i++) {
    await new Promise((r) => setTimeout(r, 100));
    after = rssMb(q);
  }
  expect(after - base).toBeLessThan(150);
  // And large results stream again.
  const again = await q.call("POST", "/v1/table/big/query", {});
  expect(again.status).toBe(200);
  expect(again.bytes.byteLength).toBe(whole.bytes.byteLength);
}, 120_000);
