// A backfill writes values only into rows unchanged since it read them. A compaction between the
// read and the write moves rows without changing them: their values must still be written (a
// backfill racing automatic maintenance once wrote nothing and counted the rows as computed). A
// run resumed from the checkpoint before its own last commit (the commit's report lost to a
// takeover) meets rows it already wrote: they count as written, not as skipped.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { afterAll, describe, expect, it } from "vitest";
import { arrow } from "../../src/engine/arrow.js";
import { planRows, writeValues } from "../../src/engine/computed-columns.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-writes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function table(name: string) {
  const db = await lancedb.connect(dir);
  const rows = Array.from({ length: 6 }, (_, i) => ({ id: i + 1, x: i + 1, a: null as number | null }));
  const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64()), new arrow.Field("x", new arrow.Int64()), new arrow.Field("a", new arrow.Int64(), true)]);
  const t = await db.createTable(name, rows, { schema, storageOptions: { new_table_enable_stable_row_ids: "true" } });
  await t.delete("id = 6");
  return t;
}
const values = (ids: number[]) => arrow.tableFromArrays({ id: BigInt64Array.from(ids.map(BigInt)), a: BigInt64Array.from(ids.map((i) => BigInt(i * 10))) });
const plan = (t: lancedb.Table) => planRows(t, { column: "a", where: null, fresh: new Set(), done: new Set(), fragments: null, others: [] });

describe("writing computed values", () => {
  it("rows a compaction moved after the read are written at their new addresses", async () => {
    const t = await table("moved");
    const read = await plan(t);
    expect(read.ids.length).toBe(5);
    await t.optimize();
    const w = await writeValues(t, ["id"], values([1, 2, 3, 4, 5]), read, true);
    expect(w.written).toBe(5);
    const got = await t.query().select(["id", "a"]).toArray();
    expect(got.map((r) => [Number(r.id), Number(r.a)]).sort((p, q) => p[0] - q[0])).toEqual([1, 2, 3, 4, 5].map((i) => [i, i * 10]));
  });

  it("a row updated after the read is left as the update wrote it, also after a compaction", async () => {
    const t = await table("changed");
    const read = await plan(t);
    await t.update({ where: "id = 2", values: { x: "200" } });
    await t.optimize();
    const w = await writeValues(t, ["id"], values([1, 2, 3, 4, 5]), read, true);
    expect(w.written).toBe(4);
    const two = await t.query().where("id = 2").select(["x", "a"]).toArray();
    expect([Number(two[0].x), two[0].a]).toEqual([200, null]);
  });

  it("rows an earlier commit of the run already wrote (its report lost to a takeover) count as written, with that commit named", async () => {
    const t = await table("resumed");
    const read = await plan(t);
    const first = await writeValues(t, ["id"], values([1, 2, 3, 4, 5]), read, true);
    expect(first).toMatchObject({ written: 5, earlier: [] });
    // The resumed run computes the same checkpoint from the same read again.
    const again = await writeValues(t, ["id"], values([1, 2, 3, 4, 5]), read, true);
    expect(again.written).toBe(5);
    expect(again.earlier).toEqual(first.versions);
  });

  it("a row changed since the read to another value, or computed as null, is not counted as written before", async () => {
    const t = await table("resumed-changed");
    const read = await plan(t);
    await writeValues(t, ["id"], values([1, 2, 3, 4, 5]), read, true);
    await t.update({ where: "id = 2", values: { a: "7" } });
    const data = arrow.tableFromArrays({ id: BigInt64Array.from([1n, 2n, 3n, 4n, 5n]), a: [10n, 20n, 30n, 40n, null] });
    const again = await writeValues(t, ["id"], data, read, true);
    expect(again.written).toBe(3);
  });
});
