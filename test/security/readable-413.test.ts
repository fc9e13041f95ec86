// A body past its limit is refused with 413. The server answered at once and closed while the
// client was still writing, so Node's fetch (undici) and Python's requests, which write the whole
// body before they read, failed with EPIPE and never saw the 413 (curl did). Now, for a body
// announced at most 32 MiB long (DRAIN_BYTES), the rest is read and dropped after the answer and
// the connection stays usable; a longer one is still answered and closed at once.
import net from "node:net";
import { expect, it } from "vitest";
import { ADMIN_KEY, READ_KEY, serverForFile } from "../helpers/quiver.js";
import { bodyOf, statusOf } from "../helpers/raw-http.js";
import { paced } from "../helpers/pace.js";

const q = serverForFile();
const MB10 = JSON.stringify({ pad: "x".repeat(10 << 20) });

it("Node's fetch with a 10 MB JSON body gets the 413 and its JSON error, for any key", async () => {
  for (const [key, path] of [[ADMIN_KEY, "/v1/namespace/big/create"], [READ_KEY, "/v1/table/t/count_rows"]]) {
    const r = await fetch(`${q.url}${path}`, { method: "POST", body: MB10, headers: { "content-type": "application/json", "x-api-key": key } });
    expect(r.status).toBe(413);
    const err = await r.json();
    expect(err).toMatchObject({ status: 413, code: 13 });
    expect(err.detail).toMatch(/^JSON body larger than the limit of 1048576 bytes \(--max-json-body\)/);
  }
  expect((await q.call("POST", "/v1/namespace/big/exists", {})).status).toBe(404);
});

/** Write `head`, then `length` bytes of `x`, then `after`; resolve with what came back once `done` says so or the socket closes. */
function raw(head: string, length: number, after: string, done: (got: string) => boolean): Promise<{ got: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(q.port, "127.0.0.1");
    let got = "";
    const finish = (closed: boolean) => {
      socket.destroy();
      resolve({ got, closed });
    };
    socket.on("error", () => undefined);
    socket.on("data", (d) => {
      got += d.toString("latin1");
      if (done(got)) finish(false);
    });
    socket.on("close", () => finish(true));
    socket.write(head);
    const chunk = Buffer.alloc(1 << 16, 0x78);
    let sent = 0;
    const step = () => {
      while (sent < length && !socket.destroyed) {
        const n = Math.min(chunk.length, length - sent);
        sent += n;
        if (!socket.write(chunk.subarray(0, n))) return void socket.once("drain", step);
      }
      if (!socket.destroyed) socket.write(after);
    };
    step();
  });
}

const post = (path: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: ${ADMIN_KEY}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`;

it("after a 413 the rest of the body is dropped and the connection serves the next request", async () => {
  const next = `GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`;
  const { got } = await raw(post("/v1/namespace/big/create", 10 << 20), 10 << 20, next, (g) => g.includes('{"status":"ok"}'));
  expect(statusOf(got)).toBe(413);
  expect(got).toMatch(/HTTP\/1\.1 200 OK[\s\S]*"status":"ok"/);
});

it("a body announced past 32 MiB is answered 413 and closed at once, unread", async () => {
  const started = Date.now();
  const { got, closed } = await raw(post("/v1/namespace/big/create", 64 << 20), 0, "", () => false);
  expect(closed).toBe(true);
  expect(statusOf(got)).toBe(413);
  expect(JSON.parse(bodyOf(got)).detail).toMatch(/larger than the limit/);
  expect(Date.now() - started).toBeLessThan(paced(8_000));
});
