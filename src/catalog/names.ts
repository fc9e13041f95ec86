// The catalog's naming rule: an object id is a path of names joined by `$` in the manifest, so a
// name may hold anything but `$` and control characters (spaces, `/` and `..` are fine: storage
// paths are derived, never taken from names).
import { invalid } from "../errors.js";

/** The separator of object ids in the manifest (the Lance directory catalog's). */
export const SEP = "$";
const MAX_NAME_LENGTH = 256;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export const objectIdOf = (id: readonly string[]) => id.join(SEP);

/**
 * Whose an object is: the top-level namespace of its id (an object id as the manifest holds it; ""
 * for an object at the root). The server's sandbox for an unscoped credential's code is keyed by
 * it (src/auth/principal.ts, sandboxScope; docs/security.md).
 */
export const tenantOf = (objectId: string) => (objectId.includes(SEP) ? objectId.slice(0, objectId.indexOf(SEP)) : "");

export const sameId = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((s, i) => s === b[i]);

/** Check one object name; `what` names the request field in the 400. */
export function checkName(name: string, what: string): void {
  if (name.length === 0) throw invalid(`${what}: names must not be empty`);
  if (name.length > MAX_NAME_LENGTH) throw invalid(`${what}: name longer than ${MAX_NAME_LENGTH} characters`);
  if (CONTROL.test(name)) throw invalid(`${what}: name ${JSON.stringify(name)} contains a control character`);
  if (name.includes(SEP)) throw invalid(`${what}: name ${JSON.stringify(name)} contains '${SEP}', the catalog's separator`);
}
