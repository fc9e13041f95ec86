// Credentials in process: API keys (roles, namespace scopes, the body's identity) and JWT bearer
// tokens (a public key or a JWKS URL). The first start that generates a key is in auth-first-start.test.ts.
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type KeyLike } from "jose";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startInProcess, type InProcess } from "./helpers/in-process.js";
import { ADMIN_KEY, NS1_KEY, READ_KEY, removeDir, WRITE_KEY } from "./helpers/quiver.js";

const ISSUER = "https://auth.test";
const AUDIENCE = "quiver";
let q: InProcess;
let signing: KeyLike;
let otherKey: KeyLike;

async function token(claims: Record<string, unknown>, opts: { key?: KeyLike; exp?: string | number; nbf?: number } = {}) {
  let jwt = new SignJWT(claims).setProtectedHeader({ alg: "RS256" }).setIssuer(ISSUER).setAudience(AUDIENCE).setSubject("alice").setIssuedAt();
  jwt = jwt.setExpirationTime(opts.exp ?? "5m");
  if (opts.nbf !== undefined) jwt = jwt.setNotBefore(opts.nbf);
  return jwt.sign(opts.key ?? signing);
}

beforeAll(async () => {
  const pair = await generateKeyPair("RS256");
  signing = pair.privateKey;
  otherKey = (await generateKeyPair("RS256")).privateKey;
  q = await startInProcess({
    env: { QUIVER_JWT_PUBLIC_KEY: await exportSPKI(pair.publicKey), QUIVER_JWT_ISSUER: ISSUER, QUIVER_JWT_AUDIENCE: AUDIENCE },
  });
  await q.call("POST", "/v1/namespace/ns1/create", {});
  await q.call("POST", "/v1/namespace/ns2/create", {});
});
afterAll(async () => {
  await q.stop();
  removeDir(q.dataDir);
});

const describeNs = (id: string, headers: Record<string, string>, body: unknown = {}) =>
  q.request("POST", `/v1/namespace/${id}/describe`, body, headers);

describe("API keys", () => {
  it("no credentials → 401 with the spec's body", async () => {
    const r = await describeNs("ns1", {});
    expect(r.status).toBe(401);
    expect(r.json).toMatchObject({ type: "/errors/unauthorized-request", status: 401, code: 16 });
  });

  it("an unknown key → 401", async () => {
    expect((await describeNs("ns1", { "x-api-key": "nope" })).status).toBe(401);
  });

  it("a key in the body's identity works, and a header wins over it", async () => {
    expect((await describeNs("ns1", {}, { identity: { api_key: READ_KEY } })).status).toBe(200);
    const r = await describeNs("ns1", { "x-api-key": "bad" }, { identity: { api_key: READ_KEY } });
    expect(r.status).toBe(401);
  });

  it("a read key cannot write (403), a write key can", async () => {
    const r = await q.request("POST", "/v1/namespace/byread/create", {}, { "x-api-key": READ_KEY });
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ type: "/errors/forbidden-request", code: 15 });
    expect((await q.call("POST", "/v1/namespace/byread/exists", {})).status).toBe(404);
    const w = await q.request("POST", "/v1/namespace/bywrite/create", {}, { "x-api-key": WRITE_KEY });
    expect(w.status).toBe(200);
  });

  it("a key scoped to ns1 works inside ns1 and gets 403 on ns2", async () => {
    expect((await describeNs("ns1", { "x-api-key": NS1_KEY })).status).toBe(200);
    const c = await q.request("POST", "/v1/namespace/ns1$inner/create", {}, { "x-api-key": NS1_KEY });
    expect(c.status).toBe(200);
    expect((await describeNs("ns2", { "x-api-key": NS1_KEY })).status).toBe(403);
    const d = await q.request("POST", "/v1/namespace/ns2/drop", {}, { "x-api-key": NS1_KEY });
    expect(d.status).toBe(403);
    expect((await q.call("POST", "/v1/namespace/ns2/exists", {})).status).toBe(200);
  });

  it("a scoped key lists only what it may see from the root", async () => {
    const r = await q.request("GET", "/v1/namespace/%24/list", undefined, { "x-api-key": NS1_KEY });
    expect(r.status).toBe(200);
    expect(r.json.namespaces).toEqual(["ns1"]);
  });

  it("an API key is also accepted as a bearer token", async () => {
    expect((await describeNs("ns1", { authorization: `Bearer ${ADMIN_KEY}` })).status).toBe(200);
  });
});

describe("JWT bearer tokens", () => {
  it("a valid token with a role claim is accepted", async () => {
    const t = await token({ role: "read" });
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(200);
  });

  it("roles limit what a token may do", async () => {
    const t = await token({ role: ["read"] });
    const r = await q.request("POST", "/v1/namespace/jwtns/create", {}, { authorization: `Bearer ${t}` });
    expect(r.status).toBe(403);
    const w = await token({ role: ["read", "write"] });
    expect((await q.request("POST", "/v1/namespace/jwtns/create", {}, { authorization: `Bearer ${w}` })).status).toBe(200);
  });

  it("the namespaces claim scopes a token", async () => {
    const t = await token({ role: "write", namespaces: ["ns1"] });
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(200);
    expect((await describeNs("ns2", { authorization: `Bearer ${t}` })).status).toBe(403);
  });

  it("an expired token → 401", async () => {
    const t = await token({ role: "admin" }, { exp: Math.floor(Date.now() / 1000) - 60 });
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(401);
  });

  it("a token accepted once stops working when it expires (verified tokens are cached only until exp)", async () => {
    const t = await token({ role: "read" }, { exp: Math.floor(Date.now() / 1000) + 2 });
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2600));
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(401);
  });

  it("a token not valid yet → 401", async () => {
    const t = await token({ role: "admin" }, { nbf: Math.floor(Date.now() / 1000) + 3600 });
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(401);
  });

  it("a token signed by the wrong key → 401", async () => {
    const t = await token({ role: "admin" }, { key: otherKey });
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(401);
  });

  it("a wrong issuer or audience → 401", async () => {
    const wrongIss = await new SignJWT({ role: "admin" }).setProtectedHeader({ alg: "RS256" }).setIssuer("https://evil").setAudience(AUDIENCE).setExpirationTime("5m").sign(signing);
    const wrongAud = await new SignJWT({ role: "admin" }).setProtectedHeader({ alg: "RS256" }).setIssuer(ISSUER).setAudience("other").setExpirationTime("5m").sign(signing);
    expect((await describeNs("ns1", { authorization: `Bearer ${wrongIss}` })).status).toBe(401);
    expect((await describeNs("ns1", { authorization: `Bearer ${wrongAud}` })).status).toBe(401);
  });

  it("a valid token without a known role → 403", async () => {
    const t = await token({ role: "superuser" });
    expect((await describeNs("ns1", { authorization: `Bearer ${t}` })).status).toBe(403);
  });

  it("auth_token in the body's identity is a bearer token", async () => {
    const t = await token({ role: "read" });
    expect((await describeNs("ns1", {}, { identity: { auth_token: t } })).status).toBe(200);
  });
});

describe("JWKS URL", () => {
  it("verifies tokens against keys served by the authorization server's JWKS endpoint", async () => {
    const pair = await generateKeyPair("ES256");
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "ES256" };
    const jwks = http.createServer((_, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => jwks.listen(0, "127.0.0.1", r));
    const port = (jwks.address() as { port: number }).port;
    const s = await startInProcess({ env: { QUIVER_JWT_JWKS_URL: `http://127.0.0.1:${port}/jwks.json`, QUIVER_JWT_ISSUER: ISSUER } });
    const sign = (key: KeyLike) =>
      new SignJWT({ role: "read" }).setProtectedHeader({ alg: "ES256", kid: "k1" }).setIssuer(ISSUER).setSubject("bob").setExpirationTime("5m").sign(key);
    const good = await sign(pair.privateKey);
    const bad = await sign((await generateKeyPair("ES256")).privateKey);
    const list = (t: string) => s.request("GET", "/v1/namespace/%24/list", undefined, { authorization: `Bearer ${t}` });
    expect((await list(good)).status).toBe(200);
    expect((await list(bad)).status).toBe(401);
    await s.stop();
    jwks.close();
    removeDir(s.dataDir);
  });
});
