// Namespaces: create, describe, drop, list, exists.
import { PageQuery } from "../schemas/params.js";
import { canBrowse } from "../auth/principal.js";
import type { CommitCheck, Entry } from "../catalog/catalog.js";
import { catalogCheck } from "../engine/deadline.js";
import { requireNamespace, requireNamespaceNow } from "../catalog/lookup.js";
import { objectIdOf } from "../catalog/names.js";
import { requireRoom } from "../catalog/quotas.js";
import { ApiError, Code, invalid } from "../errors.js";
import { CommonBody } from "../schemas/common.js";
import { CreateNamespace, DropNamespace } from "../schemas/namespace.js";
import type { Services } from "../services.js";
import { jsonOp, queryOp } from "./define.js";
import { page, pageOf } from "./pagination.js";
import { removeTableData } from "../lifecycle/table-lifecycle.js";
import { empty, json } from "./types.js";

const name = (id: readonly string[]) => JSON.stringify(objectIdOf(id));

/** Drop everything below a namespace, table data included, deepest first. */
async function dropContents(svc: Services, id: readonly string[], check: CommitCheck): Promise<void> {
  const below = svc.catalog.descendants(id);
  await svc.catalog.remove(below, check);
  await Promise.all(below.filter((e) => e.type === "table").map((e) => removeTableData(svc, e)));
}

export const createNamespace = jsonOp(CreateNamespace, async ({ id, body, svc, work }) => {
  const check = catalogCheck(work);
  if (id.length === 0) throw new ApiError(Code.NamespaceAlreadyExists, "the root namespace always exists");
  const mode = body.mode ?? "create";
  const properties = body.properties ?? {};
  return svc.catalog.exclusive(async () => {
    await svc.catalog.refresh(true);
    requireNamespace(svc.catalog, id.slice(0, -1));
    const existing = svc.catalog.get(id);
    if (existing?.type === "table") {
      throw new ApiError(Code.NamespaceAlreadyExists, `${name(id)} already exists as a table`);
    }
    if (existing) {
      if (mode === "create") throw new ApiError(Code.NamespaceAlreadyExists, `namespace ${name(id)} already exists`);
      if (mode === "exist_ok") return json({ properties: existing.properties });
      await dropContents(svc, id, check);
      await svc.catalog.remove([existing], check);
    }
    const entry: Entry = { id, objectId: objectIdOf(id), type: "namespace", location: null, properties };
    requireRoom(svc.catalog, id, "namespace", svc.config);
    await svc.catalog.insert(entry, Code.NamespaceAlreadyExists, check);
    return json({ properties });
  });
});

export const describeNamespace = jsonOp(CommonBody, async ({ id, svc }) => {
  await requireNamespaceNow(svc.catalog, id);
  return json({ properties: id.length === 0 ? {} : svc.catalog.get(id)!.properties });
});

export const namespaceExists = jsonOp(CommonBody, async ({ id, svc }) => {
  await requireNamespaceNow(svc.catalog, id);
  return empty(200);
});

export const dropNamespace = jsonOp(DropNamespace, async ({ id, body, svc, work }) => {
  const check = catalogCheck(work);
  if (id.length === 0) throw invalid("id: the root namespace cannot be dropped");
  return svc.catalog.exclusive(async () => {
    await svc.catalog.refresh(true);
    const e = svc.catalog.get(id);
    if (e?.type !== "namespace") {
      // docs/contract.md: mode Skip → 204, mode Fail → 400 (code 1 in the body).
      if (body.mode === "skip") return empty(204);
      throw new ApiError(Code.NamespaceNotFound, `namespace ${name(id)} not found`, 400);
    }
    if (body.behavior === "cascade") await dropContents(svc, id, check);
    else if (svc.catalog.descendants(id).length > 0) {
      const kids = svc.catalog.descendants(id).map((d) => `${d.type} ${JSON.stringify(d.objectId)}`);
      throw new ApiError(Code.NamespaceNotEmpty, `namespace ${name(id)} is not empty (holds ${kids.slice(0, 3).join(", ")}${kids.length > 3 ? ", ..." : ""}); use behavior Cascade`);
    }
    await svc.catalog.remove([e], check);
    return json({ properties: e.properties });
  });
});

export const listNamespaces = queryOp(async ({ id, args, svc, principal }) => {
  await requireNamespaceNow(svc.catalog, id);
  const { after, limit } = pageOf(args);
  const visible = svc.catalog.children(id, "namespace").filter((e) => canBrowse(principal, e.id));
  const p = page(visible, (e) => e.id[e.id.length - 1], after, limit);
  return json({ namespaces: p.items.map((e) => e.id[e.id.length - 1]), page_token: p.pageToken });
}, { query: PageQuery });
