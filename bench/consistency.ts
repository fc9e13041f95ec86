// Read your writes across replicas (docs/replicas.md), against LanceDB in process: on a local data
// directory and on Azurite (bench/stores.ts), in one run, one table `t` (N rows, DIM-dimensional
// vectors, no index) per store, the latency of a search (k=10, ids only) and of count_rows:
//   engine                          LanceDB in this process, `readConsistencyInterval` unset (never re-checks)
//   engine, interval 0              the same with `readConsistencyInterval: 0` (re-checks storage every read)
//   engine, interval 0, after commit  the same, each read right after another connection committed
//   quiver                          a Quiver server at the default --consistency-interval-ms
//   quiver, after commit            the same, each read right after a commit, no token (the read
//                                   may miss it): the token's control
//   quiver + token, after commit    the same server, each read right after LanceDB in this process
//                                   committed, carrying `x-quiver-min-version: <that version>`, so
//                                   the token forces the re-check
//   quiver, interval 0              a second server at --consistency-interval-ms 0
//   engine, after a pause           LanceDB in process (never re-checks), each read after 250 ms of
//                                   nothing (untimed): what a pause costs with no check at all
//   quiver 200 ms, after a pause    a server at --consistency-interval-ms 200, each read after 250 ms
//                                   of nothing (untimed): its catalog and table were re-checked
//                                   ahead (src/util/keep-fresh.ts)
//   quiver 200 ms, keep-fresh 0, after a pause   the same with --keep-fresh-ms 0: the read waits
//                                   for both checks (the pause is what a default server's reads
//                                   more than 1 s apart meet)
// The commits (untimed) are deletes that match no row: each commits a version and leaves the data
// as it was (one fragment). A re-check lists the table's versions, so its cost grows with their
// number: after each commit the bench removes the older versions (untimed), and every read meets a
// table of one or two; `--keep-versions` keeps them (240 more a round and store).
// Sequential requests; alternating rounds (stores, operations and variants each in the other
// order every other round); medians over all rounds (each round's own in brackets), and each
// ratio's range over the rounds' own medians.
//   node dist/bench/consistency.js [--rows 5000] [--dim 32] [--requests 40] [--rounds 4] [--keep-versions]
import { parseArgs } from "node:util";
import * as lancedb from "@lancedb/lancedb";
import type { QuiverProcess } from "./quiver-process.js";
import { call, fill, machine, openStores, quantile, search, startOn, STORES, vec, type Store, type StoreName } from "./stores.js";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "5000" },
    dim: { type: "string", default: "32" },
    requests: { type: "string", default: "40" },
    rounds: { type: "string", default: "4" },
    "keep-versions": { type: "boolean", default: false },
  },
});
const N = Number(values.rows);
const DIM = Number(values.dim);
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);

const READS = ["search k=10", "count_rows"] as const;
type Read = (typeof READS)[number];
const VARIANTS = ["engine", "engine, interval 0", "engine, interval 0, after commit", "quiver", "quiver, after commit", "quiver + token, after commit", "quiver, interval 0", "engine, after a pause", "quiver 200 ms, after a pause", "quiver 200 ms, keep-fresh 0, after a pause"] as const;
type Variant = (typeof VARIANTS)[number];
/** Each ratio: one variant's median over another's. */
const RATIOS: [Variant, Variant][] = [
  ["engine, interval 0", "engine"],
  ["quiver", "engine"],
  ["quiver + token, after commit", "quiver, after commit"],
  ["quiver + token, after commit", "engine, interval 0, after commit"],
  ["quiver + token, after commit", "engine, interval 0"],
  ["quiver + token, after commit", "engine"],
  ["quiver, interval 0", "engine, interval 0"],
  ["quiver, interval 0", "engine"],
  ["quiver 200 ms, after a pause", "engine, after a pause"],
  ["quiver 200 ms, keep-fresh 0, after a pause", "quiver 200 ms, after a pause"],
];
const PAUSE_MS = 250;

/** One store's readers: each variant's timed read (after its untimed preparation). Its servers join `servers`. */
async function readers(store: Store, servers: QuiverProcess[]) {
  const quiver = await startOn(store, ["--max-json-body", String(64 << 20)]); // for the rows in one request
  servers.push(quiver);
  const quiver0 = await startOn(store, ["--consistency-interval-ms", "0"]);
  const kept = await startOn(store, ["--consistency-interval-ms", "200"]);
  const unkept = await startOn(store, ["--consistency-interval-ms", "200", "--keep-fresh-ms", "0"]);
  servers.push(quiver0, kept, unkept);
  await fill(quiver, N, DIM, N);
  // Where Quiver put it (on an object store, under a random prefix): `<root>/<name>.lance`.
  const { location } = JSON.parse(await call(quiver, "describe", {})) as { location: string };
  const name = location.slice(location.lastIndexOf("/") + 1, -".lance".length);
  const open = async (opts: Partial<lancedb.ConnectionOptions> = {}) =>
    (await lancedb.connect(location.slice(0, location.lastIndexOf("/")), { storageOptions: store.storageOptions, ...opts })).openTable(name);
  const [engine, engine0, writer] = await Promise.all([open(), open({ readConsistencyInterval: 0 }), open()]);
  const first = await writer.version();
  let last = first;
  /** Another process's commit (for the servers; another connection for engine0): the version it made. */
  const commit = async () => {
    const { version } = await writer.delete("id < 0");
    if (version <= last) throw new Error(`a delete matching nothing committed no version (${version} after ${last})`);
    if (!values["keep-versions"]) await writer.optimize({ cleanupOlderThan: new Date() });
    return (last = version);
  };
  const onEngine = (t: lancedb.Table) => (read: Read, i: number) =>
    read === "count_rows" ? t.countRows() : t.vectorSearch(vec(DIM, i)).limit(10).select(["id", "_distance"]).toArrow(); // as Quiver projects it (src/engine/query.ts)
  const onQuiver = (q: QuiverProcess, headers: () => Record<string, string> = () => ({})) => (read: Read, i: number) =>
    read === "count_rows" ? call(q, "count_rows", {}, headers()) : search(q, DIM, i, headers());
  let token = 0;
  const pause = () => new Promise((r) => setTimeout(r, PAUSE_MS));
  const run: Record<Variant, { before?: () => Promise<unknown>; read: (read: Read, i: number) => Promise<unknown> }> = {
    engine: { read: onEngine(engine) },
    "engine, interval 0": { read: onEngine(engine0) },
    "engine, interval 0, after commit": { before: commit, read: onEngine(engine0) },
    quiver: { read: onQuiver(quiver) },
    "quiver, after commit": { before: commit, read: onQuiver(quiver) },
    "quiver + token, after commit": { before: async () => (token = await commit()), read: onQuiver(quiver, () => ({ "x-quiver-min-version": String(token) })) },
    "quiver, interval 0": { read: onQuiver(quiver0) },
    "engine, after a pause": { before: pause, read: onEngine(engine) },
    "quiver 200 ms, after a pause": { before: pause, read: onQuiver(kept) },
    "quiver 200 ms, keep-fresh 0, after a pause": { before: pause, read: onQuiver(unkept) },
  };
  return {
    async time(v: Variant, read: Read, i: number): Promise<number> {
      await run[v].before?.();
      const t0 = performance.now();
      await run[v].read(read, i);
      return performance.now() - t0;
    },
    versions: () => `${first}..${last}`,
  };
}

async function main(): Promise<void> {
  const stores = await openStores();
  const on: Partial<Record<StoreName, Awaited<ReturnType<typeof readers>>>> = {};
  const servers: QuiverProcess[] = [];
  try {
    for (const s of STORES) on[s] = await readers(stores[s], servers);
    /** samples[store][read][variant][round] */
    const samples = Object.fromEntries(STORES.map((s) => [s, Object.fromEntries(READS.map((r) => [r, Object.fromEntries(VARIANTS.map((v) => [v, [] as number[][]]))]))])) as Record<StoreName, Record<Read, Record<Variant, number[][]>>>;
    const query = (k: number) => (k * 7919) % N;
    for (const s of STORES) for (const r of READS) for (const v of VARIANTS) for (let k = 0; k < 5; k++) await on[s]!.time(v, r, query(k)); // warm-up
    const order = <T>(xs: readonly T[], round: number) => (round % 2 ? [...xs].reverse() : xs);
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of order(STORES, round)) {
        for (const r of order(READS, round)) {
          for (const v of order(VARIANTS, round)) {
            const xs: number[] = [];
            for (let k = 0; k < REQUESTS; k++) xs.push(await on[s]!.time(v, r, query(k)));
            samples[s][r][v].push(xs);
          }
        }
      }
    }
    const med = (rounds: number[][]) => quantile(rounds.flat(), 50);
    console.log(machine());
    console.log(`table: ${N} rows, ${DIM}-dim vectors (no index); ${ROUNDS} rounds x ${REQUESTS} sequential requests per variant, read and store; older versions ${values["keep-versions"] ? "kept" : "removed after each commit"}; Azurite in memory on loopback`);
    for (const s of STORES) {
      console.log(`\n${s} (versions ${on[s]!.versions()}): medians, ms`);
      console.log(`${"".padEnd(34)}${READS.map((r) => r.padStart(40)).join("")}`);
      const cell = (rounds: number[][]) => `${med(rounds).toFixed(2)} [${rounds.map((xs) => quantile(xs, 50).toFixed(2)).join(" ")}]`;
      for (const v of VARIANTS) console.log(`${v.padEnd(34)}${READS.map((r) => cell(samples[s][r][v]).padStart(40)).join("")}`);
      console.log(`ratios (range of the rounds' own)`);
      for (const [a, b] of RATIOS) {
        const cells = READS.map((r) => {
          const per = samples[s][r][a].map((xs, i) => quantile(xs, 50) / quantile(samples[s][r][b][i], 50));
          return `${(med(samples[s][r][a]) / med(samples[s][r][b])).toFixed(2)} (${Math.min(...per).toFixed(2)}-${Math.max(...per).toFixed(2)})`;
        });
        console.log(`${`${a} / ${b}`.padEnd(66)}${cells.map((c) => c.padStart(20)).join("")}`);
      }
    }
  } finally {
    await Promise.all(servers.map((q) => q.stop()));
    await stores.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
