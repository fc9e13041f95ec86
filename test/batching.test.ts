// Batched vector searches (src/engine/search-batcher.ts): concurrent compatible searches share one
// engine call, and every client still gets exactly the answer its own search gives when it runs
// alone. The server logs each batch at debug level, which is how these tests know batches formed.
import * as lancedb from "@lancedb/lancedb";
import type { Table as EsmTable } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { batches, queryVectors, rng } from "../bench/dataset.js";
import { fromIPC } from "./helpers/arrow.js";
import { sample } from "./helpers/metrics.js";
import { request, serverForFile, ADMIN_KEY, type Reply } from "./helpers/quiver.js";

const SPEC = { rows: 4000, dim: 32, rank: 6, seed: 11 };
const BATCH_MAX = 16;

const q = serverForFile(
  {
    // The engine's batching is what these tests check: the serving index would answer instead.
    // (and always batched: measuring batching against searches sent alone would take turns with it)
    args: ["--batch-max", String(BATCH_MAX), "--batch-slots", "1", "--serving", "off", "--batch-measure-ms", "0"],
    env: { QUIVER_LOG_LEVEL: "debug" },
    seed: async (dataDir) => {
      const db = await lancedb.connectNamespace("dir", { root: dataDir });
      await db.createNamespace(["ns1"]);
      const data = [...batches(SPEC, SPEC.rows)][0];
      const items = await db.createTable("items", data, ["ns1"]);
      await db.createTable("flat", data, ["ns1"]);
      await items.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 16, numSubVectors: 8 }) });
      await items.createIndex("text", { config: lancedb.Index.fts() });
    },
  },
  120_000,
);

const random = rng(5);
/** Random vectors from the table's distribution, and some from nowhere near it. */
const vectors = [
  ...queryVectors(SPEC, 150).map((v) => Array.from(v)),
  ...Array.from({ length: 50 }, () => Array.from({ length: SPEC.dim }, () => random() * 8 - 4)),
];

const send = (table: string, body: object, signal?: AbortSignal): Promise<Reply> =>
  signal
    ? fetch(`${q.url}/v1/table/ns1$${table}/query`, {
        method: "POST",
        headers: { "x-api-key": ADMIN_KEY, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal,
      }).then(async (r) => ({ status: r.status, headers: r.headers, text: "", bytes: new Uint8Array(await r.arrayBuffer()), json: undefined }))
    : request(`${q.url}/v1/table/ns1$${table}/query`, "POST", body, { "x-api-key": ADMIN_KEY });

const norm = (v: unknown): unknown => {
  if (typeof v === "bigint") return String(v);
  if (v !== null && typeof v === "object" && "toArray" in v) return Array.from((v as { toArray(): ArrayLike<unknown> }).toArray(), norm);
  return v;
};

/** Everything a client can see of an answer: column names and types, and every value, in order. */
function answer(r: Reply) {
  if (r.status !== 200) return { status: r.status, error: JSON.parse(Buffer.from(r.bytes).toString()).detail as string };
  const t: EsmTable = fromIPC(r.bytes);
  return {
    status: 200,
    fields: t.schema.fields.map((f) => `${f.name}: ${f.type}`),
    columns: t.schema.fields.map((_, i) => Array.from({ length: t.numRows }, (_, row) => norm(t.getChildAt(i)!.get(row)))),
  };
}

interface Case {
  table: string;
  body: object;
}

/** Each case sent alone, one after another: every search runs by itself (the pass-through path). */
async function sequential(cases: Case[]) {
  const out = [];
  for (const c of cases) out.push(answer(await send(c.table, c.body)));
  return out;
}

const concurrent = async (cases: Case[]) => (await Promise.all(cases.map((c) => send(c.table, c.body)))).map(answer);

/** Sizes (searches) of the batches the server logged after `mark` characters of its log. */
function batchSizes(mark: number): { searches: number; vectors: number }[] {
  return q
    .stderr()
    .slice(mark)
    .split("\n")
    .filter((l) => l.includes('"msg":"search batch"'))
    .map((l) => JSON.parse(l));
}

/**
 * An answer with the rows that tie at its last distance set aside: where several rows tie at the
 * k-th (quantised) distance, the engine's multi-vector call may keep another of them than a call
 * of one vector does, and rows of equal distance may come in either order. Every other row, every
 * column and the distances themselves must be the same.
 */
function untied(a: ReturnType<typeof answer>) {
  if (a.status !== 200) return a;
  const d = a.fields!.indexOf("_distance: Float32");
  if (d < 0) return a;
  const dist = a.columns![d] as number[];
  const rows = dist.map((_, r) => a.columns!.map((c) => c[r]));
  const key = (row: unknown[]) => JSON.stringify(row);
  const settled = rows.filter((row) => row[d] !== dist.at(-1)).map(key).sort();
  return { fields: a.fields, distances: dist, settled };
}

async function expectSameAsAlone(cases: Case[]) {
  const mark = q.stderr().length;
  const together = await concurrent(cases);
  const batched = batchSizes(mark);
  const alone = await sequential(cases);
  for (let i = 0; i < cases.length; i++) expect(untied(together[i]), JSON.stringify(cases[i].body).slice(0, 200)).toEqual(untied(alone[i]));
  return batched;
}

describe("batched vector searches", () => {
  it("answer, for 200 random vectors at once, row for row and value for value what each search answers alone (up to rows tied at the last distance)", async () => {
    const cases = vectors.map((v) => ({ table: "items", body: { vector: { single_vector: v }, k: 10, nprobes: 4 } }));
    const batched = await expectSameAsAlone(cases);
    expect(batched.length).toBeGreaterThan(0);
    expect(Math.max(...batched.map((b) => b.searches))).toBeGreaterThan(1);
    // The cap counts query vectors.
    expect(Math.max(...batched.map((b) => b.vectors))).toBeLessThanOrEqual(BATCH_MAX);
    const first = answer(await send("items", cases[0].body));
    expect(first.fields).toEqual(["id: Int32", "text: Utf8", "category: Utf8", "vector: FixedSizeList[32]<Float32>", "_distance: Float32"]);
  });

  it("show their batch sizes and waits in /metrics (quiver_batch_size, quiver_batch_wait_seconds)", async () => {
    const metric = async (name: string) => {
      const text = (await q.call("GET", "/metrics", undefined, { "x-api-key": ADMIN_KEY })).text;
      return sample(text, name) ?? NaN;
    };
    const [sizes, vectorsBefore, waits] = await Promise.all(["quiver_batch_size_count", "quiver_batch_size_sum", "quiver_batch_wait_seconds_count"].map(metric));
    const mark = q.stderr().length;
    const rs = await concurrent(vectors.slice(0, 64).map((v) => ({ table: "items", body: { vector: { single_vector: v }, k: 10, nprobes: 4 } })));
    expect(rs.every((r) => r.status === 200)).toBe(true);
    const batched = batchSizes(mark);
    // Every search counts once in the waits; each engine call once in the sizes, its vectors in their sum.
    expect((await metric("quiver_batch_wait_seconds_count")) - waits).toBe(64);
    const calls = (await metric("quiver_batch_size_count")) - sizes;
    expect(calls).toBeGreaterThanOrEqual(batched.length);
    expect(calls).toBeLessThan(64);
    expect((await metric("quiver_batch_size_sum")) - vectorsBefore).toBe(64);
  });

  it("keep every parameter of their own search: filters, projections, offsets, row ids, distance types, bounds, refinement", async () => {
    const shapes: Case[] = [
      { table: "items", body: { k: 5, filter: "category = 'beta'", columns: { column_names: ["id", "category"] }, with_row_id: true } },
      { table: "items", body: { k: 7, offset: 3, refine_factor: 2, nprobes: 8 } },
      { table: "items", body: { k: 4, filter: "id % 3 = 0", prefilter: false, columns: { column_aliases: { ident: "id" } } } },
      { table: "flat", body: { k: 6, distance_type: "cosine", columns: ["id", "text"] } },
      { table: "flat", body: { k: 20, lower_bound: 0, upper_bound: 40 } },
      { table: "flat", body: { k: 3, columns: { twice: "id * 2" } } },
      { table: "items", body: { k: 5, bypass_vector_index: true, columns: { column_names: ["id"] } } },
    ];
    // Interleaved, so each batch forms among neighbours it is not compatible with.
    const cases = vectors.slice(0, 30).flatMap((v) => shapes.map((s) => ({ table: s.table, body: { ...s.body, vector: { single_vector: v } } })));
    const batched = await expectSameAsAlone(cases);
    expect(Math.max(...batched.map((b) => b.searches))).toBeGreaterThan(1);
  });

  it("let clients' multi-vector searches join, each keeping its own query_index numbering", async () => {
    const cases: Case[] = vectors.slice(0, 60).map((v, i) => ({
      table: "items",
      body: i % 3 === 0 ? { vector: { multi_vector: [v, vectors[i + 100], vectors[i + 120]] }, k: 5 } : i % 3 === 1 ? { vector: [v], k: 5 } : { vector: v, k: 5 },
    }));
    const batched = await expectSameAsAlone(cases);
    expect(batched.some((b) => b.vectors > b.searches)).toBe(true);
    const multi = answer(await send("items", cases[0].body));
    expect(multi.fields![0]).toBe("query_index: Int32");
    expect(new Set(multi.columns![0])).toEqual(new Set([0, 1, 2]));
  });

  it("fail a wrong-dimension search alone: its neighbours' answers are untouched, its error is its own", async () => {
    const cases: Case[] = vectors.slice(0, 60).map((v, i) => ({
      table: "items",
      body: { vector: { single_vector: i % 5 === 0 ? v.slice(0, 8) : v }, k: 10 },
    }));
    const together = await concurrent(cases);
    const alone = await sequential(cases);
    together.forEach((a, i) => expect(untied(a)).toEqual(untied(alone[i])));
    const failed = together.filter((a) => a.status !== 200);
    expect(failed).toHaveLength(12);
    for (const f of failed) expect(f).toEqual({ status: 400, error: expect.stringMatching(/vector: .*dimension 8/) });
  });

  it("fall back to running the members alone when the engine refuses a batch", async () => {
    // Wrong-dimension vectors only share batches with each other; the engine refuses such a batch.
    const mark = q.stderr().length;
    const cases: Case[] = vectors.slice(0, 40).map((v) => ({ table: "items", body: { vector: { single_vector: v.slice(0, 8) }, k: 10 } }));
    const together = await concurrent(cases);
    expect(q.stderr().slice(mark)).toContain("search batch refused");
    for (const a of together) expect(a).toEqual({ status: 400, error: expect.stringMatching(/vector: .*dimension 8/) });
  });

  it("answers the clients that stay when others cancel mid-batch", async () => {
    const mark = q.stderr().length;
    const cases: Case[] = vectors.slice(0, 120).map((v) => ({ table: "flat", body: { vector: { single_vector: v }, k: 50, bypass_vector_index: true } }));
    const controllers = cases.map(() => new AbortController());
    const pending = cases.map((c, i) => send(c.table, c.body, controllers[i].signal).then(answer, (e: Error) => e.name));
    // Every third client leaves at staggered moments: some while waiting, some while their batch runs.
    controllers.forEach((c, i) => i % 3 === 0 && setTimeout(() => c.abort(), 1 + (i % 40)));
    const got = await Promise.all(pending);
    const alone = await sequential(cases);
    got.forEach((a, i) => {
      if (i % 3 === 0) expect([alone[i], "AbortError"]).toContainEqual(a);
      else expect(a).toEqual(alone[i]);
    });
    expect(got.filter((a) => a === "AbortError").length).toBeGreaterThan(0);
    expect(q.stderr().slice(mark)).not.toMatch(/"level":"error"/);
    expect(answer(await send("flat", cases[1].body))).toEqual(alone[1]);
  });

  it("leave full-text queries, hybrid queries and k = 0 to run alone", async () => {
    const mark = q.stderr().length;
    const words = ["apple", "river", "nebula", "piano", "summit"];
    const cases: Case[] = vectors.slice(0, 30).map((v, i) => ({
      table: "items",
      body:
        i % 3 === 0
          ? { vector: { single_vector: v }, k: 0 }
          : i % 3 === 1
            ? { full_text_query: { string_query: { query: words[i % 5] } }, k: 5 }
            : { vector: { single_vector: v }, full_text_query: { string_query: { query: words[i % 5] } }, k: 5 },
    }));
    const together = await concurrent(cases);
    const alone = await sequential(cases);
    // Rows that tie on score may come in either order from a full-text or hybrid search: compare as sets.
    const asSet = (a: ReturnType<typeof answer>) => ({ ...a, columns: undefined, rows: a.columns && a.columns[0].map((_, r) => JSON.stringify(a.columns!.map((c) => c[r]))).sort() });
    together.forEach((a, i) => expect(asSet(a)).toEqual(asSet(alone[i])));
    for (const a of together.filter((_, i) => i % 3 === 0)) expect(a.columns).toEqual([[], [], [], [], []]);
    expect(together.filter((_, i) => i % 3 === 1).every((a) => a.status === 200 && a.columns![0].length > 0)).toBe(true);
    expect(batchSizes(mark)).toEqual([]);
  });
});

describe("--batch-max 0", () => {
  const off = serverForFile({
    args: ["--batch-max", "0"],
    env: { QUIVER_LOG_LEVEL: "debug" },
    seed: async (dataDir) => {
      const db = await lancedb.connectNamespace("dir", { root: dataDir });
      await db.createTable("flat", [...batches(SPEC, 500)][0]);
    },
  });

  it("runs every search alone", async () => {
    const rs = await Promise.all(vectors.slice(0, 30).map((v) => request(`${off.url}/v1/table/flat/query`, "POST", { vector: v, k: 3 }, { "x-api-key": ADMIN_KEY })));
    for (const r of rs) expect(r.status).toBe(200);
    expect(off.stderr()).not.toContain('"msg":"search batch"');
  });
});
