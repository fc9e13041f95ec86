// Where a table's data lives, relative to the data directory. Names may hold anything but control
// characters and `$` (spaces, `/`, `..` included), so directory names are derived, never taken
// as given: a derived location is always one plain directory directly inside the data directory.
import { randomBytes } from "node:crypto";
import path from "node:path";
import { isRemote } from "../config.js";
import { invalid } from "../errors.js";

// LanceDB opens `<name>.lance` by name only when the name uses these characters.
const LANCE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/;

/**
 * Root tables keep LanceDB's `<name>.lance` layout when the name allows it; others, and every
 * table with `randomised`, get a random prefix and a slug of the id.
 */
export function newLocation(id: readonly string[], randomised = false): string {
  if (!randomised && id.length === 1 && LANCE_NAME.test(id[0])) return `${id[0]}.lance`;
  const slug = id.join(".").replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 96);
  return `${randomBytes(4).toString("hex")}_${slug}.lance`;
}

/** Where the catalog lives on an object store (a location no table may take). */
export const REMOTE_MANIFEST_LOCATION = "__manifest.lance";
/** The catalog's own table: the directory catalog's on local disk, and where it lives on an object store. */
export const CATALOG_DIRS = ["__manifest", REMOTE_MANIFEST_LOCATION];

/** A location under an object store root: `<root>/<relative>`, never outside it. */
function resolveRemote(root: string, location: string): string {
  const rel = location.startsWith(root + "/") ? location.slice(root.length + 1) : location;
  const segs = rel.split("/");
  if (!isRemote(rel) && !rel.startsWith("/") && rel !== "" && segs.every((s) => s !== "" && s !== "." && s !== "..")) return `${root}/${rel}`;
  throw invalid(`location ${JSON.stringify(location)} is outside the data directory`);
}

/** Absolute path (or object store URI) of a stored location; refuses anything that would leave the data directory. */
export function resolveLocation(root: string, location: string): string {
  if (isRemote(root)) return resolveRemote(root, location);
  const abs = path.resolve(root, location.replace(/^file:\/\//, ""));
  if (abs !== root && abs.startsWith(root + path.sep)) return abs;
  throw invalid(`location ${JSON.stringify(location)} is outside the data directory`);
}

/**
 * A client-given location (relative, absolute or file:// inside the data directory) → stored relative form.
 * Entries of the data directory whose name starts with "." are Quiver's own (its state, the replicas'
 * shared system tables), and the catalog's table is every tenant's: no table may be registered
 * there, nor inside them (a table's writes and version deletes would reach them).
 */
export function normaliseLocation(root: string, location: string): string {
  const rel = isRemote(root) ? resolveRemote(root, location).slice(root.length + 1) : path.relative(root, resolveLocation(root, location));
  const top = rel.split(/[\\/]/)[0];
  if (top.startsWith(".")) throw invalid(`location ${JSON.stringify(location)} is reserved for Quiver's own state`);
  if (CATALOG_DIRS.includes(top)) throw invalid(`location ${JSON.stringify(location)} is the catalog's own table`);
  return rel;
}

/** The Lance table name under which LanceDB's plain `connect(root)` opens this location, if any. */
export function lanceNameOf(location: string): string | null {
  if (!location.endsWith(".lance") || location.includes("/")) return null;
  const stem = location.slice(0, -".lance".length);
  return LANCE_NAME.test(stem) ? stem : null;
}
