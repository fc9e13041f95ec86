// Branch and tag names become paths in a table's directory: Lance keeps a branch's versions under
// `tree/<branch>/` and a tag in `_refs/tags/<tag>.json`. One rule per kind, Lance's own (its
// `check_valid_branch` and `check_valid_tag`) with dot segments refused too, is what the request
// schemas check (the `x-ref` keyword) and what the path joiners check again before a name is used.
import path from "node:path";
import { invalid } from "../errors.js";

// Rust's `char::is_alphanumeric`, which Lance's rules use: alphabetic or numeric, in any script.
const NAME_CHARS = /^[\p{Alphabetic}\p{Nd}\p{Nl}\p{No}._-]+$/u;

const q = JSON.stringify;

/**
 * Why `name` cannot be a branch, or null. "main" names the main branch (which has no directory of
 * its own). Lance allows a `.` segment, which is the parent directory: refused here on every route.
 */
export function branchNameFault(name: string): string | null {
  if (name === "main") return null;
  const rule = `a branch is "/"-separated segments of letters, digits, ".", "-" and "_", none of them "." or empty, with no ".." and no ".lock" at the end`;
  if (name === "") return `must not be empty; ${rule}`;
  for (const segment of name.split("/")) {
    if (segment === "") return `${q(name)} has an empty segment ("/" at either end, or "//"); ${rule}`;
    if (segment === "." || segment === "..") return `${q(name)} has a ${q(segment)} segment; ${rule}`;
    if (!NAME_CHARS.test(segment)) return `${q(name)} has a character other than a letter, digit, ".", "-" or "_"; ${rule}`;
  }
  if (name.includes("..")) return `${q(name)} contains ".."; ${rule}`;
  if (name.endsWith(".lock")) return `${q(name)} ends with ".lock"; ${rule}`;
  return null;
}

/** Why `name` cannot be a tag, or null. */
export function tagNameFault(name: string): string | null {
  const rule = `a tag is letters, digits, ".", "-" and "_", not starting or ending with ".", with no ".." and no ".lock" at the end`;
  if (name === "") return `must not be empty; ${rule}`;
  if (!NAME_CHARS.test(name)) return `${q(name)} has a character other than a letter, digit, ".", "-" or "_"; ${rule}`;
  if (name.startsWith(".") || name.endsWith(".") || name.includes("..") || name.endsWith(".lock")) return `${q(name)} is not a tag name; ${rule}`;
  return null;
}

export type RefKind = "branch" | "tag";

export const refNameFault = (kind: RefKind, name: string) => (kind === "branch" ? branchNameFault(name) : tagNameFault(name));

/** `name`, if it may be a ref of `kind`; else the 400 naming `field`. */
export function checkedRef(kind: RefKind, name: string, field: string = kind): string {
  const fault = refNameFault(kind, name);
  if (fault !== null) throw invalid(`${field}: ${fault}`);
  return name;
}

/**
 * `tree/<branch>`, where Lance keeps a named branch's files, relative to its table's directory.
 * Checked twice: the name by its rule, then the joined path, which normalised must still be itself
 * and inside `tree/` (so no later change to the rule can open a way out).
 */
export function branchTreePath(branch: string): string {
  const rel = `tree/${checkedRef("branch", branch)}`;
  if (path.posix.normalize(rel) !== rel || !rel.startsWith("tree/") || rel.length <= "tree/".length) {
    throw invalid(`branch: ${JSON.stringify(branch)} does not name a directory inside the table's tree/`);
  }
  return rel;
}
