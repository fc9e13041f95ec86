// The serving graph's repair pass: a live row that no walk from the entry point reaches (no link
// list names it) is not found even by a search for its own vector; `connect` links it from a node
// the walk reaches, into a free place of that node's list or in place of a link whose node other
// lists name too, after which the search finds it and nothing else becomes unreachable.
import { expect, it } from "vitest";
// From dist/: the kernel is dist/native/vectors.wasm.
import { assignLevel, connect, createGraphMemory, graphOf, link, newSlot, reachable, recordAt, retire, search, type Graph } from "../../dist/src/serving/graph.js";

const DIM = 4;

/** A graph of `n` linked slots of random vectors, built on one thread. */
function built(n: number, m: number): { g: Graph; vectors: Float32Array } {
  const g = graphOf(createGraphMemory({ dim: DIM, metric: "l2", m, efConstruction: 32, columnBytes: 0, maxBytes: 64 << 20 }));
  let seed = 7;
  const vectors = Float32Array.from({ length: n * DIM }, () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % 10_000) / 10_000);
  for (let i = 0; i < n; i++) {
    const s = newSlot(g, vectors, i * DIM, BigInt(i), 1);
    assignLevel(g, s);
    link(g, s, 0);
  }
  return { g, vectors };
}

/** Take `slot` out of every level-0 list that names it (as pruning can). */
function orphan(g: Graph, slot: number, n: number): void {
  for (let s = 0; s < n; s++) {
    const w = (recordAt(g, s) + g.linksAt) >> 2;
    const kept = Array.from(g.i32.subarray(w + 1, w + 1 + g.i32[w])).filter((x) => x !== slot);
    g.i32.set(kept, w + 1);
    g.i32[w] = kept.length;
  }
}

const own = (g: Graph, vectors: Float32Array, slot: number) =>
  search(g, 1, vectors.subarray(slot * DIM, (slot + 1) * DIM), { k: 1, ef: 16, exact: false, passing: 0, postfilter: false, version: 1, bits: null, lower: -Infinity, upper: Infinity }).slots[0];

const unreached = (g: Graph) => reachable(g).reduce((n, x) => n + (1 - x), 0);

/** Fill every level-0 list to its length with its own links again (a link twice reaches nothing new). */
function fill(g: Graph, n: number): void {
  for (let s = 0; s < n; s++) {
    const w = (recordAt(g, s) + g.linksAt) >> 2;
    const links = Array.from(g.i32.subarray(w + 1, w + 1 + g.i32[w]));
    if (links.length === 0) continue;
    g.i32.set(Array.from({ length: g.m0 }, (_, j) => links[j % links.length]), w + 1);
    g.i32[w] = g.m0;
  }
}

const linkCount = (g: Graph, n: number) => Array.from({ length: n }, (_, s) => g.i32[(recordAt(g, s) + g.linksAt) >> 2]).reduce((a, b) => a + b, 0);

for (const full of [false, true]) {
  it(`a row no walk reaches is linked and then found by its own vector (${full ? "every list full: a link replaced" : "room in its neighbours' lists"})`, () => {
    const N = 3000;
    const { g, vectors } = built(N, full ? 2 : 16);
    const levelOf = (s: number) => g.i32[((recordAt(g, s) + g.metaAt) >> 2) + 0];
    const lost = [101, 1234, 2999].filter((s) => levelOf(s) === 0);
    expect(lost.length).toBeGreaterThan(0);
    const before = unreached(g);
    for (const s of lost) orphan(g, s, N);
    expect(unreached(g)).toBeGreaterThanOrEqual(before + lost.length);
    for (const s of lost) expect(own(g, vectors, s)).not.toBe(s);
    // A tombstone is never answered: it is left as it is.
    const dead = 2000;
    orphan(g, dead, N);
    retire(g, dead, 1);
    if (full) fill(g, N);
    const links = linkCount(g, N);
    expect(connect(g, 0)).toBeGreaterThanOrEqual(lost.length);
    if (full) expect(linkCount(g, N)).toBe(links);
    const seen = reachable(g);
    for (let s = 0; s < N; s++) if (s !== dead) expect(seen[s], `slot ${s}`).toBe(1);
    expect(seen[dead]).toBe(0);
    for (const s of lost) expect(own(g, vectors, s)).toBe(s);
    expect(connect(g, 0)).toBe(0);
  });
}
