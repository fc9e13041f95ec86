// Shares of `--serving-memory-mb` per tenant (the top-level namespace, src/catalog/names.ts
// tenantOf). Every tenant that holds a serving index, and the one asking for room, has a fair
// share: the budget over their number. A tenant may hold more while the room lasts; when another
// asks for room that is not there, the least recently searched tables of tenants above their share
// go back to LanceDB (their indexes dropped), one at a time while their tenant stays above it, until
// the room suffices. A tenant reclaims room only within its own share, and never from itself: past
// its share, or with its own tables filling the budget, it takes what is free or its table is
// answered by LanceDB (`memory`). Two tenants above their shares therefore never evict each other
// back and forth.

/** One table's serving index, as the budget sees it. */
export interface Held {
  table: string;
  tenant: string;
  /** What it holds, and what it was granted and may still take. */
  bytes: number;
  /** When it was last searched (any increasing clock); an index still being built: Infinity. */
  searched: number;
}

/**
 * The tables to hand back to LanceDB so that `tenant` may take `need` bytes more of `budget`:
 * none when they are free, null when they cannot be had (nothing is then handed back).
 */
export function reclaim(held: readonly Held[], tenant: string, need: number, budget: number): string[] | null {
  const byTenant = new Map<string, number>([[tenant, 0]]);
  for (const h of held) byTenant.set(h.tenant, (byTenant.get(h.tenant) ?? 0) + h.bytes);
  let free = budget - [...byTenant.values()].reduce((a, b) => a + b, 0);
  if (need <= free) return [];
  const share = budget / byTenant.size;
  if (byTenant.get(tenant)! + need > share) return null;
  const out: string[] = [];
  const oldest = held.filter((h) => h.tenant !== tenant && h.searched !== Infinity).sort((a, b) => a.searched - b.searched);
  for (const h of oldest) {
    if (free >= need) break;
    const of = byTenant.get(h.tenant)!;
    if (of <= share) continue;
    out.push(h.table);
    byTenant.set(h.tenant, of - h.bytes);
    free += h.bytes;
  }
  return free >= need ? out : null;
}
