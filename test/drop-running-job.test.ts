// A table dropped while one of its jobs ran (an index build, a compaction): the job went on writing
// into the directory being removed, and the drop answered 500 ENOTEMPTY, or answered 200 and left
// the job's files, so a table created under the name later said its index already existed and its
// queries failed on a missing data file (found by the serving index's differential test). A drop
// now cancels the table's jobs and waits for their runs to stop before it removes the data. A
// renamed table's jobs are its jobs still (found by the same test: a drop under the new name met
// the build queued under the old one, 500 ENOTEMPTY).
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { seedBig } from "./helpers/big-table.js";
import { serverForFile } from "./helpers/quiver.js";
import { until } from "./helpers/transactions.js";

const q = serverForFile({ seed: async (d) => (await seedBig(d), await seedBig(d, "big2")), args: ["--auto-maintenance", "off", "--serving", "off"] });

describe("a drop while the table's index build runs", () => {
  it("cancels the build, removes every file, and a table made under the name later starts empty", async () => {
    const r = await q.call("POST", "/v1/table/big/create_index", { column: "v", index_type: "IVF_PQ", num_partitions: 8, num_sub_vectors: 32 });
    expect(r.status, r.text).toBe(200);
    const tx = r.json.transaction_id as string;
    await until(q, tx, (s) => s === "Running");

    const dropped = await q.call("POST", "/v1/table/big/drop", {});
    expect(dropped.status, dropped.text).toBe(200);
    // The build was stopped before the answer; nothing of the table is left behind it.
    const job = await q.call("POST", `/v1/transaction/${tx}/describe`, {});
    expect(job.json.status).toBe("Canceled");
    expect(existsSync(path.join(q.dataDir, "big.lance"))).toBe(false);

    const made = await q.call("POST", "/v1/table/big/create", JSON.stringify([{ id: 1, v: [0.5, 0.25] }]), { "content-type": "application/json" });
    expect(made.status, made.text).toBe(200);
    expect((await q.call("POST", "/v1/table/big/index/list", {})).json.indexes).toEqual([]);
    const rows = await q.call("POST", "/v1/table/big/query", { k: 5, columns: ["id"] }, { accept: "application/json" });
    expect([rows.status, rows.json], rows.text).toEqual([200, [{ id: 1 }]]);
  });
});

describe("a drop under a new name while the build begun under the old one runs", () => {
  it("cancels the build and removes every file", async () => {
    const r = await q.call("POST", "/v1/table/big2/create_index", { column: "v", index_type: "IVF_PQ", num_partitions: 8, num_sub_vectors: 32 });
    expect(r.status, r.text).toBe(200);
    const tx = r.json.transaction_id as string;
    await until(q, tx, (s) => s === "Running");

    const renamed = await q.call("POST", "/v1/table/big2/rename", { new_table_name: "moved" });
    expect(renamed.status, renamed.text).toBe(200);
    const dropped = await q.call("POST", "/v1/table/moved/drop", {});
    expect(dropped.status, dropped.text).toBe(200);
    const job = await q.call("POST", `/v1/transaction/${tx}/describe`, {});
    expect(job.json.status).toBe("Canceled");
    expect(existsSync(path.join(q.dataDir, "big2.lance"))).toBe(false);
  });
});
