// Idempotency-Key claims in process (src/http/idempotency.ts) over a real system table, with an
// open of that table that fails once, as a store out of reach for a moment at start does.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setImmediate as tick } from "node:timers/promises";
import { afterAll, expect, it } from "vitest";
import { openSystemTables, type SystemTables } from "../../src/engine/system-tables.js";
import { openIdempotency } from "../../src/http/idempotency.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-idem-"));
afterAll(() => rmSync(dir, { recursive: true, force: true, maxRetries: 10 }));

it("an open of its table that failed at start is tried again by the next claim: keys work without a restart", async () => {
  const store = openSystemTables(dir, {});
  let failures = 1;
  const flaky: SystemTables = { open: (name, columns) => (failures-- > 0 ? Promise.reject(new Error("store out of reach")) : store.open(name, columns)) };
  const idempotency = openIdempotency(flaky, 60_000);
  await tick();
  const request = { method: "POST", path: "/v1/table/t/insert", query: "", body: new Uint8Array([1]) };
  const first = await idempotency.claim("alice", "k-1", request);
  expect(first.kind).toBe("new");
  if (first.kind === "new") await first.keep({ status: 200, contentType: "application/json", body: "{}" });
  const retry = await idempotency.claim("alice", "k-1", request);
  expect(retry).toEqual({ kind: "replay", answer: { status: 200, contentType: "application/json", body: "{}" } });
});
