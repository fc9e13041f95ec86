// Externally managed table versions (upstream's CreateTableVersion, BatchDeleteTableVersions,
// BatchCreateTableVersions, BatchCommitTables). A writer, such as LanceDB's REST namespace client
// with managed versioning, stages a manifest in the table's `_versions` directory and asks Quiver
// to publish it as the next version: Quiver is the commit point, so it sees every version at once.
// A version's record is its published manifest file, as for any Lance table. Batches are all or
// nothing: each step can be taken back, and a failed step takes back the ones before it, all in
// the catalog's exclusive section so no other Quiver write interleaves.
import path from "node:path";
import type { Static } from "@sinclair/typebox";
import { authoriseObject, type Principal } from "../auth/principal.js";
import { requireTable } from "../catalog/lookup.js";
import { namedBranch } from "../engine/tables.js";
import { recordCommitConflict } from "../metrics.js";
import { listTags } from "../engine/refs.js";
import { isManifestFile, manifestCandidates, manifestPathOut, publishedVersions, publishManifest, setAsideManifest, tableDir, versionsDir } from "../engine/versions.js";
import { fileInfo, removeFile } from "../util/store-files.js";
import { ApiError, Code, invalid, isApiError } from "../errors.js";
import { log } from "../log.js";
import { BatchCommitTables, BatchCreateTableVersions, BatchDeleteTableVersions, CreateTableVersion } from "../schemas/version.js";
import type { Services } from "../services.js";
import { jsonOp } from "./define.js";
import { declareIn, deregisterIn } from "../lifecycle/table-lifecycle.js";
import { json } from "./types.js";

interface Step {
  result: unknown;
  undo(): Promise<unknown>;
  /** After every step of the batch succeeded. */
  finish?(): Promise<unknown>;
}

const q = JSON.stringify;

// Lance stages a manifest as `<its final name>-<uuid>`. A manifest this server set aside
// (`setAsideManifest`, named `…-deleted`) is a deleted version, never a staged one.
const STAGED_NAME = /^\d{1,20}\.manifest-[A-Za-z0-9_-]+$/;
const isStagedName = (file: string) => STAGED_NAME.test(path.posix.basename(file)) && !file.endsWith("-deleted");

/**
 * The staged manifest a request names: an object-store path as LanceDB sends it (absolute without
 * its leading slash), an absolute path, a file:// URI, or a path relative to the table directory.
 * It must sit in the branch's `_versions` directory of this table, be named as Lance names a staged
 * manifest, and end as a Lance manifest does: nothing else may become a version.
 */
async function stagedManifest(dir: string, branch: string | undefined, given: string): Promise<{ file: string; size: number }> {
  const versions = versionsDir(dir, branch);
  const hit = manifestCandidates(dir, given).find((c) => path.posix.dirname(c) === versions && isStagedName(c));
  if (!hit) throw invalid(`manifest_path: ${q(given)} is not a staged manifest (<version>.manifest-<uuid>) in the table's ${q(versions.slice(dir.length + 1))} directory`);
  const info = await fileInfo(hit);
  if (info === null) throw invalid(`manifest_path: no staged manifest at ${q(given)}`);
  if (!(await isManifestFile(hit))) throw invalid(`manifest_path: ${q(given)} is not a Lance manifest file`);
  return { file: hit, size: info.size };
}

type VersionRequest = Static<typeof CreateTableVersion>;

async function createVersion(svc: Services, id: string[], req: VersionRequest): Promise<Step> {
  const entry = await requireTable(svc.catalog, id);
  const dir = tableDir(svc.tables.root, entry);
  const branch = namedBranch(req.branch);
  if (req.metadata && Object.keys(req.metadata).length > 0) {
    throw invalid("metadata: not supported; a version's metadata is its manifest's own (write it into the manifest)");
  }
  const { file: staged, size } = await stagedManifest(dir, branch, req.manifest_path);
  if (req.manifest_size != null && req.manifest_size !== size) {
    throw invalid(`manifest_size: ${req.manifest_size} differs from the staged manifest's ${size} bytes`);
  }
  const published = await publishedVersions(dir, branch);
  const latest = published.length ? published[published.length - 1] : null;
  const on = branch ? ` on branch ${q(branch)}` : "";
  const taken = () => {
    recordCommitConflict("version");
    return new ApiError(Code.ConcurrentModification, `version ${req.version} of table ${q(entry.objectId)}${on} exists already (latest ${latest}); another writer committed first`);
  };
  if (latest !== null && req.version <= latest) throw taken();
  if (latest !== null && req.version > latest + 1) throw invalid(`version: ${req.version} skips version ${latest + 1} of table ${q(entry.objectId)}${on}`);
  const published$ = await publishManifest(dir, staged, req.version, req.naming_scheme ?? "V2", branch);
  if (!published$) throw taken();
  const announce = (version: number) => svc.tables.commits.announce({ table: entry, branch: branch ?? null, version, change: "version", rows: null, byCachedHandle: false });
  announce(req.version);
  const m = published$.manifest;
  return {
    result: { version: req.version, manifest_path: manifestPathOut(svc.config.managedVersioning, dir, m.path), manifest_size: m.size, e_tag: m.eTag, timestamp_millis: Date.now() },
    undo: async () => {
      await published$.undo();
      announce(req.version - 1);
    },
    finish: () => removeFile(staged).catch(() => undefined),
  };
}

async function deleteVersions(svc: Services, id: string[], req: Static<typeof BatchDeleteTableVersions>): Promise<Step> {
  const entry = await requireTable(svc.catalog, id);
  const dir = tableDir(svc.tables.root, entry);
  const branch = namedBranch(req.branch);
  req.ranges.forEach((r, i) => {
    if (r.end_version !== -1 && r.end_version <= r.start_version) {
      throw invalid(`ranges[${i}]: end_version ${r.end_version} must be greater than start_version ${r.start_version} (it is exclusive), or -1 for every version through the latest`);
    }
  });
  const inRange = (v: number) => req.ranges.some((r) => v >= r.start_version && (r.end_version === -1 || v < r.end_version));
  const doomed = (await publishedVersions(dir, branch)).filter(inRange);
  if (doomed.length > 0) {
    const tags = await listTags(await svc.tables.open(entry));
    const tagged = Object.entries(tags).find(([, t]) => doomed.includes(t.version));
    if (tagged) throw invalid(`ranges: version ${tagged[1].version} of table ${q(entry.objectId)} is tagged ${q(tagged[0])}; delete the tag first`);
  }
  const aside: NonNullable<Awaited<ReturnType<typeof setAsideManifest>>>[] = [];
  try {
    for (const v of doomed) {
      const a = await setAsideManifest(dir, v, branch);
      if (a) aside.push(a);
    }
  } catch (err) {
    for (const a of aside.reverse()) await a.undo();
    throw err;
  }
  const announce = () => svc.tables.commits.announce({ table: entry, branch: branch ?? null, version: null, change: "history", rows: null, byCachedHandle: false });
  announce();
  return {
    result: { deleted_count: aside.length },
    undo: async () => {
      for (const a of [...aside].reverse()) await a.undo();
      announce();
    },
    finish: () => Promise.all(aside.map((a) => a.drop())),
  };
}

/** Run the steps in order, all or nothing; errors name the step (`what(i)`) when there are several. */
async function allOrNothing(svc: Services, steps: (() => Promise<Step>)[], what: (i: number) => string): Promise<unknown[]> {
  return svc.catalog.exclusive(async () => {
    const done: Step[] = [];
    try {
      for (const [i, step] of steps.entries()) {
        try {
          done.push(await step());
        } catch (err) {
          throw isApiError(err) && steps.length > 1 ? new ApiError(err.code, `${what(i)}: ${err.message}`, err.status) : err;
        }
      }
    } catch (err) {
      for (const s of done.reverse()) {
        await s.undo().catch((e: unknown) => log.error("batch undo failed", { error: String((e as Error)?.stack ?? e) }));
      }
      throw err;
    }
    await Promise.all(done.map((s) => s.finish?.()));
    return done.map((s) => s.result);
  });
}

/** Batch routes carry their ids in the body: each must lie inside the credential's namespaces. */
function mayWrite(principal: Principal, id: readonly string[] | null | undefined, field: string): string[] {
  if (!id || id.length === 0) throw invalid(`${field}.id: is required (the table's id)`);
  authoriseObject(principal, id, "write", `${field}.id`);
  return [...id];
}

export const createTableVersion = jsonOp(CreateTableVersion, async ({ id, body, svc }) => {
  const [version] = await allOrNothing(svc, [() => createVersion(svc, id, body)], () => "");
  return json({ version });
});

export const batchDeleteTableVersions = jsonOp(BatchDeleteTableVersions, async ({ id, body, svc }) => {
  const [result] = await allOrNothing(svc, [() => deleteVersions(svc, id, body)], () => "");
  return json(result);
});

export const batchCreateTableVersions = jsonOp(BatchCreateTableVersions, async ({ body, svc, principal }) => {
  const ids = body.entries.map((e, i) => mayWrite(principal, e.id, `entries[${i}]`));
  const versions = await allOrNothing(
    svc,
    body.entries.map((e, i) => () => createVersion(svc, ids[i], e)),
    (i) => `entries[${i}]`,
  );
  return json({ versions });
});

const KINDS = ["declare_table", "create_table_version", "delete_table_versions", "deregister_table"] as const;

export const batchCommitTables = jsonOp(BatchCommitTables, async ({ body, svc, principal, work }) => {
  const steps = body.operations.map((op, i): (() => Promise<Step>) => {
    const given = KINDS.filter((k) => op[k] != null);
    if (given.length !== 1) throw invalid(`operations[${i}]: provide exactly one of ${KINDS.join(", ")} (got ${given.length ? given.join(", ") : "none"})`);
    const kind = given[0];
    const id = mayWrite(principal, op[kind]!.id, `operations[${i}].${kind}`);
    switch (kind) {
      case "declare_table":
        return async () => {
          const d = await declareIn(svc, id, op.declare_table!, principal, work);
          return { result: { declare_table: d.response }, undo: d.undo };
        };
      case "create_table_version":
        return async () => {
          const s = await createVersion(svc, id, op.create_table_version!);
          return { ...s, result: { create_table_version: { version: s.result } } };
        };
      case "delete_table_versions":
        return async () => {
          const s = await deleteVersions(svc, id, op.delete_table_versions!);
          return { ...s, result: { delete_table_versions: s.result } };
        };
      case "deregister_table":
        return async () => {
          const { entry, undo } = await deregisterIn(svc, id, work);
          const location = tableDir(svc.tables.root, entry);
          return {
            result: { deregister_table: { id: entry.id, location, properties: entry.properties } },
            undo,
            finish: async () => svc.tables.evict(entry.objectId),
          };
        };
    }
  });
  const results = await allOrNothing(svc, steps, (i) => `operations[${i}]`);
  return json({ results });
});
