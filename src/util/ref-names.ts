// Branch and tag names become paths in a table's directory: Lance keeps a branch's versions under
// `tree/<branch>/` and a tag in `_refs/tags/<tag>.json`. One rule per kind, Lance's own (its
// `check_valid_branch` and `check_valid_tag`) with dot segments refused too, is what the request
// schemas check (the `x-ref` keyword) and what the path joiners check again before a name is used.
import path from "node:path";
import { invalid } from "../errors.js";

// Rust's `char::is_alphanumeric`, which Lance's rules use: alphabetic or numeric, in any script.
const NAME_CHARS = /^[\p{Alphabetic}\p{Nd}\p{Nl}\p{No}._-]+$/u;

/**
 * Lance lists tags by their file names, which it wrote percent-encoded and reads back as given: a
 * tag with a letter outside ASCII made every tags/list and branches/delete of its table 500. Tags
 * keep to ASCII; branches (listed from their own record) keep Lance's rule.
 */
const TAG_CHARS = /^[A-Za-z0-9._-]+$/;

const q = JSON.stringify;

/**
 * The most bytes a ref name may take on disk, where it is one path component (a tag's
 * `<tag>.json`, first written as `<tag>.json.tmp.<32 hex>#1`) or several (a branch's) and a
 * component has at most 255 bytes (Linux's NAME_MAX). Lance's object store writes each UTF-8 byte
 * of a character other than an ASCII letter, digit, ".", "-" or "_" as `%25XX`: 5 bytes. Bounded in
 * characters (200), 100 letters "é" took 1,000 bytes and made ENAMETOOLONG.
 */
const MAX_REF_BYTES = 200;
const PLAIN = /[A-Za-z0-9._-]/g;

/** `name`'s bytes as Lance spells it on disk. */
const diskBytes = (name: string) => {
  const plain = name.match(PLAIN)?.length ?? 0;
  return plain + 5 * (Buffer.byteLength(name, "utf8") - plain);
};

/**
 * What Lance keeps in a table's (and each branch's) directory. A branch lives at `tree/<name>/`,
 * so branch `x/data` would be branch x's data directory and `x/_versions` its versions: no segment
 * of a branch may be one of these, or any name starting with "_" (Lance's metadata names do).
 */
const LANCE_DIRS = new Set(["data", "tree"]);
const lanceDir = (segment: string) => LANCE_DIRS.has(segment) || segment.startsWith("_");

const overBytes = (name: string) => {
  const bytes = diskBytes(name);
  if (bytes <= MAX_REF_BYTES) return null;
  return `${q(name.slice(0, 16))}… takes ${bytes} bytes on disk, more than ${MAX_REF_BYTES} (each UTF-8 byte of a letter or digit outside ASCII is written as "%25XX", 5 bytes)`;
};

/**
 * Why `name` cannot be a branch, or null. "main" names the main branch (which has no directory of
 * its own). Lance allows a `.` segment, which is the parent directory: refused here on every route.
 */
export function branchNameFault(name: string): string | null {
  if (name === "main") return null;
  const rule = `a branch is "/"-separated segments of letters, digits, ".", "-" and "_", none of them "." or empty, "data", "tree" or starting with "_", with no ".." and no ".lock" at the end, at most ${MAX_REF_BYTES} bytes on disk`;
  if (name === "") return `must not be empty; ${rule}`;
  const long = overBytes(name);
  if (long !== null) return `${long}; ${rule}`;
  for (const segment of name.split("/")) {
    if (segment === "") return `${q(name)} has an empty segment ("/" at either end, or "//"); ${rule}`;
    if (segment === "." || segment === "..") return `${q(name)} has a ${q(segment)} segment; ${rule}`;
    if (!NAME_CHARS.test(segment)) return `${q(name)} has a character other than a letter, digit, ".", "-" or "_"; ${rule}`;
    if (lanceDir(segment)) return `${q(name)} has a segment ${q(segment)}, a name Lance uses inside a branch's directory; ${rule}`;
  }
  if (name.includes("..")) return `${q(name)} contains ".."; ${rule}`;
  if (name.endsWith(".lock")) return `${q(name)} ends with ".lock"; ${rule}`;
  return null;
}

/** Why `name` cannot be a tag, or null. */
export function tagNameFault(name: string): string | null {
  const rule = `a tag is ASCII letters, digits, ".", "-" and "_", not starting or ending with ".", with no ".." and no ".lock" at the end, at most ${MAX_REF_BYTES} characters`;
  if (name === "") return `must not be empty; ${rule}`;
  const long = overBytes(name);
  if (long !== null) return `${long}; ${rule}`;
  if (!TAG_CHARS.test(name)) return `${q(name)} has a character other than an ASCII letter, digit, ".", "-" or "_"; ${rule}`;
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
