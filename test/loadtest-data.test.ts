// The load tester's data, in process: vector files as benchmark sets ship them, the exact ground
// truth against a plain sort, datasets with held-out queries and their stored ground truth, merging
// the runs of several generators (the merged HDR histogram is the histogram of all the answers),
// noise figures, the client-limit diagnosis, thresholds on a sweep, and --compare's noise column.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { rng, vectorSource } from "../bench/dataset.js";
import { loadDataset, type DatasetOptions } from "../loadtest/datasets.js";
import { groundTruth, recallAt, type Distance } from "../loadtest/ground-truth.js";
import { comparePage } from "../loadtest/html.js";
import { mergeHistograms, mergeRuns } from "../loadtest/merge.js";
import { bootstrapMean, interval, overlaps } from "../loadtest/noise.js";
import { decodeHistogram, percentileCurve, recorder, summarize } from "../loadtest/recorder.js";
import type { Report, RunResult, SweepPoint } from "../loadtest/report.js";
import type { ServerPoint } from "../loadtest/server-metrics.js";
import { evaluate, parseThresholds } from "../loadtest/thresholds.js";
import { readIvecs, readVectorFile, row, writeFvecs, writeIvecs, type Vectors } from "../loadtest/vector-files.js";
import { progressText } from "../loadtest/progress.js";
import { identicalPoints } from "../loadtest/sweep.js";
import { clientLimit } from "../loadtest/warnings.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-loadtest-data-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function randomVectors(count: number, dim: number, seed: number): Vectors {
  const r = rng(seed);
  return { dim, count, data: Float32Array.from({ length: count * dim }, () => r() * 2 - 1) };
}

describe("vector files", () => {
  it("reads and writes .fvecs, .bvecs and .ivecs as the SIFT and GIST sets ship them, naming a bad file", () => {
    const v = randomVectors(5, 3, 1);
    const f = path.join(dir, "v.fvecs");
    writeFvecs(f, v);
    expect(readFileSync(f).length).toBe(5 * (4 + 3 * 4));
    expect(readVectorFile(f)).toEqual(v);
    // .bvecs: a 4-byte dimension, then one byte a value.
    const b = Buffer.alloc(2 * (4 + 3));
    [[1, 2, 3], [250, 0, 7]].forEach((vals, i) => (b.writeInt32LE(3, i * 7), vals.forEach((x, j) => (b[i * 7 + 4 + j] = x))));
    writeFileSync(path.join(dir, "v.bvecs"), b);
    expect(Array.from(readVectorFile(path.join(dir, "v.bvecs")).data)).toEqual([1, 2, 3, 250, 0, 7]);
    const ids = Int32Array.from([3, 1, 4, 1, 5, 9]);
    writeIvecs(path.join(dir, "gt.ivecs"), 3, 2, ids);
    expect(readIvecs(path.join(dir, "gt.ivecs"))).toEqual({ k: 3, count: 2, ids });
    writeFileSync(path.join(dir, "bad.fvecs"), Buffer.alloc(10));
    expect(() => readVectorFile(path.join(dir, "bad.fvecs"))).toThrow(/bad\.fvecs: not a vecs file/);
  });
});

describe("ground truth", () => {
  const naive = (base: Vectors, q: Float32Array, distance: Distance) =>
    Array.from({ length: base.count }, (_, i) => {
      const b = row(base, i);
      let dot = 0;
      let l2 = 0;
      let nb = 0;
      let nq = 0;
      for (let d = 0; d < base.dim; d++) {
        dot += b[d] * q[d];
        l2 += (b[d] - q[d]) ** 2;
        nb += b[d] ** 2;
        nq += q[d] ** 2;
      }
      return { i, d: distance === "l2" ? l2 : distance === "dot" ? -dot : 1 - dot / Math.sqrt(nb * nq) };
    })
      .sort((a, b) => a.d - b.d || a.i - b.i)
      .map((x) => x.i);

  it("equals a plain sort of every distance, for l2, cosine and dot", async () => {
    const base = randomVectors(300, 7, 2);
    const queries = randomVectors(6, 7, 3);
    for (const distance of ["l2", "cosine", "dot"] as const) {
      const t = await groundTruth(base, queries, 10, distance);
      expect(t.k).toBe(10);
      for (let q = 0; q < 6; q++) expect(Array.from(t.ids.subarray(q * 10, q * 10 + 10)), distance).toEqual(naive(base, row(queries, q), distance).slice(0, 10));
    }
  });

  it("recall@k is the share of the true top k found", () => {
    const truth = { k: 4, count: 1, ids: Int32Array.from([7, 3, 9, 1]) };
    expect(recallAt(truth, 0, new Set([3, 7, 100]), 2)).toBe(1);
    expect(recallAt(truth, 0, new Set([3, 7, 100, 200]), 4)).toBe(0.5);
  });
});

describe("datasets", () => {
  const opts = (o: Partial<DatasetOptions>): DatasetOptions => ({ dataset: "lowrank-2k", dim: 16, queryCount: 50, distance: "l2", datasetDir: path.join(dir, "sets"), ...o });

  it("a generated set is the bench's vectors, its queries held out (never a row), its ground truth computed once and stored", async () => {
    const lines: string[] = [];
    const d = await loadDataset(opts({}), (l) => lines.push(l));
    expect([d.base.count, d.base.dim, d.queries.count, d.truth.k, d.truth.count, d.truth_source]).toEqual([2000, 16, 50, 100, 50, "computed"]);
    // The rows are the bench generator's first 2,000 draws (the bench's table for the same size).
    const next = vectorSource({ dim: 16, rank: 16, seed: 42 });
    for (let i = 0; i < 3; i++) expect(row(d.base, i)).toEqual(next());
    const rows = new Set(Array.from({ length: d.base.count }, (_, i) => row(d.base, i).join()));
    for (let q = 0; q < d.queries.count; q++) expect(rows.has(row(d.queries, q).join())).toBe(false);
    expect(lines.join()).toMatch(/computing the ground truth of 50 queries over 2000 rows/);
    const again = await loadDataset(opts({}), () => {});
    expect(again.truth_source).toBe("stored");
    expect(again.truth.ids).toEqual(d.truth.ids);
    expect(readVectorFile(path.join(d.dir, "queries.fvecs"))).toEqual(d.queries);
    // Another distance is another ground truth.
    expect((await loadDataset(opts({ distance: "cosine" }), () => {})).truth_source).toBe("computed");
  });

  it("a file dataset holds out its last rows as queries, or takes a query file and the set's own ground truth", async () => {
    const all = randomVectors(220, 8, 5);
    const file = path.join(dir, "base.fvecs");
    writeFvecs(file, all);
    const d = await loadDataset(opts({ dataset: file, queryCount: 20 }), () => {});
    expect([d.base.count, d.queries.count]).toEqual([200, 20]);
    expect(row(d.queries, 0)).toEqual(row(all, 200));
    const qfile = path.join(dir, "query.fvecs");
    writeFvecs(qfile, randomVectors(5, 8, 6));
    const gt = path.join(dir, "gt100.ivecs");
    writeIvecs(gt, 3, 5, Int32Array.from({ length: 15 }, (_, i) => i));
    const withFiles = await loadDataset(opts({ dataset: file, queries: qfile, groundTruth: gt }), () => {});
    expect([withFiles.base.count, withFiles.queries.count, withFiles.truth_source, withFiles.truth.k]).toEqual([220, 5, "file", 3]);
    writeIvecs(gt, 3, 5, Int32Array.from({ length: 15 }, (_, i) => 1000 + i));
    await expect(loadDataset(opts({ dataset: file, queries: qfile, groundTruth: gt }), () => {})).rejects.toThrow(/gt100\.ivecs: a row id outside the dataset's 220 rows/);
    await expect(loadDataset(opts({ dataset: path.join(dir, "nope.fvecs") }), () => {})).rejects.toThrow(/--dataset: expected lowrank-<rows>, gaussian-<rows>/);
  });
});

describe("several generators", () => {
  it("the merged HDR histogram equals the histogram of every answer, per run and per second; counts and rates add", () => {
    const r = rng(9);
    const parts = [recorder(), recorder()];
    const union = recorder();
    for (let i = 0; i < 4000; i++) {
      // Latencies from 0.2 ms to ~4 s, heavy-tailed, spread over two seconds.
      const us = Math.round(200 * Math.exp(r() * 9.9));
      const which = parts[i % 2];
      const status = i % 97 ? 200 : 503;
      for (const rec of [which, union]) rec.record("vector", status, undefined, us, us / 2);
      if (i === 2000) for (const rec of [...parts, union]) rec.roll(1);
    }
    const runs = parts.map((p) => ({ ...p.done(2), sent: 2000, unsent: 0, late: 0, max_backlog: 3, connections: 8, target_rate: 500 }) as RunResult);
    const merged = mergeRuns(runs);
    const all = union.done(2);
    const h = decodeHistogram(merged.hdr);
    const u = decodeHistogram(all.hdr);
    expect(h.totalCount).toBe(u.totalCount);
    for (const p of [0, 1, 10, 50, 90, 99, 99.9, 99.99, 100]) expect(h.getValueAtPercentile(p), `p${p}`).toBe(u.getValueAtPercentile(p));
    expect([h.minNonZeroValue, h.maxValue, h.mean]).toEqual([u.minNonZeroValue, u.maxValue, u.mean]);
    // Bucket for bucket: the stored histograms are the same bytes.
    expect(merged.hdr).toBe(all.hdr);
    expect(merged.service_hdr).toBe(all.service_hdr);
    expect(merged.workloads.vector.hdr).toBe(all.workloads.vector.hdr);
    expect(merged.timeline.map((p) => p.hdr)).toEqual(all.timeline.map((p) => p.hdr));
    // Figures equal the union's as its histogram stores them (a stored histogram keeps a value to 3 digits).
    expect(merged.latency_ms).toEqual(summarize(u));
    expect(merged.percentiles).toEqual(percentileCurve(u));
    expect(merged.latency_ms.p99).toBe(all.latency_ms.p99);
    expect([merged.requests, merged.errors, merged.by_status]).toEqual([all.requests, all.errors, all.by_status]);
    expect(merged.timeline.map((p) => p.requests)).toEqual(all.timeline.map((p) => p.requests));
    expect(merged.throughput).toBeCloseTo(runs[0].throughput + runs[1].throughput, 9);
    expect([merged.target_rate, merged.connections, merged.sent]).toEqual([1000, 16, 4000]);
    expect(mergeHistograms([]).totalCount).toBe(0);
  });
});

describe("noise, warnings, thresholds", () => {
  it("medians, ranges and a bootstrap interval of a mean", () => {
    expect(interval([3, 1, 2, 10])).toEqual({ median: 2.5, min: 1, max: 10, n: 4 });
    expect(overlaps(interval([1, 2]), interval([2, 3]))).toBe(true);
    expect(overlaps(interval([1, 2]), interval([2.5, 3]))).toBe(false);
    const xs = Array.from({ length: 200 }, (_, i) => (i % 10) / 10);
    const [lo, hi] = bootstrapMean(xs);
    expect(lo).toBeLessThan(0.45);
    expect(hi).toBeGreaterThan(0.45);
    expect(hi - lo).toBeLessThan(0.15);
    expect(bootstrapMean(xs)).toEqual([lo, hi]);
  });

  it("the client-limit warning names its cause and fix: the server had room, the connections were all busy, or the harness's CPU", () => {
    const open = (latency: number, service: number) =>
      ({ target_rate: 1200, connections: 16, unsent: 0, max_backlog: 2856, latency_ms: { p50: latency }, service_ms: { p50: service } }) as unknown as RunResult;
    const client = { cpu_seconds: 3, cpu_cores: 0.3, cpu_us_per_request: 50, event_loop_p99_ms: 2, event_loop_max_ms: 5 };
    const server = (max: number) => ({ points: [{ in_flight_max: max } as ServerPoint, { in_flight_max: max - 3 } as ServerPoint], requests_counted: null, error: null });
    expect(clientLimit(open(1542, 5.3), client, server(15))).toEqual([expect.stringMatching(/server never had more than 15 requests in flight of the 16 .*--generators 2/)]);
    expect(clientLimit(open(1542, 5.3), client, server(16))).toEqual([expect.stringMatching(/connections were all busy; raise --connections/)]);
    expect(clientLimit(open(1542, 5.3), client, null)).toEqual([expect.stringMatching(/p50 1542 ms\) while each request took p50 5\.3 ms once sent/)]);
    // The wait was the server's (service time near the latency): no client limit.
    expect(clientLimit(open(400, 390), client, null)).toEqual([]);
    expect(clientLimit(open(5, 5), { ...client, cpu_cores: 1.9 }, null, 2)).toEqual([expect.stringMatching(/CPU was saturated \(0\.95 cores a process.*--generators 4/)]);
  });

  it("a sweep passes its thresholds at its first point meeting them all, and names it", () => {
    const point = (label: string, qps: number, p99: number, recall: number) =>
      ({ label, qps: interval([qps]), p50_ms: interval([1]), p99_ms: interval([p99]), service_p99_ms: interval([p99]), requests: 100, errors: 0, recall: { mean: recall } }) as unknown as SweepPoint;
    const r = { sweep: { points: [point("nprobes=5", 900, 8, 0.8), point("nprobes=20", 500, 12, 0.96), point("nprobes=40", 300, 30, 0.99)] } } as unknown as Report;
    expect(evaluate(parseThresholds("p99<20ms,recall>0.95"), r)).toEqual({ pass: true, point: "nprobes=20", checks: [{ expr: "p99<20ms", value: 12, pass: true }, { expr: "recall>0.95", value: 0.96, pass: true }] });
    const fail = evaluate(parseThresholds("p99<10ms,recall>0.95"), r);
    expect([fail.pass, fail.point, fail.checks.map((c) => c.pass)]).toEqual([false, "nprobes=5", [true, false]]);
  });

  it("sweep points whose recall searches got the same rows in the same order are flagged as one setting", () => {
    const point = (label: string, answers: string, mean = 0.9) => ({ label, params: { [label.split("=")[0]]: Number(label.split("=")[1]) }, recall: { answers, mean } }) as unknown as SweepPoint;
    const w = identicalPoints([point("nprobes=5", "a"), point("nprobes=10", "a"), point("nprobes=20", "a"), point("nprobes=40", "b"), point("ef=8", "c")]);
    expect(w).toEqual([expect.stringMatching(/^sweep points nprobes=5, nprobes=10, nprobes=20 answered every recall query with the same rows in the same order: the server does not honour the swept setting there .*noise, not settings$/)]);
    expect(identicalPoints([point("ef=64", "a"), point("ef=128", "b")])).toEqual([]);
  });

  it("the progress line never counts past its total: past the plan it says so", () => {
    const at = (elapsed: number, total: number) => progressText({ label: "[sweep ef=64]", elapsed, total, rate: 120, p50: 5, p99: 40, errors: 0 });
    expect(at(10.2, 48)).toBe("[sweep ef=64] 10/48 s  120 req/s  p50 5.00 ms  p99 40.0 ms  errors 0  38 s left");
    expect(at(48.4, 48)).toMatch(/ 48\/48 s .* 0 s left$/);
    expect(at(52, 48)).toBe("[sweep ef=64] 52 s, past the 48 s planned  120 req/s  p50 5.00 ms  p99 40.0 ms  errors 0  finishing");
  });

  it("identical answers that are all exact say the narrowest setting is already exact, not that the setting is ignored", () => {
    const point = (label: string, ef: number) => ({ label, params: { ef }, recall: { answers: "same", mean: 1 } }) as unknown as SweepPoint;
    const [w, ...more] = identicalPoints([point("ef=128", 128), point("ef=64", 64), point("ef=256", 256), point("ef=512", 512)]);
    expect(more).toEqual([]);
    expect(w).toMatch(/^sweep points ef=128, ef=64, ef=256, ef=512 answered every recall query with the same rows in the same order, all exact \(recall 1\.0\): the narrowest setting, ef=64, is already exact here/);
    expect(w).not.toMatch(/does not honour/);
  });

  it("recall in a page keeps its 4 decimals: 0.9998 is not shown as 1", () => {
    const point = { label: "ef=256", qps: interval([100]), p99_ms: interval([5]), recall: { mean: 0.9998, ci95: [0.9995, 1] } } as unknown as SweepPoint;
    const sweep = { run: null, sweep: { points: [point], rounds: 1, axes: [] }, repeats: null, options: { workloads: [{ kind: "vector" }], url: "u", table: "t", accept: "arrow", repeat: 1, sweep: [] }, machine: { loadavg: [] }, versions: {}, started_at: "", mode: "closed", server: null } as unknown as Report;
    expect(comparePage(sweep, sweep, ["a.json", "b.json"])).toMatch(/ef=256<\/td><td>recall<\/td><td>0\.9998 \(0\.9995–1\)<\/td>/);
  });

  it("--compare says whether the runs' ranges tell a figure apart, and that single runs cannot", () => {
    const report = (throughputs: number[], p99s: number[]) => {
      const run = { throughput: throughputs[0], errors: 0, latency_ms: { p50: 1, p95: 1, p99: p99s[0], p999: 1, max: 1 }, service_ms: { p50: 1, p99: 1 }, percentiles: [], timeline: [], seconds: 1 };
      const repeats = throughputs.length > 1 ? { rows: [], shown: 0, intervals: { throughput: interval(throughputs), p99: interval(p99s) } } : null;
      return { run, repeats, options: { workloads: [{ kind: "vector" }], url: "u", table: "t", accept: "arrow", repeat: throughputs.length }, machine: { loadavg: [] }, versions: {}, started_at: "", mode: "closed", server: null } as unknown as Report;
    };
    const page = comparePage(report([550, 1400, 900], [5, 6, 7]), report([600, 1000, 1300], [9, 9.5, 10]), ["a.json", "b.json"]);
    expect(page).toMatch(/successful answers \/ s<\/td>.*?within the noise \(ranges overlap\)/);
    expect(page).toMatch(/p99 ms<\/td>.*?differs \(ranges apart\)/);
    expect(comparePage(report([550], [5]), report([600], [9]), ["a.json", "b.json"])).toMatch(/p99 ms<\/td>.*?one run each: no noise estimate/);
  });

  it("--compare of two sweeps compares them point by point with their rounds' ranges, and warns when a sweep meets a plain run", () => {
    const point = (label: string, qps: number[], p99: number[], recall: number, ci95: [number, number]) =>
      ({ label, qps: interval(qps), p99_ms: interval(p99), recall: { mean: recall, ci95 } }) as unknown as SweepPoint;
    const sweep = (points: SweepPoint[]) =>
      ({ run: null, sweep: { points, rounds: 3, axes: [] }, repeats: null, options: { workloads: [{ kind: "vector" }], url: "u", table: "t", accept: "arrow", repeat: 3, sweep: [] }, machine: { loadavg: [] }, versions: {}, started_at: "", mode: "closed", server: null }) as unknown as Report;
    const a = sweep([point("ef=64", [900, 1000, 1100], [5, 6, 7], 0.95, [0.94, 0.96]), point("ef=128", [600, 650, 700], [8, 9, 10], 0.99, [0.985, 0.995])]);
    const b = sweep([point("ef=64", [1500, 1600, 1700], [5.5, 6, 6.5], 0.951, [0.94, 0.962]), point("ef=128", [640, 680, 720], [3, 3.5, 4], 0.99, [0.985, 0.995])]);
    const page = comparePage(a, b, ["a.json", "b.json"]);
    expect(page).toContain("Sweep points (ratio = B / A)");
    expect(page).not.toContain("one run each");
    expect(page).toMatch(/ef=64<\/td><td>searches \/ s<\/td><td>1,?000 \(900–1,?100\)<\/td><td>1,?600 \(1,?500–1,?700\)<\/td><td>1\.6×<\/td><td>differs \(ranges apart\)/);
    expect(page).toMatch(/ef=128<\/td><td>searches \/ s<\/td>.*?within the noise \(ranges overlap\)/);
    expect(page).toMatch(/ef=128<\/td><td>p99 ms<\/td>.*?differs \(ranges apart\)/);
    expect(page).toMatch(/ef=64<\/td><td>recall<\/td>.*?within the noise \(95% intervals overlap\)/);
    expect(page).toContain("Recall against throughput");
    const plain = { ...a, sweep: null, run: { throughput: 1, errors: 0, latency_ms: { p50: 1, p95: 1, p99: 1, p999: 1, max: 1 }, service_ms: { p50: 1, p99: 1 }, percentiles: [], timeline: [], seconds: 1 } } as unknown as Report;
    expect(comparePage(a, plain, ["a.json", "b.json"])).toContain("A is a sweep and B is a closed loop: their figures do not measure the same thing");
  });
});
