// `--serving-memory-mb` bounds all serving indexes together, growth included, and a tenant (the
// top-level namespace) has a share of it that another tenant's arrival reclaims. Before, each index
// could grow to the room there was when it was built: a write key's four small tables, grown by
// inserts, held 3.3 times a 32 MB budget, and another tenant's new table was refused its index
// (`reason=memory`). Here, with a 4 MB budget: tenant a's tables grow past it and the indexes'
// bytes in /metrics never exceed it (a table that grows past what is left goes back to LanceDB);
// tenant b's new table then gets its index, a's least recently searched table going back to
// LanceDB (`reason=evicted`); every search answers LanceDB's rows throughout.
import * as lancedb from "@lancedb/lancedb";
import type { Table as EsmTable } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { arrow } from "../../src/engine/arrow.js";
import { batch, queryVectors, rng, vectorSource } from "../../bench/dataset.js";
import { estimate } from "../../dist/src/serving/table-index.js";
import { fromIPC } from "../helpers/arrow.js";
import { sample } from "../helpers/metrics.js";
import { DEFAULT_KEYS, serverForFile, type FileServer } from "../helpers/quiver.js";

const SPEC = { rows: 1000, dim: 32, rank: 4, seed: 3 };
const BUDGET = 4 * 2 ** 20;
const A_KEY = "test-tenant-a-key";
const B_KEY = "test-tenant-b-key";
const PATH = "x-quiver-search-path";
const v = Array.from(queryVectors(SPEC, 1)[0]);

const rows = (first: number, count: number, seed: number) => batch({ ...SPEC, rows: count }, first, count, vectorSource({ ...SPEC, seed: SPEC.seed + seed }), rng(seed));

/** A server with a 4 MB budget and tables of 1,000 rows, each with a vector index, in namespaces a and b. */
function server(tables: string[]): FileServer & { root: string } {
  const q = serverForFile(
    {
      args: ["--serving-memory-mb", String(BUDGET / 2 ** 20)],
      env: { QUIVER_API_KEYS: `${DEFAULT_KEYS},${A_KEY}:write:a,${B_KEY}:write:b` },
      seed: async (dir) => {
        (q as { root: string }).root = dir;
        const db = await lancedb.connectNamespace("dir", { root: dir });
        await db.createNamespace(["a"]);
        await db.createNamespace(["b"]);
        for (const [i, id] of tables.entries()) {
          const [ns, name] = id.split("$");
          const t = await db.createTable(name, rows(0, SPEC.rows, i), [ns]);
          await t.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }) });
        }
      },
    },
    180_000,
  );
  return q as FileServer & { root: string };
}

const keyOf = (table: string) => (table.startsWith("a$") ? A_KEY : B_KEY);

/** Every row measured, by whichever path answers; the path and the answer. */
async function search(q: FileServer, table: string, version?: number): Promise<{ path: string; t: EsmTable }> {
  const headers: Record<string, string> = { "x-api-key": keyOf(table), ...(version ? { "x-quiver-min-version": String(version) } : {}) };
  const r = await q.call("POST", `/v1/table/${table}/query`, { vector: { single_vector: v }, k: 10, bypass_vector_index: true }, headers);
  expect(r.status, r.text).toBe(200);
  return { path: r.headers.get(PATH) ?? "", t: fromIPC(r.bytes) };
}

/** The same search, by LanceDB itself, at the table's latest version. */
async function exact(root: string, table: string): Promise<EsmTable> {
  const [ns, name] = table.split("$");
  const t = await (await lancedb.connectNamespace("dir", { root })).openTable(name, [ns]);
  return (await t.vectorSearch(v).bypassVectorIndex().limit(10).toArrow()) as unknown as EsmTable;
}

const col = (t: EsmTable, n: string) => Array.from(t.getChild(n)!.toArray() as ArrayLike<number>);

/** A search answers LanceDB's rows and distances; its path. */
async function checked(q: FileServer & { root: string }, table: string, version?: number): Promise<string> {
  const got = await search(q, table, version);
  const want = await exact(q.root, table);
  expect(col(got.t, "id")).toEqual(col(want, "id"));
  const d = col(want, "_distance");
  col(got.t, "_distance").forEach((x, i) => expect(x).toBeCloseTo(d[i], 3));
  return got.path;
}

async function served(q: FileServer & { root: string }, table: string): Promise<void> {
  let path = "";
  for (let i = 0; i < 600 && (path = await checked(q, table)) !== "serving"; i++) await new Promise((r) => setTimeout(r, 100));
  expect(path, table).toBe("serving");
}

/** What all serving indexes hold, as /metrics reports it. */
async function indexBytes(q: FileServer): Promise<number> {
  const scrape = (await q.call("GET", "/metrics")).text;
  return scrape.split("\n").filter((l) => l.startsWith("quiver_serving_index_bytes{")).reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

const metric = async (q: FileServer, name: string, labels: Record<string, string>) => sample((await q.call("GET", "/metrics")).text, name, labels) ?? 0;

/** Insert 1,000 new rows with a tenant's key; the version it made. */
let next = 10_000;
async function grow(q: FileServer, table: string): Promise<number> {
  const body = arrow.tableToIPC(rows(next, 1000, next) as never, "stream");
  next += 1000;
  const r = await q.call("POST", `/v1/table/${table}/insert`, body, { "x-api-key": keyOf(table) });
  expect(r.status, r.text).toBe(200);
  return r.json.version as number;
}

describe("a tenant's tables growing past the budget", () => {
  const tables = ["a$t1", "a$t2", "a$t3", "a$t4"];
  const q = server(tables);

  it("never hold more than --serving-memory-mb together: a table that grows past what is left goes back to LanceDB", async () => {
    for (const t of tables) await served(q, t);
    expect(await indexBytes(q)).toBeLessThanOrEqual(BUDGET);
    const paths = new Map<string, string>();
    for (let round = 0; round < 6; round++) {
      for (const t of tables) {
        const version = await grow(q, t);
        expect(await indexBytes(q)).toBeLessThanOrEqual(BUDGET);
        paths.set(t, await checked(q, t, version));
      }
    }
    // 24,000 rows were added: past the budget, some tables are LanceDB's again, and say why.
    expect([...paths.values()]).toContain("engine; reason=memory");
    expect(await metric(q, "quiver_serving_evictions_total", { cause: "growth" })).toBeGreaterThan(0);
    expect(await metric(q, "quiver_serving_tables", { state: "memory" })).toBeGreaterThan(0);
  }, 300_000);
});

describe("another tenant's new table", () => {
  const q = server(["a$t1", "a$t2", "a$t3", "b$t"]);

  it("takes its room back from the least recently searched tables of the tenant past its share", async () => {
    const own = ["a$t1", "a$t2", "a$t3"];
    for (const t of own) await served(q, t);
    // Tenant a fills the budget until b's index would not fit in what is left.
    const need = estimate(SPEC.rows, SPEC.dim, 0);
    for (let i = 0; i < 30 && BUDGET - (await indexBytes(q)) >= need; i++) {
      const t = own[i % own.length];
      expect(await checked(q, t, await grow(q, t))).toBe("serving");
      expect(await indexBytes(q)).toBeLessThanOrEqual(BUDGET);
    }
    expect(BUDGET - (await indexBytes(q))).toBeLessThan(need);
    // a$t2 is searched least recently, a$t1 last.
    for (const t of ["a$t2", "a$t3", "a$t1"]) expect(await checked(q, t)).toBe("serving");
    await served(q, "b$t");
    expect(await indexBytes(q)).toBeLessThanOrEqual(BUDGET);
    expect(await checked(q, "a$t2")).toBe("engine; reason=evicted");
    expect(await checked(q, "a$t1")).toBe("serving");
    expect(await metric(q, "quiver_serving_evictions_total", { cause: "share" })).toBeGreaterThan(0);
    expect(await metric(q, "quiver_serving_tables", { state: "evicted" })).toBeGreaterThan(0);
    expect(await checked(q, "b$t")).toBe("serving");
  }, 300_000);
});
