// Table versions: list, describe, restore. LanceDB lists versions with their time and metadata;
// the manifest's path, size and e_tag come from the file itself (engine/versions.ts).
import { VersionListQuery } from "../schemas/params.js";
import { hasVersions } from "../engine/datasets.js";
import { mainOr, namedBranch, type TableHandle, type Version } from "../engine/tables.js";
import { tableVersion } from "../engine/table-info.js";
import { restoreVersion } from "../engine/writes.js";
import { cleanedVersion, goneFile, manifestFile, manifestPathOut, manifestPathV2, storedFiles, tableDir } from "../engine/versions.js";
import { ApiError, Code, invalid } from "../errors.js";
import { DescribeTableVersion, RestoreTable } from "../schemas/version.js";
import { jsonOp, queryOp } from "./define.js";
import { pageOf } from "./pagination.js";
import { openAt, openTable } from "./table-ref.js";
import { requireTable } from "../catalog/lookup.js";
import type { Services } from "../services.js";
import { json } from "./types.js";
import { listVersions } from "../engine/version-list.js";
import { cleanupCutoff } from "../engine/maintenance.js";
import { activeMaintenance, type MaintenanceSpec } from "../jobs/kinds/maintenance.js";
import type { Entry } from "../catalog/catalog.js";

async function versionRecord(svc: Services, dir: string, branch: string | undefined, v: Version) {
  const m = await manifestFile(dir, v.version, branch);
  return {
    version: v.version,
    manifest_path: manifestPathOut(svc.config.managedVersioning, dir, m?.path ?? manifestPathV2(v.version, branch)),
    ...(m ? { manifest_size: m.size, e_tag: m.eTag } : {}),
    timestamp_millis: Math.round(v.timestamp.getTime()),
    metadata: { ...v.metadata },
  };
}

/** The page token is the last version returned. */
function versionToken(token: string | null): number | null {
  if (token === null) return null;
  if (!/^\d+$/.test(token)) throw invalid(`page_token: must be a version number, got ${JSON.stringify(token)}`);
  return Number(token);
}

export const listTableVersions = queryOp(async ({ id, args, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch: string | undefined = args.branch;
  const { after, limit } = pageOf(args);
  const from = versionToken(after);
  const descending: boolean = args.descending ?? false;
  const dir = tableDir(svc.tables.root, entry);
  // A declared table has no versions yet (a managed-versioning writer asks before its first commit).
  if (!(await hasVersions(dir))) return json({ versions: [], page_token: null });
  const t = await openAt(svc, entry, { branch });
  const all = (await listVersions(t))
    .filter((v) => from === null || (descending ? v.version < from : v.version > from))
    .sort((a, b) => (descending ? b.version - a.version : a.version - b.version));
  const slice = await readable(dir, branch, all, limit + 1);
  const page = slice.slice(0, limit);
  return json({
    versions: await Promise.all(page.map((v) => versionRecord(svc, dir, branch, v))),
    page_token: slice.length > limit ? String(page[page.length - 1].version) : null,
  });
}, { query: VersionListQuery });

/**
 * The first `n` of `versions` that can be read: a version whose files a cleanup removed before its
 * manifest (a cleanup stopped, or still running) is not listed, as it would not be once the cleanup
 * ends. Branches are not checked (goneFile).
 */
async function readable(dir: string, branch: string | undefined, versions: Version[], n: number): Promise<Version[]> {
  if (namedBranch(branch)) return versions.slice(0, n);
  const stored = await storedFiles(dir);
  const out: Version[] = [];
  for (const v of versions) {
    if (out.length >= n) break;
    if (!(await goneFile(dir, v.version, stored))) out.push(v);
  }
  return out;
}

export const describeTableVersion = jsonOp(DescribeTableVersion, async ({ id, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch = body.branch ?? undefined;
  const t = await openAt(svc, entry, { branch });
  const wanted = body.version ?? (await tableVersion(t));
  const dir = tableDir(svc.tables.root, entry);
  const v = (await listVersions(t)).find((x) => x.version === wanted);
  if (!v) {
    const on = namedBranch(branch) ? ` on branch ${JSON.stringify(branch)}` : "";
    throw new ApiError(Code.TableVersionNotFound, `version ${wanted} not found${on} in table ${JSON.stringify(entry.objectId)}`);
  }
  // As a read at the version checks it (table-ref.ts, openAt); branches are not checked (goneFile).
  const gone = namedBranch(branch) ? null : await svc.versionChecks.gone(dir, wanted);
  if (gone) throw cleanedVersion(entry.objectId, wanted, gone);
  return json({ version: await versionRecord(svc, dir, branch, v) });
});

/**
 * A restore to a version a maintenance job's cleanup may be removing is refused (409) until the job
 * ends: the cleanup chose the files to remove from the manifests it listed, so the restored version
 * would name files it then removes, and the table's latest version could not be read. A cleanup
 * keeps what is newer than its cutoff, and a cutoff taken now is at least any taken before (the
 * retention window and the newest --maintenance-max-versions only move forward); one that starts
 * later on this replica keeps the version (openAt's read lease).
 */
async function refuseCleanupRace(svc: Services, entry: Entry, table: TableHandle, branch: string | null, version: number): Promise<void> {
  const job = activeMaintenance(svc.jobs, entry.id, branch);
  if (!job || !(job.spec as MaintenanceSpec).cleanup) return;
  const v = (await listVersions(table)).find((x) => x.version === version);
  const cutoff = await cleanupCutoff(table, svc.config.retainVersionsMs, Infinity, svc.config.maintenanceMaxVersions);
  if (v && v.timestamp.getTime() < cutoff.getTime()) {
    throw new ApiError(Code.ConcurrentModification, `table ${JSON.stringify(entry.objectId)} is being maintained (job ${job.id}), whose cleanup may remove version ${version}: restore it once the job has ended, or restore a version newer than ${cutoff.toISOString()}`);
  }
}

/** Commits a new version whose content is the old one's; history is kept. */
export const restoreTable = jsonOp(RestoreTable, async ({ id, body, svc, work }) => {
  const { entry, table: old } = await openTable(svc, id, { version: body.version, branch: body.branch, recheck: true });
  await refuseCleanupRace(svc, entry, old, mainOr(body.branch), body.version);
  await svc.tables.write(entry, body.branch, { change: "restore", byCachedHandle: false, work }, () => restoreVersion(old));
  return json({});
});
