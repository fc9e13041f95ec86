// Pagination (lance-namespace `PageToken`): an opaque `page_token` (here: the last name returned, so LanceDB's client,
// which sends "start after this name", works too) and an inclusive `limit`. Listings are sorted,
// so an item that exists throughout a listing is returned exactly once however others change it.
export const MAX_PAGE = 1000;

/** Where a page starts and its size, from the `page_token` and `limit` parameters (PageQuery). */
export const pageOf = (args: { page_token?: string; limit?: number }): { after: string | null; limit: number } => ({
  after: args.page_token || null,
  limit: Math.min(args.limit ?? MAX_PAGE, MAX_PAGE),
});

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
