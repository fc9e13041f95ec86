// Background jobs are bounded and fair: one credential flooding create_index gets 503 Slow down
// (with Retry-After) past --max-queued-jobs-per-credential, a table's queue is bounded whoever
// submits (--max-queued-jobs-per-table), another tenant's build is still accepted and starts before
// the flooder's queued ones; a second index of the same type on the same column is 409 naming the
// first unless `replace` is asked.
import { describe, expect, it } from "vitest";
import { seedIndexTable } from "../helpers/index-data.js";
import { ADMIN_KEY, serverForFile } from "../helpers/quiver.js";
import { settle } from "../helpers/transactions.js";

const A = "tenant-a-key";
const B = "tenant-b-key";

const q = serverForFile({
  env: { QUIVER_API_KEYS: `${ADMIN_KEY}:admin,${A}:write:a1|a2,${B}:write:b1` },
  args: ["--max-queued-jobs-per-credential", "3", "--max-queued-jobs-per-table", "4", "--index-builds", "1"],
  seed: async (dataDir) => {
    for (const t of ["a1", "a2", "b1", "dup", "fill"]) await seedIndexTable(dataDir, t, 300);
  },
});

/** Distinct (column, type) pairs, so none is a duplicate of another. */
const PAIRS: [string, string][] = [
  ["id", "BTREE"], ["cat", "BITMAP"], ["cat", "BTREE"], ["tags", "LABEL_LIST"], ["text", "FM"], ["s.x", "BTREE"], ["f", "BTREE"], ["text", "BTREE"],
];

const createIndex = (table: string, body: Record<string, unknown>, key = ADMIN_KEY) => q.call("POST", `/v1/table/${table}/create_index`, body, { "x-api-key": key });
const describeTx = async (tx: string) => (await q.call("POST", `/v1/transaction/${tx}/describe`, {})).json as { status: string; properties: Record<string, string> };
const cancelAll = async () => {
  const jobs = (await q.call("POST", "/v1/jobs/list", {})).json.jobs as { job_id: string; status: string }[];
  for (const j of jobs) if (j.status === "Queued" || j.status === "Running") await q.call("POST", "/v1/jobs/cancel", { job_id: j.job_id });
};

/** Until no job is queued or running (cancelled ones end at their next step). */
const idle = async () => {
  for (let i = 0; i < 300; i++) {
    const jobs = (await q.call("POST", "/v1/jobs/list", {})).json.jobs as { status: string }[];
    if (!jobs.some((j) => j.status === "Queued" || j.status === "Running")) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("jobs still active after 30 s");
};

describe("queued jobs per credential and per table", () => {
  it("a flood by one key is refused past its bound; another tenant's build is accepted and starts before the flooder's queued ones", async () => {
    const replies = [];
    for (const [i, [column, index_type]] of PAIRS.entries()) replies.push(await createIndex("a1", { column, index_type, name: `ix${i}` }, A));
    const accepted = replies.filter((r) => r.status === 200).map((r) => r.json.transaction_id as string);
    const refused = replies.filter((r) => r.status === 503);
    expect(accepted.length + refused.length).toBe(PAIRS.length);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0].headers.get("retry-after")).toBe("5");
    expect(refused[0].json).toMatchObject({ status: 503, title: "Slow down" });
    expect(refused[0].json.detail).toMatch(/already has 3 background jobs queued \(max-queued-jobs-per-credential\)/);

    const b = await createIndex("b1", { column: "id", index_type: "BTREE" }, B);
    expect(b.status, b.text).toBe(200);
    const waiting = [];
    for (const tx of accepted) if ((await describeTx(tx)).status === "Queued") waiting.push(tx);
    expect(waiting.length).toBeGreaterThanOrEqual(2);

    const done = await settle(q, b.json.transaction_id, 60_000);
    expect(done.status).toBe("Succeeded");
    const bStart = Date.parse(done.properties.started_at);
    for (const tx of waiting) {
      const a = await describeTx(tx);
      if (a.properties.started_at !== undefined) expect(Date.parse(a.properties.started_at)).toBeGreaterThanOrEqual(bStart);
    }
    // The first of A's queued builds starts right after B's, not before.
    const next = await settle(q, waiting[0], 60_000);
    expect(Date.parse(next.properties.started_at)).toBeGreaterThanOrEqual(bStart);
    await cancelAll();
  });

  it("a table's queue is bounded whoever submits", async () => {
    let i = 0;
    let last;
    do last = await createIndex("a2", { column: PAIRS[i][0], index_type: PAIRS[i][1], name: `ix${i}` }, A);
    while (last.status === 200 && ++i < PAIRS.length);
    expect(last.status).toBe(503);
    for (;;) {
      last = await createIndex("a2", { column: PAIRS[i][0], index_type: PAIRS[i][1], name: `ix${i}` });
      if (last.status !== 200 || ++i >= PAIRS.length) break;
    }
    expect(last.status, last.text).toBe(503);
    expect(last.headers.get("retry-after")).toBe("5");
    expect(last.json.detail).toMatch(/table "a2" already has 4 background jobs queued \(max-queued-jobs-per-table\)/);
    // Another table is not affected.
    const other = await createIndex("b1", { column: "cat", index_type: "BITMAP" });
    expect(other.status, other.text).toBe(200);
    await cancelAll();
  });
});

describe("a second index of the same type on the same column", () => {
  const build = async (body: Record<string, unknown>) => {
    const r = await createIndex("dup", body);
    expect(r.status, r.text).toBe(200);
    expect((await settle(q, r.json.transaction_id, 60_000)).status).toBe("Succeeded");
  };
  const names = async () => ((await q.call("POST", "/v1/table/dup/index/list", {})).json.indexes as { index_name: string }[]).map((i) => i.index_name).sort();

  it("is 409 naming the existing one, whatever its name or the column's spelling; another type is not", async () => {
    await build({ column: "id", index_type: "BTREE", name: "first" });
    for (const column of ["id", "`id`"]) {
      const r = await createIndex("dup", { column, index_type: "btree", name: "second" });
      expect(r.status, r.text).toBe(409);
      expect(r.json.detail).toMatch(/index "first" \(BTREE on "id"\) already exists in table "dup"; send "replace": true/);
    }
    await build({ column: "id", index_type: "BITMAP", name: "id_bitmap" });
    expect(await names()).toEqual(["first", "id_bitmap"]);
  });

  it("on a nested field, spelled with or without quotes", async () => {
    await build({ column: "s.x", index_type: "BTREE" });
    const r = await createIndex("dup", { column: "`s`.`x`", index_type: "BTREE", name: "again" });
    expect(r.status, r.text).toBe(409);
    expect(r.json.detail).toMatch(/index "s\.x_idx" \(BTREE on "s\.x"\)/);
  });

  it("replace: true drops the existing one and builds the new one", async () => {
    await build({ column: "id", index_type: "BTREE", name: "second", replace: true });
    expect(await names()).toEqual(["id_bitmap", "s.x_idx", "second"]);
  });

  it("a replace refused by the queue bounds leaves the existing index in place", async () => {
    await build({ column: "f", index_type: "BTREE", name: "f_kept" });
    // The bound holds while the fill's builds wait; on a loaded machine one may start between the
    // refusal and the replace, freeing a place: the replace is then accepted, and the scenario is
    // played again from the same start.
    let refused = false;
    for (let attempt = 0; attempt < 5 && !refused; attempt++) {
      try {
        let i = 0;
        let last;
        do last = await createIndex("fill", { column: PAIRS[i][0], index_type: PAIRS[i][1], name: `fill${i}`, replace: true });
        while (last.status === 200 && ++i < PAIRS.length);
        expect(last.status, last.text).toBe(503);
        const r = await createIndex("dup", { column: "f", index_type: "BTREE", name: "f_new", replace: true });
        expect([200, 503], r.text).toContain(r.status);
        refused = r.status === 503;
        if (refused) expect(await names()).toContain("f_kept");
      } finally {
        await cancelAll();
      }
      if (!refused) {
        await idle();
        await build({ column: "f", index_type: "BTREE", name: "f_kept", replace: true });
      }
    }
    expect(refused).toBe(true);
  });

  it("a build of the same type and column still queued is 409 too", async () => {
    const first = await createIndex("dup", { column: "text", index_type: "FM" });
    expect(first.status, first.text).toBe(200);
    const r = await createIndex("dup", { column: "text", index_type: "FM", name: "text_again", replace: true });
    expect(r.status, r.text).toBe(409);
    expect(r.json.detail).toContain(`(transaction ${first.json.transaction_id})`);
    expect((await settle(q, first.json.transaction_id, 60_000)).status).toBe("Succeeded");
  });
});
