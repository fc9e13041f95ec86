// A read key aborted the server with one count_rows: `array_length(array_repeat(id, 300000000)) > 0`
// made the engine allocate 7.2 GB at once, and a failed native allocation ends the process. Every
// expression is now sized before the engine sees it (src/schemas/expression-size.ts): the sizes
// given to array- and string-building functions must be literals, and a value past
// --max-expression-array elements, or holding one column more than --max-expression-copies
// times, is 400. The attacks are answered at once and the server's memory does not move.
import { readFileSync } from "node:fs";
import { Field, Int64, Schema, Table, tableFromIPC } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { toStream } from "../helpers/arrow.js";
import { READ_KEY, serverForFile } from "../helpers/quiver.js";
import { seedTable } from "../helpers/seed.js";
import { paced } from "../helpers/pace.js";

const q = serverForFile({ seed: (dir) => seedTable(dir, ["e"], Array.from({ length: 50 }, (_, i) => ({ id: i, name: `n${i}` }))) });
const read = (op: string, body: unknown) => q.call("POST", `/v1/table/e/${op}`, body, { "x-api-key": READ_KEY });
/** Peak resident memory of the server process so far (VmHWM), in MB. */
const peakMb = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${q.proc.pid}/status`, "utf8"))![1]) / 1024;
const idSchema = Buffer.from(toStream(new Table(new Schema([new Field("id", new Int64(), true)])))).toString("base64");

const ATTACK = "array_length(array_repeat(id, 300000000)) > 0";
const LIMIT = /(--max-expression-copies|--max-expression-array|must be an integer literal)/;

describe("expression memory", () => {
  it("the read key's array_repeat attacks are 400, and the server lives with its memory as it was", async () => {
    expect((await read("count_rows", {})).json).toBe(50);
    const before = peakMb();
    const cases: [string, unknown, string][] = [
      ["count_rows", { predicate: ATTACK }, "predicate"],
      ["query", { columns: { a: "array_repeat(name, 100000000)" }, k: 10 }, "columns.a"],
      ["query", { filter: ATTACK, k: 10 }, "filter"],
      ["explain_plan", { query: { filter: ATTACK, k: 10 } }, "query.filter"],
    ];
    for (const [op, body, field] of cases) {
      const t0 = Date.now();
      const r = await read(op, body);
      expect(r.status, `${op}: ${r.text}`).toBe(400);
      expect(r.json.detail.startsWith(`${field}: `), r.json.detail).toBe(true);
      expect(r.json.detail).toMatch(/array_repeat\(…\) holds column "(id|name)" up to \d+ times in one value, past the limit of 16 \(--max-expression-copies\)/);
      expect(Date.now() - t0).toBeLessThan(paced(5_000));
    }
    expect(q.proc.exitCode).toBe(null);
    expect((await read("count_rows", { predicate: "id < 10" })).json).toBe(10);
    expect(peakMb() - before).toBeLessThan(100);
  });

  it("other routes to a huge value are 400 too: repeat, lpad, range, nesting, sizes that are not literals", async () => {
    const cases: [string, RegExp][] = [
      ["repeat(name, 1000000000) = 'x'", /repeat\(…\) holds column "name" up to 1000000000 times/],
      ["lpad(name, 1000000000) = 'x'", /lpad\(…\) builds up to 1000000000 elements .* limit of 1024 \(--max-expression-array\)/],
      ["rpad(name, 2000, 'ab') = 'x'", /rpad\(…\) builds up to 2000 elements/],
      ["array_length(range(0, 1000000000)) > 0", /range\(…\) builds up to 1000000000 elements/],
      ["array_length(generate_series(1, 5000)) > 0", /generate_series\(…\) builds up to 5000 elements/],
      ["array_length(array_repeat(array_repeat(1, 1000), 1000)) > 0", /array_repeat\(…\) builds up to 1000000 elements/],
      ["array_length(array_repeat(id, CAST(300000000 AS BIGINT))) > 0", /the size given to array_repeat must be an integer literal/],
      ["array_length(array_repeat(id, id * 1000000)) > 0", /the size given to array_repeat must be an integer literal/],
      ["array_length(range(0, id)) > 0", /range needs integer literal bounds/],
      ['"array_repeat"(id, 300000000) = make_array(1)', /holds column "id" up to 300000000 times/],
      ["length(concat(" + Array(40).fill("name").join(", ") + ")) > 0", /concat\(…\) holds column "name" up to 40 times/],
      ["length(replace(replace(replace(name, '', name), '', name), '', name)) > 0", /replace grows with the product of two stored values/],
    ];
    for (const [predicate, want] of cases) {
      const r = await read("count_rows", { predicate });
      expect(r.status, predicate).toBe(400);
      expect(r.json.detail, predicate).toMatch(want);
      expect(r.json.detail.startsWith("predicate: "), r.json.detail).toBe(true);
    }
    const literal = await read("query", { columns: { id: "id", a: `'${"x".repeat(2000)}'` }, k: 1 });
    expect(literal.status).toBe(400);
    expect(literal.json.detail).toMatch(/^columns\.a: the expression builds up to 2000 elements/);
    expect((await read("count_rows", {})).json).toBe(50);
  });

  it("values within the bounds are answered by the engine", async () => {
    const r = await read("query", { columns: { id: "id", a: "array_repeat(id, 16)", p: "lpad(name, 1024, '*')", b: "array_length(array_repeat(1, 1024))" }, filter: "id = 3", k: 1 });
    expect(r.status, r.text).toBe(200);
    const rows = tableFromIPC(r.bytes).toArray().map((x) => x.toJSON());
    expect([...rows[0].a.toArray()]).toEqual(new Array(16).fill(3));
    expect(rows[0].p).toBe("*".repeat(1022) + "n3");
    expect(Number(rows[0].b)).toBe(1024);
    expect((await read("count_rows", { predicate: "array_length(range(0, 1000)) = 1000 AND id IN (1, 2, 3)" })).json).toBe(3);
    const past = await read("query", { columns: { a: "array_repeat(id, 17)" }, k: 1 });
    expect(past.status).toBe(400);
    expect(past.json.detail).toMatch(/^columns\.a: array_repeat\(…\) holds column "id" up to 17 times in one value, past the limit of 16/);
  });

  it("every place an expression reaches the engine is sized", async () => {
    const bomb = "array_length(array_repeat(id, 300000000)) > 0";
    const value = "array_repeat(id, 300000000)";
    const cases: [string, unknown, string][] = [
      ["delete", { predicate: bomb }, "predicate"],
      ["update", { predicate: "id = 1", updates: [["name", "array_to_string(" + value + ", ',')"]] }, "updates[0][1]"],
      ["update", { predicate: bomb, updates: [["name", "'x'"]] }, "predicate"],
      ["add_columns", { new_columns: [{ name: "z", expression: value }] }, "new_columns[0].expression"],
      ["add_columns", { new_columns: [{ name: "z", computed: value }] }, "new_columns[0].computed.udf"],
      ["add_columns", { new_columns: [{ name: "z", virtual_column: { udf_backend: "sql", udf: value, input_columns: ["id"] } }] }, "new_columns[0].virtual_column.udf"],
      ["backfill_column", { column: "name", where: bomb }, "where"],
    ];
    for (const [op, body, field] of cases) {
      const r = await q.call("POST", `/v1/table/e/${op}`, body);
      expect(r.status, `${op}: ${r.text}`).toBe(400);
      expect(r.json.detail.startsWith(`${field}: `), r.json.detail).toBe(true);
      expect(r.json.detail).toMatch(LIMIT);
    }
    for (const param of ["when_matched_update_all_filt", "when_not_matched_by_source_delete_filt"]) {
      const merge = await q.call("POST", `/v1/table/e/merge_insert?on=id&${param}=${encodeURIComponent(bomb)}`, new Uint8Array(0), { "content-type": "application/vnd.apache.arrow.stream" });
      expect(merge.status).toBe(400);
      expect(merge.json.detail.startsWith(`${param}: `), merge.json.detail).toBe(true);
    }
    for (const [source, field] of [[{ table: "e", filter: bomb }, "source_query.filter"], [{ table: "e", columns: { id: value } }, "source_query.columns.id"]] as const) {
      const view = await q.call("POST", "/v1/materialized_view/v/create", { kind: "query", source_query: JSON.stringify(source), output_schema: idSchema });
      expect(view.status, view.text).toBe(400);
      expect(view.json.detail.startsWith(`${field}: `), view.json.detail).toBe(true);
    }
    expect((await q.call("POST", "/v1/table/e/count_rows", {})).json).toBe(50);
    expect((await q.call("POST", "/v1/table/e/describe", {})).json.schema.fields.map((f: { name: string }) => f.name)).toEqual(["id", "name"]);
  });
});
