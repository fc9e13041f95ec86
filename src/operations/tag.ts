// Table tags: table-wide names for a version of main or of a branch. LanceDB resolves a tag's
// version against the branch of the handle that sets it, so set/update go through that branch.
import { PageQuery } from "../schemas/params.js";
import { namedBranch, type TableHandle } from "../engine/tables.js";
import { tableDir } from "../engine/versions.js";
import { requestCommit } from "../engine/deadline.js";
import { clientTag, countTags, createTag, deleteTag, listTags, refError, tagBranch, tagVersion, updateTag, type RefNames } from "../engine/refs.js";
import type { Entry } from "../catalog/catalog.js";
import { SetTag, TagRef } from "../schemas/tag.js";
import type { Services } from "../services.js";
import { jsonOp, queryOp } from "./define.js";
import { page, pageOf } from "./pagination.js";
import { openAt } from "./table-ref.js";
import { requireTable } from "../catalog/lookup.js";
import { requireRefRoom } from "../catalog/quotas.js";
import { keyedSerial } from "../util/serial.js";
import { json } from "./types.js";

/** Runs a tag call on the table (at `branch`), turning Lance's ref errors into API errors. */
async function onTags<T>(svc: Services, entry: Entry, names: Omit<RefNames, "table">, fn: (t: TableHandle) => Promise<T>): Promise<T> {
  const t = await openAt(svc, entry, { branch: names.branch });
  try {
    return await fn(t);
  } catch (err) {
    throw refError(err, { ...names, table: entry.objectId }) ?? err;
  }
}

// Creates on one table take turns, so concurrent ones cannot all pass the count before any writes.
const creates = keyedSerial();

const withBranch = (branch: string | undefined) => (namedBranch(branch) ? { branch } : {});

export const listTableTags = queryOp(async ({ id, args, svc, lancedbClient }) => {
  const entry = await requireTable(svc.catalog, id);
  // LanceDB's remote client reads one unpaged map of name → tag.
  const { after, limit } = lancedbClient ? { after: null, limit: Number.MAX_SAFE_INTEGER } : pageOf(args);
  const all = await onTags(svc, entry, {}, listTags);
  const names = Object.keys(all).sort();
  const p = page(names, (n) => n, after, limit);
  const dir = tableDir(svc.tables.root, entry);
  const tags: Record<string, unknown> = {};
  for (const name of p.items) {
    // napi objects: the fields are getters, so they are copied one by one.
    const c = all[name];
    tags[name] = { ...withBranch(await tagBranch(dir, name)), version: c.version, manifestSize: c.manifestSize };
  }
  return json(lancedbClient ? tags : { tags, page_token: p.pageToken });
}, { query: PageQuery });

export const getTableTagVersion = jsonOp(TagRef, async ({ id, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const version = await onTags(svc, entry, { tag: body.tag }, (t) => tagVersion(t, body.tag));
  return json({ version, ...withBranch(await tagBranch(tableDir(svc.tables.root, entry), body.tag)) });
});

export const createTableTag = jsonOp(SetTag, async ({ id, body, svc, work }) => {
  const entry = await requireTable(svc.catalog, id);
  const names = { tag: clientTag(body.tag), version: body.version, branch: body.branch ?? undefined };
  const dir = tableDir(svc.tables.root, entry);
  await creates(dir, async () => {
    requireRefRoom(entry.objectId, "tag", await countTags(dir), svc.config);
    await onTags(svc, entry, names, (t) => requestCommit(work, () => createTag(t, body.tag, body.version)));
  });
  return json({});
});

export const updateTableTag = jsonOp(SetTag, async ({ id, body, svc, work }) => {
  const entry = await requireTable(svc.catalog, id);
  const names = { tag: clientTag(body.tag), version: body.version, branch: body.branch ?? undefined };
  await onTags(svc, entry, names, (t) => requestCommit(work, () => updateTag(t, body.tag, body.version)));
  return json({});
});

export const deleteTableTag = jsonOp(TagRef, async ({ id, body, svc, work }) => {
  const entry = await requireTable(svc.catalog, id);
  await onTags(svc, entry, { tag: clientTag(body.tag) }, (t) => requestCommit(work, () => deleteTag(t, body.tag)));
  return json({});
});
