// A tenant's input is never a 500: every JSON route of the route table, in process over dispatch(),
// with each body field given wrong types and deep nesting, and the inputs that used to be 500s
// (a 3,000-deep struct row in a JSON insert, `version()` in `columns`).
import type { TObject } from "@sinclair/typebox";
import { beforeAll, describe, expect, it } from "vitest";
import type { Outgoing } from "../../src/http/pipeline.js";
import { routes } from "../../src/routes.js";
import { inProcessForFile } from "../helpers/in-process.js";
import { ADMIN_KEY as KEY } from "../helpers/quiver.js";

// The built services, as a server process runs them: its job launcher and worker threads start
// from files next to them.
const q = inProcessForFile();

const signal = () => new AbortController().signal;
const send = (p: string, body: unknown, headers: Record<string, string> = {}): Promise<Outgoing> => {
  const [pathOnly, query = ""] = p.split("?");
  const raw = typeof body === "string" ? body : JSON.stringify(body);
  return q.pipeline.dispatch({ method: "POST", path: pathOnly, query, headers: { "x-api-key": KEY, ...headers }, signal }, Buffer.from(raw));
};
const detail = (o: Outgoing) => (o.kind === "body" ? (JSON.parse(String(o.body)) as { detail: string }).detail : "");

beforeAll(async () => {
  expect((await send("/v1/namespace/f/create", {})).status).toBe(200);
  const rows = Array.from({ length: 10 }, (_, i) => ({ id: i, name: `n${i}`, s: { a: i } }));
  expect((await send("/v1/table/f$t/create", rows, { "content-type": "application/json" })).status).toBe(200);
});

/** `{"a":{"a":…}}` nested `n` deep. */
const deep = (n: number) => '{"a":'.repeat(n) + "1" + "}".repeat(n);

describe("inputs that were 500s", () => {
  it("a 3,000-deep struct row in a JSON insert is 400 naming the depth limit", async () => {
    const o = await send("/v1/table/f$t/insert", `[{"id": 1, "s": ${deep(3000)}}]`, { "content-type": "application/json" });
    expect(o.status).toBe(400);
    expect(detail(o)).toBe("rows: nested more than 64 arrays or objects deep, the limit (--max-json-depth)");
    const body = await send("/v1/table/f$t/count_rows", `{"context": ${deep(3000)}}`);
    expect([body.status, detail(body)]).toEqual([400, "body: nested more than 64 arrays or objects deep, the limit (--max-json-depth)"]);
  });

  it("the depth limit counts nesting, not brackets: 64 deep passes, 65 is refused, brackets in strings do not count", async () => {
    const DEPTH = "body: nested more than 64 arrays or objects deep, the limit (--max-json-depth)";
    const at = async (body: string) => {
      const r = await send("/v1/table/f$t/count_rows", body);
      return r.status === 200 ? 200 : detail(r);
    };
    // 64 deep gets past the depth check to the schema (context maps names to strings).
    expect(await at(`{"context": ${deep(63)}}`)).toBe("context.a: must be string");
    expect(await at(`{"context": ${deep(64)}}`)).toBe(DEPTH);
    expect(await at(`{"context": {"a": "${"[{".repeat(100)}"}}`)).toBe(200);
  });

  it("version() and other column-free expressions in columns are 400 naming columns", async () => {
    for (const expr of ["version()", "now()", "1"]) {
      const o = await send("/v1/table/f$t/query", { columns: { v: expr }, k: 5 });
      expect(o.status, expr).toBe(400);
      expect(detail(o)).toMatch(/^columns: /);
    }
  });
});

/** Values of the wrong type (or absurd) for any field. */
const WRONG: unknown[] = [null, true, -1, 1e308, "", "x".repeat(300), [], [[[[[]]]]], {}, JSON.parse(deep(40))];

describe("every JSON route, each field given wrong values, answers below 500", () => {
  const jsonRoutes = routes.filter((r) => r.method === "POST" && r.value.op.body === "json" && r.value.op.schema);
  const idFor = (p: string) => p.replace("{id}", p.includes("/namespace/") ? "f" : "f$t").replace(/\{(\w+)\}/g, "x");
  for (const r of jsonRoutes) {
    it(`${r.value.name}`, async () => {
      const props = Object.keys((r.value.op.schema as TObject).properties ?? {}).filter((k) => k !== "identity");
      const failures: string[] = [];
      for (const k of props) {
        for (const v of WRONG) {
          const o = await send(idFor(r.path), { [k]: v });
          if (o.status >= 500 && o.status !== 503) failures.push(`${k}=${JSON.stringify(v)?.slice(0, 40)} → ${o.status} ${detail(o).slice(0, 200)}`);
        }
      }
      expect(failures).toEqual([]);
    });
  }
});
