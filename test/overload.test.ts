// Overload: past --max-in-flight the answer is 503 "Slow down" with Retry-After, and the server
// keeps serving once the flood has passed; /metrics counts the 503s by reason.
import { expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { seedTable } from "./helpers/seed.js";
import { fromIPC } from "./helpers/arrow.js";
import { sample } from "./helpers/metrics.js";
import { serverForFile } from "./helpers/quiver.js";

const ROWS = 50_000;
const q = serverForFile({
  args: ["--max-in-flight", "4"],
  seed: async (dataDir) => {
    const ids = Int32Array.from({ length: ROWS }, (_, i) => i);
    await seedTable(dataDir, ["flood"], new arrow.Table({ id: arrow.makeVector(ids) }) as never);
  },
});

it("a flood gets 503 Slow down with Retry-After beyond the in-flight bound, the rest succeed", async () => {
  const replies = await Promise.all(Array.from({ length: 64 }, () => q.call("POST", "/v1/table/flood/query", {})));
  const busy = replies.filter((r) => r.status === 503);
  const ok = replies.filter((r) => r.status === 200);
  expect(busy.length + ok.length).toBe(64);
  expect(busy.length).toBeGreaterThan(0);
  expect(ok.length).toBeGreaterThanOrEqual(4);
  for (const r of busy) {
    expect(r.json).toMatchObject({ type: "/errors/service-unavailable", title: "Slow down", status: 503, code: 17 });
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
  }
  for (const r of ok) expect(fromIPC(r.bytes).numRows).toBe(ROWS);
  // Each is counted by its reason.
  const metrics = await q.call("GET", "/metrics");
  expect(sample(metrics.text, "quiver_unavailable_total", { reason: "in_flight" })).toBe(busy.length);
  // Once the flood has passed, requests are served again.
  const after = await q.call("POST", "/v1/table/flood/query", { k: 5 });
  expect(after.status).toBe(200);
  expect(fromIPC(after.bytes).numRows).toBe(5);
});
