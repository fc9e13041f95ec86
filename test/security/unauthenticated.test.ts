// What a client without a valid credential can cost, and credentials that never end. Before: every
// 401 was logged with all of its `x-svc-ctx-*` headers (~2.4 KB a line; one client made 68 MB of
// log in 5 s); a keyless 1 MB JSON body was read and parsed to find its `identity` (8 connections
// at 42/s pushed another tenant's count_rows p50 from 3.6 to 252 ms); a JWT without `exp` was
// accepted forever.
import { generateKeyPairSync } from "node:crypto";
import net from "node:net";
import { SignJWT } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { UNAUTHENTICATED_LINES_PER_S } from "../../src/http/access.js";
import { ADMIN_KEY, request, serverForFile } from "../helpers/quiver.js";
import { statusOf, bodyOf } from "../helpers/raw-http.js";
import { paced } from "../helpers/pace.js";

const R1 = "k-r1";
const ISSUER = "https://auth.test";
const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
const q = serverForFile({
  args: ["--jwt-max-lifetime-s", "3600"],
  env: {
    QUIVER_API_KEYS: `${ADMIN_KEY}:admin,${R1}:read:ns1`,
    QUIVER_LOG_LEVEL: "info",
    QUIVER_JWT_PUBLIC_KEY: publicKey.export({ type: "spki", format: "pem" }).toString(),
    QUIVER_JWT_ISSUER: ISSUER,
  },
});

beforeAll(async () => {
  expect((await q.call("POST", "/v1/namespace/ns1/create", {})).status).toBe(200);
  const rows = JSON.stringify([{ id: 1 }, { id: 2 }]);
  expect((await q.call("POST", "/v1/table/ns1$t/create", rows, { "content-type": "application/json" })).status).toBe(200);
});

/** Forty context headers of 60 bytes: what the attack sent with each request. */
const CONTEXT = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`x-svc-ctx-k${i}`, `secret-${"v".repeat(53)}`]));
const lines = () => q.stderr().split("\n").filter((l) => l !== "");

describe("401 answers", () => {
  it("are logged in bounded lines: no context headers, at most the limit a second, the rest counted", async () => {
    const N = 300;
    const started = Date.now();
    for (let round = 0; round < N / 30; round++) {
      const replies = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          i % 2 === 0
            ? request(`${q.url}/v1/namespace/ns1/describe`, "POST", {}, { "x-api-key": "not-a-key", ...CONTEXT })
            : request(`${q.url}/v1/table/ns1$t/count_rows`, "POST", {}, CONTEXT),
        ),
      );
      for (const r of replies) expect(r.status).toBe(401);
    }
    const seconds = Math.ceil((Date.now() - started) / 1000) + 1;
    await new Promise((r) => setTimeout(r, 1500));
    const logged = lines().filter((l) => l.includes('"status":401'));
    const leftOut = lines().filter((l) => l.includes('"msg":"unauthenticated requests not logged"'));
    expect(logged.length).toBeLessThanOrEqual(UNAUTHENTICATED_LINES_PER_S * seconds);
    expect(leftOut.length).toBeGreaterThan(0);
    expect(logged.length + leftOut.reduce((n, l) => n + JSON.parse(l).count, 0)).toBe(N);
    for (const l of [...logged, ...leftOut]) {
      expect(l.length).toBeLessThan(400);
      expect(l).not.toContain("secret-");
    }
  });
});

/** Headers announcing a `length`-byte JSON body, then its first `sent` bytes; resolves with what the server answered. */
function announce(path: string, length: number, sent: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(q.port, "127.0.0.1");
    let got = "";
    socket.on("error", () => undefined);
    socket.on("data", (d) => (got += d.toString("latin1")));
    socket.on("close", () => resolve(got));
    socket.write(`POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n${sent}`);
    setTimeout(() => socket.destroy(), 5_000);
  });
}

describe("bodies without a credential header", () => {
  const identity = { api_key: R1 };

  it("a small body carrying `identity` still authenticates (lance-namespace clients)", async () => {
    const r = await request(`${q.url}/v1/table/ns1$t/count_rows`, "POST", { identity, context: { pad: "x".repeat(30_000) } });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toBe(2);
  });

  it("one announced past --max-identity-body is 413 at once, unread, naming the limit; with a header the same body is read", async () => {
    const started = Date.now();
    const raw = await announce("/v1/table/ns1$t/count_rows", 1 << 20, `{"identity":{"api_key":"${R1}"},"context":{"pad":"`);
    expect(statusOf(raw)).toBe(413);
    expect(Date.now() - started).toBeLessThan(paced(4_000));
    expect(JSON.parse(bodyOf(raw)).detail).toMatch(/^JSON body larger than the limit of 65536 bytes \(--max-identity-body, .*send x-api-key or Authorization/);
    const big = { identity, context: { pad: "x".repeat(1 << 19) } };
    expect((await request(`${q.url}/v1/table/ns1$t/count_rows`, "POST", big)).status).toBe(413);
    expect((await request(`${q.url}/v1/table/ns1$t/count_rows`, "POST", big, { "x-api-key": R1 })).json).toBe(2);
  });
});

describe("bearer JWTs", () => {
  const bearer = async (build: (t: SignJWT) => SignJWT) => {
    const t = await build(new SignJWT({ role: "read" }).setProtectedHeader({ alg: "ES256" }).setIssuer(ISSUER).setSubject("s")).sign(privateKey);
    return (await request(`${q.url}/v1/namespace/ns1/describe`, "POST", {}, { authorization: `Bearer ${t}` })).status;
  };
  const now = () => Math.floor(Date.now() / 1000);

  it("without `exp` is 401", async () => {
    expect(await bearer((t) => t.setIssuedAt())).toBe(401);
    expect(await bearer((t) => t)).toBe(401);
  });

  it("valid for longer than --jwt-max-lifetime-s (from `iat`, or from now without one) is 401; within it, 200", async () => {
    expect(await bearer((t) => t.setIssuedAt().setExpirationTime("5m"))).toBe(200);
    expect(await bearer((t) => t.setExpirationTime("5m"))).toBe(200);
    expect(await bearer((t) => t.setIssuedAt().setExpirationTime("2h"))).toBe(401);
    expect(await bearer((t) => t.setExpirationTime("2h"))).toBe(401);
    expect(await bearer((t) => t.setIssuedAt(now() - 86_400).setExpirationTime(now() + 60))).toBe(401);
    expect(await bearer((t) => t.setIssuedAt().setExpirationTime(now() + 100 * 365 * 86_400))).toBe(401);
  });
});
