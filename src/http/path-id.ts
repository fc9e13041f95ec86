// Object identifiers in paths: `ns1$ns2$table`, percent- and form-decoded, split on `?delimiter=`.
import { invalid } from "../errors.js";

export const DEFAULT_DELIMITER = "$";
const MAX_NAME_LENGTH = 256;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Decode one raw path segment. LanceDB's client form-encodes ids, so `+` is a space. */
export function decodeSegment(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, " "));
  } catch {
    throw invalid(`${what}: malformed percent-encoding in ${JSON.stringify(raw)}`);
  }
}

/** Check one object name; the catalog joins names with `$`, so a name cannot hold it. */
export function checkName(name: string, what: string): void {
  if (name.length === 0) throw invalid(`${what}: names must not be empty`);
  if (name.length > MAX_NAME_LENGTH) throw invalid(`${what}: name longer than ${MAX_NAME_LENGTH} characters`);
  if (CONTROL.test(name)) throw invalid(`${what}: name ${JSON.stringify(name)} contains a control character`);
  if (name.includes("$")) throw invalid(`${what}: name ${JSON.stringify(name)} contains '$', the catalog's separator`);
}

export function parseId(decoded: string, delimiter: string): string[] {
  if (delimiter.length === 0) throw invalid("delimiter: must not be empty");
  if (decoded === delimiter) return [];
  const parts = decoded.split(delimiter);
  parts.forEach((p) => checkName(p, "id"));
  return parts;
}

export function joinId(id: readonly string[], delimiter: string): string {
  return id.length === 0 ? delimiter : id.join(delimiter);
}
