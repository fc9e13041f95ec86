// Bearer JWTs from an OAuth 2.0 authorization server, verified with jose against a JWKS URL
// or a PEM public key; claims map to a role and namespace prefixes by configuration.
import { createPublicKey, type KeyObject } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from "jose";
import type { Config } from "../config.js";
import { isRole, roleRank, type Principal, type Role } from "./principal.js";

export type JwtVerifier = (token: string) => Promise<Principal | null>;

function claimList(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(String);
  if (typeof v === "string") return v.split(/[|\s,]+/).filter(Boolean);
  return [];
}

function toPrincipal(payload: JWTPayload, cfg: Config): Principal {
  const subject = payload.sub ?? "jwt";
  const roles = claimList(payload[cfg.jwtRoleClaim]).filter(isRole) as Role[];
  // A valid token without a known role authenticates but covers nothing: every call is 403.
  if (roles.length === 0) return { subject, role: "read", prefixes: [] };
  const role = roles.reduce((a, b) => (roleRank[b] > roleRank[a] ? b : a));
  const prefixClaim = payload[cfg.jwtPrefixClaim];
  const prefixes = prefixClaim === undefined ? null : claimList(prefixClaim).map((p) => p.split("$"));
  return { subject, role, prefixes };
}

/** Verifies signature, issuer, audience, expiry and not-before; null when any check fails. */
export function makeJwtVerifier(cfg: Config): JwtVerifier | null {
  const opts = { issuer: cfg.jwtIssuer, audience: cfg.jwtAudience };
  let verify: (token: string) => Promise<{ payload: JWTPayload }>;
  if (cfg.jwtJwksUrl) {
    const jwks = createRemoteJWKSet(new URL(cfg.jwtJwksUrl));
    verify = (token) => jwtVerify(token, jwks, opts);
  } else if (cfg.jwtPublicKey) {
    const pem = existsSync(cfg.jwtPublicKey) ? readFileSync(cfg.jwtPublicKey, "utf8") : cfg.jwtPublicKey;
    const key: KeyObject = createPublicKey(pem);
    verify = (token) => jwtVerify(token, key, opts);
  } else return null;
  return async (token) => {
    try {
      return toPrincipal((await verify(token)).payload, cfg);
    } catch {
      return null;
    }
  };
}
