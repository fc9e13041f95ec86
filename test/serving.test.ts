// The serving index (workers/serving.ts): vector searches of an indexed column answered in the
// worker pool, compared with LanceDB's exact answers on the same rows.
import * as lancedb from "@lancedb/lancedb";
import type { Table as EsmTable } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { batches, queryVectors } from "../bench/dataset.js";
import { fromIPC } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const SPEC = { rows: 3000, dim: 16, rank: 4, seed: 11 };
const qv = queryVectors(SPEC, 12).map((v) => Array.from(v));
let flat: lancedb.Table;

const q = inProcessForFile(
  {
    seed: async (dataDir) => {
      const db = await lancedb.connectNamespace("dir", { root: dataDir });
      const data = [...batches(SPEC, SPEC.rows)][0];
      const items = await db.createTable("items", data, []);
      flat = await db.createTable("flat", data, []);
      await items.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 4, numSubVectors: 4 }) });
    },
  },
  120_000,
);

const search = (table: string, body: object) => q.call("POST", `/v1/table/${table}/query`, { k: 10, ...body });

/** Search until the serving index answers (it is built on the first search). */
async function served(table: string, body: object): Promise<EsmTable> {
  for (let i = 0; i < 200; i++) {
    const r = await search(table, body);
    if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
    if (r.headers.get("x-quiver-search-path") === "serving") return fromIPC(r.bytes);
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`the serving index never answered: ${(await search(table, body)).headers.get("x-quiver-search-path")} ${q.stderr().slice(-3000)}`);
}

const col = (t: EsmTable, n: string) => Array.from(t.getChild(n)!.toArray() as ArrayLike<unknown>);

describe("serving index", () => {
  it("answers a search as exact search does: same rows, distances, schema", async () => {
    const got = await served("items", { vector: { single_vector: qv[0] } });
    const want = await flat.vectorSearch(qv[0]).limit(10).toArrow();
    expect(got.schema.fields.map((f) => `${f.name}:${f.type}`)).toEqual(want.schema.fields.map((f) => `${f.name}:${f.type}`));
    expect(col(got, "id")).toEqual(col(want, "id"));
    (col(got, "_distance") as number[]).forEach((d, i) => expect(d).toBeCloseTo(col(want, "_distance")[i] as number, 4));
    expect(col(got, "text")).toEqual(col(want, "text"));
  });
});
