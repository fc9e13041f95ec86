// A schema change that loses its commit to a compaction (automatic maintenance rewriting small
// fragments in the background) is made again on the latest version: a client's add_columns once
// answered 409 "preempted by concurrent transaction Rewrite" while nothing else changed the table.
// A lost race with another schema change stays a 409.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { afterAll, describe, expect, it } from "vitest";
import { ApiError, Code } from "../../src/errors.js";
import { addSqlColumns } from "../../src/engine/schema-edit.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-schema-edit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A table of eight small fragments, and a second handle on it that has not seen later commits. */
async function fragmented(name: string) {
  const db = await lancedb.connect(dir);
  const t = await db.createTable(name, [{ id: 0 }]);
  for (let i = 1; i < 8; i++) await t.add([{ id: i }]);
  const stale = await (await lancedb.connect(dir)).openTable(name);
  await stale.countRows();
  return { t, stale };
}

describe("schema changes racing background work", () => {
  it("a column added on a handle that missed a compaction is added, once, on the latest version", async () => {
    const { t, stale } = await fragmented("compacted");
    await t.optimize();
    const version = await addSqlColumns(stale, [{ name: "twice", valueSql: "id * 2" }], "new_columns");
    await t.checkoutLatest();
    expect(await t.version()).toBe(version);
    expect((await t.schema()).fields.map((f) => f.name)).toEqual(["id", "twice"]);
    expect((await t.query().where("twice <> id * 2").toArray()).length).toBe(0);
  });

  it("one lost to another schema change is a 409 naming the conflict", async () => {
    const { t, stale } = await fragmented("raced");
    await addSqlColumns(t, [{ name: "a", valueSql: "id" }], "new_columns");
    const err = await addSqlColumns(stale, [{ name: "b", valueSql: "id" }], "new_columns").then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe(Code.ConcurrentModification);
  });
});
