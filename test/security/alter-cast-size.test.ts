// Row 6 of the bounds attack, by a cast: an update or an added column is held to --max-value-bytes
// before it commits, but alter_columns could widen a list's items (int8 → int64 is 8× the bytes),
// and casts compound. A cast's values are now counted in the new type's widths before the commit:
// past the bound it is 400 naming the field and the column, and the table is unchanged.
// A write stores a number or a list sent to a string column as its text, so that text is what is
// measured (measuring the value as sent refused such writes with a planning error); and no cast
// LanceDB accepts makes text of a value, so a cast's growth is its items' widths alone.
import { Field, FixedSizeList, Int32, Int8, List, Struct, Table, vectorFromArray } from "apache-arrow";
import { expect, it } from "vitest";
import { toStream } from "../helpers/arrow.js";
import { serverForFile } from "../helpers/quiver.js";

const VALUE = 4096;
const ITEMS = 2000; // 2,000 bytes as int8, 4,000 as int16, 8,000 as int32
const q = serverForFile({ args: ["--max-value-bytes", String(VALUE)] });
const post = (p: string, body: unknown) => q.call("POST", p, body);

const int8List = new List(new Field("item", new Int8(), true));
const items = Array.from({ length: ITEMS }, (_, i) => i % 100);
const listOf = (item: string) => ({ type: "list", fields: [{ name: "item", type: { type: item }, nullable: true }] });

const expect400 = (r: { status: number; text: string; json: any }, what: RegExp) => {
  expect(r.status, r.text).toBe(400);
  expect(r.json.detail).toMatch(what);
};
const describe_ = async () => (await post("/v1/table/t/describe", {})).json;
const fieldType = (schema: any, ...path: string[]) => path.reduce((f: any, n) => f.type.fields.find((c: any) => c.name === n), { type: schema });

it("a cast that would make a list past --max-value-bytes is 400 naming the column, nothing committed; a cast within it commits", async () => {
  const table = new Table({
    id: vectorFromArray([1, 2]),
    l: vectorFromArray([items, [1, 2, 3]], int8List),
    st: vectorFromArray([{ l: items }, { l: [1] }], new Struct([new Field("l", int8List, true)])),
    f: vectorFromArray([items, items], new FixedSizeList(ITEMS, new Field("item", new Int8(), true))),
  });
  expect((await post("/v1/table/t/create", toStream(table))).status).toBe(200);
  const before = await describe_();

  expect400(
    await post("/v1/table/t/alter_columns", { alterations: [{ path: "l", data_type: listOf("int32") }] }),
    new RegExp(`^alterations\\[0\\]\\.data_type: column "l" would hold a value of more than ${VALUE} bytes \\(--max-value-bytes\\); nothing was written$`),
  );
  expect400(await post("/v1/table/t/alter_columns", { alterations: [{ path: "st.l", data_type: listOf("int64") }] }), /^alterations\[0\]\.data_type: column "st\.l" would hold .*--max-value-bytes/);
  expect400(
    await post("/v1/table/t/alter_columns", { alterations: [{ path: "f", data_type: { type: "fixed_size_list", length: ITEMS, fields: [{ name: "item", type: { type: "int32" }, nullable: true }] } }] }),
    /^alterations\[0\]\.data_type: column "f" would hold .*--max-value-bytes/,
  );
  const after = await describe_();
  expect(after.version).toBe(before.version);
  expect(after.schema).toEqual(before.schema);

  // Within the bound the cast commits; the next widening, past it, is refused (casts compound).
  expect((await post("/v1/table/t/alter_columns", { alterations: [{ path: "l", data_type: listOf("int16") }] })).status).toBe(200);
  expect(fieldType((await describe_()).schema, "l").type.fields[0].type.type).toBe("int16");
  expect400(await post("/v1/table/t/alter_columns", { alterations: [{ path: "l", data_type: listOf("int32") }] }), /--max-value-bytes/);
  expect(fieldType((await describe_()).schema, "l").type.fields[0].type.type).toBe("int16");
  const kept = await post("/v1/table/t/count_rows", { predicate: `cardinality(l) = ${ITEMS}` });
  expect(kept.status, kept.text).toBe(200);
  expect(kept.json).toBe(1);
});

it("a write of a number or a list into a string column is measured as the text it stores: written within the bound, 400 past it", async () => {
  const table = new Table({
    id: vectorFromArray([1, 2], new Int32()),
    s: vectorFromArray(["a", "b"]),
    l: vectorFromArray([items, [1, 2, 3]], int8List),
  });
  expect((await post("/v1/table/w/create", toStream(table))).status).toBe(200);
  const update = (value: string, predicate?: string) => post("/v1/table/w/update", { updates: [["s", value]], ...(predicate ? { predicate } : {}) });
  const texts = async () => ((await q.call("POST", "/v1/table/w/query", { columns: ["id", "s"], k: 10 }, { accept: "application/json" })).json as { id: number; s: string }[]).sort((a, b) => a.id - b.id).map((r) => r.s);

  const number = await update("id * 10");
  expect(number.status, number.text).toBe(200);
  expect(await texts()).toEqual(["10", "20"]);
  // Row 1's 2,000 items are about 7,800 bytes as text.
  expect400(await update("l"), new RegExp(`^updates\\[0\\]\\[1\\]: column "s" would hold a value of more than ${VALUE} bytes \\(--max-value-bytes\\); nothing was written$`));
  expect(await texts()).toEqual(["10", "20"]);
  const short = await update("l", "id = 2");
  expect(short.status, short.text).toBe(200);
  expect(await texts()).toEqual(["10", "[1, 2, 3]"]);
});

it("no cast LanceDB accepts makes text of a value: a number cast to a string is refused in its words, nothing committed", async () => {
  const before = await post("/v1/table/w/describe", {});
  expect400(await post("/v1/table/w/alter_columns", { alterations: [{ path: "id", data_type: { type: "utf8" } }] }), /^Cannot cast column "id" from Int32 to Utf8/);
  expect400(await post("/v1/table/w/alter_columns", { alterations: [{ path: "id", data_type: { type: "large_utf8" } }] }), /^Cannot cast column "id" from Int32 to LargeUtf8/);
  expect((await post("/v1/table/w/describe", {})).json.version).toBe(before.json.version);
});
