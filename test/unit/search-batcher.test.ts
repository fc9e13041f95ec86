// When the search batcher sends waiting searches to the engine (src/engine/search-batcher.ts), in
// process on a real LanceDB table: searches submitted in one tick meet a known state, so which
// engine calls form is deterministic (read off quiver_batch_size in the metrics registry).
import * as lancedb from "@lancedb/lancedb";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { batches, queryVectors } from "../../bench/dataset.js";
import { createSearchBatcher } from "../../src/engine/search-batcher.js";
import { renderMetrics } from "../../src/metrics.js";
import { querySpec } from "../../src/operations/query-spec.js";

const SPEC = { rows: 500, dim: 16, rank: 4, seed: 3 };
const vectors = queryVectors(SPEC, 20).map((v) => Array.from(v));
// Unindexed, so that each vector is a scan and an engine call lasts many timer ticks.
const SLOW = { rows: 40_000, dim: 64, rank: 8, seed: 4 };
const slowVectors = queryVectors(SLOW, 20).map((v) => Array.from(v));
let dir: string;
let table: lancedb.Table;
let slow: lancedb.Table;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "quiver-batcher-"));
  const db = await lancedb.connect(dir);
  table = await db.createTable("t", [...batches(SPEC, SPEC.rows)][0]);
  slow = await db.createTable("slow", [...batches(SLOW, SLOW.rows)][0]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Engine calls of batchable searches so far: how many, how many vectors, how many of one vector,
 * and how many started after the engine had none running (quiver_batch_idle_seconds).
 */
async function calls() {
  const text = await renderMetrics();
  const num = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
  return {
    count: num(/^quiver_batch_size_count (\S+)$/m),
    vectors: num(/^quiver_batch_size_sum (\S+)$/m),
    ofOne: num(/^quiver_batch_size_bucket\{le="1"\} (\S+)$/m),
    afterIdle: num(/^quiver_batch_idle_seconds_count (\S+)$/m),
    idleSeconds: num(/^quiver_batch_idle_seconds_sum (\S+)$/m),
    waited: num(/^quiver_batch_wait_seconds_sum (\S+)$/m),
  };
}

async function since(before: Awaited<ReturnType<typeof calls>>) {
  const now = await calls();
  return { count: now.count - before.count, vectors: now.vectors - before.vectors, ofOne: now.ofOne - before.ofOne, afterIdle: now.afterIdle - before.afterIdle };
}

/** Seconds the searches waited for an engine call since `before`, summed. */
const waitedSince = async (before: Awaited<ReturnType<typeof calls>>) => (await calls()).waited - before.waited;

const search = (v: number[] | number[][]) => querySpec({ vector: v, k: 5 } as never);
/** A deadline no search here comes near. */
const bound = () => ({ deadline: { at: performance.now() + 60_000, ms: 60_000 }, signal: null });

describe("search batcher", () => {
  it("runs a lone search at once, alone, and records the engine's idle time before each but the first", async () => {
    const b = createSearchBatcher({ batchMax: 64, slots: 2 });
    const before = await calls();
    for (const v of vectors.slice(0, 3)) {
      await b.run(table, search(v), "t", bound());
      // Past the engine call's end (its slot frees just after the answer resolves).
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await since(before)).toEqual({ count: 3, vectors: 3, ofOne: 3, afterIdle: 2 });
  });

  it("counts searches sent alone while batching is off as engine calls: the time they ran is not recorded as idle at the next batch", async () => {
    let on = true;
    const b = createSearchBatcher({ batchMax: 64, slots: 2, choice: { batching: () => on, done: () => undefined } });
    await b.run(slow, search(slowVectors[0]), "slow", bound());
    await new Promise((r) => setTimeout(r, 5));
    const before = await calls();
    on = false;
    const t0 = performance.now();
    for (const v of slowVectors.slice(1, 6)) await b.run(slow, search(v), "slow", bound());
    const aloneMs = performance.now() - t0;
    on = true;
    await b.run(slow, search(slowVectors[6]), "slow", bound());
    // Only the moments between one call's end and the next one's start were idle.
    const idleMs = ((await calls()).idleSeconds - before.idleSeconds) * 1000;
    expect(idleMs).toBeLessThan(aloneMs / 4);
  });

  it("while a batch runs, keeps the searches arriving waiting until they are a fair share, rounded down, then sends them while it runs", async () => {
    const b = createSearchBatcher({ batchMax: 64, slots: 2 });
    const before = await calls();
    // A client's 10-vector search takes the engine; 9 single searches arrive while it runs. A
    // straggler sent alone to the free slot would cost a whole engine call: they leave together
    // once they are half of the 19 vectors in flight rounded down (a batch of 9), while the 10
    // still run. Rounded up (10), they waited for the engine to finish: with an odd number in
    // flight the engine ran one call at a time.
    const runs = [b.run(table, search(vectors.slice(0, 10)), "t", bound()), ...vectors.slice(10, 19).map((v) => b.run(table, search(v), "t", bound()))];
    await Promise.all(runs);
    expect(await since(before)).toEqual({ count: 2, vectors: 19, ofOne: 0, afterIdle: 0 });
  });

  it("sends a ready batch in its turn, half an engine call after the running one starts, not in step with it", async () => {
    const b = createSearchBatcher({ batchMax: 64, slots: 2 });
    await slow.vectorSearch(slowVectors[0]).limit(5).toArrow();
    const before = await calls();
    const t0 = performance.now();
    await b.run(slow, search(slowVectors.slice(0, 10)), "slow", bound());
    const callMs = performance.now() - t0;
    await new Promise((r) => setImmediate(r));
    // Just answered: a client's 10-vector search runs at once, and 9 single searches are a fair
    // share of the 19 in flight. Without turns they left in the same tick and both calls ran in
    // step; in turn, they leave half an engine call later (or when the 10 end, if sooner).
    const t1 = performance.now();
    const tenMs = b.run(slow, search(slowVectors.slice(10, 20)), "slow", bound()).then(() => performance.now() - t1);
    await Promise.all([tenMs, ...slowVectors.slice(0, 9).map((v) => b.run(slow, search(v), "slow", bound()))]);
    const { count, vectors: n, ofOne } = await since(before);
    expect({ count, vectors: n, ofOne }).toEqual({ count: 3, vectors: 29, ofOne: 0 });
    const meanWaitMs = ((await waitedSince(before)) * 1000) / 9;
    expect(meanWaitMs).toBeGreaterThan(Math.min(callMs, await tenMs) / 4);
  });

  it("with one slot, the searches that waited leave together when the engine frees (after no idle time to speak of)", async () => {
    const b = createSearchBatcher({ batchMax: 64, slots: 1 });
    const before = await calls();
    await Promise.all(vectors.slice(0, 6).map((v) => b.run(table, search(v), "t", bound())));
    expect(await since(before)).toEqual({ count: 2, vectors: 6, ofOne: 1, afterIdle: 1 });
  });

  /** A batcher that has just answered an 8-vector search: past the answer's microtasks (the slot frees in one), before any timer can fire. */
  async function justAnswered8() {
    const b = createSearchBatcher({ batchMax: 64, slots: 2 });
    await b.run(table, search(vectors.slice(0, 8)), "t", bound());
    await new Promise((r) => setImmediate(r));
    return { b, before: await calls() };
  }

  it("waits for the searches it just answered, so their clients' next searches leave as two fair batches, not a straggler first", async () => {
    const { b, before } = await justAnswered8();
    // The 8 clients come back: the first finds the engine idle, yet 7 searches are on their way,
    // so it waits for them; they leave as 4 + 4 (the fair share of 8 with two slots), not 1 + 7.
    await Promise.all(vectors.slice(0, 8).map((v) => b.run(table, search(v), "t", bound())));
    const { count, vectors: n, ofOne } = await since(before);
    expect({ count, vectors: n, ofOne }).toEqual({ count: 2, vectors: 8, ofOne: 0 });
  });

  it("sends a waiting search once the searches it waited for fail to come back within half an engine call", async () => {
    const { b, before } = await justAnswered8();
    await b.run(table, search(vectors[0]), "t", bound());
    expect(await since(before)).toEqual({ count: 1, vectors: 1, ofOne: 1, afterIdle: 1 });
  });
});
