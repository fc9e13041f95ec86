// Options of bodyless and Arrow-body table operations, which arrive as query parameters.
import { invalid } from "../errors.js";
import { matchMode } from "../schemas/mode.js";

/** A mode parameter, case-insensitive in PascalCase or snake_case; yields the snake_case value. */
export function modeParam<V extends string>(q: URLSearchParams, name: string, allowed: readonly V[], def: V): V {
  const raw = q.get(name);
  if (raw === null || raw === "") return def;
  const hit = matchMode(raw, allowed);
  if (hit === undefined) throw invalid(`${name}: must be one of ${allowed.join(", ")} (got ${JSON.stringify(raw)})`);
  return hit;
}

/** A JSON-encoded string map parameter, such as create's `properties`. */
export function mapParam(q: URLSearchParams, name: string): Record<string, string> | undefined {
  const raw = q.get(name);
  if (raw === null || raw === "") return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw invalid(`${name}: must be a JSON object of strings`);
  }
  if (v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v) || Object.values(v as object).some((x) => typeof x !== "string")) {
    throw invalid(`${name}: must be a JSON object of strings`);
  }
  return v as Record<string, string>;
}

export const stringParam = (q: URLSearchParams, name: string): string | undefined => q.get(name) || undefined;

/** A list parameter given repeated and/or comma-separated. */
export const listParam = (q: URLSearchParams, name: string): string[] =>
  q.getAll(name).flatMap((v) => v.split(",")).map((s) => s.trim()).filter((s) => s.length > 0);
