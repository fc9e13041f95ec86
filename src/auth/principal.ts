// Who is calling and what they may touch: a role and, optionally, namespace prefixes.
import { objectIdOf, tenantOf } from "../catalog/names.js";
import { ApiError, Code } from "../errors.js";

export type Role = "read" | "write" | "admin";
export const roleRank: Record<Role, number> = { read: 1, write: 2, admin: 3 };

export interface Principal {
  subject: string;
  /**
   * A stable id of the credential, never its secret: `key:<id>` for an API key (see
   * src/auth/api-keys.ts, keyIdOf), `jwt:<sub>` for a bearer token. Kept with what the credential
   * defines (a view) and owns (a job), so its access can be checked again later.
   */
  key: string;
  role: Role;
  /** Namespace paths this principal is limited to; null means everywhere. */
  prefixes: string[][] | null;
}

/**
 * Whose share a request counts against (rate limits, body readers) and whose Idempotency-Keys it
 * sees: the credential's stable id with the namespaces it is limited to, never its display name
 * (API keys' labels, a token's `sub`, may repeat across keys and tenants).
 */
export function bucketOf(p: Pick<Principal, "key" | "prefixes">): string {
  let b = buckets.get(p);
  if (b === undefined) buckets.set(p, (b = JSON.stringify([p.key, p.prefixes])));
  return b;
}
/** Made once per principal (an API key's is the same frozen object every request), not a string a request. */
const buckets = new WeakMap<Pick<Principal, "key" | "prefixes">, string>();

export const isRole = (s: string): s is Role => s === "read" || s === "write" || s === "admin";

const startsWith = (id: readonly string[], prefix: readonly string[]) =>
  prefix.length <= id.length && prefix.every((p, i) => id[i] === p);

/** May the principal act on object `id` (it lies inside one of its prefixes)? */
export function covers(p: Pick<Principal, "prefixes">, id: readonly string[]): boolean {
  return p.prefixes === null || p.prefixes.some((prefix) => startsWith(id, prefix));
}

/**
 * Whose compute sandbox checks the principal's code for object `id`: its longest prefix that
 * covers `id` (an unscoped principal's: the object's top-level namespace, as for everyone's jobs).
 * Every credential whose code runs in the sandbox of path P may write everything under P, and
 * only objects under P are checked there, so escaped code in it reaches no source or verdict its
 * own credential could not (docs/security.md, "One credential scope per sandbox").
 */
export function sandboxScope(p: Pick<Principal, "prefixes">, id: readonly string[]): string {
  if (p.prefixes === null) return tenantOf(objectIdOf(id));
  const longest = p.prefixes.filter((prefix) => startsWith(id, prefix)).sort((a, b) => b.length - a.length)[0];
  return objectIdOf(longest ?? id);
}

/** May the principal see into `id` at all: it is inside a prefix, or an ancestor of one (for listings). */
export function canBrowse(p: Principal, id: readonly string[]): boolean {
  return p.prefixes === null || p.prefixes.some((prefix) => startsWith(id, prefix) || startsWith(prefix, id));
}

/** Has the principal at least `role` on object `id`? */
export const allows = (p: Pick<Principal, "role" | "prefixes">, id: readonly string[], role: Role): boolean =>
  roleRank[p.role] >= roleRank[role] && covers(p, id);

/**
 * THE check of every object a request touches: the one in its path (src/http/pipeline.ts) and
 * every other one it names (a view's source, a rename target, a batch entry, a registered
 * location's owner). 403 naming the object and the role, decided before the object is looked
 * up, so the answer never says whether an object the caller may not reach exists.
 */
export function authoriseObject(p: Pick<Principal, "role" | "prefixes">, id: readonly string[], role: Role, field?: string): void {
  if (allows(p, id, role)) return;
  const what = field ? `${field}: ` : "";
  const why = roleRank[p.role] < roleRank[role] ? `needs the ${role} role; this credential has ${p.role}` : `this credential may not ${role === "read" ? "read" : "write"} it`;
  throw new ApiError(Code.PermissionDenied, `${what}${JSON.stringify(objectIdOf(id))}: ${why}`);
}
