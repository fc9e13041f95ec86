// Table versions: list, describe, restore. LanceDB lists versions with their time and metadata;
// the manifest's path, size and e_tag come from the file itself (engine/versions.ts).
import { VersionListQuery } from "../schemas/params.js";
import { hasVersions } from "../engine/datasets.js";
import { namedBranch, type Version } from "../engine/tables.js";
import { tableVersion } from "../engine/table-info.js";
import { restoreVersion } from "../engine/writes.js";
import { manifestFile, manifestPathOut, manifestPathV2, tableDir } from "../engine/versions.js";
import { ApiError, Code, invalid } from "../errors.js";
import { DescribeTableVersion, RestoreTable } from "../schemas/version.js";
import { jsonOp, queryOp } from "./define.js";
import { pageOf } from "./pagination.js";
import { openAt, openTable } from "./table-ref.js";
import { requireTable } from "../catalog/lookup.js";
import type { Services } from "../services.js";
import { json } from "./types.js";
import { listVersions } from "../engine/version-list.js";

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
  const slice = all.slice(0, limit);
  return json({
    versions: await Promise.all(slice.map((v) => versionRecord(svc, dir, branch, v))),
    page_token: all.length > limit ? String(slice[slice.length - 1].version) : null,
  });
}, { query: VersionListQuery });

export const describeTableVersion = jsonOp(DescribeTableVersion, async ({ id, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const branch = body.branch ?? undefined;
  const t = await openAt(svc, entry, { branch });
  const wanted = body.version ?? (await tableVersion(t));
  const v = (await listVersions(t)).find((x) => x.version === wanted);
  if (!v) {
    const on = namedBranch(branch) ? ` on branch ${JSON.stringify(branch)}` : "";
    throw new ApiError(Code.TableVersionNotFound, `version ${wanted} not found${on} in table ${JSON.stringify(entry.objectId)}`);
  }
  return json({ version: await versionRecord(svc, tableDir(svc.tables.root, entry), branch, v) });
});

/** Commits a new version whose content is the old one's; history is kept. */
export const restoreTable = jsonOp(RestoreTable, async ({ id, body, svc, work }) => {
  const { entry, table: old } = await openTable(svc, id, { version: body.version, branch: body.branch });
  await svc.tables.write(entry, body.branch, { change: "restore", byCachedHandle: false, work }, () => restoreVersion(old));
  return json({});
});
