// The two stores the storage benches compare in one run: a local data directory and a container on
// Azurite (bench/azurite.ts, in memory on loopback). Quiver servers on either (each with a state
// directory of its own, so several on one store are replicas), the table `t` they fill (N rows of
// an id, a category and a DIM-dimensional vector) and the JSON calls the benches make.
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { startAzurite } from "./azurite.js";
import { startQuiver, type QuiverProcess } from "./quiver-process.js";
import { pct } from "./stats.js";

export const KEY = "bench-storage-key";
export const STORES = ["local", "azurite"] as const;
export type StoreName = (typeof STORES)[number];

export interface Store {
  /** A local path or an az:// URI. */
  uri: string;
  /** What LanceDB needs to reach it. */
  storageOptions: Record<string, string>;
}

export interface Stores extends Record<StoreName, Store> {
  close(): Promise<void>;
}

export async function openStores(): Promise<Stores> {
  const az = await startAzurite();
  await az.createContainer("bench");
  const localDir = mkdtempSync(path.join(tmpdir(), "quiver-bench-local-"));
  return {
    local: { uri: localDir, storageOptions: {} },
    azurite: { uri: "az://bench/quiver", storageOptions: az.storageOptions() },
    async close() {
      await az.stop();
      rmSync(localDir, { recursive: true, force: true });
    },
  };
}

/** A Quiver server on `store`, maintenance off. */
export const startOn = (store: Store, args: string[] = []): Promise<QuiverProcess> =>
  startQuiver(store.uri, KEY, ["--auto-maintenance", "off", ...Object.entries(store.storageOptions).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]), ...args]);

export const vec = (dim: number, i: number) => Array.from({ length: dim }, (_, d) => Math.sin(i * 0.37 + d));
export const rows = (dim: number, from: number, n: number) => Array.from({ length: n }, (_, k) => ({ id: from + k, cat: `c${(from + k) % 5}`, vector: vec(dim, from + k) }));

/** POST a JSON body (a string is sent as it is) to an operation on table `t`: the answer's text; anything but 200 throws. */
export async function call(q: QuiverProcess, op: string, body: unknown, headers: Record<string, string> = {}): Promise<string> {
  const r = await fetch(`${q.url}/v1/table/t/${op}`, {
    method: "POST",
    headers: { "x-api-key": KEY, "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${op}: ${r.status} ${text.slice(0, 300)}`);
  return text;
}

/** A search as the benches send it: k=10 nearest to row `i`'s vector, ids only, answered in JSON. */
export const search = (q: QuiverProcess, dim: number, i: number, headers: Record<string, string> = {}) =>
  call(q, "query", { vector: { single_vector: vec(dim, i) }, k: 10, columns: ["id"] }, { accept: "application/json", ...headers });

/** Create table `t` through `q` with `n` rows, `batch` a request (a fragment each). */
export async function fill(q: QuiverProcess, n: number, dim: number, batch = 1000): Promise<void> {
  for (let i = 0; i < n; i += batch) await call(q, i === 0 ? "create" : "insert", JSON.stringify(rows(dim, i, Math.min(batch, n - i))));
}

export const quantile = (xs: number[], p: number) => pct([...xs].sort((a, b) => a - b), p);

export const machine = () => `machine: ${cpus().length} cores, ${cpus()[0]?.model ?? "?"}; node ${process.version}`;
