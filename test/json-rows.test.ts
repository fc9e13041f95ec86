// Rows as JSON: writes with Content-Type application/json or application/x-ndjson, and query answers
// with Accept application/json or application/x-ndjson, against the same data read as Arrow. In
// process; how a large answer streams on the wire is in json-rows-wire.test.ts.
import { describe, expect, it } from "vitest";
import { fromIPC } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const q = inProcessForFile({ args: ["--max-json-body", "200000"] });

const asJson = { "content-type": "application/json" };
const asNdjson = { "content-type": "application/x-ndjson" };
const wantJson = { accept: "application/json" };

function post(path: string, body: string, headers: Record<string, string>) {
  return q.call("POST", path, body, headers);
}

describe("JSON rows in", () => {
  it("create infers the documented types from an array of rows", async () => {
    const rows = [
      { id: 1, score: 0.5, name: "a", ok: true, vector: [1, 0, 0], tags: ["x", "y"], meta: { n: 1, s: "p" } },
      { id: 2, score: 1, name: "b", ok: false, vector: [0, 1, 0], tags: [], meta: { n: 2, s: null } },
    ];
    const r = await post("/v1/table/inferred/create", JSON.stringify(rows), asJson);
    expect(r.status, r.text).toBe(200);
    const d = await q.call("POST", "/v1/table/inferred/describe", {});
    const types = Object.fromEntries(d.json.schema.fields.map((f: any) => [f.name, f.type]));
    expect(types.id).toEqual({ type: "int64" });
    expect(types.score).toEqual({ type: "float64" });
    expect(types.name).toEqual({ type: "utf8" });
    expect(types.ok).toEqual({ type: "bool" });
    expect(types.vector).toMatchObject({ type: "fixed_size_list", length: 3, fields: [{ type: { type: "float32" } }] });
    expect(types.tags).toMatchObject({ type: "list", fields: [{ type: { type: "utf8" } }] });
    expect(types.meta).toMatchObject({ type: "struct", fields: [{ name: "n", type: { type: "int64" } }, { name: "s", type: { type: "utf8" } }] });
    const back = await q.call("POST", "/v1/table/inferred/query", { k: 10, columns: ["id", "name", "vector", "tags", "meta"] }, wantJson);
    expect(back.headers.get("content-type")).toBe("application/json");
    expect(back.json).toEqual(rows.map(({ id, name, vector, tags, meta }) => ({ id, name, vector, tags, meta })));
  });

  it("create with a schema: every documented value form round-trips, and JSON equals the Arrow answer", async () => {
    const schema = {
      fields: [
        { name: "id", type: { type: "int64" }, nullable: false },
        { name: "big", type: { type: "int64" }, nullable: true },
        { name: "u8", type: { type: "uint8" }, nullable: true },
        { name: "f", type: { type: "float32" }, nullable: true },
        { name: "bin", type: { type: "binary" }, nullable: true },
        { name: "day", type: { type: "date32" }, nullable: true },
        { name: "at", type: { type: "timestamp:us:UTC" }, nullable: true },
        { name: "local", type: { type: "timestamp:ms" }, nullable: true },
        { name: "v", type: { type: "fixed_size_list", length: 2, fields: [{ name: "item", type: { type: "float32" }, nullable: true }] }, nullable: true },
      ],
    };
    const rows = [
      { id: 1, big: "9007199254740993", u8: 255, f: 1.5, bin: Buffer.from("hi").toString("base64"), day: "2024-02-29", at: "2024-01-02T03:04:05.123456Z", local: "2024-01-02T03:04:05.120", v: [1, 2] },
      { id: 2, big: -5, u8: null, f: "NaN", bin: null, day: null, at: 1704164645123, local: null, v: null },
    ];
    const r = await post("/v1/table/typed/create", JSON.stringify({ schema, rows }), asJson);
    expect(r.status, r.text).toBe(200);
    const json = await q.call("POST", "/v1/table/typed/query", { k: 10 }, wantJson);
    expect(json.json).toEqual([
      { id: 1, big: "9007199254740993", u8: 255, f: 1.5, bin: "aGk=", day: "2024-02-29", at: "2024-01-02T03:04:05.123456Z", local: "2024-01-02T03:04:05.120", v: [1, 2] },
      { id: 2, big: -5, u8: null, f: "NaN", bin: null, day: null, at: "2024-01-02T03:04:05.123000Z", local: null, v: null },
    ]);
    // The same answer as Arrow IPC holds the same values.
    const ipc = fromIPC((await q.call("POST", "/v1/table/typed/query", { k: 10 })).bytes);
    expect(ipc.getChild("big")!.get(0)).toBe(9007199254740993n);
    expect(Buffer.from(ipc.getChild("bin")!.get(0)).toString()).toBe("hi");
    expect(Number.isNaN(ipc.getChild("f")!.get(1))).toBe(true);
    expect(ipc.getChild("at")!.get(0)).toBeCloseTo(Date.parse("2024-01-02T03:04:05.123Z") + 0.456, 3);
  });

  it("insert takes NDJSON and merge_insert takes a JSON array, read as the table's schema", async () => {
    await post("/v1/table/people/create", JSON.stringify([{ id: 1, name: "ann" }]), asJson);
    const ins = await post("/v1/table/people/insert", '{"id":2,"name":"bo"}\n\n{"id":3}\n', asNdjson);
    expect(ins.status, ins.text).toBe(200);
    expect(ins.json.num_inserted_rows).toBe(2);
    const m = await post(
      "/v1/table/people/merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true",
      JSON.stringify([{ id: 3, name: "cy" }, { id: 4, name: "di" }]),
      asJson,
    );
    expect(m.status, m.text).toBe(200);
    expect(m.json).toMatchObject({ num_inserted_rows: 1, num_updated_rows: 1 });
    const rows = await q.call("POST", "/v1/table/people/query", { k: 10 }, { accept: "application/x-ndjson" });
    expect(rows.headers.get("content-type")).toBe("application/x-ndjson");
    const got = rows.text.trim().split("\n").map((l) => JSON.parse(l)).sort((a, b) => a.id - b.id);
    expect(got).toEqual([{ id: 1, name: "ann" }, { id: 2, name: "bo" }, { id: 3, name: "cy" }, { id: 4, name: "di" }]);
  });

  it("a row that does not fit is a 400 naming the row and column, and nothing is written", async () => {
    await post("/v1/table/strict/create", JSON.stringify({ schema: { fields: [{ name: "id", type: { type: "int32" }, nullable: false }, { name: "v", type: { type: "fixed_size_list", length: 2, fields: [{ name: "item", type: { type: "float32" }, nullable: true }] }, nullable: true }] }, rows: [{ id: 1, v: [0, 0] }] }), asJson);
    const cases: [string, RegExp][] = [
      [JSON.stringify([{ id: 2 }, { id: "three" }]), /^rows\[1\]\.id: expected an integer in \[-2147483648, 2147483647\], got "three"$/],
      [JSON.stringify([{ id: 2, v: [1, 2, 3] }]), /^rows\[0\]\.v: expected an array of 2 values, got 3 values$/],
      [JSON.stringify([{ id: 2, v: [1, 2] }, { id: 3, v: [1, "x"] }]), /^rows\[1\]\.v\[1\]: expected a number, got "x"$/],
      ['[{"id": 2, "v": [1, 1e39]}]', /^rows\[0\]\.v\[1\]: a number outside the range of a 32-bit float/],
      [JSON.stringify([{ v: [1, 2] }]), /^rows\[0\]\.id: column "id" is not nullable in table "strict"$/],
      [JSON.stringify([{ id: 2, extra: 1 }]), /^rows\[0\]: column "extra" is not in table "strict"$/],
      [JSON.stringify([{ id: 2 }, 7]), /^rows\[1\]: expected an object \(one row\), got 7$/],
      [JSON.stringify({ id: 2 }), /^body: JSON rows must be an array of objects/],
      ["[{", /^body: malformed JSON/],
      ["[]", /^body: holds no rows$/],
    ];
    for (const [body, detail] of cases) {
      const r = await post("/v1/table/strict/insert", body, asJson);
      expect(r.status, body).toBe(400);
      expect(r.json.detail, body).toMatch(detail);
    }
    const bad = await post("/v1/table/strict/insert", '{"id":5}\nnot json\n', asNdjson);
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toMatch(/^body: line 2 is not JSON/);
    const d = await q.call("POST", "/v1/table/strict/describe", {});
    expect(d.json.version).toBe(1);
  });

  it("vector items: numbers and null items stored as sent; a NaN item is the engine's 400 and nothing is written", async () => {
    const r = await post("/v1/table/strict/insert", JSON.stringify([{ id: 10, v: [1.5, -0.25] }, { id: 11, v: [null, 2] }, { id: 12, v: [-0.25, 3] }]), asJson);
    expect(r.status, r.text).toBe(200);
    const ipc = fromIPC((await q.call("POST", "/v1/table/strict/query", { k: 10, filter: "id >= 10" })).bytes);
    const byId = new Map(Array.from({ length: ipc.numRows }, (_, i) => [ipc.getChild("id")!.get(i) as number, ipc.getChild("v")!.get(i)!]));
    expect(Array.from(byId.get(10)!.toArray() as Float32Array)).toEqual([1.5, -0.25]);
    expect(byId.get(11)!.get(0)).toBeNull();
    expect(byId.get(11)!.get(1)).toBe(2);
    expect(Array.from(byId.get(12)!.toArray() as Float32Array)).toEqual([-0.25, 3]);
    const version = (await q.call("POST", "/v1/table/strict/describe", {})).json.version;
    const nan = await post("/v1/table/strict/insert", JSON.stringify([{ id: 13, v: [1, "NaN"] }]), asJson);
    expect(nan.status).toBe(400);
    expect(nan.json.detail).toMatch(/NaN/);
    expect((await q.call("POST", "/v1/table/strict/describe", {})).json.version).toBe(version);
  });

  it("create refuses what it cannot infer, naming the column", async () => {
    const mixed = await post("/v1/table/mixed/create", JSON.stringify([{ a: 1 }, { a: "x" }]), asJson);
    expect(mixed.status).toBe(400);
    expect(mixed.json.detail).toMatch(/^rows: column "a" mixes value kinds \(number, string\); give a schema$/);
    const nulls = await post("/v1/table/mixed/create", JSON.stringify([{ a: 1, b: null }]), asJson);
    expect(nulls.status).toBe(400);
    expect(nulls.json.detail).toMatch(/column "b" \(it holds only nulls\)/);
    expect((await q.call("POST", "/v1/table/mixed/exists", {})).status).toBe(404);
  });

  it("a body type that is neither Arrow nor JSON is 415; JSON rows over --max-json-body are 413", async () => {
    const r = await post("/v1/table/people/insert", "id,name\n9,x\n", { "content-type": "text/csv" });
    expect(r.status).toBe(415);
    expect(r.json.detail).toMatch(/^content-type: "text\/csv" is not accepted here/);
    expect(r.json.title).toBe("Unsupported media type");
    const big = JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ id: i, name: "n" })));
    const tooBig = await post("/v1/table/people/insert", big, asJson);
    expect(tooBig.status).toBe(413);
    expect(tooBig.json.detail).toMatch(/--max-json-body/);
  });
});

describe("JSON rows out", () => {
  it("Accept picks the format by q-value; Arrow stays the default", async () => {
    const ask = (accept?: string) => q.call("POST", "/v1/table/people/query", { k: 1 }, accept ? { accept } : {});
    expect((await ask()).headers.get("content-type")).toBe("application/vnd.apache.arrow.file");
    expect((await ask("*/*")).headers.get("content-type")).toBe("application/vnd.apache.arrow.file");
    expect((await ask("application/json;q=0.5, application/vnd.apache.arrow.file")).headers.get("content-type")).toBe("application/vnd.apache.arrow.file");
    expect((await ask("application/vnd.apache.arrow.file;q=0.2, application/json")).headers.get("content-type")).toBe("application/json");
    expect((await ask("application/jsonl")).headers.get("content-type")).toBe("application/x-ndjson");
  });

  it("query errors are still the JSON error body, before any row", async () => {
    const r = await q.call("POST", "/v1/table/people/query", { k: 1, filter: "nope > 1" }, wantJson);
    expect(r.status).toBe(404);
    expect(r.json.detail).toMatch(/nope/);
  });
});
