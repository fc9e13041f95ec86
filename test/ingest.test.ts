// The ingest pool: with --ingest-inline-max-bytes 1 every Arrow body is decoded and normalised in a
// Piscina worker; results, 400s and overload must be what the inline path gives.
import path from "node:path";
import { Field, Int32, Schema, Table, TimestampMillisecond, Utf8, vectorFromArray } from "apache-arrow";
import * as lancedb from "@lancedb/lancedb";
import { beforeAll, describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { removeDir, startQuiver, type Quiver, serverForFile } from "./helpers/quiver.js";

const q = serverForFile({ args: ["--ingest-inline-max-bytes", "1"] });
beforeAll(async () => {
  expect((await q.call("POST", "/v1/namespace/g/create", {})).status).toBe(200);
});

const WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"];
/** ids from..from+n-1 with `tag` as a dictionary-encoded string column (apache-arrow's default for strings). */
const rows = (from: number, n: number, prefix = "") => {
  const ids = Array.from({ length: n }, (_, i) => from + i);
  const t = new Table({ id: vectorFromArray(ids, new Int32()), tag: vectorFromArray(ids.map((i) => prefix + WORDS[i % 5])) });
  expect(t.schema.fields[1].type.toString()).toMatch(/^Dictionary/);
  return toStream(t);
};
const post = (server: Quiver, id: string, op: string, body?: unknown) => server.call("POST", `/v1/table/${id}/${op}`, body);
const count = async (server: Quiver, id: string) => (await post(server, id, "count_rows", {})).json as number;

/** All rows read straight from the dataset with LanceDB, sorted by id. */
async function readBack(server: Quiver, id: string): Promise<{ id: number; tag: string }[]> {
  const loc = (await post(server, id, "describe", {})).json.location as string;
  const db = await lancedb.connect(path.dirname(loc));
  const t = await db.openTable(path.basename(loc, ".lance"));
  const out = (await t.query().toArray()).map((r) => ({ id: Number(r.id), tag: String(r.tag) }));
  return out.sort((a, b) => a.id - b.id);
}
const expected = (from: number, n: number, prefix = "") =>
  Array.from({ length: n }, (_, i) => ({ id: from + i, tag: prefix + WORDS[(from + i) % 5] }));

describe("through the pool", () => {
  it("create, insert and merge_insert with a dictionary column store the data intact", async () => {
    const t = "g$t1";
    const c = await post(q, t, "create", rows(0, 2000));
    expect(c.status).toBe(200);
    expect(c.json.version).toBe(1);
    const schema = (await post(q, t, "describe", {})).json.schema.fields;
    expect(schema.map((f: { name: string; type: { type: string } }) => [f.name, f.type.type])).toEqual([["id", "int32"], ["tag", "utf8"]]);

    const i = await post(q, t, "insert", rows(2000, 1000));
    expect(i.status).toBe(200);
    expect(i.json).toEqual({ version: 2, num_inserted_rows: 1000 });

    // Update ids 2500..3499 (500 exist, 500 are new) with prefixed tags.
    const m = await post(q, t, "merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true", rows(2500, 1000, "x-"));
    expect(m.status).toBe(200);
    expect(m.json).toMatchObject({ version: 3, num_inserted_rows: 500, num_updated_rows: 500, num_deleted_rows: 0 });

    expect(await count(q, t)).toBe(3500);
    expect(await readBack(q, t)).toEqual([...expected(0, 2500), ...expected(2500, 1000, "x-")]);
  });

  it("a body that is not Arrow is 400 with the inline message, and nothing is stored", async () => {
    const t = "g$t2";
    const r = await post(q, t, "create", new Uint8Array(4096).fill(7));
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^body: not a valid Arrow IPC stream/);
    expect((await post(q, t, "describe", {})).status).toBe(404);
  });

  it("an unstorable time zone is 400 naming the column; a mismatching column is 400; the table is unchanged", async () => {
    const t = "g$t3";
    expect((await post(q, t, "create", rows(0, 100))).status).toBe(200);
    const tz = new Table({
      id: vectorFromArray([1], new Int32()),
      at: vectorFromArray([new Date(0)], new TimestampMillisecond("+01:00")),
    });
    const bad = await post(q, t, "insert", toStream(tz));
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toMatch(/^column "at": time zone "\+01:00" cannot be stored by Lance/);

    const wrong = toStream(new Table({ id: vectorFromArray(["a"], new Utf8()) }));
    const w = await post(q, t, "insert", wrong);
    expect(w.status).toBe(400);
    expect(w.json.detail).toBe('column "id": table "g$t3" has type int32, the data has utf8');

    const extra = new Table({ id: vectorFromArray([1], new Int32()), nope: vectorFromArray([1], new Int32()) });
    const e = await post(q, t, "merge_insert?on=id&when_not_matched_insert_all=true", toStream(extra));
    expect(e.status).toBe(400);
    expect(e.json.detail).toBe('column "nope" is not in table "g$t3"');

    expect(await count(q, t)).toBe(100);
    expect((await post(q, t, "describe", {})).json.version).toBe(1);
  });

  it("a schema without columns is 400", async () => {
    const empty = toStream(new Table(new Schema([] as Field[])));
    const r = await post(q, "g$t4", "create", empty);
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^body: /);
  });
});

describe("saturation", () => {
  it("with one worker and no queue, concurrent large inserts get 503 with Retry-After, never 500; the rest are stored", async () => {
    const s = await startQuiver({ args: ["--ingest-inline-max-bytes", "1", "--workers", "1", "--max-queue", "0"] });
    try {
      expect((await s.call("POST", "/v1/namespace/g/create", {})).status).toBe(200);
      const t = "g$busy";
      expect((await post(s, t, "create", rows(0, 10))).status).toBe(200);
      const body = rows(0, 30_000); // ~0.4 MB, dictionary-encoded: tens of ms of flattening each
      let inserted = 0;
      let busy = 0;
      // Rounds of 12 at once until the pool has turned some away (the first round may meet a cold worker).
      for (let round = 0; round < 5 && busy === 0; round++) {
        const replies = await Promise.all(Array.from({ length: 12 }, () => post(s, t, "insert", body)));
        for (const r of replies) {
          expect([200, 503]).toContain(r.status);
          if (r.status === 200) inserted++;
          else {
            busy++;
            expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
            expect(r.json).toMatchObject({ code: 17, title: "Slow down" });
            expect(r.json.detail).toMatch(/ingest pool is busy/);
          }
        }
      }
      expect(busy).toBeGreaterThan(0);
      expect(inserted).toBeGreaterThan(0);
      // Healthy afterwards: every accepted insert is there, and a new one succeeds.
      expect(await count(s, t)).toBe(10 + inserted * 30_000);
      expect((await post(s, t, "insert", rows(0, 5))).status).toBe(200);
      expect(await count(s, t)).toBe(15 + inserted * 30_000);
    } finally {
      await s.stop();
      removeDir(s.dataDir);
    }
  }, 60_000);
});
