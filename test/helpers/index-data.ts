// Tables for index tests, written with LanceDB directly (explicit schema: vectors are
// fixed-size float32 lists, `s` a struct holding a scalar and a vector).
import { createRequire } from "node:module";
import * as lancedb from "@lancedb/lancedb";

// LanceDB's own (CommonJS) apache-arrow copy: the ESM one is not recognised by it.
export const A = createRequire(import.meta.url)("apache-arrow") as typeof import("apache-arrow");

const vecType = (dim: number) => new A.FixedSizeList(dim, new A.Field("item", new A.Float32(), true));

export function indexSchema(dim: number) {
  return new A.Schema([
    new A.Field("id", new A.Int64()),
    new A.Field("cat", new A.Utf8()),
    new A.Field("text", new A.Utf8()),
    new A.Field("tags", new A.List(new A.Field("item", new A.Utf8(), true))),
    new A.Field("f", new A.Float64()),
    new A.Field("vec", vecType(dim)),
    new A.Field("s", new A.Struct([new A.Field("x", new A.Int64()), new A.Field("v", vecType(dim))])),
  ]);
}

const WORDS = ["quick", "brown", "fox", "jumps", "lazy", "dog", "café", "naïve", "running"];

/** Deterministic rows: low-rank-ish vectors so IVF training behaves. */
export function indexRows(n: number, dim: number, from = 0): Record<string, unknown>[] {
  let seed = 1 + from;
  const rnd = () => ((seed = (seed * 16807) % 2147483647) / 2147483647) - 0.5;
  const vec = () => Array.from({ length: dim }, rnd);
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return {
      id: BigInt(i),
      cat: `c${i % 5}`,
      text: `The ${WORDS[i % WORDS.length]} ${WORDS[(i * 7) % WORDS.length]} row ${i}`,
      tags: ["a", `b${i % 3}`],
      f: i / 7,
      vec: vec(),
      s: { x: BigInt(i), v: vec() },
    };
  });
}

export async function seedIndexTable(dataDir: string, name: string, n: number, dim = 32): Promise<lancedb.Table> {
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  return db.createTable(name, lancedb.makeArrowTable(indexRows(n, dim), { schema: indexSchema(dim) }), []);
}

/** The same table opened by another process (this test), at its latest version. */
export async function openIndexTable(dataDir: string, name: string): Promise<lancedb.Table> {
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  return db.openTable(name, []);
}

/** An Arrow IPC stream of rows, for /insert. */
export function rowsIpc(n: number, dim: number, from: number): Uint8Array {
  return A.tableToIPC(lancedb.makeArrowTable(indexRows(n, dim, from), { schema: indexSchema(dim) }), "stream");
}
