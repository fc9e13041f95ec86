// Attacks across namespaces, with the credentials a tenant is normally given: a key limited to
// namespace prefix `ns1` naming an object of `ns2` anywhere in a request besides its path (a view's
// source, a refresh's source version, a rename target, a registered location, batch entries, job
// and transaction ids). Each is refused and changes nothing in ns2. A second part checks that a
// view's refreshes read its source on behalf of the credential that defined it, also after that
// key was removed or narrowed (server restarted with other keys).
// Convention (docs/security.md): an object named by id is 403 before it is looked up (the answer
// is the same whether it exists); a job or transaction id of another tenant is 404, as an unknown id.
import { Field, Float64, Int64, Schema, Table, Utf8, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { paced } from "../helpers/pace.js";
import { toStream } from "../helpers/arrow.js";
import { inProcessForFile, startInProcess, type InProcess } from "../helpers/in-process.js";
import { ADMIN_KEY, removeDir } from "../helpers/quiver.js";
import { settle } from "../helpers/transactions.js";

const NS1_WRITER = "ns1-writer-key";
const NS1_ADMIN = "ns1-admin-key";
const KEYS = `${ADMIN_KEY}:admin,${NS1_WRITER}:write:ns1,${NS1_ADMIN}:admin:ns1`;

const rowsIpc = (n: number, from = 0) =>
  toStream(
    new Table({
      id: vectorFromArray(Array.from({ length: n }, (_, i) => BigInt(from + i)), new Int64()),
      x: vectorFromArray(Array.from({ length: n }, (_, i) => (from + i) / 2), new Float64()),
      text: vectorFromArray(Array.from({ length: n }, (_, i) => `secret ${from + i}`), new Utf8()),
    }),
  );
const schemaOf = (fields: [string, "int64" | "float64" | "utf8"][]) => {
  const types = { int64: new Int64(), float64: new Float64(), utf8: new Utf8() };
  return Buffer.from(toStream(new Table(new Schema(fields.map(([n, t]) => new Field(n, types[t], true)))))).toString("base64");
};
const envelope = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64");

/** A view body of each kind reading `src`, as a tenant would send it (with an initial refresh). */
const viewBodies = (src: string): Record<string, Record<string, unknown>> => ({
  query: { kind: "query", source_query: JSON.stringify({ table: src, columns: ["id", "text"] }), output_schema: schemaOf([["id", "int64"], ["text", "utf8"]]), with_no_data: false },
  "udtf js": {
    kind: "udtf",
    source_query: JSON.stringify({ table: src }),
    output_schema: schemaOf([["text", "utf8"]]),
    udtf_spec: { kind: "udtf", udtf: envelope({ backend: "js", source: "(rows) => rows.map((r) => ({ text: r.text }))" }), udtf_name: "copy", udtf_version: "1", input_columns: ["text"] },
    with_no_data: false,
  },
  "udtf sql": {
    kind: "udtf",
    source_query: JSON.stringify({ table: src }),
    output_schema: schemaOf([["text", "utf8"]]),
    udtf_spec: { kind: "udtf", udtf: envelope({ backend: "sql", sql: "SELECT text FROM source" }), udtf_name: "copy", udtf_version: "1" },
    with_no_data: false,
  },
  chunker: {
    kind: "chunker",
    source_query: JSON.stringify({ table: src, columns: ["id"] }),
    output_schema: schemaOf([["id", "int64"], ["word", "utf8"]]),
    udtf_spec: { kind: "chunker", udtf: envelope({ backend: "js", source: "(row) => row.text.split(' ').map((w) => ({ word: w }))" }), udtf_name: "split", udtf_version: "1", input_columns: ["text"] },
    with_no_data: false,
  },
});

const as = (key: string) => ({ "x-api-key": key });

describe("a key limited to ns1 naming ns2's objects", () => {
  const q = inProcessForFile({ env: { QUIVER_API_KEYS: KEYS } });
  const post = (p: string, body: unknown, key = NS1_WRITER) => q.call("POST", p, body, as(key));
  /** ns2's state as the admin sees it: tables, the secret's version and rows, jobs. */
  const ns2State = async () => {
    const tables = await q.call("GET", "/v1/namespace/ns2/table/list");
    const described = await q.call("POST", "/v1/table/ns2$secret/describe", {});
    const rows = await q.call("POST", "/v1/table/ns2$secret/count_rows", {});
    return { tables: tables.json.tables, version: described.json.version, rows: rows.text };
  };
  let before: Awaited<ReturnType<typeof ns2State>>;

  beforeAll(async () => {
    for (const ns of ["ns1", "ns2"]) expect((await q.call("POST", `/v1/namespace/${ns}/create`, {})).status).toBe(200);
    expect((await q.call("POST", "/v1/table/ns2$secret/create", rowsIpc(50))).status).toBe(200);
    expect((await q.call("POST", "/v1/table/ns2$kept/create", rowsIpc(5))).status).toBe(200);
    expect((await q.call("POST", "/v1/table/ns2$jobs/create", rowsIpc(5))).status).toBe(200);
    expect((await q.call("POST", "/v1/table/ns1$own/create", rowsIpc(10))).status).toBe(200);
    before = await ns2State();
  });

  it("a direct read of ns2 is 403 (the control)", async () => {
    const r = await post("/v1/table/ns2$secret/count_rows", {});
    expect(r.status).toBe(403);
  });

  it("a version token on ns2's table is 403 before it is checked: the answer does not tell ns2's latest version", async () => {
    for (const token of ["1", "999999"]) {
      const r = await q.call("POST", "/v1/table/ns2$secret/count_rows", {}, { ...as(NS1_WRITER), "x-quiver-min-version": token });
      expect(r.status, r.text).toBe(403);
      expect(r.text).not.toMatch(/latest|version \d/);
    }
  });

  for (const kind of ["query", "udtf js", "udtf sql", "chunker"]) {
    it(`a ${kind} view in ns1 over ns2's table is 403 at create, and no view is made`, async () => {
      const view = `ns1$steal_${kind.replace(" ", "_")}`;
      const r = await post(`/v1/materialized_view/${view}/create`, viewBodies("ns2$secret")[kind]);
      expect(r.status, r.text).toBe(403);
      expect(r.json.detail).toMatch(/source_query\.table: "ns2\$secret"/);
      expect((await q.call("POST", `/v1/table/${view}/exists`, {})).status).toBe(404);
    });
  }

  it("a source named as an array of names is checked the same way", async () => {
    const body = { ...viewBodies("x").query, source_query: JSON.stringify({ table: ["ns2", "secret"] }) };
    const r = await post("/v1/materialized_view/ns1$steal_array/create", body);
    expect(r.status, r.text).toBe(403);
  });

  it("refreshing a view whose source the caller may not read is 403, src_version too", async () => {
    // The admin made a view in ns1 over ns2: ns1's writer may write ns1, not read ns2.
    const made = await q.call("POST", "/v1/materialized_view/ns1$by_admin/create", { ...viewBodies("ns2$secret")["udtf js"], with_no_data: true });
    expect(made.status, made.text).toBe(201);
    for (const body of [{}, { src_version: 1 }]) {
      const r = await post("/v1/materialized_view/ns1$by_admin/refresh", body);
      expect(r.status, r.text).toBe(403);
    }
    const jobs = await q.call("POST", "/v1/jobs/list", { table: ["ns1", "by_admin"] });
    expect(jobs.json.jobs).toEqual([]);
  });

  it("rename into ns2 is 403", async () => {
    for (const body of [{ new_table_name: "stolen", new_namespace_id: ["ns2"] }, { new_table_name: "stolen", new_namespace_id: [] }]) {
      const r = await post("/v1/table/ns1$own/rename", body);
      expect(r.status, r.text).toBe(403);
    }
    expect((await q.call("POST", "/v1/table/ns1$own/exists", {})).status).toBe(200);
  });

  it("register of a location holding ns2's data is 403 for an admin limited to ns1", async () => {
    const loc = (await q.call("POST", "/v1/table/ns2$secret/describe", {})).json.location as string;
    const r = await post("/v1/table/ns1$copy/register", { location: loc }, NS1_ADMIN);
    expect(r.status, r.text).toBe(403);
    expect(r.json.detail).not.toMatch(/ns2\$secret/);
    // The kept data of a deregistered ns2 table records no owner: only an unlimited admin may take it.
    const kept = (await q.call("POST", "/v1/table/ns2$kept/describe", {})).json.location as string;
    expect((await q.call("POST", "/v1/table/ns2$kept/deregister", {})).status).toBe(200);
    const again = await post("/v1/table/ns1$copy/register", { location: kept }, NS1_ADMIN);
    expect(again.status, again.text).toBe(403);
    expect((await q.call("POST", "/v1/table/ns1$copy/exists", {})).status).toBe(404);
    // An unlimited admin may.
    expect((await q.call("POST", "/v1/table/ns2$kept/register", { location: kept })).status).toBe(200);
  });

  it("reclaiming orphan directories (the whole data directory) is 403 for an admin limited to ns1", async () => {
    const r = await post("/v1/admin/reclaim", undefined, NS1_ADMIN);
    expect(r.status, r.text).toBe(403);
    expect((await q.call("POST", "/v1/admin/reclaim")).status).toBe(200);
  });

  it("batch-create and batch-commit entries naming ns2 are 403, and nothing is committed", async () => {
    const create = await post("/v1/table/version/batch-create", { entries: [{ id: ["ns1", "own"], version: 2, manifest_path: "x" }, { id: ["ns2", "secret"], version: 2, manifest_path: "x" }] });
    expect(create.status, create.text).toBe(403);
    expect(create.json.detail).toMatch(/entries\[1\]\.id/);
    const commit = await post("/v1/table/batch-commit", { operations: [{ deregister_table: { id: ["ns2", "secret"] } }] });
    expect(commit.status, commit.text).toBe(403);
    expect((await q.call("POST", "/v1/table/ns2$secret/exists", {})).status).toBe(200);
  });

  it("a job of ns2 is not found by ns1's key: describe, cancel and list; it is not canceled", async () => {
    const built = await q.call("POST", "/v1/table/ns2$jobs/create_index", { column: "id", index_type: "BTREE" });
    expect(built.status, built.text).toBe(200);
    const tx = built.json.transaction_id as string;
    const reads = [
      await post(`/v1/transaction/${tx}/describe`, {}),
      await post("/v1/jobs/describe", { job_id: tx }),
      await post("/v1/jobs/cancel", { job_id: tx }),
    ];
    for (const r of reads) {
      expect(r.status, r.text).toBe(404);
      expect(r.text).not.toMatch(/secret/);
    }
    const unknown = await post("/v1/jobs/describe", { job_id: "00000000-0000-0000-0000-000000000000" });
    expect(unknown.json.detail.replace(/"[^"]*"/, "ID")).toBe(reads[1].json.detail.replace(/"[^"]*"/, "ID"));
    const listed = await post("/v1/jobs/list", {});
    expect(listed.json.jobs.map((j: { job_id: string }) => j.job_id)).not.toContain(tx);
    expect((await settle(q, tx)).status).toBe("Succeeded");
  });

  it("ns2 is as it was", async () => {
    const after = await ns2State();
    expect(after).toEqual(before);
  });
});

describe("refreshes read the source on behalf of the view's definer", () => {
  const DEFINER = "definer-key";
  let q: InProcess;
  let dataDir: string;
  const start = async (keys: string) => {
    q = await startInProcess({ env: { QUIVER_API_KEYS: keys }, args: ["--auto-refresh-cooldown-ms", "100"], ...(dataDir ? { dataDir } : {}) });
    dataDir = q.dataDir;
  };
  const jobsOf = async (view: string[]) => (await q.call("POST", "/v1/jobs/list", { table: view })).json.jobs as { job_id: string; created_at_millis: number }[];
  /** The newest job of `view` once there are `n`, settled. */
  const nthJob = async (view: string[], n: number) => {
    const end = Date.now() + paced(30_000);
    for (;;) {
      const jobs = await jobsOf(view);
      if (jobs.length >= n) return settle(q, jobs[0].job_id, 60_000);
      if (Date.now() > end) throw new Error(`view ${view.join("$")} has ${jobs.length} jobs, not ${n}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const insert = (rows: number, from: number) => q.call("POST", "/v1/table/ns1$src/insert", rowsIpc(rows, from));

  beforeAll(async () => {
    await start(`${ADMIN_KEY}:admin,${DEFINER}:write:ns1`);
    expect((await q.call("POST", "/v1/namespace/ns1/create", {})).status).toBe(200);
    expect((await q.call("POST", "/v1/table/ns1$src/create", rowsIpc(10))).status).toBe(200);
    const body = { ...viewBodies("ns1$src")["udtf js"], auto_refresh: true };
    const r = await q.call("POST", "/v1/materialized_view/ns1$v/create", body, as(DEFINER));
    expect(r.status, r.text).toBe(201);
    expect((await settle(q, r.json.job_id, 60_000)).status).toBe("Succeeded");
    expect((await insert(1, 100)).status).toBe(200);
    expect((await nthJob(["ns1", "v"], 2)).status).toBe("Succeeded");
  });
  afterAll(async () => {
    await q?.stop();
    if (dataDir) removeDir(dataDir);
  });

  it("once the definer's key is gone, a refresh (automatic or by hand) fails naming why, and automatic ones stop", async () => {
    await q.stop();
    await start(`${ADMIN_KEY}:admin`);
    expect((await insert(1, 200)).status).toBe(200);
    const auto = await nthJob(["ns1", "v"], 3);
    expect(auto.status).toBe("Failed");
    expect(auto.properties.auto).toBe("true");
    expect(auto.properties.error_message).toMatch(/API key that defined view "ns1\$v" \(configured key 2\) is no longer configured/);
    expect((await insert(1, 250)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await jobsOf(["ns1", "v"])).toHaveLength(3);
    const r = await q.call("POST", "/v1/materialized_view/ns1$v/refresh", {});
    expect(r.status, r.text).toBe(202);
    const manual = await settle(q, r.json.job_id, 60_000);
    expect(manual.status).toBe("Failed");
    expect(manual.properties.error_message).toBe(auto.properties.error_message);
  });

  it("a definer whose key now covers other prefixes may no longer refresh the view automatically", async () => {
    await q.stop();
    await start(`${ADMIN_KEY}:admin,${DEFINER}:write:ns3`);
    expect((await insert(1, 300)).status).toBe(200);
    const auto = await nthJob(["ns1", "v"], 5);
    expect(auto.properties.auto).toBe("true");
    expect(auto.status).toBe("Failed");
    expect(auto.properties.error_message).toMatch(/\(configured key 2\) may no longer read its source "ns1\$src"/);
    // Stopped: further writes queue no more refreshes that would fail for the same reason.
    expect((await insert(1, 400)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await jobsOf(["ns1", "v"])).toHaveLength(5);
  });
});
