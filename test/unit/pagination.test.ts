// Listings' pages, in process: the token is the last item returned, the limit is inclusive and
// capped, and an item present throughout a listing is returned exactly once.
import { describe, expect, it } from "vitest";
import { MAX_PAGE, page, pageOf } from "../../src/operations/pagination.js";
import { PageQuery } from "../../src/schemas/params.js";
import { compileParams } from "../../src/schemas/validate.js";

const limits = { maxExpressionLength: 100, maxExpressionCost: 10, maxExpressionArray: 1024, maxExpressionCopies: 16 };
const pageParams = (q: URLSearchParams) => pageOf(compileParams(PageQuery)(q, limits));

const names = Array.from({ length: 25 }, (_, i) => `t${String(i).padStart(2, "0")}`);
const id = (s: string) => s;

describe("pagination", () => {
  it("walks a listing page by page with the last item as the token", () => {
    const seen: string[] = [];
    let token: string | null = null;
    do {
      const p = page(names, id, token, 10);
      seen.push(...p.items);
      token = p.pageToken;
    } while (token !== null);
    expect(seen).toEqual(names);
  });

  it("the last page carries no token; a token past the end gives an empty page", () => {
    expect(page(names, id, "t19", 10)).toEqual({ items: names.slice(20), pageToken: null });
    expect(page(names, id, "t99", 10)).toEqual({ items: [], pageToken: null });
  });

  it("a token that is not an item starts after where it would sort", () => {
    expect(page(names, id, "t05x", 2).items).toEqual(["t06", "t07"]);
  });

  it("limit is parsed from the PageQuery schema, capped at the maximum page, and validated naming the parameter", () => {
    expect(pageParams(new URLSearchParams("limit=5&page_token=t03"))).toEqual({ after: "t03", limit: 5 });
    expect(pageParams(new URLSearchParams("limit=999999")).limit).toBe(MAX_PAGE);
    expect(pageParams(new URLSearchParams("")).limit).toBe(MAX_PAGE);
    expect(() => pageParams(new URLSearchParams("limit=0"))).toThrow(/^limit: must be >= 1$/);
    expect(() => pageParams(new URLSearchParams("limit=x"))).toThrow(/^limit: must be integer$/);
  });
});
