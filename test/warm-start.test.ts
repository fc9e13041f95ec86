// A start that is ready only when warm: `/readyz` answers 503 `warming` until the serving indexes
// saved at the last shutdown (or those --warm-tables names) are loaded, with --warm-timeout-ms as
// its bound; and a saved index that survives maintenance's cleanup under writes (its version is
// pinned at the shutdown), so the restart loads it and brings it forward instead of rebuilding; and
// a start on an object store that does not answer yet, which waits not ready instead of exiting;
// and a saved index whose version a cleanup removed (a SIGKILL leaves no pin), built again.
import * as lancedb from "@lancedb/lancedb";
import type { Table as EsmTable } from "apache-arrow";
import { readdirSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { arrow } from "../src/engine/arrow.js";
import { batch, batches, queryVectors, rng, vectorSource } from "../bench/dataset.js";
import { fromIPC } from "./helpers/arrow.js";
import { sample } from "./helpers/metrics.js";
import { startAzurite } from "./helpers/azurite.js";
import { removeDir, startQuiver, tempDataDir, type Quiver } from "./helpers/quiver.js";
import { settle } from "./helpers/transactions.js";

const SMALL = { rows: 1200, dim: 8, rank: 3, seed: 5 };
const BIG = { rows: 20_000, dim: 32, rank: 4, seed: 7 };
const PATH = "x-quiver-search-path";
const ARGS = ["--workers", "1", "--auto-maintenance", "off", "--retain-versions-ms", "0", "--maintenance-max-versions", "2"];

const dirs: string[] = [];
afterAll(() => dirs.forEach(removeDir));

async function seeded(tables: [string, typeof SMALL][]): Promise<string> {
  const dir = tempDataDir();
  dirs.push(dir);
  const db = await lancedb.connectNamespace("dir", { root: dir });
  for (const [name, spec] of tables) {
    const t = await db.createTable(name, [...batches(spec, spec.rows)][0], []);
    await t.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }) });
  }
  return dir;
}

const metric = async (q: Quiver, name: string, labels: Record<string, string> = {}) => sample((await q.call("GET", "/metrics")).text, name, labels) ?? 0;
const post = (q: Quiver, table: string, op: string, body?: unknown) => q.call("POST", `/v1/table/${table}/${op}`, body);
const versions = async (q: Quiver, table: string) => ((await post(q, table, "version/list", {})).json.versions as { version: number }[]).map((v) => v.version);
const ipc = (t: import("apache-arrow").Table) => arrow.tableToIPC(t as never, "stream");
const rowsOf = (first: number, count: number) => ipc(batch({ ...SMALL, rows: count }, first, count, vectorSource({ ...SMALL, seed: SMALL.seed + first }), rng(first)) as never);

/** `/readyz` polled until 200; every answer before it. */
async function untilReady(q: Quiver, ms = 180_000): Promise<{ status: number; json: any }[]> {
  const seen: { status: number; json: any }[] = [];
  const end = Date.now() + ms;
  for (;;) {
    const r = await q.call("GET", "/readyz");
    seen.push({ status: r.status, json: r.json });
    if (r.status === 200) return seen;
    if (Date.now() > end) throw new Error(`not ready within ${ms} ms: ${JSON.stringify(seen.at(-1))}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

async function search(q: Quiver, table: string, v: number[]): Promise<{ t: EsmTable; path: string }> {
  const r = await post(q, table, "query", { k: 10, vector: { single_vector: v } });
  expect(r.status, r.text).toBe(200);
  return { t: fromIPC(r.bytes), path: r.headers.get(PATH) ?? "" };
}

async function exact(dir: string, table: string, v: number[]): Promise<EsmTable> {
  const t = await (await lancedb.connectNamespace("dir", { root: dir })).openTable(table, []);
  return (await t.vectorSearch(v).bypassVectorIndex().limit(10).toArrow()) as unknown as EsmTable;
}

const col = (t: EsmTable, n: string) => Array.from(t.getChild(n)!.toArray() as ArrayLike<unknown>);

describe("a restart after writes and cleanup past the saved version", () => {
  it("loads the saved serving index (not rebuilt), is ready only then, answers as LanceDB's exact search, and releases the pin", async () => {
    const dir = await seeded([["warm", SMALL]]);
    const v = queryVectors(SMALL, 4).map((x) => Array.from(x));
    let q = await startQuiver({ dataDir: dir, args: ARGS });
    try {
      for (let i = 0; i < 600 && (await search(q, "warm", v[0])).path !== "serving"; i++) await new Promise((r) => setTimeout(r, 50));
      expect((await search(q, "warm", v[0])).path).toBe("serving");
      const saved = (await versions(q, "warm")).at(-1)!;
      expect(await q.stop()).toBe(0);

      // Another run writes and cleans up: the version the index was saved at is kept, pinned.
      q = await startQuiver({ dataDir: dir, args: [...ARGS, "--serving", "off"] });
      expect(Object.keys((await post(q, "warm", "tags/list", {})).json.tags)).toEqual([expect.stringMatching(/^quiver-serving-/)]);
      for (let i = 0; i < 4; i++) expect((await post(q, "warm", "insert", rowsOf(10_000 + i * 10, 10))).status).toBe(200);
      expect((await post(q, "warm", "delete", { predicate: "id < 20" })).status).toBe(200);
      const job = await post(q, "warm", "optimize", {});
      expect(job.status, job.text).toBe(202);
      expect((await settle(q, job.json.job_id, 120_000)).status).toBe("Succeeded");
      const kept = await versions(q, "warm");
      expect(kept).toContain(saved);
      expect(Math.max(...kept)).toBeGreaterThan(saved + 5);
      expect(await q.stop()).toBe(0);

      q = await startQuiver({ dataDir: dir, args: ARGS });
      await untilReady(q);
      // Ready means the index is loaded and brought forward: the first search is the index's.
      for (const x of v) {
        const got = await search(q, "warm", x);
        expect(got.path).toBe("serving");
        const want = await exact(dir, "warm", x);
        expect(col(got.t, "id")).toEqual(col(want, "id"));
        (col(got.t, "_distance") as number[]).forEach((d, i) => expect(d).toBeCloseTo((col(want, "_distance") as number[])[i], 3));
      }
      expect(await metric(q, "quiver_serving_build_seconds_count", { loaded: "true" })).toBe(1);
      expect(await metric(q, "quiver_serving_build_seconds_count", { loaded: "false" })).toBe(0);
      expect(await metric(q, "quiver_warm_tables")).toBe(0);
      expect(await metric(q, "quiver_warm_timed_out")).toBe(0);
      // The pin is released once the index is forward: the next cleanup may remove the old version.
      expect(Object.keys((await post(q, "warm", "tags/list", {})).json.tags)).toEqual([]);
    } finally {
      await q.stop();
    }
  }, 600_000);
});

describe("a restart after a SIGKILL and a cleanup past the saved version", () => {
  it("builds the index again (the saved one answers at a version the table no longer holds), without reporting the file unreadable", async () => {
    const dir = await seeded([["killed", SMALL]]);
    const v = Array.from(queryVectors(SMALL, 1)[0]);
    const savedFiles = () => readdirSync(path.join(dir, ".quiver", "serving"), { withFileTypes: true }).filter((f) => f.name.endsWith(".qvx"));
    let q = await startQuiver({ dataDir: dir, args: ARGS });
    try {
      for (let i = 0; i < 600 && (await search(q, "killed", v)).path !== "serving"; i++) await new Promise((r) => setTimeout(r, 50));
      // Saved after its build; the kill leaves no pin on its version.
      for (let i = 0; i < 600 && savedFiles().length === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(savedFiles()).toHaveLength(1);
      const saved = (await versions(q, "killed")).at(-1)!;
      await q.kill();

      q = await startQuiver({ dataDir: dir, args: [...ARGS, "--serving", "off"] });
      for (let i = 0; i < 4; i++) expect((await post(q, "killed", "insert", rowsOf(10_000 + i * 10, 10))).status).toBe(200);
      const job = await post(q, "killed", "optimize", {});
      expect(job.status, job.text).toBe(202);
      expect((await settle(q, job.json.job_id, 120_000)).status).toBe("Succeeded");
      expect(await versions(q, "killed")).not.toContain(saved);
      expect(await q.stop()).toBe(0);

      q = await startQuiver({ dataDir: dir, args: ARGS });
      await untilReady(q);
      expect((await search(q, "killed", v)).path).toBe("serving");
      expect(await metric(q, "quiver_serving_build_seconds_count", { loaded: "false" })).toBe(1);
      expect(q.stderr()).not.toContain("the saved index could not be read");
    } finally {
      await q.stop();
    }
  }, 600_000);
});

describe("warming at start", () => {
  it("--warm-tables: /readyz answers 503 warming until the named table's index is built, then 200", async () => {
    const dir = await seeded([["big", BIG]]);
    const q = await startQuiver({ dataDir: dir, args: [...ARGS, "--warm-tables", "big,nosuch"] });
    try {
      const seen = await untilReady(q);
      expect(seen[0]).toEqual({ status: 503, json: { status: "not_ready", reason: "warming", tables: 1 } });
      expect((await search(q, "big", Array.from(queryVectors(BIG, 1)[0]))).path).toBe("serving");
      expect(await metric(q, "quiver_serving_build_seconds_count", { loaded: "false" })).toBe(1);
      expect(q.stderr()).toContain("--warm-tables names tables that do not exist");
    } finally {
      await q.stop();
    }
  }, 600_000);

  it("--warm-timeout-ms: past it the server is ready with tables still warming, and says so in /metrics", async () => {
    const dir = await seeded([["big", BIG]]);
    const q = await startQuiver({ dataDir: dir, args: [...ARGS, "--warm-tables", "big", "--warm-timeout-ms", "0"] });
    try {
      await untilReady(q, 30_000);
      expect(await metric(q, "quiver_warm_timed_out")).toBe(1);
      expect(await metric(q, "quiver_warm_tables")).toBeLessThanOrEqual(1);
      expect(q.stderr()).toContain("--warm-timeout-ms passed");
    } finally {
      await q.stop();
    }
  }, 600_000);
});

describe("a start on an object store that does not answer", () => {
  it("listens not ready (503 storage), logs each try, and becomes ready without a restart once the store answers", async () => {
    const az = await startAzurite();
    let q: Quiver | null = null;
    try {
      await az.createContainer("slow");
      az.pause();
      const storage = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
      q = await startQuiver({ dataUri: "az://slow/quiver", args: [...storage, "--storage-timeout-ms", "4000", "--workers", "1", "--auto-maintenance", "off"] });
      const r = await q.call("GET", "/readyz");
      expect(r.status).toBe(503);
      expect(r.json).toMatchObject({ status: "not_ready", reason: "storage", cause: expect.stringContaining("no answer within 4000 ms") });
      expect((await q.call("GET", "/healthz")).status).toBe(200);
      const table = await q.call("POST", "/v1/table/t/count_rows", {});
      expect(table.status).toBe(503);
      expect(table.json.detail).toMatch(/^starting: the data directory does not answer yet/);
      const tries = () => q!.stderr().split("\n").filter((l) => l.includes("the data directory does not answer")).length;
      for (let i = 0; i < 600 && tries() < 2; i++) await new Promise((res) => setTimeout(res, 50));
      expect(tries()).toBeGreaterThanOrEqual(2);
      expect(q.proc.exitCode).toBeNull();

      az.resume();
      await untilReady(q, 120_000);
      expect((await q.call("POST", "/v1/table/t/create", JSON.stringify([{ id: 1 }, { id: 2 }]), { "content-type": "application/json" })).status).toBe(200);
      expect((await q.call("POST", "/v1/table/t/count_rows", {})).json).toBe(2);
    } finally {
      az.resume();
      await q?.stop();
      if (q) removeDir(q.dataDir);
      await az.stop();
    }
  }, 300_000);
});
