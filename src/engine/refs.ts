// Tags and branches: LanceDB's calls on them, what its API leaves out (a tag's branch, a branch's
// creation time and metadata) read from Lance's `_refs/` files, name rules, and the one place
// Lance's ref error texts are turned into API errors.
import { namedBranch, type TableHandle } from "./tables.js";
import { exists, joinInside, listNames, readBytes, removeTree } from "../util/store-files.js";
import { branchNameFault, branchTreePath, checkedRef } from "../util/ref-names.js";
import { ApiError, Code, invalid } from "../errors.js";
import { engineReason, errorText, isVersionMissing } from "./messages.js";

/** The table's tags: name → version and manifest size. */
export const listTags = async (t: TableHandle) => (await t.tags()).list();
export const tagVersion = async (t: TableHandle, tag: string) => (await t.tags()).getVersion(tag);
/** Tags `version` of the branch `t` is on (LanceDB resolves it against the handle's branch). */
export const createTag = async (t: TableHandle, tag: string, version: number) => (await t.tags()).create(tag, version);
/** How many of its tags the table in `tableDir` holds (replicas' serving pins not counted): one listing of Lance's tag files, none read. */
export const countTags = async (tableDir: string) => (await listNames(joinInside(tableDir, "_refs/tags"))).filter((n) => n.endsWith(".json") && !isServingPin(n)).length;
export const updateTag = async (t: TableHandle, tag: string, version: number) => (await t.tags()).update(tag, version);
export const deleteTag = async (t: TableHandle, tag: string) => (await t.tags()).delete(tag);
/**
 * The tag by which a replica holds the version its saved serving index answers at (taken at a
 * shutdown, deleted once a restart brought the index forward): cleanups keep every version from a
 * tagged one on, so the restart reads each version's operation since, as a live sync does.
 */
const SERVING_PIN = "quiver-serving-";
export const servingPin = (replica: string) => SERVING_PIN + replica.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 150);
export const isServingPin = (tag: string) => tag.startsWith(SERVING_PIN);
/** `tag`, unless it is a replica's serving pin, which a client may read but not create, move or delete (a pin a client moved or removed would hold the wrong version; one it made would be deleted by maintenance as a stale pin). */
export function clientTag(tag: string): string {
  if (isServingPin(tag)) throw invalid(`tag: ${JSON.stringify(tag)} starts with ${JSON.stringify(SERVING_PIN)}, the names Quiver's replicas hold their saved serving indexes' versions by; choose another name`);
  return tag;
}
/** Moves `t` to the tagged version (a handle of its own: the cached one must not move). */
export const checkoutTag = (t: TableHandle, tag: string) => t.checkout(tag);

/** The table's branches: name → parent branch and version, manifest size. */
export const listBranches = async (t: TableHandle) => (await t.branches()).list();
export async function createBranch(t: TableHandle, name: string, from: string | undefined, version: number | undefined): Promise<void> {
  await (await t.branches()).create(name, from, version);
}
export const deleteBranch = async (t: TableHandle, name: string) => (await t.branches()).delete(name);

async function readJson(file: string): Promise<Record<string, unknown> | null> {
  try {
    return JSON.parse((await readBytes(file)).toString("utf8"));
  } catch {
    return null;
  }
}

/** The branch a tag points into; undefined for main. */
export async function tagBranch(tableDir: string, tag: string): Promise<string | undefined> {
  const rec = await readJson(joinInside(tableDir, `_refs/tags/${checkedRef("tag", tag)}.json`));
  return typeof rec?.branch === "string" ? rec.branch : undefined;
}

export interface BranchFile {
  createAt?: number;
  metadata?: Record<string, string>;
}

export async function branchFile(tableDir: string, name: string): Promise<BranchFile> {
  const rec = await readJson(joinInside(tableDir, `_refs/branches/${encodeURIComponent(checkedRef("branch", name))}.json`));
  return {
    createAt: typeof rec?.createAt === "number" ? rec.createAt : undefined,
    metadata: rec?.metadata && typeof rec.metadata === "object" ? (rec.metadata as Record<string, string>) : undefined,
  };
}

// Lance creates the branch directory before it validates the name, and accepts a "." segment.
export function checkBranchName(name: string): void {
  if (name === "main") throw invalid(`name: "main" is the main branch and cannot be created or deleted`);
  const fault = branchNameFault(name);
  if (fault !== null) throw invalid(`name: ${fault}`);
}

/** Runs a branch creation; if it fails, removes the directories it may have left behind. */
export async function withoutOrphan<T>(tableDir: string, name: string, create: () => Promise<T>): Promise<T> {
  // The outermost directory of `tree/<a>/<b>/…` that does not exist yet (a may be another branch's parent).
  const segs = branchTreePath(name).split("/");
  let fresh: string | null = null;
  for (let i = 2; i <= segs.length && fresh === null; i++) {
    const dir = joinInside(tableDir, segs.slice(0, i).join("/"));
    if (!(await exists(dir))) fresh = dir;
  }
  try {
    return await create();
  } catch (err) {
    if (fresh !== null) await removeTree(fresh);
    throw err;
  }
}

export interface RefNames {
  table: string;
  tag?: string;
  branch?: string;
  version?: number;
}

const q = JSON.stringify;

/** Lance's tag/branch/version errors as API errors; null for anything else. */
export function refError(err: unknown, n: RefNames): ApiError | null {
  const msg = errorText(err);
  const first = engineReason(err);
  const onBranch = namedBranch(n.branch) ? ` on branch ${q(n.branch)}` : "";
  if (/Ref conflict error: tag \S+ already exists/.test(msg)) {
    return new ApiError(Code.TableTagAlreadyExists, `tag ${q(n.tag)} already exists in table ${q(n.table)}`);
  }
  if (/Ref not found error: tag \S+ does not exist/.test(msg)) {
    return new ApiError(Code.TableTagNotFound, `tag ${q(n.tag)} not found in table ${q(n.table)}`);
  }
  if (isVersionMissing(err)) {
    return new ApiError(Code.TableVersionNotFound, `version ${n.version} not found${onBranch} in table ${q(n.table)}`);
  }
  if (/Ref not found error: Branch .* does not exist|tree\/.*\/_versions(,|\s|$)/.test(msg)) {
    return new ApiError(Code.TableBranchNotFound, `branch ${q(n.branch)} not found in table ${q(n.table)}`);
  }
  if (/Ref is invalid: /.test(msg)) return invalid(first.replace(/^Ref is invalid: /, `${n.tag !== undefined ? "tag" : "name"}: `));
  if (/Ref conflict error: Branch \S+ is referenced by/.test(msg)) {
    return new ApiError(Code.InvalidTableState, `branch ${q(n.branch)} of table ${q(n.table)} cannot be deleted: ${first.replace(/^Ref conflict error: /, "")}`);
  }
  return null;
}
