// Two servers (replicas) on one data directory, each with its own state directory, over HTTP: the
// answers they give stay right when both write and read the same tables.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromIPC, toStream } from "./helpers/arrow.js";
import { removeDir, startQuiver, tempDataDir, type Quiver } from "./helpers/quiver.js";

const dataDir = tempDataDir();
const stateDirs: string[] = [];
let a: Quiver;
let b: Quiver;

/** A replica on the shared data directory with a private state directory of its own. */
function replica(args: string[] = []) {
  const state = mkdtempSync(path.join(tmpdir(), "quiver-state-"));
  stateDirs.push(state);
  return startQuiver({ dataDir, args: ["--state-dir", state, ...args] });
}

beforeAll(async () => {
  // B's cached handles would stay stale for a minute: only the version token makes it re-check.
  [a, b] = await Promise.all([replica(), replica(["--consistency-interval-ms", "60000"])]);
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  for (const d of [dataDir, ...stateDirs]) removeDir(d);
});

const rows = (ids: number[]) => toStream(new Table({ id: vectorFromArray(ids, new Int32()) }));

async function idsAt(q: Quiver, table: string, version?: number, headers: Record<string, string> = {}): Promise<Set<number>> {
  const r = await q.call("POST", `/v1/table/${table}/query`, { k: 100_000, ...(version ? { version } : {}), columns: { column_names: ["id"] } }, headers);
  expect(r.status, r.text).toBe(200);
  return new Set(Array.from(fromIPC(r.bytes).getChild("id")!.toArray() as Int32Array));
}

describe("writes through two replicas", () => {
  it("8 concurrent inserters over A and B: every row kept, each answered version its own commit's", async () => {
    expect((await a.call("POST", "/v1/table/split/create", rows([0]))).status).toBe(200);
    const answers: { id: number; via: Quiver; version: number }[] = [];
    let next = 1;
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        const via = w % 2 ? b : a;
        for (let i = 0; i < 12; i++) {
          const id = next++;
          const r = await via.call("POST", "/v1/table/split/insert", rows([id]));
          expect(r.status, r.text).toBe(200);
          answers.push({ id, via, version: r.json.version });
        }
      }),
    );
    // Read through A at the newest answered version: without the token A may answer from a handle
    // up to its consistency interval behind B's last commits.
    const newest = Math.max(...answers.map((w) => w.version));
    const all = await idsAt(a, "split", undefined, { "x-quiver-min-version": String(newest) });
    for (const w of answers) expect(all.has(w.id), `row ${w.id}`).toBe(true);
    // One version answered to writes through both replicas: no commit of one server holds another's rows.
    const by = new Map<number, Set<Quiver>>();
    for (const w of answers) by.set(w.version, (by.get(w.version) ?? new Set()).add(w.via));
    const shared = [...by].filter(([, vias]) => vias.size > 1).map(([v]) => v);
    expect(shared, "versions answered by both replicas").toEqual([]);
    // Each answered version holds its write, and the one before does not: the write's own commit.
    for (const w of answers) {
      expect((await idsAt(a, "split", w.version)).has(w.id), `row ${w.id} at its v${w.version}`).toBe(true);
      expect((await idsAt(a, "split", w.version - 1)).has(w.id), `row ${w.id} before its v${w.version}`).toBe(false);
    }
  });
});

describe("read your writes across replicas: x-quiver-min-version", () => {
  it("a write through A is read through B when the read carries the write's version", async () => {
    expect((await a.call("POST", "/v1/table/ryw/create", rows([1]))).status).toBe(200);
    // B opens and caches the table at its first version.
    expect(await idsAt(b, "ryw")).toEqual(new Set([1]));
    const w = await a.call("POST", "/v1/table/ryw/insert", rows([2]));
    expect(w.status, w.text).toBe(200);
    // Without the token B answers from its cached handle, within its consistency interval.
    expect((await idsAt(b, "ryw")).has(2)).toBe(false);
    const token = { "x-quiver-min-version": String(w.json.version) };
    expect(await idsAt(b, "ryw", undefined, token)).toEqual(new Set([1, 2]));
    const count = await b.call("POST", "/v1/table/ryw/count_rows", {}, token);
    expect(count.json).toBe(2);
  });

  it("a token past the table's latest version, or not a version, is 400 naming the header", async () => {
    const far = await b.call("POST", "/v1/table/ryw/query", { k: 1 }, { "x-quiver-min-version": "999999" });
    expect(far.status).toBe(400);
    expect(far.json.error).toMatch(/^x-quiver-min-version: .*no version 999999/);
    const junk = await b.call("POST", "/v1/table/ryw/query", { k: 1 }, { "x-quiver-min-version": "soon" });
    expect(junk.status).toBe(400);
    expect(junk.json.error).toMatch(/^x-quiver-min-version:/);
  });
});

describe("Idempotency-Key across replicas", () => {
  const insert = (via: Quiver, ids: number[], key: string) => via.call("POST", "/v1/table/idem/insert", rows(ids), { "idempotency-key": key });
  // Read through A at least at `version`: the insert may have been applied by B.
  const count = async (version = 1) => (await a.call("POST", "/v1/table/idem/count_rows", {}, { "x-quiver-min-version": String(version) })).json as number;

  it("a retry landing on the other replica replays the first answer", async () => {
    expect((await a.call("POST", "/v1/table/idem/create", rows([0]))).status).toBe(200);
    const first = await insert(a, [1], "k-retry");
    expect(first.status).toBe(200);
    const retry = await insert(b, [1], "k-retry");
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.json).toEqual(first.json);
    expect(await count(first.json.version)).toBe(2);
    expect((await insert(b, [9], "k-retry")).status).toBe(409);
  });

  it("concurrent first attempts on both replicas apply once; every answer is the one applied", async () => {
    for (let round = 0; round < 4; round++) {
      const before = await count();
      const replies = await Promise.all([a, b, a, b].map((via) => insert(via, [100 + round], `k-race-${round}`)));
      for (const r of replies) expect(r.status, r.text).toBe(200);
      expect(new Set(replies.map((r) => r.json.version)).size, `round ${round}`).toBe(1);
      expect(await count(replies[0].json.version)).toBe(before + 1);
    }
  });
});

describe("orphan reclaim across replicas", () => {
  it("a directory another replica claimed is not reclaimed, whatever its age", async () => {
    // A table directory B is creating right now: claimed in the shared store, no catalog row yet.
    // C reclaims unnamed directories of any age: only the claim keeps it.
    const c = await replica(["--orphan-min-age-ms", "0"]);
    try {
      const big = toStream(new Table({ id: vectorFromArray(Array.from({ length: 300_000 }, (_, i) => i), new Int32()) }));
      const creating = b.call("POST", "/v1/table/slow/create", big);
      const reclaims: string[][] = [];
      for (let i = 0; i < 40; i++) {
        await new Promise((r) => setTimeout(r, 25));
        const r = await c.call("POST", "/v1/admin/reclaim", {});
        expect(r.status, r.text).toBe(200);
        reclaims.push(r.json.removed ?? []);
      }
      expect((await creating).status).toBe(200);
      expect(reclaims.flat().filter((n) => n.startsWith("slow"))).toEqual([]);
      expect((await a.call("POST", "/v1/table/slow/count_rows", {})).json).toBe(300_000);
    } finally {
      await c.stop();
    }
  });
});
