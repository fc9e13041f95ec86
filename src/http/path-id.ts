// Object identifiers in paths: `ns1$ns2$table`, percent- and form-decoded, split on `?delimiter=`.
import { checkName, SEP } from "../catalog/names.js";
import { invalid } from "../errors.js";

/** The default delimiter (docs/contract.md) is the catalog's own separator. */
export const DEFAULT_DELIMITER = SEP;

/** Decode one raw path segment. LanceDB's client form-encodes ids, so `+` is a space. */
export function decodeSegment(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, " "));
  } catch {
    throw invalid(`${what}: malformed percent-encoding in ${JSON.stringify(raw)}`);
  }
}

export function parseId(decoded: string, delimiter: string): string[] {
  if (delimiter.length === 0) throw invalid("delimiter: must not be empty");
  if (decoded === delimiter) return [];
  const parts = decoded.split(delimiter);
  parts.forEach((p) => checkName(p, "id"));
  return parts;
}
