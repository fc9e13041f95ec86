// Item 7 of the attack on the compute sandbox: error text from user code was unbounded.
// `(() => { throw "A".repeat(1e8) })()` was a 400 of 200 MB, and a backfill error of 5e7
// characters was stored in the job store, returned by every describe. Now such text is cut to a
// few KB (saying how much was cut) before it reaches an answer, a log line or the job store.
import { beforeAll, describe, expect, it } from "vitest";
import { serverForFile } from "../helpers/quiver.js";
import { settle } from "../helpers/transactions.js";
import { addColumn, jsColumn, post, pyColumn, TENANT_KEYS, twoTenants, W1 } from "../helpers/sandbox.js";

const q = serverForFile({ args: ["--udf-timeout-ms", "10000", "--workers", "2"], env: { QUIVER_API_KEYS: TENANT_KEYS } });
beforeAll(() => twoTenants(q));

const BOUND = 16_384;

describe("error text that user code chooses", () => {
  it("a JavaScript throw of 1e8 characters at definition is a 400 of a few KB that says it was cut", async () => {
    const r = await addColumn(q, "ns1$t", jsColumn('(() => { throw "A".repeat(1e8); })()'), W1, 60_000);
    expect(r.status).toBe(400);
    expect(r.bytes.length).toBeLessThan(BOUND);
    expect(r.json.detail).toMatch(/AAAA… \(\d+ more characters cut\)/);
  });

  it("a Python exception of 1e8 characters at definition is a 400 of a few KB that says it was cut", { timeout: 120_000 }, async () => {
    const r = await addColumn(q, "ns1$t", pyColumn('raise Exception("A" * 10**8)\ndef f(x):\n    return str(x)'), W1, 120_000);
    expect(r.status).toBe(400);
    expect(r.bytes.length).toBeLessThan(BOUND);
    expect(r.json.detail).toMatch(/more characters cut/);
  });

  it("a backfill whose UDF throws 5e7 characters fails with a few KB of error, in its record and every describe", { timeout: 120_000 }, async () => {
    const add = await addColumn(q, "ns1$t", jsColumn('(x) => { throw "B".repeat(5e7); }'), W1);
    expect(add.status, add.text).toBe(200);
    const job = await post(q, "/v1/table/ns1$t/backfill_column", { column: add.column }, W1);
    expect(job.status, job.text).toBe(202);
    const done = await settle(q, job.json.job_id, 100_000);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message.length).toBeLessThan(BOUND);
    expect(done.properties.error_message).toMatch(/BBBB… \(\d+ more characters cut\)/);
    const listed = await post(q, "/v1/jobs/list", {}, W1);
    expect(listed.status).toBe(200);
    expect(listed.bytes.length).toBeLessThan(4 * BOUND);
  });
});
