// Slow uploads: a body still arriving holds no execution slot, and one arriving slower than the
// configured pace is answered 408 with the error body (and logged); past --max-body-readers new
// uploads get 503 while requests without a body keep running.
import { afterAll, expect, it } from "vitest";
import { ADMIN_KEY, logLine, serverForFile } from "./helpers/quiver.js";
import { bodyOf, slowUpload, statusOf, type RawClient } from "./helpers/raw-http.js";

const q = serverForFile({ args: ["--max-in-flight", "4", "--max-body-readers", "6", "--body-timeout-ms", "1500", "--body-min-rate", "1000"] });
const clients: RawClient[] = [];
afterAll(() => clients.forEach((c) => c.socket.destroy()));

const BODY = JSON.stringify({ id: ["slow"], padding: "x".repeat(400) });

it("4 uploads at 1 byte/s hold no execution slot of --max-in-flight 4: 20 describes meanwhile all answer 200", async () => {
  expect((await q.call("POST", "/v1/namespace/slow/create", {})).status).toBe(200);
  const slow = Array.from({ length: 4 }, () => slowUpload(q.port, "/v1/namespace/slow/describe", BODY, { "x-api-key": ADMIN_KEY }, 1000));
  clients.push(...slow);
  await new Promise((r) => setTimeout(r, 300));
  for (let i = 0; i < 20; i++) expect((await q.call("POST", "/v1/namespace/slow/describe", {})).status).toBe(200);
});

it("an upload slower than 1.5 s + 1 s per 1000 bytes is answered 408 with the error body, logged, and the connection closed", async () => {
  const c = slowUpload(q.port, "/v1/namespace/slow/describe", BODY, { "x-api-key": ADMIN_KEY }, 1000);
  clients.push(c);
  await c.closed;
  expect(statusOf(c.received())).toBe(408);
  const body = JSON.parse(bodyOf(c.received()));
  expect(body).toMatchObject({ status: 408, type: "/errors/request-timeout", code: 13, instance: "/v1/namespace/slow/describe" });
  expect(body.detail).toMatch(/JSON body: \d+ of \d+ bytes arrived in [\d.]+ s/);
  await logLine(q, (l) => l.includes('"request body too slow"'));
});

it("past --max-body-readers 6 a new upload gets 503 Slow down, while a request without a body is answered 200", async () => {
  const slow = Array.from({ length: 6 }, () => slowUpload(q.port, "/v1/namespace/slow/describe", BODY, { "x-api-key": ADMIN_KEY }, 1000));
  clients.push(...slow);
  await new Promise((r) => setTimeout(r, 300));
  const busy = await q.call("POST", "/v1/namespace/slow/describe", { id: ["slow"] });
  expect(busy.status).toBe(503);
  expect(busy.json).toMatchObject({ title: "Slow down", detail: "more than 6 request bodies arriving; retry later" });
  expect((await q.call("GET", "/v1/namespace/slow/list")).status).toBe(200);
  // Once the slow ones are cut (408), uploads are accepted again.
  await Promise.all(slow.map((c) => c.closed));
  expect((await q.call("POST", "/v1/namespace/slow/describe", { id: ["slow"] })).status).toBe(200);
});
