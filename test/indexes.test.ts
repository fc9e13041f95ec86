// Index operations end to end: every index type built through the API and used by a query,
// parameters reaching the engine, validation errors, listing, stats, drop, unindexed rows.
import { describe, expect, it } from "vitest";
import { openIndexTable, seedIndexTable } from "./helpers/index-data.js";
import { inProcessForFile } from "./helpers/in-process.js";
import { READ_KEY } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const N = 2000;

const q = inProcessForFile({
  seed: async (dataDir) => {
    await seedIndexTable(dataDir, "t", N);
    await seedIndexTable(dataDir, "vt", N);
    await seedIndexTable(dataDir, "errs", 300);
    await seedIndexTable(dataDir, "ep", 600);
  },
});

const create = (table: string, body: Record<string, unknown>, op = "create_index") => q.call("POST", `/v1/table/${table}/${op}`, body);
const list = async (table: string) => (await q.call("POST", `/v1/table/${table}/index/list`, {})).json.indexes as any[];

async function build(table: string, body: Record<string, unknown>, op?: string) {
  const r = await create(table, body, op);
  expect(r.status, r.text).toBe(200);
  expect(r.json.transaction_id).toMatch(/^[0-9a-f-]{36}$/);
  const done = await settle(q, r.json.transaction_id);
  expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
  return done;
}

const plan = async (table: string, f: (t: Awaited<ReturnType<typeof openIndexTable>>) => { explainPlan(): Promise<string> }) =>
  f(await openIndexTable(q.dataDir, table)).explainPlan();

const unit = (seed: number) => Array.from({ length: 32 }, (_, i) => Math.sin(seed + i));

describe("scalar and FTS indexes", () => {
  const cases: [string, string, string, (t: any) => any, string][] = [
    ["BTREE", "id", "id_idx", (t) => t.query().where("id > 1990"), "@id_idx(BTree)"],
    ["BITMAP", "cat", "cat_idx", (t) => t.query().where("cat = 'c1'"), "@cat_idx(Bitmap)"],
    ["LABEL_LIST", "tags", "tags_idx", (t) => t.query().where("array_has_any(tags, ['b1'])"), "@tags_idx(LabelList)"],
    ["FM", "text", "text_fm", (t) => t.query().where("contains(text, 'lazy')"), "@text_fm(Fm)"],
    ["BTREE", "s.x", "s.x_idx", (t) => t.query().where("s.x = 7"), "@s.x_idx(BTree)"],
  ];
  for (const [type, column, name, query, expected] of cases) {
    it(`${type} on ${column} is built and used by a filter`, async () => {
      const done = await build("t", { column, index_type: type, ...(name.endsWith("_idx") ? {} : { name }) });
      expect(done.properties).toMatchObject({ operation: "create_index", table: "t", index_name: name, column, index_type: type });
      const listed = (await list("t")).find((i) => i.index_name === name);
      expect(listed).toMatchObject({ columns: [column], status: "Active", index_type: type, num_indexed_rows: N, num_unindexed_rows: 0 });
      expect(listed.index_uuid).toMatch(/^[0-9a-f-]{36}$/);
      expect(await plan("t", query)).toContain(`ScalarIndexQuery`);
      expect(await plan("t", query)).toContain(expected);
    });
  }

  it("FTS with every option: the options reach the engine and a match query uses it", async () => {
    const opts = { with_position: true, base_tokenizer: "whitespace", language: "french", max_token_length: 20, lower_case: false, stem: false, remove_stop_words: false, ascii_folding: false };
    await build("t", { column: "text", index_type: "FTS", name: "text_fts", ...opts });
    const ix = (await list("t")).find((i) => i.index_name === "text_fts");
    expect(ix).toMatchObject({ index_type: "FTS", status: "Active", columns: ["text"] });
    expect(JSON.parse(ix.index_details)).toMatchObject({ ...opts, language: "French" });
    expect(await plan("t", (t) => t.search("quick", "fts").limit(5))).toContain("MatchQuery: column=text");
    // with_position reached it: phrase queries need positions.
    const hits = await (await openIndexTable(q.dataDir, "t")).search('"The quick"', "fts").limit(3).toArray();
    expect(hits.length).toBe(3);
  });
});

describe("vector indexes", () => {
  const cases: [string, Record<string, unknown>, (d: any) => void][] = [
    ["IVF_FLAT", { distance_type: "cosine", num_partitions: 4, max_iterations: 7, sample_rate: 64 }, (d) => {
      expect(d.metric_type).toBe("COSINE");
      expect(d.runtime_hints).toMatchObject({ "lance.ivf.max_iters": "7", "lance.ivf.sample_rate": "64" });
    }],
    ["IVF_PQ", { distance_type: "dot", num_partitions: 4, num_sub_vectors: 4, num_bits: 4 }, (d) => {
      expect(d.metric_type).toBe("DOT");
      expect(d.compression).toMatchObject({ type: "pq", num_bits: 4, num_sub_vectors: 4 });
    }],
    ["IVF_RQ", { num_partitions: 4, num_bits: 2 }, (d) => {
      expect(d.compression).toMatchObject({ type: "rq", num_bits: 2 });
    }],
    ["IVF_HNSW_PQ", { num_partitions: 2, num_sub_vectors: 8, m: 6, ef_construction: 40 }, (d) => {
      expect(d.compression).toMatchObject({ type: "pq", num_sub_vectors: 8 });
      expect(d.hnsw).toMatchObject({ max_connections: 6, construction_ef: 40 });
    }],
    ["IVF_HNSW_SQ", { distance_type: "l2", num_partitions: 2, m: 5, ef_construction: 30 }, (d) => {
      expect(d.metric_type).toBe("L2");
      expect(d.compression).toMatchObject({ type: "sq" });
      expect(d.hnsw).toMatchObject({ max_connections: 5, construction_ef: 30 });
    }],
  ];
  for (const [type, params, check] of cases) {
    it(`${type}: parameters reach the engine and a vector search uses it; drop removes it`, async () => {
      const name = `v_${type.toLowerCase()}`;
      await build("vt", { column: "vec", index_type: type, name, ...params });
      const ix = (await list("vt")).find((i) => i.index_name === name);
      expect(ix).toMatchObject({ index_type: type, status: "Active", num_indexed_rows: N });
      check(JSON.parse(ix.index_details));
      const metric = (params.distance_type as string) ?? "l2";
      const p = await plan("vt", (t) => t.vectorSearch(unit(1)).column("vec").distanceType(metric).limit(5));
      expect(p).toContain(`ANNSubIndex: name=${name}`);
      expect(p).toContain(`uuid=${ix.index_uuid}`);
      const stats = await q.call("POST", `/v1/table/vt/index/${name}/stats`, {});
      expect(stats.json).toMatchObject({ index_type: type, distance_type: metric, num_indexed_rows: N, num_unindexed_rows: 0, num_indices: 1 });
      const drop = await q.call("POST", `/v1/table/vt/index/${name}/drop`, {});
      expect(drop.status).toBe(200);
      expect((await list("vt")).map((i) => i.index_name)).not.toContain(name);
      expect(await plan("vt", (t) => t.vectorSearch(unit(1)).column("vec").limit(5))).toContain("KNNVectorDistance");
    });
  }

  it("an IVF_PQ index on a nested vector field (default name from the path)", async () => {
    const done = await build("vt", { column: "s.v", index_type: "IVF_PQ", num_partitions: 2 });
    expect(done.properties.index_name).toBe("s.v_idx");
    const ix = (await list("vt")).find((i) => i.index_name === "s.v_idx");
    expect(ix.columns).toEqual(["s.v"]);
    expect(await plan("vt", (t) => t.vectorSearch(unit(2)).column("s.v").limit(5))).toContain("ANNSubIndex: name=s.v_idx");
  });

  it("create_scalar_index builds scalar indexes and refuses vector ones", async () => {
    await build("vt", { column: "cat", index_type: "bitmap", name: "cat_scalar" }, "create_scalar_index");
    expect((await list("vt")).find((i) => i.index_name === "cat_scalar")).toMatchObject({ index_type: "BITMAP" });
    const r = await create("vt", { column: "vec", index_type: "IVF_PQ" }, "create_scalar_index");
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^index_type: IVF_PQ is a vector index/);
  });
});

describe("index records and plans through Quiver", () => {
  it("a listed index carries its size, creation time, type URL, version and segments", async () => {
    const started = Date.now();
    await build("ep", { column: "id", index_type: "BTREE", name: "ep_id" });
    const ix = (await list("ep")).find((i) => i.index_name === "ep_id");
    expect(ix.size_bytes).toBeGreaterThan(0);
    expect(typeof ix.created_at).toBe("string");
    const at = Date.parse(ix.created_at);
    expect(Number.isNaN(at)).toBe(false);
    expect(at).toBeGreaterThanOrEqual(started - 1000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1000);
    expect(ix.type_url).toMatch(/BTree/i);
    expect(Number.isInteger(ix.index_version)).toBe(true);
    expect(ix.num_segments).toBeGreaterThanOrEqual(1);
  });

  const explain = async (query: Record<string, unknown>, verbose?: boolean) => {
    const r = await q.call("POST", "/v1/table/ep/explain_plan", { query, ...(verbose === undefined ? {} : { verbose }) });
    expect(r.status, r.text).toBe(200);
    expect(typeof r.json).toBe("string");
    return r.json as string;
  };

  it("explain_plan shows a BTREE filter, an IVF_PQ search and an FTS query using their indexes", async () => {
    expect(await explain({ filter: "cat = 'c1'", k: 10 })).not.toContain("ScalarIndexQuery");
    await build("ep", { column: "cat", index_type: "BTREE", name: "ep_cat" });
    const scalar = await explain({ filter: "cat = 'c1'", k: 10 });
    expect(scalar).toContain("ScalarIndexQuery");
    expect(scalar).toContain("@ep_cat(BTree)");

    const vq = { vector: { single_vector: unit(3) }, vector_column: "vec", k: 5 };
    expect(await explain(vq)).not.toContain("ANNSubIndex");
    await build("ep", { column: "vec", index_type: "IVF_PQ", name: "ep_vec", num_partitions: 2, num_sub_vectors: 4 });
    const ann = await explain(vq, true);
    expect(ann).toContain("ANNSubIndex: name=ep_vec");
    expect(ann).toContain(`uuid=${(await list("ep")).find((i) => i.index_name === "ep_vec").index_uuid}`);

    await build("ep", { column: "text", index_type: "FTS", name: "ep_text" });
    const fts = await explain({ full_text_query: { string_query: { query: "lazy", columns: ["text"] } }, k: 5 });
    expect(fts).toContain("MatchQuery");
    expect(fts).toContain("column=text");
  });
});

describe("rows added after a build", () => {
  it("show as unindexed in list and stats", async () => {
    await build("vt", { column: "id", index_type: "BTREE" });
    const t = await openIndexTable(q.dataDir, "vt");
    const { indexRows } = await import("./helpers/index-data.js");
    const { makeArrowTable } = await import("@lancedb/lancedb");
    const { indexSchema } = await import("./helpers/index-data.js");
    await t.add(makeArrowTable(indexRows(25, 32, N), { schema: indexSchema(32) }));
    // Another process wrote: Quiver sees it within its consistency interval (1 s).
    await new Promise((r) => setTimeout(r, 1100));
    expect((await list("vt")).find((i) => i.index_name === "id_idx")).toMatchObject({ num_indexed_rows: N, num_unindexed_rows: 25 });
    const s = await q.call("POST", "/v1/table/vt/index/id_idx/stats", {});
    expect(s.json).toMatchObject({ index_type: "BTREE", num_indexed_rows: N, num_unindexed_rows: 25 });
  });
});

describe("a build that fails", () => {
  it("is Failed with the engine's message, and nothing is listed", async () => {
    const r = await create("errs", { column: "vec", index_type: "IVF_PQ", name: "too_many", num_partitions: 1000 });
    expect(r.status).toBe(200);
    const done = await settle(q, r.json.transaction_id);
    expect(done.status).toBe("Failed");
    expect(done.properties.error_message).toMatch(/KMeans cannot train 1000 centroids with 300 vectors/);
    expect(done.properties.error_message).not.toMatch(/\.rs:\d+/);
    expect((await list("errs")).map((i) => i.index_name)).not.toContain("too_many");
  });
});

describe("create_index validation (nothing is built)", () => {
  const bad: [string, string, Record<string, unknown>, number, number, RegExp][] = [
    ["unknown table", "nope", { column: "id", index_type: "BTREE" }, 404, 4, /"nope"/],
    ["unknown namespace", "nons$t", { column: "id", index_type: "BTREE" }, 404, 1, /"nons"/],
    ["unknown column", "errs", { column: "nope", index_type: "BTREE" }, 404, 12, /column "nope" not found in table "errs"/],
    ["unknown nested column", "errs", { column: "s.nope", index_type: "BTREE" }, 404, 12, /"s.nope"/],
    ["bad field path", "errs", { column: "s..x", index_type: "BTREE" }, 400, 13, /empty segment/],
    ["empty column", "errs", { column: "", index_type: "BTREE" }, 400, 13, /^column:/],
    ["unknown index type", "errs", { column: "id", index_type: "SUPER" }, 400, 13, /^index_type: unknown index type "SUPER"/],
    ["vector index on a string", "errs", { column: "text", index_type: "IVF_PQ" }, 400, 13, /IVF_PQ index cannot be built on column "text" of type Utf8/],
    ["FTS on an integer", "errs", { column: "id", index_type: "FTS" }, 400, 13, /FTS index cannot be built on column "id"/],
    ["BITMAP on a float", "errs", { column: "f", index_type: "BITMAP" }, 400, 13, /BITMAP index cannot be built on column "f"/],
    ["LABEL_LIST on a string", "errs", { column: "text", index_type: "LABEL_LIST" }, 400, 13, /LABEL_LIST/],
    ["BTREE on a struct", "errs", { column: "s", index_type: "BTREE" }, 400, 13, /column "s" of type Struct/],
    ["unknown FTS language (would abort the engine)", "errs", { column: "text", index_type: "FTS", language: "Klingon" }, 400, 13, /^language: unknown language "Klingon"/],
    ["unknown tokenizer", "errs", { column: "text", index_type: "FTS", base_tokenizer: "bogus" }, 400, 13, /^base_tokenizer:/],
    ["negative max_token_length", "errs", { column: "text", index_type: "FTS", max_token_length: -1 }, 400, 13, /^max_token_length:/],
    ["unknown distance type", "errs", { column: "vec", index_type: "IVF_PQ", distance_type: "manhattan" }, 400, 13, /^distance_type:/],
    ["hamming on float vectors (would panic)", "errs", { column: "vec", index_type: "IVF_FLAT", distance_type: "hamming" }, 400, 13, /^distance_type:/],
    ["num_partitions 0 (would panic)", "errs", { column: "vec", index_type: "IVF_PQ", num_partitions: 0 }, 400, 13, /^num_partitions:/],
    ["max_iterations 0 (would panic)", "errs", { column: "vec", index_type: "IVF_PQ", max_iterations: 0 }, 400, 13, /^max_iterations:/],
    ["num_bits 5 for PQ", "errs", { column: "vec", index_type: "IVF_PQ", num_bits: 5 }, 400, 13, /^num_bits: must be 4 or 8/],
    ["sub-vectors not dividing the dimension", "errs", { column: "vec", index_type: "IVF_PQ", num_sub_vectors: 5 }, 400, 13, /^num_sub_vectors: must divide the vector dimension 32/],
    ["HNSW m below 4", "errs", { column: "vec", index_type: "IVF_HNSW_SQ", m: 2 }, 400, 13, /^m: must be at least 4/],
    ["a parameter of another index type", "errs", { column: "id", index_type: "BTREE", num_sub_vectors: 4 }, 400, 13, /^num_sub_vectors: not a parameter of BTREE/],
    ["FTS option on a vector index", "errs", { column: "vec", index_type: "IVF_PQ", stem: true }, 400, 13, /^stem: not a parameter of IVF_PQ/],
    ["target_partition_size", "errs", { column: "vec", index_type: "IVF_PQ", target_partition_size: 100 }, 400, 13, /^target_partition_size:/],
    ["a name with a slash", "errs", { column: "id", index_type: "BTREE", name: "a/b" }, 400, 13, /^name:/],
  ];
  for (const [what, table, body, status, code, detail] of bad) {
    it(`${what} → ${status} code ${code}`, async () => {
      const before = await q.call("POST", "/v1/table/errs/index/list", {});
      const r = await create(table, body);
      expect(r.status, r.text).toBe(status);
      expect(r.json).toMatchObject({ status, code });
      expect(r.json.detail).toMatch(detail);
      expect(await q.call("POST", "/v1/table/errs/index/list", {})).toMatchObject({ json: before.json });
    });
  }

  it("a taken name is 409 code 7, whether the index is built or still being built", async () => {
    await build("errs", { column: "id", index_type: "BTREE", name: "taken" });
    const r = await create("errs", { column: "cat", index_type: "BITMAP", name: "taken" });
    expect(r.status).toBe(409);
    expect(r.json).toMatchObject({ code: 7 });
    expect(r.json.detail).toBe('index "taken" (BTREE on "id") already exists in table "errs"; send "replace": true to replace it');
    // Default name: a second index on the same column needs its own name.
    await build("errs", { column: "cat", index_type: "BTREE" });
    const again = await create("errs", { column: "cat", index_type: "BITMAP" });
    expect(again.status).toBe(409);
    expect(again.json.detail).toContain('"cat_idx"');
    // Two creates of one name at once: exactly one is accepted.
    const both = await Promise.all([1, 2].map(() => create("errs", { column: "f", index_type: "BTREE", name: "racy" })));
    expect(both.map((b) => b.status).sort()).toEqual([200, 409]);
    await settle(q, both.find((b) => b.status === 200)!.json.transaction_id);
    expect((await list("errs")).filter((i) => i.index_name === "racy").length).toBe(1);
  });

  it("the server survived every rejected request (no engine abort)", async () => {
    expect((await q.call("POST", "/v1/table/errs/index/list", {})).status).toBe(200);
  });

  it("a read-only key may list but not create", async () => {
    expect((await q.call("POST", "/v1/table/errs/index/list", {}, { "x-api-key": READ_KEY })).status).toBe(200);
    const r = await q.call("POST", "/v1/table/errs/create_index", { column: "id", index_type: "BTREE", name: "ro" }, { "x-api-key": READ_KEY });
    expect(r.status).toBe(403);
  });
});

describe("list, stats and drop errors", () => {
  it("stats and drop of a missing index are 404 code 6", async () => {
    const s = await q.call("POST", "/v1/table/errs/index/nope/stats", {});
    expect(s.status).toBe(404);
    expect(s.json).toMatchObject({ code: 6, detail: 'index "nope" not found in table "errs"' });
    const d = await q.call("POST", "/v1/table/errs/index/nope/drop", {});
    expect(d.status).toBe(404);
    expect(d.json.code).toBe(6);
  });

  it("list of a missing table is 404 code 4; an old version lists what it had", async () => {
    expect((await q.call("POST", "/v1/table/nope/index/list", {})).json.code).toBe(4);
    const old = await q.call("POST", "/v1/table/errs/index/list", { version: 1 });
    expect(old.status).toBe(200);
    expect(old.json.indexes).toEqual([]);
  });

  it("list pages by name", async () => {
    const all = (await list("t")).map((i) => i.index_name);
    expect(all.length).toBeGreaterThan(3);
    expect([...all].sort()).toEqual(all);
    const p1 = await q.call("POST", "/v1/table/t/index/list", { limit: 2 });
    expect(p1.json.indexes.map((i: any) => i.index_name)).toEqual(all.slice(0, 2));
    const p2 = await q.call("POST", "/v1/table/t/index/list", { limit: 100, page_token: p1.json.page_token });
    expect(p2.json.indexes.map((i: any) => i.index_name)).toEqual(all.slice(2));
    expect(p2.json.page_token).toBeNull();
  });
});
