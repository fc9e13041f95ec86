// Pagination (lance-namespace `PageToken`): an opaque `page_token` (here: the last name returned, so LanceDB's client,
// which sends "start after this name", works too) and an inclusive `limit`. Listings are sorted,
// so an item that exists throughout a listing is returned exactly once however others change it.
import { invalid } from "../errors.js";

export const MAX_PAGE = 1000;

export function pageParams(q: URLSearchParams): { after: string | null; limit: number } {
  const token = q.get("page_token");
  const rawLimit = q.get("limit");
  let limit = MAX_PAGE;
  if (rawLimit !== null && rawLimit !== "") {
    if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1) throw invalid(`limit: must be an integer >= 1, got ${JSON.stringify(rawLimit)}`);
    limit = Math.min(Number(rawLimit), MAX_PAGE);
  }
  return { after: token ? token : null, limit };
}

/** `keys` must be sorted ascending; returns one page and the token for the next (null at the end). */
export function page<T>(items: T[], key: (t: T) => string, after: string | null, limit: number) {
  let start = 0;
  if (after !== null) {
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (key(items[mid]) <= after) lo = mid + 1;
      else hi = mid;
    }
    start = lo;
  }
  const slice = items.slice(start, start + limit);
  const more = start + limit < items.length;
  return { items: slice, pageToken: more ? key(slice[slice.length - 1]) : null };
}

export function boolParam(q: URLSearchParams, name: string, def: boolean): boolean {
  const v = q.get(name);
  if (v === null || v === "") return def;
  if (/^true$/i.test(v)) return true;
  if (/^false$/i.test(v)) return false;
  throw invalid(`${name}: must be true or false, got ${JSON.stringify(v)}`);
}
