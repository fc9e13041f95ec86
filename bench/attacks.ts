// `/healthz` latency while one attack of issue 50's table runs (rows 2-6 and 12), against an idle
// baseline of the same run: the target is a p99 of at most 50 ms during any of them. Each
// attack is sent as the issue describes it, and where the server now refuses it, the largest form
// it accepts is sent after it. `/healthz` is asked every 10 ms, open loop, on connections of its own
// (a new one when all are waiting), so an event-loop stall shows in every request sent during it.
//   node dist/bench/attacks.js [--rounds 3] [--tables 734] [--rows 3,4,12] [--checkout DIR]
// (--rows: only those rows' attacks, after the idle baseline; --checkout: the server built in DIR's
// dist/, to compare two builds with one bench). Writes may take 10 minutes (--write-timeout-ms):
// the one at the bound takes minutes on a busy machine, and its whole commit is measured.
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import * as lancedb from "@lancedb/lancedb";
import { batches, queryVectors } from "./dataset.js";
import { Conn } from "./http-client.js";
import { startQuiver, type QuiverProcess } from "./quiver-process.js";
import { pct } from "./stats.js";

const KEY = "bench-attacks-key";
const HEADERS = `x-api-key: ${KEY}\r\n`;
const JSON_HEADERS = `${HEADERS}content-type: application/json\r\n`;
const NDJSON_HEADERS = `${HEADERS}content-type: application/x-ndjson\r\n`;
const SEARCHED = { rows: 50_000, dim: 8, rank: 3, seed: 11 };
const LEVENSHTEIN_ROWS = 20_000;
const WIDE_COLUMNS = 2000;
// Each row of the wide table counts 8 bytes a column toward --max-decoded-body (256 MiB).
const WIDE_ROWS_ACCEPTED = Math.floor((256 << 20) / ((WIDE_COLUMNS + 1) * 8));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `/healthz` latencies (ms) of requests sent every 10 ms until `stop` is called. */
function sampler(port: number) {
  const idle: Conn[] = [];
  const all: Conn[] = [];
  const ms: number[] = [];
  let failed = 0;
  let out = 0;
  const timer = setInterval(() => {
    // uWS closes connections idle for ~10 s: those are left.
    let conn = idle.pop();
    while (conn?.closed) conn = idle.pop();
    if (conn === undefined) all.push((conn = new Conn("127.0.0.1", port)));
    const t0 = performance.now();
    out++;
    conn.request("GET", "/healthz", "", null).then(
      (r) => {
        if (r.status === 200) ms.push(performance.now() - t0);
        else failed++;
        idle.push(conn);
      },
      () => failed++,
    ).finally(() => out--);
  }, 10);
  return async () => {
    clearInterval(timer);
    // The requests still out are waited for: a stall's requests are its samples.
    while (out > 0) await sleep(10);
    for (const c of all) c.close();
    return { ms: ms.sort((a, b) => a - b), failed, connections: all.length };
  };
}

interface Attack {
  row: number;
  name: string;
  /** The attack's requests, in order; answers their status codes. */
  run: (conn: Conn, q: QuiverProcess) => Promise<number[]>;
}

const send = async (conn: Conn, p: string, body: string | object, headers = JSON_HEADERS) =>
  (await conn.request("POST", p, headers, Buffer.from(typeof body === "string" ? body : JSON.stringify(body)))).status;

const repeatSend = async (n: number, f: (i: number) => Promise<number>) => {
  const codes: number[] = [];
  for (let i = 0; i < n; i++) codes.push(await f(i));
  return codes;
};

const v = Array.from(queryVectors(SEARCHED, 1)[0]);
const inValues = Array.from({ length: 8000 }, (_, i) => i * 6 + 1).join(", ");

// Each refused form and the largest accepted one are measured apart.
const ATTACKS: Attack[] = [
  {
    row: 2,
    name: "levenshtein(rpad(text, 1024, 'x'), rpad(text, 1024, 'y')) > 0 count_rows ×2 on 20,000 rows (refused)",
    run: (conn) => repeatSend(2, () => send(conn, "/v1/table/l/count_rows", { predicate: "levenshtein(rpad(text, 1024, 'x'), rpad(text, 1024, 'y')) > 0" })),
  },
  {
    row: 2,
    name: "the same at the bound, 32 × 32 characters, ×2",
    run: (conn) => repeatSend(2, () => send(conn, "/v1/table/l/count_rows", { predicate: "levenshtein(rpad(text, 32, 'x'), rpad(text, 32, 'y')) > 0" })),
  },
  {
    row: 3,
    name: "vector query, filter id > -n AND id IN (8,000 values), 50,000 rows, serving index, ×3",
    // Distinct filters: each is evaluated afresh.
    run: (conn) => repeatSend(3, (i) => send(conn, "/v1/table/s/query", { vector: { single_vector: v }, k: 10, filter: `id > -${i + 1} AND id IN (${inValues})` })),
  },
  {
    row: 4,
    name: "one query of 55,000 query vectors, 990 KB (refused)",
    run: async (conn) => [await send(conn, "/v1/table/s/query", `{"k":10,"vector":{"multi_vector":[${Array(55_000).fill("[0,0,0,0,0,0,0,1]").join(",")}]}}`)],
  },
  {
    row: 4,
    name: "one query of 512 query vectors (the bound)",
    run: async (conn) => [await send(conn, "/v1/table/s/query", { k: 10, vector: { multi_vector: queryVectors(SEARCHED, 512).map((x) => Array.from(x)) } })],
  },
  {
    row: 5,
    name: `146 KB of NDJSON {} lines into ${WIDE_COLUMNS} columns (refused)`,
    run: async (conn) => [await send(conn, "/v1/table/wide/insert", "{}\n".repeat(48_700), NDJSON_HEADERS)],
  },
  {
    row: 5,
    name: `${WIDE_ROWS_ACCEPTED.toLocaleString("en")} {} lines into ${WIDE_COLUMNS} columns (the bound)`,
    run: async (conn) => [await send(conn, "/v1/table/wide/insert", "{}\n".repeat(WIDE_ROWS_ACCEPTED), NDJSON_HEADERS)],
  },
  {
    row: 6,
    name: "update s = repeat(s, 16) ×5 on a 1 KiB value",
    run: (conn) => repeatSend(5, () => send(conn, "/v1/table/u/update", { updates: [["s", "repeat(s, 16)"]] })),
  },
];

function tablesAttack(n: number): Attack {
  return {
    row: 12,
    name: `${n} table creates, one after another`,
    run: (conn) => repeatSend(n, (i) => send(conn, `/v1/table/many$t${i}/create`, `{"id":${i},"s":"x"}\n`, NDJSON_HEADERS)),
  };
}

/** The tables the attacks use: two seeded before the server starts, the rest made through it. */
async function seed(dir: string): Promise<void> {
  const db = await lancedb.connectNamespace("dir", { root: dir });
  const s = await db.createTable("s", [...batches(SEARCHED, SEARCHED.rows)][0], []);
  await s.createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 16, numSubVectors: 2 }) });
  await db.createTable("l", [...batches({ ...SEARCHED, rows: LEVENSHTEIN_ROWS }, LEVENSHTEIN_ROWS)][0], []);
}

async function prepare(conn: Conn): Promise<void> {
  const ok = async (p: string, body: string | object, headers?: string) => {
    const status = await send(conn, p, body, headers);
    if (status !== 200) throw new Error(`${p}: ${status}`);
  };
  const fields = Array.from({ length: WIDE_COLUMNS }, (_, i) => ({ name: `c${i}`, type: { type: "utf8" }, nullable: true }));
  fields.push({ name: "n", type: { type: "int8" }, nullable: true });
  await ok("/v1/table/wide/create", { schema: { fields }, rows: [{ c0: "seed" }] });
  await ok("/v1/table/u/create", `${JSON.stringify({ id: 1, s: "x".repeat(1024) })}\n`, NDJSON_HEADERS);
  await ok("/v1/namespace/many/create", {});
  // The serving index is built in the background once the table is read.
  for (let i = 0; ; i++) {
    const r = await conn.request("POST", "/v1/table/s/query", JSON_HEADERS, Buffer.from(JSON.stringify({ vector: { single_vector: v }, k: 3 })));
    if (/x-quiver-search-path: serving/i.test(r.head)) return;
    if (i > 1200) throw new Error("the serving index of table s was not ready after 2 minutes");
    await sleep(100);
  }
}

interface Measured {
  label: string;
  samples: number;
  p50: number;
  p99: number;
  max: number;
  seconds: number;
  codes: string;
}

/** Status codes as counts, in order of first answer: "200×3 400×2". */
function statuses(codes: number[]): string {
  const counts = new Map<number, number>();
  for (const c of codes) counts.set(c, (counts.get(c) ?? 0) + 1);
  return [...counts].map(([c, n]) => `${c}×${n}`).join(" ");
}

async function measure(port: number, label: string, work: () => Promise<number[]>): Promise<Measured> {
  const stop = sampler(port);
  const t0 = performance.now();
  const codes = await work();
  const seconds = (performance.now() - t0) / 1000;
  const { ms, failed } = await stop();
  if (failed > 0) console.log(`  (${failed} /healthz requests failed during ${label})`);
  // An attack refused within a sampling interval has no /healthz answer during it: NaN, no figure.
  return { label, samples: ms.length, p50: pct(ms, 50), p99: pct(ms, 99), max: pct(ms, 100), seconds, codes: statuses(codes) };
}

const load = () => loadavg().map((x) => x.toFixed(1)).join(" ");

async function round(n: number, tables: number, rows: Set<number> | null, checkout: string | undefined): Promise<Measured[]> {
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-bench-attacks-"));
  await seed(dir);
  const q = await startQuiver(dir, KEY, ["--write-timeout-ms", "600000"], checkout);
  const port = Number(new URL(q.url).port);
  const conn = new Conn("127.0.0.1", port);
  const out: Measured[] = [];
  try {
    await prepare(conn);
    console.log(`round ${n}: load average ${load()} (1, 5, 15 min)`);
    out.push(await measure(port, "idle", async () => (await sleep(3000), [])));
    for (const [i, a] of [...ATTACKS, tablesAttack(tables)].filter((a) => rows === null || rows.has(a.row)).entries()) {
      out.push(await measure(port, `${i + 1}. row ${a.row}: ${a.name}`, () => a.run(conn, q)));
      // The next attack starts from a quiet server.
      await sleep(1000);
    }
    console.log(`round ${n} done: load average ${load()}`);
  } finally {
    conn.close();
    await q.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

const f = (x: number) => x.toFixed(1).padStart(7);

function print(rows: Measured[]): void {
  console.log(`${"attack".padEnd(12)} ${"samples".padStart(7)} ${"p50 ms".padStart(7)} ${"p99 ms".padStart(7)} ${"max ms".padStart(7)} ${"secs".padStart(6)}  statuses`);
  for (const r of rows) console.log(`${r.label.split(":")[0].padEnd(12)} ${String(r.samples).padStart(7)} ${f(r.p50)} ${f(r.p99)} ${f(r.max)} ${r.seconds.toFixed(1).padStart(6)}  ${r.codes}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: "string", default: "3" }, tables: { type: "string", default: "734" }, rows: { type: "string" }, checkout: { type: "string" } } });
  const rows = values.rows === undefined ? null : new Set(values.rows.split(",").map(Number));
  const rounds: Measured[][] = [];
  for (let n = 1; n <= Number(values.rounds); n++) {
    const r = await round(n, Number(values.tables), rows, values.checkout);
    for (const m of r) console.log(`  ${m.label}`);
    print(r);
    rounds.push(r);
  }
  if (rounds.length < 2) return;
  console.log("\nmedian [range] over rounds of /healthz p99 and max, ms");
  for (let i = 0; i < rounds[0].length; i++) {
    const across = (k: "p99" | "max" | "p50") => {
      const xs = rounds.map((r) => r[i][k]).filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
      if (xs.length === 0) return "-";
      return `${pct(xs, 50).toFixed(0)} [${xs[0].toFixed(0)}-${xs[xs.length - 1].toFixed(0)}]`;
    };
    console.log(`${rounds[0][i].label.split(":")[0].padEnd(12)} p50 ${across("p50")}  p99 ${across("p99")}  max ${across("max")}`);
  }
}

await main();
