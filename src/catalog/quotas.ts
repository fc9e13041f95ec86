// How many tables and namespaces one tenant (the top-level namespace, "" for the root) may hold
// (--max-tables-per-tenant, --max-namespaces-per-tenant): a create past it is refused with 403
// naming the quota, before anything is written. Counted from the cached catalog (Catalog.count).
import { ApiError, Code } from "../errors.js";
import type { Catalog, ObjectType } from "./catalog.js";
import { objectIdOf, tenantOf } from "./names.js";

export interface Quotas {
  maxTablesPerTenant: number;
  maxNamespacesPerTenant: number;
}

/** 403 when creating object `id` of `type` would take its tenant past its quota. */
export function requireRoom(catalog: Catalog, id: readonly string[], type: ObjectType, quotas: Quotas): void {
  const tenant = tenantOf(objectIdOf(id));
  const [max, flag] = type === "table" ? [quotas.maxTablesPerTenant, "max-tables-per-tenant"] : [quotas.maxNamespacesPerTenant, "max-namespaces-per-tenant"];
  if (catalog.count(tenant, type) < max) return;
  const whose = tenant === "" ? "the root namespace" : `tenant ${JSON.stringify(tenant)}`;
  throw new ApiError(Code.PermissionDenied, `${whose} already holds ${max} ${type === "table" ? "tables" : "namespaces"} (${flag}); drop some before creating more`);
}
