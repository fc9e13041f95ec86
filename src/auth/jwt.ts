// Bearer JWTs from an OAuth 2.0 authorization server, verified with jose against a JWKS URL
// or a PEM public key; claims map to a role and namespace prefixes by configuration.
import { createPublicKey, type KeyObject } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from "jose";
import { SEP } from "../catalog/names.js";
import type { Config } from "../config.js";
import { isRole, roleRank, type Principal, type Role } from "./principal.js";

/** The token's principal; null when it fails a check; a string when it is valid but cannot be a principal (why). */
export type JwtVerifier = (token: string) => Promise<Principal | string | null>;

const CACHE_MS = 60_000;
const CACHE_SIZE = 10_000;

function claimList(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(String);
  if (typeof v === "string") return v.split(/[|\s,]+/).filter(Boolean);
  return [];
}

/**
 * A token without `sub` names no one: such tokens would all be one principal, sharing its
 * Idempotency-Keys and rate-limit buckets across whoever they were issued to. Refused (401).
 */
const NO_SUBJECT = "bearer token: the `sub` claim is required (a non-empty string naming the principal)";

function toPrincipal(payload: JWTPayload & { sub: string }, cfg: Config): Principal {
  const subject = payload.sub;
  const key = `jwt:${subject}`;
  const roles = claimList(payload[cfg.jwtRoleClaim]).filter(isRole) as Role[];
  // A valid token without a known role authenticates but covers nothing: every call is 403.
  if (roles.length === 0) return { subject, key, role: "read", prefixes: [] };
  const role = roles.reduce((a, b) => (roleRank[b] > roleRank[a] ? b : a));
  const prefixClaim = payload[cfg.jwtPrefixClaim];
  const prefixes = prefixClaim === undefined ? null : claimList(prefixClaim).map((p) => p.split(SEP));
  return { subject, key, role, prefixes };
}

/**
 * A token's validity must end, and not too late: `exp` at most --jwt-max-lifetime-s past its `iat`
 * or past now, whichever is earlier, so a leaked token or an issuer's mistake is bounded too.
 */
function lifetimeBounded(payload: JWTPayload, maxS: number): boolean {
  const now = Date.now() / 1000;
  return payload.exp !== undefined && payload.exp - Math.min(payload.iat ?? now, now) <= maxS;
}

/** Verifies signature, issuer, audience, expiry (required, bounded) and not-before; null when any check fails. */
export function makeJwtVerifier(cfg: Config): JwtVerifier | null {
  const opts = { issuer: cfg.jwtIssuer, audience: cfg.jwtAudience, requiredClaims: ["exp"] };
  let verify: (token: string) => Promise<{ payload: JWTPayload }>;
  if (cfg.jwtJwksUrl) {
    const jwks = createRemoteJWKSet(new URL(cfg.jwtJwksUrl));
    verify = (token) => jwtVerify(token, jwks, opts);
  } else if (cfg.jwtPublicKey) {
    const pem = existsSync(cfg.jwtPublicKey) ? readFileSync(cfg.jwtPublicKey, "utf8") : cfg.jwtPublicKey;
    const key: KeyObject = createPublicKey(pem);
    verify = (token) => jwtVerify(token, key, opts);
  } else return null;
  // Signature checks cost ~50 µs (RS256): a token verified once is trusted again until it expires,
  // for at most CACHE_MS, so a key removed from the JWKS stops working within that time.
  const cache = new Map<string, { principal: Principal; until: number }>();
  return async (token) => {
    const hit = cache.get(token);
    if (hit && Date.now() < hit.until) return hit.principal;
    cache.delete(token);
    try {
      const { payload } = await verify(token);
      if (!lifetimeBounded(payload, cfg.jwtMaxLifetimeS)) return null;
      if (typeof payload.sub !== "string" || payload.sub === "") return NO_SUBJECT;
      const principal = toPrincipal(payload as JWTPayload & { sub: string }, cfg);
      if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
      cache.set(token, { principal, until: Math.min(payload.exp! * 1000, Date.now() + CACHE_MS) });
      return principal;
    } catch {
      return null;
    }
  };
}
