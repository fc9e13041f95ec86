// Whose a request is decides whose Idempotency-Keys it sees and whose rate-limit bucket it drains.
// Bearer tokens without `sub` all used to be the one subject `jwt`: a write token of ns1 and one of
// ns2 collided on an Idempotency-Key (409) and shared one bucket. Such tokens are now 401 naming the
// claim, and a bucket is the credential's id with its namespaces, so tokens of one `sub` scoped to
// two tenants share neither.
import { exportSPKI, generateKeyPair, SignJWT, type KeyLike } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startInProcess, type InProcess } from "../helpers/in-process.js";
import { ADMIN_KEY, removeDir } from "../helpers/quiver.js";

const ISSUER = "https://auth.test";
const AUDIENCE = "quiver";
let signing: KeyLike;
let jwtEnv: Record<string, string>;

const token = (claims: Record<string, unknown>, sub?: string) => {
  let t = new SignJWT(claims).setProtectedHeader({ alg: "RS256" }).setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime("5m");
  if (sub !== undefined) t = t.setSubject(sub);
  return t.sign(signing);
};
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

beforeAll(async () => {
  const pair = await generateKeyPair("RS256");
  signing = pair.privateKey;
  jwtEnv = { QUIVER_JWT_PUBLIC_KEY: await exportSPKI(pair.publicKey), QUIVER_JWT_ISSUER: ISSUER, QUIVER_JWT_AUDIENCE: AUDIENCE };
});

async function server(env: Record<string, string> = {}): Promise<InProcess> {
  return startInProcess({ env: { ...jwtEnv, ...env } });
}

describe("idempotency", () => {
  let q: InProcess;
  beforeAll(async () => {
    q = await server();
    for (const ns of ["ns1", "ns2"]) expect((await q.call("POST", `/v1/namespace/${ns}/create`, {})).status).toBe(200);
  });
  afterAll(async () => {
    await q.stop();
    removeDir(q.dataDir);
  });
  const create = (id: string, headers: Record<string, string>) => q.request("POST", `/v1/namespace/${id}/create`, {}, { "idempotency-key": "k-1", ...headers });

  it("a token without `sub` is 401 naming the claim, whatever it would cover", async () => {
    for (const ns of ["ns1", "ns2"]) {
      const r = await create(`${ns}$nosub`, bearer(await token({ role: "write", namespaces: [ns] })));
      expect(r.status, r.text).toBe(401);
      expect(r.json).toMatchObject({ code: 16, status: 401 });
      expect(r.json.detail).toMatch(/`sub`/);
      const empty = await create(`${ns}$nosub`, bearer(await token({ role: "write", namespaces: [ns] }, "")));
      expect(empty.status, empty.text).toBe(401);
    }
    expect((await q.call("POST", "/v1/namespace/list", { id: ["ns1"] })).json.namespaces ?? []).not.toContain("nosub");
  });

  it("one `sub` scoped to two tenants: the same Idempotency-Key in each runs in each", async () => {
    for (const ns of ["ns1", "ns2"]) {
      const r = await create(`${ns}$svc`, bearer(await token({ role: "write", namespaces: [ns] }, "svc")));
      expect(r.status, `${ns}: ${r.text}`).toBe(200);
    }
    for (const ns of ["ns1", "ns2"]) expect((await q.call("POST", `/v1/namespace/${ns}$svc/exists`, {})).status).toBe(200);
  });
});

describe("rate limits", () => {
  let q: InProcess;
  // One request a second per bucket, so a second request within the second is 503 in a shared bucket.
  beforeAll(async () => (q = await server({ QUIVER_RATE_LIMIT_RPS: "1" })));
  afterAll(async () => {
    await q.stop();
    removeDir(q.dataDir);
  });

  it("tokens of one `sub` scoped to two tenants drain two buckets (each request passes its limit: 404, the namespace is not there)", async () => {
    const [t1, t2] = [await token({ role: "read", namespaces: ["ns1"] }, "svc"), await token({ role: "read", namespaces: ["ns2"] }, "svc")];
    const [a, b] = await Promise.all([q.request("POST", "/v1/namespace/ns1/describe", {}, bearer(t1)), q.request("POST", "/v1/namespace/ns2/describe", {}, bearer(t2))]);
    expect(a.status, a.text).toBe(404);
    expect(b.status, b.text).toBe(404);
  });
});
