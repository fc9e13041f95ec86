// Backfill throughput with replicas: the same JavaScript backfills over the same data with 1 Quiver
// replica and with 3, each behind HAProxy (bench/haproxy.ts), on one local data directory, each
// replica with its own --state-dir: one backfill alone, then one on each of 3 tables at once.
// Issue 23 asks that throughput not shrink with replicas. Rows/s count from submit to Succeeded;
// each cell is measured --repeat times on fresh columns, and the summary is the median of each
// replica count's cells over all its runs.
// With --split, each backfill is split into as many tasks as there are replicas (--backfill-tasks),
// which the replicas share; without it, each backfill runs as one job on one replica.
//   node dist/bench/replicas.js [--rows 100000] [--replicas 1,3,3,1] [--repeat 2] [--split]
// (ABBA order: a drift of the machine's load between the runs falls on both counts)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { arrow } from "../src/engine/arrow.js";
import { batches } from "./dataset.js";
import { freePort, startHaproxy } from "./haproxy.js";
import { startQuiver } from "./quiver-process.js";

const { values } = parseArgs({ options: { rows: { type: "string", default: "100000" }, replicas: { type: "string", default: "1,3,3,1" }, repeat: { type: "string", default: "2" }, split: { type: "boolean", default: false } } });
const REPEAT = Number(values.repeat);
const ROWS = Number(values.rows);
const KEY = "bench-replicas-key";
const SPEC = { rows: ROWS, dim: 32, rank: 8, seed: 5 };
const body = Buffer.from(arrow.tableToIPC(new arrow.Table([...batches(SPEC)].flatMap((t) => t.batches)), "stream"));
const out = (name: string, type: string) => [{ column: name, data_type: { type }, nullable: true }];
// bench/backfill.ts's cheap and CPU-heavy UDFs.
const UDFS: Record<string, (name: string) => object> = {
  js: (name) => ({ udf_backend: "js", udf: "(id) => id * 2 + 1", input_columns: ["id"], outputs: out(name, "float64") }),
  "js heavy": (name) => ({ udf_backend: "js", udf: "(t) => { let h = 0; for (let k = 0; k < 300; k++) for (let i = 0; i < t.length; i++) h = (h * 31 + t.charCodeAt(i)) | 0; return h; }", input_columns: ["text"], outputs: out(name, "int32") }),
};

async function call(url: string, p: string, b: object | Buffer): Promise<{ json: any; replica: string | null }> {
  const res = await fetch(url + p, {
    method: "POST",
    headers: { "x-api-key": KEY, ...(Buffer.isBuffer(b) ? {} : { "content-type": "application/json" }) },
    body: Buffer.isBuffer(b) ? new Uint8Array(b) : JSON.stringify(b),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${p}: ${res.status} ${JSON.stringify(json)}`);
  return { json, replica: res.headers.get("x-quiver-replica") };
}

/**
 * Start backfills of `column` on `tables` together through the balancer; answers their rows per
 * second together. Each job is followed through the replica that took it (HAProxy names it), which
 * keeps the polling off the others.
 */
async function backfills(lb: string, urls: string[], tables: string[], column: string): Promise<number> {
  const t0 = performance.now();
  const jobs = await Promise.all(tables.map((t) => call(lb, `/v1/table/${t}/backfill_column`, { column })));
  await Promise.all(
    jobs.map(async ({ json, replica }) => {
      const url = urls[Number(replica!.slice(1))];
      const job = json.job_id as string;
      for (;;) {
        const d = (await call(url, `/v1/transaction/${job}/describe`, {})).json;
        if (d.status === "Succeeded") return;
        if (d.status !== "Queued" && d.status !== "Running") throw new Error(`job ${job}: ${d.status} ${d.properties.error_message}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }),
  );
  return (ROWS * tables.length) / ((performance.now() - t0) / 1000);
}

const counts = values.replicas!.split(",").map(Number);
const COLUMNS = Object.keys(UDFS).flatMap((u) => [`${u}, 1 job`, `${u}, 3 at once`]);
const row = (label: string, cells: number[]) => console.log(`${label.padEnd(12)}${cells.map((c, i) => Math.round(c).toString().padStart(COLUMNS[i].length + 4)).join("")}`);
/** Every measurement, by replica count, then by column. */
const samples = new Map<number, number[][]>();
console.log(`${ROWS} rows per table (id int32, a 32-d vector, text); js backfills submitted and followed through HAProxy; rows/s from submit to Succeeded${values.split ? "; each split into one task per replica" : ""}`);
console.log(`${"replicas".padEnd(12)}${COLUMNS.map((c) => c.padStart(c.length + 4)).join("")}`);
for (const n of counts) {
  const data = mkdtempSync(path.join(tmpdir(), "quiver-bench-replicas-"));
  const ports = await Promise.all(Array.from({ length: n }, () => freePort()));
  const states = ports.map(() => mkdtempSync(path.join(tmpdir(), "quiver-bench-state-")));
  const split = values.split ? ["--backfill-tasks", String(n)] : [];
  const replicas = await Promise.all(ports.map((port, i) => startQuiver(data, KEY, ["--port", String(port), "--state-dir", states[i], "--auto-maintenance", "off", ...split])));
  const urls = replicas.map((q) => q.url);
  const lb = await startHaproxy(ports);
  const tables = ["t0", "t1", "t2"];
  for (const t of tables) await call(lb.url, `/v1/table/${t}/create`, body);
  for (let r = 0; r < REPEAT; r++) {
    const cells: number[] = [];
    for (const [udf, vc] of Object.entries(UDFS)) {
      const name = `c_${udf.replace(" ", "_")}_${r}`;
      const [alone, many] = [`${name}_1`, `${name}_3`];
      for (const t of tables) await call(lb.url, `/v1/table/${t}/add_columns`, { new_columns: [{ name: alone, virtual_column: vc(alone) }, { name: many, virtual_column: vc(many) }] });
      cells.push(await backfills(lb.url, urls, ["t0"], alone));
      cells.push(await backfills(lb.url, urls, tables, many));
    }
    row(String(n), cells);
    samples.set(n, [...(samples.get(n) ?? []), cells]);
  }
  await lb.stop();
  await Promise.all(replicas.map((q) => q.stop()));
  for (const d of [data, ...states]) rmSync(d, { recursive: true, force: true });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
console.log("median");
for (const [n, runs] of samples) row(String(n), COLUMNS.map((_, i) => median(runs.map((c) => c[i]))));
