// A table's schema read through LanceDB's native table and decoded once per distinct schema
// (src/engine/schema-ipc.ts): the same answer as LanceDB's own `schema()`, and, for a wide table,
// no second decode on the event loop while the schema stays the same across versions. Before, each
// new version of a 2,001-column table cost a decode that built an empty record batch of every
// column (30-84 ms cold), and every write of JSON rows encoded the schema again for the worker.
import { rmSync } from "node:fs";
import * as lancedb from "@lancedb/lancedb";
import { afterAll, describe, expect, it } from "vitest";
import { arrow } from "../../src/engine/arrow.js";
import { readSchema, schemaFromIpc, schemaToIpc } from "../../src/engine/schema-ipc.js";
import { tempDataDir } from "../helpers/quiver.js";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

async function table(fields: InstanceType<typeof arrow.Field>[], row: Record<string, unknown>) {
  const dir = tempDataDir();
  dirs.push(dir);
  const db = await lancedb.connect(dir);
  const schema = new arrow.Schema(fields, new Map([["owner", "test"]]));
  const t = await db.createEmptyTable("t", schema);
  await t.add([row]);
  return t;
}

describe("a table's schema", () => {
  it("reads as LanceDB's schema() reads it: nested and list fields, nullability, field and schema metadata", async () => {
    const t = await table(
      [
        new arrow.Field("id", new arrow.Int64(), false),
        new arrow.Field("vector", new arrow.FixedSizeList(4, new arrow.Field("item", new arrow.Float32(), true)), true),
        new arrow.Field("tags", new arrow.List(new arrow.Field("item", new arrow.Utf8(), true)), true),
        new arrow.Field("meta", new arrow.Struct([new arrow.Field("a", new arrow.Int32(), true), new arrow.Field("b", new arrow.Utf8(), true)]), true, new Map([["note", "kept"]])),
      ],
      { id: 1n, vector: [1, 2, 3, 4], tags: ["x"], meta: { a: 1, b: "y" } },
    );
    const ours = await readSchema(t);
    const theirs = await t.schema();
    expect(ours.fields.map(String)).toEqual(theirs.fields.map(String));
    expect(ours.fields.map((f) => [f.name, f.nullable, [...f.metadata]])).toEqual(theirs.fields.map((f) => [f.name, f.nullable, [...f.metadata]]));
    expect([...ours.metadata]).toEqual([...theirs.metadata]);
  });

  it("of a wide table is decoded once while writes leave it unchanged, and read afresh once it changes", async () => {
    const fields = Array.from({ length: 2000 }, (_, i) => new arrow.Field(`c${i}`, new arrow.Utf8(), true));
    const t = await table(fields, { c0: "seed" });
    const first = await readSchema(t);
    expect(first.fields).toHaveLength(2000);
    await t.add([{ c0: "a" }]);
    await t.add([{ c0: "b" }]);
    expect(await t.version()).toBe(4);
    // The same object: nothing decoded it again.
    expect(await readSchema(t)).toBe(first);
    await t.addColumns([{ name: "extra", valueSql: "cast(1 as int)" }]);
    const changed = await readSchema(t);
    expect(changed).not.toBe(first);
    expect(changed.fields.at(-1)?.name).toBe("extra");
    expect(changed.fields).toHaveLength(2001);
  });
});

describe("a schema crossing to a pool worker", () => {
  it("is encoded once per schema object and decoded once per distinct bytes, and the round trip keeps it", () => {
    const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int32(), false), new arrow.Field("s", new arrow.Utf8(), true)]);
    const bytes = schemaToIpc(schema);
    expect(schemaToIpc(schema)).toBe(bytes);
    const back = schemaFromIpc(bytes);
    expect(schemaFromIpc(new Uint8Array(bytes))).toBe(back);
    expect(back.fields.map(String)).toEqual(schema.fields.map(String));
  });
});
