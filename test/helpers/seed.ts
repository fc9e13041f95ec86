// Make tables directly with LanceDB's own directory namespace, as another process would,
// before (or while) Quiver serves the same data directory.
import * as lancedb from "@lancedb/lancedb";

export async function seedTable(dataDir: string, id: string[], rows: Record<string, unknown>[]): Promise<void> {
  const db = await lancedb.connectNamespace("dir", { root: dataDir });
  const ns = id.slice(0, -1);
  for (let i = 1; i <= ns.length; i++) {
    const existing = (await db.listNamespaces(ns.slice(0, i - 1))).namespaces;
    // LanceDB's mode "exist_ok" still throws for an existing namespace, so look first.
    if (!existing.includes(ns[i - 1])) await db.createNamespace(ns.slice(0, i));
  }
  await db.createTable(id[id.length - 1], rows, ns);
}

/** Rows `{a, b}` numbered from `from`: a small table shape shared by the version and ref tests. */
export const abRows = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ a: from + i, b: `r${from + i}` }));

/** Open a table directly with LanceDB (another process's view of the same data directory). */
export const openDirect = async (dataDir: string, name: string, ns: string[] = [], opts: { branch?: string; version?: number } = {}) =>
  (await lancedb.connectNamespace("dir", { root: dataDir })).openTable(name, ns, opts);
