// Table maintenance beside other work: a table's properties (its own threshold, deleted rows) set
// it off under --auto-maintenance off; it keeps a chunker view's last refreshed source version and
// every version while another job runs; after compaction a backfill computes what it would have
// without it.
import { Field, Int64, Schema, Table, Utf8 } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { askedServer, rows } from "./helpers/maintenance.js";
import { sample } from "./helpers/metrics.js";
import { settle } from "./helpers/transactions.js";

const { q, post, insert, versions, maintain, count, maintainedByItself, smallCommits } = askedServer();

describe("maintenance beside other work", () => {
  it("a table's properties turn automatic maintenance on under --auto-maintenance off, with their own threshold", async () => {
    const props = { "quiver.maintenance": "on", "quiver.maintenance.small_fragments": "3" };
    const r = await post("own", "create", rows(0, 1), `?properties=${encodeURIComponent(JSON.stringify(props))}`);
    expect(r.status, r.text).toBe(200);
    for (let i = 1; i < 4; i++) await insert("own", i, 1);
    expect(await maintainedByItself("own")).toBe(true);
    const metrics = (await q.call("GET", "/metrics")).text;
    expect(sample(metrics, "quiver_jobs", { kind: "maintenance", state: "Succeeded" })).toBeGreaterThanOrEqual(1);
  });

  it("deleted rows: stats and /metrics count them; past a table's deleted_percent they set off maintenance, which compacts them away", async () => {
    // Automatic maintenance is off on this server: the rows stay deleted in place.
    expect((await post("holes", "create", rows(0, 100))).status).toBe(200);
    expect((await post("holes", "delete", { predicate: "id < 50" })).status).toBe(200);
    expect((await post("holes", "stats", {})).json.maintenance.deleted_rows).toBe(50);
    expect(sample((await q.call("GET", "/metrics")).text, "quiver_table_deleted_rows", { table: "holes", branch: "main" })).toBe(50);

    const props = { "quiver.maintenance": "on", "quiver.maintenance.deleted_percent": "20" };
    expect((await post("sparse", "create", rows(0, 100), `?properties=${encodeURIComponent(JSON.stringify(props))}`)).status).toBe(200);
    expect((await post("sparse", "delete", { predicate: "id < 10" })).status).toBe(200);
    expect((await post("sparse", "delete", { predicate: "id < 50" })).status).toBe(200);
    expect(await maintainedByItself("sparse")).toBe(true);
    expect((await post("sparse", "stats", {})).json.maintenance.deleted_rows).toBe(0);
    expect(await count("sparse")).toBe(50);
    expect(sample((await q.call("GET", "/metrics")).text, "quiver_table_deleted_rows", { table: "sparse", branch: "main" })).toBe(0);
  });

  it("keeps a chunker view's last refreshed source version, and its next refresh stays incremental", async () => {
    const src = await smallCommits(3);
    const view = `${src}v`;
    const c = await q.call("POST", `/v1/materialized_view/${view}/create`, {
      kind: "chunker",
      source_query: JSON.stringify({ table: src, columns: ["id"] }),
      output_schema: Buffer.from(toStream(new Table(new Schema([new Field("id", new Int64(), true), new Field("part", new Utf8(), true)])))).toString("base64"),
      udtf_spec: { kind: "chunker", udtf: Buffer.from(JSON.stringify({ backend: "js", source: "(row) => [{ part: row.s }, { part: row.s + '!' }]" })).toString("base64"), udtf_name: "twice", udtf_version: "1", input_columns: ["s"] },
      with_no_data: true,
    });
    expect(c.status, c.text).toBeLessThan(300);
    const refresh = async () => {
      const r = await q.call("POST", `/v1/materialized_view/${view}/refresh`, {});
      expect(r.status, r.text).toBe(202);
      expect((await settle(q, r.json.job_id, 60_000)).status).toBe("Succeeded");
      return (await post(view, "describe", {})).json.materialized_view.last_refresh;
    };
    const first = await refresh();
    for (let i = 3; i < 6; i++) await insert(src, i * 10, 10);
    await maintain(src);
    expect(await versions(src)).toContain(first.source_version);
    const next = await refresh();
    expect(next.mode).toBe("incremental");
    expect(next.rows_written).toBe(60);
    expect(await count(view)).toBe(120);
  }, 240_000);

  it("removes nothing while another job is active on the table", async () => {
    const t = await smallCommits(4);
    const add = await post(t, "add_columns", { new_columns: [{ name: "slow", virtual_column: { udf_backend: "js", udf: "(x) => { const end = Date.now() + 50; while (Date.now() < end); return x; }", input_columns: ["x"], outputs: [{ column: "slow", data_type: { type: "float64" }, nullable: true }] } }] });
    expect(add.status, add.text).toBe(200);
    const bf = await post(t, "backfill_column", { column: "slow", task_size: 1, concurrency: 1, checkpoint_size: 1 });
    expect(bf.status, bf.text).toBe(202);
    const before = await versions(t);
    const done = await maintain(t);
    expect(done.cleanup).toMatch(new RegExp(`^deferred: job ${bf.json.job_id} \\(backfill\\)`));
    expect(await versions(t)).toEqual(expect.arrayContaining(before));
    await q.call("POST", "/v1/jobs/cancel", { job_id: bf.json.job_id });
  });

  it("after compaction a default backfill computes the same rows as without it, for each of several virtual columns", async () => {
    // Two tables written alike; only the first is maintained. A backfill's commit updates its rows,
    // which makes them stale for the table's other virtual columns (rows_computed shows it), so the
    // control table says what each backfill must compute; the last column backfilled computes only
    // the rows missing or changed since.
    const vc = (name: string, udf: string) => ({ name, virtual_column: { udf_backend: "js", udf, input_columns: ["x"], outputs: [{ column: name, data_type: { type: "float64" }, nullable: true }] } });
    const backfill = async (t: string, column: string) => {
      const r = await post(t, "backfill_column", { column });
      expect(r.status, r.text).toBe(202);
      const s = await settle(q, r.json.job_id, 60_000);
      expect(s.status).toBe("Succeeded");
      return Number(s.properties.rows_computed);
    };
    const [maintained, control] = [await smallCommits(10), await smallCommits(10)];
    for (const t of [maintained, control]) {
      expect((await post(t, "add_columns", { new_columns: [vc("y", "(x) => x * 2"), vc("z", "(x) => x + 1")] })).status).toBe(200);
      expect(await backfill(t, "y")).toBe(100);
      expect(await backfill(t, "z")).toBe(100);
      await insert(t, 100, 5);
      expect((await post(t, "update", { predicate: "id < 3", updates: [["x", "x + 100"]] })).status).toBe(200);
    }
    await maintain(maintained);
    expect((await post(maintained, "stats", {})).json.fragment_stats.num_fragments).toBe(1);
    expect(await backfill(maintained, "z")).toBe(8);
    expect(await backfill(control, "z")).toBe(8);
    expect(await backfill(maintained, "y")).toBe(await backfill(control, "y"));
    for (const t of [maintained, control]) expect(await count(t, { predicate: "y = x * 2 AND z = x + 1" })).toBe(105);
  }, 240_000);
});
