// Per-credential limits: past --rate-limit-rps a credential gets 503 "Slow down" with Retry-After
// computed from the limit; past --rate-limit-concurrent, 503 while its requests run; other
// credentials are not affected.
import { expect, it } from "vitest";
import { ADMIN_KEY, READ_KEY, serverForFile, type Reply } from "./helpers/quiver.js";
import { nonReading } from "./helpers/raw-http.js";
import { arrow } from "../src/engine/arrow.js";
import { seedTable } from "./helpers/seed.js";

const q = serverForFile({
  args: ["--rate-limit-rps", "5", "--rate-limit-concurrent", "2", "--response-idle-ms", "2000"],
  seed: async (dataDir) => {
    const ids = Int32Array.from({ length: 2_000_000 }, (_, i) => i);
    await seedTable(dataDir, ["many"], new arrow.Table({ id: arrow.makeVector(ids), pad: arrow.makeVector(new Float64Array(2_000_000)) }) as never);
  },
});

it("past 5 requests/s a credential gets 503 Slow down with Retry-After: 1 and a reason; another credential is served", async () => {
  // One request at a time (the credential may have 2 in flight) until the bucket is empty: a loaded
  // machine may answer fewer than 5 a second for a while, so the first 503 is waited for, not timed.
  const replies: Reply[] = [];
  for (const end = Date.now() + 40_000; Date.now() < end && !replies.some((r) => r.status === 503); ) {
    replies.push(await q.call("GET", "/v1/namespace/$/list", undefined, { "x-api-key": READ_KEY }));
  }
  const limited = replies.filter((r) => r.status === 503);
  expect(replies.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(5);
  expect(limited.length).toBeGreaterThan(0);
  for (const r of limited) {
    expect(r.json).toMatchObject({ title: "Slow down", status: 503, detail: "this credential is limited to 5 requests per second; retry in 1 s" });
    expect(r.headers.get("retry-after")).toBe("1");
  }
  expect((await q.call("GET", "/v1/namespace/$/list", undefined, { "x-api-key": ADMIN_KEY })).status).toBe(200);
  // The bucket refills at the limit's rate.
  await new Promise((r) => setTimeout(r, 1100));
  expect((await q.call("GET", "/v1/namespace/$/list", undefined, { "x-api-key": READ_KEY })).status).toBe(200);
}, 60_000);

it("past 2 concurrent requests a credential gets 503 until one of them ends", async () => {
  await new Promise((r) => setTimeout(r, 1100));
  // Two large results nobody reads hold the credential's two places until they are cut.
  const held = [nonReading(q.port, "/v1/table/many/query", "{}", { "x-api-key": READ_KEY }), nonReading(q.port, "/v1/table/many/query", "{}", { "x-api-key": READ_KEY })];
  await new Promise((r) => setTimeout(r, 500));
  const r = await q.call("POST", "/v1/table/many/count_rows", {}, { "x-api-key": READ_KEY });
  expect(r.status).toBe(503);
  expect(r.json.detail).toBe("this credential has 2 requests in flight, its limit; retry later");
  expect((await q.call("POST", "/v1/table/many/count_rows", {}, { "x-api-key": ADMIN_KEY })).status).toBe(200);
  // Cut after 2 s without progress, they give their places back.
  let after = r;
  for (let i = 0; i < 50 && after.status !== 200; i++) {
    await new Promise((res) => setTimeout(res, 200));
    after = await q.call("POST", "/v1/table/many/count_rows", {}, { "x-api-key": READ_KEY });
  }
  expect(after.status).toBe(200);
  for (const c of held) c.socket.destroy();
});
