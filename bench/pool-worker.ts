// Piscina worker for the pool experiment (bench/pool.ts): runs one vector query with its own
// LanceDB handle and returns the engine's raw IPC buffers. Not on Quiver's request path; see
// docs/design.md (Queries) for why.
import * as lancedb from "@lancedb/lancedb";

interface Task {
  dataDir: string;
  table: string;
  vector: number[];
  k: number;
  nprobes: number;
}

let table: Promise<lancedb.Table> | null = null;

export default async function run(t: Task): Promise<Buffer[]> {
  table ??= lancedb.connectNamespace("dir", { root: t.dataDir }).then((db) => db.openTable(t.table));
  const q = (await table).vectorSearch(t.vector).limit(t.k).nprobes(t.nprobes);
  const it = await (q as unknown as { nativeExecute(): Promise<{ next(): Promise<Buffer | null> }> }).nativeExecute();
  const out: Buffer[] = [];
  for (let b = await it.next(); b; b = await it.next()) out.push(b);
  return out;
}
