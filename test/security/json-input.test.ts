// JSON that JavaScript reads differently from what it says. A row key `__proto__` set the prototype
// of the objects rows are built in: a create was a 500, or (a number's key) answered 200 having
// stored no rows. A number literal past float64's range (1e400) parses as Infinity: it was stored
// as Infinity in rows and taken as a query's `k` or a search's bounds; 1e39 in a float32 column
// (a vector's element) was stored as Infinity too. Each is now a 400 naming the row or field, and
// nothing is stored; `constructor` and `prototype` are plain column names.
import { describe, expect, it } from "vitest";
import { inProcessForFile } from "../helpers/in-process.js";

const q = inProcessForFile();
const JSON_ROWS = { "content-type": "application/json" };
const NDJSON = { "content-type": "application/x-ndjson" };
const send = (p: string, raw: string, headers = JSON_ROWS) => q.call("POST", p, raw, headers);
const rowsOf = async (id: string) => JSON.parse((await q.call("POST", `/v1/table/${id}/query`, { k: 100 }, { accept: "application/json" })).text);
const expect400 = (r: { status: number; text: string; json: any }, detail: RegExp) => {
  expect(r.status, r.text).toBe(400);
  expect(r.json.detail).toMatch(detail);
};

describe("`__proto__`, `constructor` and `prototype` in JSON rows", () => {
  it("a `__proto__` key anywhere in a row is 400 naming it, on create and on insert; nothing is stored", async () => {
    expect((await q.call("POST", "/v1/namespace/n/create", {})).status).toBe(200);
    const cases: [string, RegExp][] = [
      ['[{"id":1,"__proto__":{"a":1}}]', /^rows\[0\]: "__proto__" cannot be a column or field name$/],
      ['[{"id":1,"__proto__":5}]', /^rows\[0\]: "__proto__"/],
      ['[{"id":1,"s":{"a":1}},{"id":2,"s":{"__proto__":null}}]', /^rows\[1\]\.s: "__proto__"/],
      ['[{"id":1,"l":[{"__proto__":1}]}]', /^rows\[0\]\.l\[0\]: "__proto__"/],
      ['{"rows":[{"id":1}],"schema":{"fields":[{"name":"__proto__","type":{"type":"int64"}}]}}', /"__proto__" cannot be a column or field name/],
    ];
    for (const [body, detail] of cases) {
      expect400(await send("/v1/table/n$p/create", body), detail);
      expect((await q.call("POST", "/v1/table/n$p/exists", {})).status).toBe(404);
    }
    expect400(await send("/v1/table/n$p/create", '{"id":1}\n{"id":2,"__proto__":{}}\n', NDJSON), /^rows\[1\]: "__proto__"/);
    expect((await send("/v1/table/n$t/create", '[{"id":1}]')).status).toBe(200);
    expect400(await send("/v1/table/n$t/insert", '[{"id":2,"__proto__":{"id":3}}]'), /^rows\[0\]: "__proto__"/);
    expect(await rowsOf("n$t")).toEqual([{ id: 1 }]);
  });

  it("`constructor` and `prototype` are plain column names, and such text is a plain string value", async () => {
    expect((await send("/v1/table/n$c/create", '[{"id":1,"constructor":2,"prototype":"x","s":"__proto__"}]')).status).toBe(200);
    expect(await rowsOf("n$c")).toEqual([{ id: 1, constructor: 2, prototype: "x", s: "__proto__" }]);
  });

  it("a float column given the name of an object property as a string is 400, not that property", async () => {
    const schema = { fields: [{ name: "x", type: { type: "float64" }, nullable: true }] };
    for (const v of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      expect400(await send("/v1/table/n$f/create", JSON.stringify({ schema, rows: [{ x: v }] })), /^rows\[0\]\.x: expected a number, got /);
    }
    expect((await send("/v1/table/n$f/create", JSON.stringify({ schema, rows: [{ x: "Infinity" }, { x: 1e300 }] }))).status).toBe(200);
    expect(await rowsOf("n$f")).toEqual([{ x: "Infinity" }, { x: 1e300 }]);
  });
});

describe("numbers outside a float's range", () => {
  it("in JSON rows are 400 naming the row and column, also in a vector and in NDJSON", async () => {
    const tooBig = /outside the range of a 64-bit float/;
    expect400(await send("/v1/table/n$i/create", '[{"id":1,"x":1.5},{"id":2,"x":1e400}]'), /^rows\[1\]\.x: a number outside the range of a 64-bit float/);
    expect400(await send("/v1/table/n$i/create", '[{"id":1,"x":-1e400}]'), tooBig);
    expect400(await send("/v1/table/n$i/create", '[{"id":1,"v":[1,2,1e999]}]'), /^rows\[0\]\.v\[2\]: a number outside/);
    expect400(await send("/v1/table/n$i/create", '{"id":1,"x":1}\n{"id":2,"x":2e308}\n', NDJSON), /^rows\[1\]\.x: /);
    expect((await q.call("POST", "/v1/table/n$i/exists", {})).status).toBe(404);
    expect((await send("/v1/table/n$i/create", '[{"id":1,"x":1.5}]')).status).toBe(200);
    expect400(await send("/v1/table/n$i/insert", `[{"id":2,"x":1${"0".repeat(309)}}]`), /^rows\[0\]\.x: /);
    expect(await rowsOf("n$i")).toEqual([{ id: 1, x: 1.5 }]);
  });

  it("past a float32 or float16 column's range are 400 naming the row and column, where Arrow stored Infinity", async () => {
    const schema = { fields: [{ name: "id", type: { type: "int64" }, nullable: false }, { name: "h", type: { type: "float16" }, nullable: true }, { name: "f", type: { type: "float32" }, nullable: true }] };
    const create = (rows: object[]) => send("/v1/table/n$s/create", JSON.stringify({ schema, rows }));
    expect400(await create([{ id: 1, f: 3.5e38 }]), /^rows\[0\]\.f: a number outside the range of a 32-bit float/);
    expect400(await create([{ id: 1, f: -1e39 }]), /^rows\[0\]\.f: a number outside the range of a 32-bit float/);
    expect400(await create([{ id: 1, h: 70000 }]), /^rows\[0\]\.h: a number outside the range of a 16-bit float/);
    expect((await q.call("POST", "/v1/table/n$s/exists", {})).status).toBe(404);
    // The largest finite values of each fit; "Infinity" is how an infinite value is sent.
    expect((await create([{ id: 1, h: 65504, f: 3.4028234663852886e38 }, { id: 2, h: 1.5, f: "Infinity" }])).status).toBe(200);
    expect(await rowsOf("n$s")).toEqual([{ id: 1, h: 65504, f: 3.4028234663852886e38 }, { id: 2, h: 1.5, f: "Infinity" }]);
    // A vector given as an array of numbers is float32: an element past its range names the element.
    expect((await send("/v1/table/n$v/create", '[{"id":1,"v":[1,2,3]}]')).status).toBe(200);
    expect400(await send("/v1/table/n$v/insert", '[{"id":2,"v":[1,1e39,3]}]'), /^rows\[0\]\.v\[1\]: a number outside the range of a 32-bit float/);
    expect(await rowsOf("n$v")).toEqual([{ id: 1, v: [1, 2, 3] }]);
  });

  it("in a JSON body are 400 naming the field", async () => {
    const cases: [string, string][] = [
      ['{"k":1e400}', "k"],
      ['{"vector":[1,-1e400]}', "vector[1]"],
      ['{"lower_bound":1e400}', "lower_bound"],
      ['{"version":1e400}', "version"],
      ['{"full_text_query":{"structured_query":{"query":{"match":{"terms":"a","column":"s","boost":1e400}}}}}', "full_text_query.structured_query.query.match.boost"],
    ];
    for (const [raw, field] of cases) {
      const r = await send("/v1/table/n$i/query", raw);
      expect400(r, new RegExp(`^${field.replace(/[[\].]/g, "\\$&")}: a number outside the range of a 64-bit float$`));
    }
    expect400(await send("/v1/table/n$i/count_rows", '{"version":1e400}'), /^version: a number outside/);
    expect400(await send("/v1/table/n$i/explain_plan", '{"query":{"k":1e400}}'), /^query\.k: a number outside/);
    expect((await send("/v1/table/n$i/count_rows", '{"predicate":"x < 1e300"}')).json).toBe(1);
  });
});
