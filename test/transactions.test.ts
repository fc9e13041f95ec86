// Index builds as transactions: Queued → Running → Succeeded under the --index-builds bound,
// reads and writes during a build, cancel (running and queued), alter, durability across a
// crash (SIGKILL mid-build) and restart, and who may see a transaction.
import { describe, expect, it } from "vitest";
import { openIndexTable, rowsIpc, seedIndexTable } from "./helpers/index-data.js";
import { NS1_KEY, READ_KEY, serverForFile } from "./helpers/quiver.js";
import { terminal, until } from "./helpers/transactions.js";

const BIG = 20_000;
const DIM = 64;
const ARGS = ["--index-builds", "1"];

const q = serverForFile({
  args: ARGS,
  seed: async (dataDir) => {
    await seedIndexTable(dataDir, "big", BIG, DIM);
    await seedIndexTable(dataDir, "small", 500, 8);
  },
});

type Tx = { status: string; properties: Record<string, string> };
const describeTx = async (tx: string): Promise<Tx> => (await q.call("POST", `/v1/transaction/${tx}/describe`, {})).json;
const alter = (tx: string, actions: unknown[], headers?: Record<string, string>) => q.call("POST", `/v1/transaction/${tx}/alter`, { actions }, headers);
const cancel = (tx: string) => alter(tx, [{ setStatusAction: { status: "Canceled" } }]);
const list = async (table: string) => (await q.call("POST", `/v1/table/${table}/index/list`, {})).json.indexes as any[];

async function submit(table: string, body: Record<string, unknown>): Promise<string> {
  const r = await q.call("POST", `/v1/table/${table}/create_index`, body);
  expect(r.status, r.text).toBe(200);
  return r.json.transaction_id;
}
/** A build that takes seconds here: HNSW over all rows in one partition. `vec` gets one such index
 *  (a second of the same type on a column is 409), the others go to `s.v`, each canceled or failed. */
const slow = (name: string, column = "vec") => submit("big", { column, index_type: "IVF_HNSW_SQ", name, num_partitions: 1, m: 16, ef_construction: 150 });


let succeededTx = "";

describe("progress, bound and concurrency", () => {
  it("Queued → Running → Succeeded, one build at a time, while queries and inserts keep working", async () => {
    const a = await slow("slow_a");
    const b = await submit("big", { column: "id", index_type: "BTREE" });
    expect((await describeTx(b)).status).toBe("Queued");
    await until(q, a, (s) => s === "Running");
    expect((await describeTx(b)).status).toBe("Queued");

    const listed = await list("big");
    expect(listed.find((i) => i.index_name === "slow_a")).toMatchObject({ status: "Building", transaction_id: a, index_type: "IVF_HNSW_SQ", columns: ["vec"] });
    expect(listed.find((i) => i.index_name === "id_idx")).toMatchObject({ status: "Queued", transaction_id: b });
    const st = await q.call("POST", "/v1/table/big/index/slow_a/stats", {});
    expect(st.json).toMatchObject({ status: "Building", num_indexed_rows: 0, num_unindexed_rows: BIG, transaction_id: a });

    // A query and an insert through Quiver while the build runs; neither waits for it.
    let t0 = Date.now();
    const qr = await q.call("POST", "/v1/table/big/query", { vector: { single_vector: Array(DIM).fill(0.1) }, vector_column: "vec", k: 5, columns: { column_names: ["id"] } });
    expect(qr.status, qr.text).toBe(200);
    const queryMs = Date.now() - t0;
    t0 = Date.now();
    const ins = await q.call("POST", "/v1/table/big/insert", rowsIpc(100, DIM, BIG));
    expect(ins.status, ins.text).toBe(200);
    const insertMs = Date.now() - t0;
    expect((await describeTx(a)).status).toBe("Running");
    console.log(`during a build: query ${queryMs} ms, insert ${insertMs} ms`);

    // Never two builds at once with --index-builds 1.
    const seenA: string[] = [];
    for (;;) {
      const [da, db] = [await describeTx(a), await describeTx(b)];
      expect([da.status, db.status].filter((s) => s === "Running").length).toBeLessThanOrEqual(1);
      if (seenA[seenA.length - 1] !== da.status) seenA.push(da.status);
      if (terminal(db.status)) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(seenA).toEqual(["Running", "Succeeded"]);
    const da = await describeTx(a);
    expect(da.properties).toMatchObject({ operation: "create_index", table: "big", index_name: "slow_a", column: "vec", index_type: "IVF_HNSW_SQ" });
    expect(Number(da.properties.duration_ms)).toBeGreaterThan(0);
    expect(Date.parse(da.properties.finished_at)).toBeGreaterThanOrEqual(Date.parse(da.properties.started_at));
    expect((await describeTx(b)).status).toBe("Succeeded");
    // The rows inserted during the build are in the table, indexed or not depending on whether the
    // build had read the table before they landed.
    const ix = (await list("big")).find((i) => i.index_name === "slow_a");
    expect(ix.status).toBe("Active");
    expect(ix.num_indexed_rows + ix.num_unindexed_rows).toBe(BIG + 100);
    expect(ix.num_indexed_rows).toBeGreaterThanOrEqual(BIG);
    succeededTx = a;
  });
});

describe("cancel", () => {
  it("a running build: Canceled at once, never committed", async () => {
    const c = await slow("slow_c", "s.v");
    await until(q, c, (s) => s === "Running");
    const r = await cancel(c);
    expect(r.status).toBe(200);
    expect(r.json.status).toBe("Canceled");
    expect((await describeTx(c)).status).toBe("Canceled");
    const version = await (await openIndexTable(q.dataDir, "big")).version();
    // The slot is free again: the next build runs.
    const d = await submit("small", { column: "id", index_type: "BTREE" });
    expect((await until(q, d, terminal)).status).toBe("Succeeded");
    expect((await list("big")).map((i) => i.index_name)).not.toContain("slow_c");
    // Nor later: the build's process was killed, nothing is left to commit.
    await new Promise((res) => setTimeout(res, 1500));
    expect(await (await openIndexTable(q.dataDir, "big")).version()).toBe(version);
    expect((await list("big")).map((i) => i.index_name)).not.toContain("slow_c");
  });

  it("a queued build: Canceled, never started; a finished one cannot be canceled", async () => {
    const e = await slow("slow_e", "s.v");
    const f = await submit("small", { column: "cat", index_type: "BITMAP" });
    expect((await cancel(f)).json.status).toBe("Canceled");
    expect((await cancel(e)).json.status).toBe("Canceled");
    const df = await describeTx(f);
    expect(df.status).toBe("Canceled");
    expect(df.properties.started_at).toBeUndefined();
    expect((await list("small")).map((i) => i.index_name)).not.toContain("cat_idx");
    // Canceling again is a no-op; canceling a Succeeded build is a conflict.
    expect((await cancel(f)).status).toBe(200);
    const late = await cancel(succeededTx);
    expect(late.status).toBe(409);
    expect(late.json).toMatchObject({ code: 14 });
    expect(late.json.detail).toContain("already Succeeded");
  });
});

describe("alter", () => {
  it("sets and unsets properties, all or nothing", async () => {
    let r = await alter(succeededTx, [{ setPropertyAction: { key: "owner", value: "ann" } }, { setPropertyAction: { key: "ticket", value: "7" } }]);
    expect(r.status).toBe(200);
    expect(r.json.properties).toMatchObject({ owner: "ann", ticket: "7", operation: "create_index" });
    r = await alter(succeededTx, [{ setPropertyAction: { key: "owner", value: "bob", mode: "Skip" } }, { unsetPropertyAction: { key: "ticket" } }]);
    expect(r.json.properties.owner).toBe("ann");
    expect(r.json.properties.ticket).toBeUndefined();
    // One bad action: nothing applied.
    r = await alter(succeededTx, [{ setPropertyAction: { key: "owner", value: "carl" } }, { setPropertyAction: { key: "owner", value: "dan", mode: "fail" } }]);
    expect(r.status).toBe(409);
    expect((await describeTx(succeededTx)).properties.owner).toBe("ann");
  });

  const bad: [string, unknown, number, number, RegExp][] = [
    ["no actions", [], 400, 13, /^actions:/],
    ["two things in one action", [{ setStatusAction: { status: "Canceled" }, unsetPropertyAction: { key: "x" } }], 400, 13, /exactly one/],
    ["a status other than Canceled", [{ setStatusAction: { status: "Running" } }], 400, 13, /only Canceled can be set/],
    ["an unknown status", [{ setStatusAction: { status: "Paused" } }], 400, 13, /unknown status "Paused"/],
    ["a server-reported property", [{ setPropertyAction: { key: "error_message", value: "x" } }], 400, 13, /"error_message" is reported by the server/],
    ["unset with mode Fail of a missing property", [{ unsetPropertyAction: { key: "nope", mode: "Fail" } }], 400, 13, /"nope" is not set/],
  ];
  for (const [what, actions, status, code, detail] of bad) {
    it(`${what} → ${status}`, async () => {
      const before = await describeTx(succeededTx);
      const r = await q.call("POST", `/v1/transaction/${succeededTx}/alter`, { actions });
      expect(r.status, r.text).toBe(status);
      expect(r.json.code).toBe(code);
      expect(r.json.detail).toMatch(detail);
      expect(await describeTx(succeededTx)).toEqual(before);
    });
  }

  it("an unknown transaction is 404 code 10", async () => {
    for (const op of ["describe", "alter"]) {
      const body = op === "alter" ? { actions: [{ setStatusAction: { status: "Canceled" } }] } : {};
      const r = await q.call("POST", `/v1/transaction/00000000-0000-0000-0000-000000000000/${op}`, body);
      expect(r.status).toBe(404);
      expect(r.json).toMatchObject({ code: 10, detail: 'transaction "00000000-0000-0000-0000-000000000000" not found' });
    }
  });

  it("a credential limited to another namespace may not see it (404, as an unknown id); a read key may describe but not alter", async () => {
    const r = await q.call("POST", `/v1/transaction/${succeededTx}/describe`, {}, { "x-api-key": NS1_KEY });
    expect(r.status).toBe(404);
    expect(r.json).toMatchObject({ code: 10, detail: `transaction "${succeededTx}" not found` });
    expect((await q.call("POST", `/v1/transaction/${succeededTx}/describe`, {}, { "x-api-key": READ_KEY })).status).toBe(200);
    expect((await alter(succeededTx, [{ setPropertyAction: { key: "k", value: "v" } }], { "x-api-key": READ_KEY })).status).toBe(403);
  });
});

describe("durability", () => {
  it("a crash mid-build: the build is Failed after restart, a queued one resumes, finished ones stay", async () => {
    const g = await slow("slow_g", "s.v");
    const h = await submit("small", { column: "cat", index_type: "BTREE", name: "after_crash" });
    await until(q, g, (s) => s === "Running");
    expect((await describeTx(h)).status).toBe("Queued");
    await q.kill();
    await q.restart();
    const dg = await describeTx(g);
    expect(dg.status).toBe("Failed");
    expect(dg.properties.error_message).toBe("interrupted by a server restart");
    expect((await until(q, h, terminal)).status).toBe("Succeeded");
    expect((await list("small")).map((i) => i.index_name)).toContain("after_crash");
    expect((await list("big")).map((i) => i.index_name)).not.toContain("slow_g");
    const a = await describeTx(succeededTx);
    expect(a).toMatchObject({ status: "Succeeded", properties: { owner: "ann", index_name: "slow_a" } });
  });

  it("a clean stop marks a running build Failed (never Running forever)", async () => {
    const k = await slow("slow_k", "s.v");
    await until(q, k, (s) => s === "Running");
    const code = await q.stop();
    expect(code, q.stderr().slice(-2000)).toBe(0);
    await q.restart();
    const d = await describeTx(k);
    expect(d.status).toBe("Failed");
    expect(d.properties.error_message).toMatch(/^interrupted by a server (shutdown|restart)$/);
  });
});
