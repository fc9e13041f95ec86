// A multi-vector query's set-up runs on the event loop, and its cost grows with the square of the
// query vectors: LanceDB (its Node client has no call taking several at once) copies the list so
// far each time one is added. The bound on their count (docs/limits.md, "Sizes a request names")
// keeps one query's main-thread CPU near 30 ms on the 2-core machine (docs/limits.md has the figures;
// at the old bound of 1,024, 50-60 ms; at 4,096 the set-up alone took 370-540 ms). Here: a query
// at the bound is answered whole, one past it is refused before LanceDB sees it.
import * as lancedb from "@lancedb/lancedb";
import { expect, it } from "vitest";
import { batches } from "../../bench/dataset.js";
import { SEARCH } from "../../src/schemas/bounds.js";
import { READ_KEY, serverForFile } from "../helpers/quiver.js";

const SPEC = { rows: 3000, dim: 8, rank: 3, seed: 5 };
const q = serverForFile({
  args: ["--serving", "off"],
  seed: async (dir) => {
    const db = await lancedb.connectNamespace("dir", { root: dir });
    await db.createTable("t", [...batches(SPEC, SPEC.rows)][0], []);
  },
});

it("a query with the most query vectors allowed answers each of them; one more is a 400 naming the field", async () => {
  const vectors = Array.from({ length: SEARCH.queryVectors }, (_, i) => Array.from({ length: SPEC.dim }, (_, d) => ((i * 31 + d) % 17) / 17));
  expect(SEARCH.queryVectors).toBe(512);
  const r = await q.call("POST", "/v1/table/t/query", { vector: { multi_vector: vectors }, k: 1 }, { "x-api-key": READ_KEY, accept: "application/json" });
  expect(r.status, r.text).toBe(200);
  // One row for each query vector, each numbered by the vector it answers.
  expect(r.json).toHaveLength(vectors.length);
  expect(new Set((r.json as { query_index: number }[]).map((row) => row.query_index)).size).toBe(vectors.length);
  // One past the bound, as a multi_vector list and as the flat list LanceDB's client sends.
  for (const [vector, field] of [
    [{ multi_vector: [...vectors, vectors[0]] }, "vector.multi_vector"],
    [[...vectors, vectors[0]], "vector"],
  ] as const) {
    const over = await q.call("POST", "/v1/table/t/query", { vector, k: 1 }, { "x-api-key": READ_KEY, accept: "application/json" });
    expect(over.status, over.text).toBe(400);
    expect(over.json.detail).toBe(`${field}: must NOT have more than ${SEARCH.queryVectors} items`);
  }
}, 120_000);
