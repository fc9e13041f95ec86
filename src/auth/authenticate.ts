// Credentials → principal. Headers win over the body's `identity`.
import { ApiError, Code } from "../errors.js";
import type { Config } from "../config.js";
import type { SystemTables } from "../util/system-table.js";
import { hashKey, keyIdOf, loadStoredKeys, parseKeySpec, type StoredKey } from "./api-keys.js";
import { makeJwtVerifier } from "./jwt.js";
import type { Principal } from "./principal.js";

export interface Credentials {
  apiKey?: string;
  bearer?: string;
}

export type Authenticate = (creds: Credentials) => Promise<Principal>;

const KNOWN_KEYS = 1024;

const unauthenticated = (msg: string) => new ApiError(Code.Unauthenticated, msg);

export interface AuthSetup {
  authenticate: Authenticate;
  /** The admin key generated on this start, to print once. */
  generatedKey?: string;
  /**
   * What the API key with stable id `key` may do now (null when no such key is configured any
   * more). Bearer tokens (`jwt:` ids) cannot be looked up without the token: null for them too.
   */
  credential: (key: string) => Principal | null;
}

/** `store`: the shared store, where a generated admin key's hash is kept for every replica. */
export async function setupAuth(cfg: Config, store: SystemTables): Promise<AuthSetup> {
  const configured = cfg.apiKeys ? parseKeySpec(cfg.apiKeys).map((k) => k.entry) : [];
  const jwt = makeJwtVerifier(cfg);
  const stored = await loadStoredKeys(store, cfg.stateDir, configured.length === 0 && jwt === null);
  const principalOf = (k: StoredKey): Principal => Object.freeze({ subject: k.label, key: keyIdOf(k.hash), role: k.role, prefixes: k.prefixes });
  const byHash = new Map<string, Principal>();
  for (const k of [...stored.keys, ...configured]) byHash.set(k.hash, principalOf(k));
  const byId = new Map([...byHash.values()].map((p) => [p.key, p]));

  // Valid keys' principals, so a key is hashed once per process rather than per request. Only keys
  // that match are remembered (junk cannot grow it), in memory only, and the set of keys is fixed
  // for the life of the process; bounded all the same.
  const known = new Map<string, Principal>();
  const fromKey = (key: string): Principal | null => {
    const hit = known.get(key);
    if (hit) return hit;
    const p = byHash.get(hashKey(key));
    if (!p) return null;
    if (known.size >= KNOWN_KEYS) known.clear();
    known.set(key, p);
    return p;
  };

  const authenticate: Authenticate = async ({ apiKey, bearer }) => {
    if (apiKey !== undefined) {
      const p = fromKey(apiKey);
      if (!p) throw unauthenticated("invalid API key");
      return p;
    }
    if (bearer !== undefined) {
      // A bearer token is a JWT when a verifier is configured; an API key is accepted there too.
      const p = fromKey(bearer) ?? (jwt ? await jwt(bearer) : null);
      if (!p) throw unauthenticated("invalid or expired bearer token");
      if (typeof p === "string") throw unauthenticated(p);
      return p;
    }
    throw unauthenticated("missing credentials: send Authorization: Bearer <token> or x-api-key");
  };
  return { authenticate, generatedKey: stored.generated, credential: (key) => byId.get(key) ?? null };
}
