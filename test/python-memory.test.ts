// A Python UDF past the compute sandbox's memory bound, on a real server: the backfill fails saying
// so, and the next Python backfill works. A file of its own (its server is not
// test/python-udfs.test.ts's), so the two run side by side.
import { describe, expect, it, vi } from "vitest";
import { serverForFile } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

// The interpreter loads again after the sandbox is replaced (about 0.5 s, more on a loaded machine).
vi.setConfig({ testTimeout: 240_000 });

const int64Column = (name: string, udf: string) => ({ name, virtual_column: { udf_backend: "python", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "int64" }, nullable: true }] } });

describe("Python memory", () => {
  // Bound: 2 workers x 128 MB + 1024 MB of writable memory for the compute sandbox process (--sandbox-memory-mb's default).
  const small = serverForFile({ args: ["--worker-heap-mb", "128", "--workers", "2", "--udf-timeout-ms", "60000"] });

  it("a UDF that allocates without end fails the backfill naming the sandbox's memory bound; the next Python backfill works", async () => {
    const id = "pymem";
    expect((await small.call("POST", `/v1/table/${id}/create`, [{ id: 1, x: 1 }, { id: 2, x: 2 }])).status).toBe(200);
    const hog = int64Column("y", "def f(x):\n    keep = []\n    while True:\n        keep.append(b'a' * (32 << 20))");
    expect((await small.call("POST", `/v1/table/${id}/add_columns`, { new_columns: [hog] })).status).toBe(200);
    const r = await small.call("POST", `/v1/table/${id}/backfill_column`, { column: "y" });
    expect(r.status, r.text).toBe(202);
    const done = await settle(small, r.json.job_id, 200_000);
    expect(done.status).toBe("Failed");
    expect(JSON.stringify(done.properties)).toMatch(/it reached its memory bound: \d+ MB of writable memory, within 1\/16 of --sandbox-memory-mb 1280/);
    const ok = int64Column("z", "def f(x):\n    return int(x) + 1");
    expect((await small.call("POST", `/v1/table/${id}/add_columns`, { new_columns: [ok] })).status).toBe(200);
    const again = await small.call("POST", `/v1/table/${id}/backfill_column`, { column: "z" });
    expect((await settle(small, again.json.job_id, 200_000)).status).toBe("Succeeded");
  });
});
