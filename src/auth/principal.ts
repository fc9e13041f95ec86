// Who is calling and what they may touch: a role and, optionally, namespace prefixes.
export type Role = "read" | "write" | "admin";
export const roleRank: Record<Role, number> = { read: 1, write: 2, admin: 3 };

export interface Principal {
  subject: string;
  role: Role;
  /** Namespace paths this principal is limited to; null means everywhere. */
  prefixes: string[][] | null;
}

export const isRole = (s: string): s is Role => s === "read" || s === "write" || s === "admin";

const startsWith = (id: readonly string[], prefix: readonly string[]) =>
  prefix.length <= id.length && prefix.every((p, i) => id[i] === p);

/** May the principal act on object `id` (it lies inside one of its prefixes)? */
export function covers(p: Principal, id: readonly string[]): boolean {
  return p.prefixes === null || p.prefixes.some((prefix) => startsWith(id, prefix));
}

/** May the principal see into `id` at all: it is inside a prefix, or an ancestor of one (for listings). */
export function canBrowse(p: Principal, id: readonly string[]): boolean {
  return p.prefixes === null || p.prefixes.some((prefix) => startsWith(id, prefix) || startsWith(prefix, id));
}
