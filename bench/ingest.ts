// Where large Arrow uploads are decoded: inline on the event loop, or in the ingest pool.
//  1. micro: decode + normalise cost per body size inline, against the pool round trip (wall time
//     and event-loop busy time), to place --ingest-inline-max-bytes;
//  2. load: p99 of small queries (8 in flight, closed loop) while another client inserts large
//     bodies with a dictionary-encoded string column, once through the pool (default threshold)
//     and once all inline (--ingest-inline-max-bytes huge); plus a baseline without inserts.
//   node dist/bench/ingest.js [--rows 200000] [--duration 10] [--concurrency 8] [--rounds 2] [--skip-micro]
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { options } from "../src/config.js";
import { arrow } from "../src/engine/arrow.js";
import { normaliseIpc } from "../src/engine/ipc-in.js";
import { createWorkerPool } from "../workers/pool.js";
import { Conn } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line, pct, type Result } from "./stats.js";

const { values } = parseArgs({
  strict: true,
  options: {
    rows: { type: "string", default: "200000" },
    duration: { type: "string", default: "10" },
    concurrency: { type: "string", default: "8" },
    rounds: { type: "string", default: "2" },
    "skip-micro": { type: "boolean", default: false },
  },
});
const ROWS = Number(values.rows);
const D = Number(values.duration);
const C = Number(values.concurrency);
const KEY = "bench-ingest-key";
const DIM = 16;
const inlineMaxDefault = options.find((o) => o.key === "ingest-inline-max-bytes")!.def;

type Kind = "mixed" | "plain" | "tags";
/**
 * `n` rows. mixed: id int32, score float64, tag (1,000 distinct strings, dictionary-encoded: what
 * apache-arrow makes of strings by default), vec float32[16]; plain: the same with tag as utf8;
 * tags: only the dictionary column (the most rows per byte, so the worst stall per MB).
 */
function body(n: number, kind: Kind = "mixed"): Uint8Array {
  const ids = Int32Array.from({ length: n }, (_, i) => i);
  const tags = Array.from({ length: n }, (_, i) => `tag-${String((i * 7919) % 1000).padStart(4, "0")}`);
  if (kind === "tags") return arrow.tableToIPC(new arrow.Table({ tag: arrow.vectorFromArray(tags) }), "stream");
  const vec = Float32Array.from({ length: n * DIM }, (_, i) => (i % 97) / 97);
  const child = new arrow.Field("item", new arrow.Float32(), true);
  const vecData = arrow.makeData({
    type: new arrow.FixedSizeList(DIM, child),
    length: n,
    nullCount: 0,
    child: arrow.makeData({ type: new arrow.Float32(), length: n * DIM, data: vec }),
  });
  const t = new arrow.Table({
    id: arrow.makeVector(ids),
    score: arrow.makeVector(Float64Array.from(ids, (i) => i / 3)),
    tag: kind === "plain" ? arrow.vectorFromArray(tags, new arrow.Utf8()) : arrow.vectorFromArray(tags),
    vec: arrow.makeVector(vecData),
  });
  return arrow.tableToIPC(t, "stream");
}

// Each measurement starts with a clean heap, so one side's garbage is not collected on the other's clock.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const mb = (n: number) => n / 2 ** 20;
const median = (xs: number[]) => pct([...xs].sort((a, b) => a - b), 50);

async function micro(): Promise<void> {
  console.log("\n## micro: decode + normalise, inline vs ingest pool (1 worker, warm), median of repetitions");
  console.log(`${"body".padEnd(26)}${"MB".padStart(8)}${"inline ms".padStart(11)}${"ms/MB".padStart(8)}${"pool wall ms".padStart(14)}${"pool loop-busy ms".padStart(19)}`);
  // An inline threshold of 0 sends every body through the pool.
  const pool = createWorkerPool({ workers: 1, maxQueue: 16, ingestInlineMaxBytes: 0, maxDecodedBody: 256 << 20, maxValueBytes: 16 << 20, maxJsonDepth: 64 });
  const viaPool = (raw: Uint8Array) => pool.ingest(raw);
  await viaPool(body(100)); // start the worker
  const cases: [number, Kind][] = [
    [100, "mixed"], [300, "mixed"], [1_000, "mixed"], [3_000, "mixed"], [10_000, "mixed"], [50_000, "mixed"], [200_000, "mixed"],
    [200_000, "plain"], [1_000, "tags"], [10_000, "tags"], [100_000, "tags"],
  ];
  for (const [n, kind] of cases) {
    const raw = body(n, kind);
    const reps = Math.max(5, Math.min(60, Math.round(4e6 / n)));
    const inline: number[] = [];
    const wall: number[] = [];
    const busy: number[] = [];
    gc();
    for (let i = 0; i < reps; i++) {
      const copy = raw.slice(); // the request body the server would hold
      const elu0 = performance.eventLoopUtilization();
      const t1 = performance.now();
      await viaPool(copy);
      wall.push(performance.now() - t1);
      busy.push(performance.eventLoopUtilization(elu0).active);
    }
    gc();
    for (let i = 0; i < reps; i++) {
      const t0 = performance.now();
      normaliseIpc(raw, { maxDecodedBody: 256 << 20, maxValueBytes: 16 << 20 });
      inline.push(performance.now() - t0);
    }
    gc();
    const m = median(inline);
    const name = `${n} rows ${kind}`;
    console.log(`${name.padEnd(26)}${mb(raw.length).toFixed(2).padStart(8)}${m.toFixed(2).padStart(11)}${(m / mb(raw.length)).toFixed(2).padStart(8)}${median(wall).toFixed(2).padStart(14)}${median(busy).toFixed(2).padStart(19)}`);
  }
  await pool.destroy();
}

interface Phase {
  queries: Result;
  inserts: number[];
}

/** Queries at C in flight for `seconds`; meanwhile (when `insert` is set) one client inserting back to back. */
async function phase(url: URL, name: string, insert: Uint8Array | null, seconds = D): Promise<Phase> {
  const conns = Array.from({ length: C }, () => new Conn(url.hostname, Number(url.port)));
  const json = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
  const countBody = Buffer.from("{}");
  const describeBody = Buffer.from("{}");
  const inserts: number[] = [];
  let stop = false;
  const writer = insert
    ? (async () => {
        const w = new Conn(url.hostname, Number(url.port));
        const payload = Buffer.from(insert.buffer, insert.byteOffset, insert.byteLength);
        const h = `x-api-key: ${KEY}\r\ncontent-type: application/vnd.apache.arrow.stream\r\n`;
        while (!stop) {
          const t0 = performance.now();
          const r = await w.request("POST", "/v1/table/b$big/insert", h, payload);
          if (r.status !== 200) throw new Error(`insert: ${r.status} ${r.body}`);
          inserts.push(performance.now() - t0);
        }
        w.close();
      })()
    : null;
  try {
    const queries = await closedLoop(name, C, seconds, async (loop, i) => {
      // Half describe (event loop only), half count_rows (event loop + LanceDB).
      const count = (loop + i) % 2 === 0;
      const r = await conns[loop].request("POST", count ? "/v1/table/b$small/count_rows" : "/v1/namespace/b/describe", json, count ? countBody : describeBody);
      return r.status === 200 ? null : `${r.status} ${r.body.toString().slice(0, 120)}`;
    });
    return { queries, inserts };
  } finally {
    stop = true;
    await writer;
    conns.forEach((c) => c.close());
  }
}

async function load(): Promise<void> {
  const big = body(ROWS);
  const small = body(1_000);
  console.log(`\n## load: ${C} small queries in flight (describe / count_rows alternating) while one client inserts ${ROWS} rows (${mb(big.length).toFixed(1)} MB, dictionary tag column) back to back; ${D} s per phase`);
  const setups: [string, string[]][] = [
    [`pool (${inlineMaxDefault >> 10} KiB)`, []],
    ["inline", ["--ingest-inline-max-bytes", String(2 ** 40)]],
  ];
  const results: Record<string, Phase[]> = {};
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const [label, args] of setups) {
      const dir = mkdtempSync(path.join(tmpdir(), "quiver-ingest-bench-"));
      const q = await startQuiver(dir, KEY, args);
      try {
        const url = new URL(q.url);
        const c = new Conn(url.hostname, Number(url.port));
        const h = `x-api-key: ${KEY}\r\n`;
        for (const [p, b] of [["/v1/namespace/b/create", Buffer.from("{}")], ["/v1/table/b$small/create", small], ["/v1/table/b$big/create", small]] as const) {
          const r = await c.request("POST", p, h, Buffer.from(b));
          if (r.status !== 200) throw new Error(`${p}: ${r.status} ${r.body}`);
        }
        c.close();
        await phase(url, "warm-up", big, 2);
        const base = await phase(url, `${label}: idle`, null);
        const busy = await phase(url, `${label}: inserting`, big);
        (results[label] ??= []).push(base, busy);
      } finally {
        await q.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  console.log(header() + `${"inserts".padStart(9)}${"insert p50 ms".padStart(15)}`);
  for (const phases of Object.values(results)) {
    for (const p of phases) {
      const ins = p.inserts.length ? `${String(p.inserts.length).padStart(9)}${median(p.inserts).toFixed(0).padStart(15)}` : "";
      console.log(line(p.queries) + ins);
    }
  }
}

console.log(`machine: ${cpus()[0]?.model ?? "?"} x ${availableParallelism()} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
if (!values["skip-micro"]) await micro();
await load();
