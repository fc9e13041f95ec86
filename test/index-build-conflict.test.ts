// An index build whose commit loses to a compaction committed while it trained (another process's,
// or automatic maintenance's: seen failing the first build of a freshly loaded table on Azurite
// with "Retryable commit conflict … CreateIndex transaction was preempted by concurrent transaction
// Rewrite") trains again on the latest version and succeeds (src/engine/indexes.ts, buildIndex).
import * as lancedb from "@lancedb/lancedb";
import { expect, it } from "vitest";
import { indexRows, indexSchema, openIndexTable, seedIndexTable } from "./helpers/index-data.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { settle } from "./helpers/transactions.js";

const DIM = 128;
const FRAGMENTS = 10;
const ROWS = 2000;
const q = inProcessForFile({
  seed: async (dataDir) => {
    const t = await seedIndexTable(dataDir, "t", ROWS, DIM);
    for (let f = 1; f < FRAGMENTS; f++) await t.add(lancedb.makeArrowTable(indexRows(ROWS, DIM, f * ROWS), { schema: indexSchema(DIM) }));
  },
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("a build that a compaction preempted while it trained is built again and succeeds", async () => {
  const r = await q.call("POST", "/v1/table/t/create_index", { column: "vec", index_type: "IVF_PQ" });
  expect(r.status, r.text).toBe(200);
  const tx = r.json.transaction_id as string;
  const status = async () => (await q.call("POST", `/v1/transaction/${tx}/describe`, {})).json.status as string;
  while ((await status()) === "Queued") await sleep(50);
  // While it trains (its process started and read the table): compactions of new small fragments.
  const other = await openIndexTable(q.dataDir, "t");
  let compacted = 0;
  for (let i = 0; i < 3 && (await status()) === "Running"; i++) {
    await sleep(1000);
    await other.add(lancedb.makeArrowTable(indexRows(10, DIM, 1_000_000 + i * 10), { schema: indexSchema(DIM) }));
    await other.optimize().then(() => compacted++, () => undefined);
  }
  const done = await settle(q, tx, 300_000);
  expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
  expect(compacted).toBeGreaterThan(0);
  const indexes = (await q.call("POST", "/v1/table/t/index/list", {})).json.indexes as { index_name: string }[];
  expect(indexes.map((i) => i.index_name)).toContain("vec_idx");
}, 300_000);
