// How many tables and namespaces one tenant (the top-level namespace, "" for the root) may hold
// (--max-tables-per-tenant, --max-namespaces-per-tenant), and tags and branches one table may
// hold (--max-tags-per-table, --max-branches-per-table; counting a tenant's would read every
// table, so its bound is tables × per table): a create past one is refused with 403 naming the
// quota, before anything is written. Tables and namespaces are counted from the cached catalog
// (Catalog.count), refs from the table's own.
import { ApiError, Code } from "../errors.js";
import type { Catalog, ObjectType } from "./catalog.js";
import { objectIdOf, tenantOf } from "./names.js";

export interface Quotas {
  maxTablesPerTenant: number;
  maxNamespacesPerTenant: number;
}

export interface RefQuotas {
  maxTagsPerTable: number;
  maxBranchesPerTable: number;
}

/** 403 when creating object `id` of `type` would take its tenant past its quota. */
export function requireRoom(catalog: Catalog, id: readonly string[], type: ObjectType, quotas: Quotas): void {
  const tenant = tenantOf(objectIdOf(id));
  const [max, flag] = type === "table" ? [quotas.maxTablesPerTenant, "max-tables-per-tenant"] : [quotas.maxNamespacesPerTenant, "max-namespaces-per-tenant"];
  if (catalog.count(tenant, type) < max) return;
  const whose = tenant === "" ? "the root namespace" : `tenant ${JSON.stringify(tenant)}`;
  throw new ApiError(Code.PermissionDenied, `${whose} already holds ${max} ${type === "table" ? "tables" : "namespaces"} (${flag}); drop some before creating more`);
}

/** 403 when table `table`, holding `held` refs of `kind`, may not take another. */
export function requireRefRoom(table: string, kind: "tag" | "branch", held: number, quotas: RefQuotas): void {
  const [max, flag] = kind === "tag" ? [quotas.maxTagsPerTable, "max-tags-per-table"] : [quotas.maxBranchesPerTable, "max-branches-per-table"];
  if (held < max) return;
  throw new ApiError(Code.PermissionDenied, `table ${JSON.stringify(table)} already holds ${max} ${kind === "tag" ? "tags" : "branches"} (${flag}); delete some before creating more`);
}
