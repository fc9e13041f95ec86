// Candidate serving-index libraries on the bench's data, one thread each: recall@10 against exact
// search, searches a second, build time and memory. The libraries measured against the project's own
// kernel are not dependencies; install them in a folder of their own and name it:
//   (cd /tmp/libs && npm install usearch@2.26.2 hnswlib-node@3.0.0)   (hnswlib-node compiles with node-gyp)
//   npm run build && node bench/libraries.mjs --modules /tmp/libs [--rows 100000] [--clusters 64] [--queries 500] [--ef 64]
// Runs each library in a child process of its own (so memory figures are its own), for the low-rank
// data and for clustered Gaussian data.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import path from "node:path";

const { values } = parseArgs({
  strict: false,
  options: {
    rows: { type: "string", default: "100000" },
    clusters: { type: "string", default: "64" },
    queries: { type: "string", default: "500" },
    ef: { type: "string", default: "64" },
    library: { type: "string" },
    modules: { type: "string", default: "." },
    data: { type: "string" },
  },
});
const ROWS = Number(values.rows);
const Q = Number(values.queries);
const EF = Number(values.ef);
const M = 16;
const EF_CONSTRUCTION = 128;
const DIM = 128;

async function one(library, data) {
  const { vectorSource, queryVectors } = await import("../dist/bench/dataset.js");
  const spec = { dim: DIM, rank: 16, seed: 42, ...(data === "gaussian" ? { clusters: Number(values.clusters) } : {}) };
  const src = vectorSource(spec);
  const flat = new Float32Array(ROWS * DIM);
  for (let i = 0; i < ROWS; i++) flat.set(src(), i * DIM);
  const qs = queryVectors(spec, Q);
  // Exact answers by brute force with the project's kernel (every row measured).
  const g = await import("../dist/src/serving/graph.js");
  const exactIx = g.graphOf(g.createGraphMemory({ dim: DIM, metric: "l2", m: M, efConstruction: EF_CONSTRUCTION, columnBytes: 0, maxBytes: 2 ** 31 }));
  for (let i = 0; i < ROWS; i++) g.newSlot(exactIx, flat, i * DIM, BigInt(i), 1);
  const base = { version: 1, bits: null, lower: -Infinity, upper: Infinity, passing: 0, postfilter: false };
  const truth = qs.map((q) => new Set(g.search(exactIx, 1, q, { ...base, k: 10, ef: 10, exact: true }).slots));
  const rss0 = process.memoryUsage().rss;
  const require = createRequire(path.resolve(String(values.modules), "node_modules", "x.js"));
  let build, search, bytes;
  if (library === "own") {
    const ix = g.graphOf(g.createGraphMemory({ dim: DIM, metric: "l2", m: M, efConstruction: EF_CONSTRUCTION, columnBytes: 0, maxBytes: 2 ** 31 }));
    build = () => {
      for (let i = 0; i < ROWS; i++) {
        const s = g.newSlot(ix, flat, i * DIM, BigInt(i), 1);
        g.assignLevel(ix, s);
      }
      for (let s = 0; s < ROWS; s++) g.link(ix, s, 0);
    };
    search = (q) => Array.from(g.search(ix, 1, q, { ...base, k: 10, ef: EF, exact: false }).slots);
    bytes = () => g.usedBytes(ix);
  } else if (library === "usearch") {
    const u = require("usearch");
    const ix = new u.Index({ dimensions: DIM, metric: "l2sq", quantization: "f32", connectivity: M, expansion_add: EF_CONSTRUCTION, expansion_search: EF, multi: false });
    build = () => ix.add(BigUint64Array.from({ length: ROWS }, (_, i) => BigInt(i)), flat, 1);
    search = (q) => Array.from(ix.search(q, 10, 1).keys, Number);
    bytes = () => NaN;
  } else {
    const h = require("hnswlib-node");
    const ix = new h.HierarchicalNSW("l2", DIM);
    ix.initIndex(ROWS, M, EF_CONSTRUCTION, 100);
    build = () => {
      for (let i = 0; i < ROWS; i++) ix.addPoint(Array.from(flat.subarray(i * DIM, (i + 1) * DIM)), i);
    };
    search = (q) => {
      ix.setEf(EF);
      return ix.searchKnn(Array.from(q), 10).neighbors;
    };
    bytes = () => NaN;
  }
  let t = performance.now();
  build();
  const buildS = (performance.now() - t) / 1000;
  const rss = (process.memoryUsage().rss - rss0) / 2 ** 20;
  let hits = 0;
  qs.forEach((q, i) => search(q).forEach((id) => truth[i].has(id) && hits++));
  // The faster of two timed passes (the machine may be shared).
  const passes = [0, 1].map(() => {
    const t0 = performance.now();
    for (const q of qs) search(q);
    return (performance.now() - t0) / Q;
  });
  const perSearch = Math.min(...passes);
  console.log(
    JSON.stringify({ library, data, buildS: +buildS.toFixed(1), searchesPerS: Math.round(1000 / perSearch), recall: +(hits / (10 * Q)).toFixed(3), rssMiB: Math.round(rss), indexMiB: Number.isNaN(bytes()) ? null : +(bytes() / 2 ** 20).toFixed(1) }),
  );
}

if (values.library) {
  await one(String(values.library), String(values.data));
} else {
  const me = fileURLToPath(import.meta.url);
  for (const data of ["lowrank", "gaussian"]) {
    for (const library of ["own", "usearch", "hnswlib"]) {
      const r = spawnSync(process.execPath, [me, "--library", library, "--data", data, ...process.argv.slice(2)], { encoding: "utf8" });
      process.stdout.write(r.stdout || `${library} ${data}: failed: ${(r.stderr || "").split("\n").slice(-4).join(" ")}\n`);
    }
  }
}
