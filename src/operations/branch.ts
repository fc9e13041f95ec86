// Table branches. LanceDB answers an internal error for an existing name and leaves a directory
// behind for an invalid one, so names and existence are checked here first, one change at a time.
import { PageQuery } from "../schemas/params.js";
import { namedBranch, type TableHandle } from "../engine/tables.js";
import type { Entry } from "../catalog/catalog.js";
import { branchFile, checkBranchName, createBranch, deleteBranch, listBranches, refError, withoutOrphan, type RefNames } from "../engine/refs.js";
import { tableDir } from "../engine/versions.js";
import { requestCommit } from "../engine/deadline.js";
import { ApiError, Code, invalid } from "../errors.js";
import { CreateTableBranch, DeleteTableBranch } from "../schemas/branch.js";
import type { Services } from "../services.js";
import { keyedSerial } from "../util/serial.js";
import { jsonOp, queryOp } from "./define.js";
import { page, pageOf } from "./pagination.js";
import { openAt } from "./table-ref.js";
import { requireTable } from "../catalog/lookup.js";
import { requireRefRoom } from "../catalog/quotas.js";
import { json } from "./types.js";

// Changes to one table's branches take turns, which makes check-then-create atomic within this
// process; other tables' do not wait (a create lists every branch of its table: at 1,000 branches
// another tenant's create waited 1.3 s behind five on one table when the queue was the server's).
const turns = keyedSerial();

async function onBranches<T>(svc: Services, entry: Entry, names: Omit<RefNames, "table">, fn: (t: TableHandle) => Promise<T>): Promise<T> {
  const t = await openAt(svc, entry);
  try {
    return await fn(t);
  } catch (err) {
    throw refError(err, { ...names, table: entry.objectId }) ?? err;
  }
}

const q = JSON.stringify;

export const listTableBranches = queryOp(async ({ id, args, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const { after, limit } = pageOf(args);
  const all = await onBranches(svc, entry, {}, listBranches);
  const p = page(Object.keys(all).sort(), (n) => n, after, limit);
  const dir = tableDir(svc.tables.root, entry);
  const branches: Record<string, unknown> = {};
  for (const name of p.items) {
    // napi objects: the fields are getters, so they are copied one by one.
    const c = all[name];
    const file = await branchFile(dir, name);
    branches[name] = {
      ...(c.parentBranch ? { parentBranch: c.parentBranch } : {}),
      parentVersion: c.parentVersion,
      createAt: file.createAt ?? 0,
      manifestSize: c.manifestSize,
      ...(file.metadata ? { metadata: file.metadata } : {}),
    };
  }
  return json({ branches, page_token: p.pageToken });
}, { query: PageQuery });

export const createTableBranch = jsonOp(CreateTableBranch, async ({ id, body, svc, work }) => {
  const entry = await requireTable(svc.catalog, id);
  const { name } = body;
  checkBranchName(name);
  const from = namedBranch(body.from_branch);
  const version = body.from_version ?? undefined;
  const dir = tableDir(svc.tables.root, entry);
  await turns(dir, async () => {
    const existing = await onBranches(svc, entry, {}, listBranches);
    if (name in existing) throw new ApiError(Code.TableBranchAlreadyExists, `branch ${q(name)} already exists in table ${q(entry.objectId)}`);
    if (from !== undefined && !(from in existing)) {
      throw new ApiError(Code.TableBranchNotFound, `from_branch: branch ${q(from)} not found in table ${q(entry.objectId)}`);
    }
    requireRefRoom(entry.objectId, "branch", Object.keys(existing).length, svc.config);
    await onBranches(svc, entry, { branch: from, version }, (t) => requestCommit(work, () => withoutOrphan(dir, name, () => createBranch(t, name, from, version))));
  });
  return json({});
});

export const deleteTableBranch = jsonOp(DeleteTableBranch, async ({ id, body, svc, work }) => {
  const entry = await requireTable(svc.catalog, id);
  if (body.name === "main") throw invalid(`name: "main" is the main branch and cannot be deleted`);
  await turns(tableDir(svc.tables.root, entry), () => onBranches(svc, entry, { branch: body.name }, (t) => requestCommit(work, () => deleteBranch(t, body.name))));
  return json({});
});
