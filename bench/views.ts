// Materialized-view refresh throughput per kind (query, udtf in JavaScript and in SQL, chunker)
// with 1, 2 and 4 worker threads: source rows per second of a first (full) refresh, from submit
// to done, and of an incremental chunker refresh after 1% of the source changed.
//   node dist/bench/views.js [--rows 100000] [--workers 1,2,4]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { arrow } from "../src/engine/arrow.js";
import { Conn, post, untilSucceeded } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";

const { values } = parseArgs({ options: { rows: { type: "string", default: "100000" }, workers: { type: "string", default: "1,2,4" } } });
const ROWS = Number(values.rows);
const KEY = "bench-views-key";
const H = `x-api-key: ${KEY}\r\ncontent-type: application/json\r\n`;
const WORDS = ["apple", "river", "stone", "cloud", "ember", "frost", "grove"];

function rows(from: number, n: number): Buffer {
  const ids = Array.from({ length: n }, (_, i) => from + i);
  return Buffer.from(arrow.tableToIPC(new arrow.Table({
    id: arrow.vectorFromArray(ids.map(BigInt), new arrow.Int64()),
    x: arrow.vectorFromArray(ids.map((i) => i / 3), new arrow.Float64()),
    cat: arrow.vectorFromArray(ids.map((i) => `c${i % 8}`), new arrow.Utf8()),
    text: arrow.vectorFromArray(ids.map((i) => Array.from({ length: 2 + (i % 5) }, (_, k) => WORDS[(i + k) % WORDS.length]).join(" ")), new arrow.Utf8()),
  }), "stream"));
}
const schema = (fields: [string, A][]) => Buffer.from(arrow.tableToIPC(new arrow.Table(new arrow.Schema(fields.map(([n, t]) => new arrow.Field(n, t, true)))), "stream")).toString("base64");
type A = import("apache-arrow").DataType;
const envelope = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64");

const VIEWS: Record<string, object> = {
  query: { kind: "query", source_query: JSON.stringify({ table: "src", columns: { id: "id", y: "x * 2" }, filter: "cat <> 'c0'" }), output_schema: schema([["id", new arrow.Int64()], ["y", new arrow.Float64()]]) },
  "udtf js": {
    kind: "udtf", source_query: JSON.stringify({ table: "src" }), output_schema: schema([["cat", new arrow.Utf8()], ["n", new arrow.Int64()], ["mean", new arrow.Float64()]]),
    udtf_spec: { kind: "udtf", udtf: envelope({ backend: "js", source: "(rows) => [{ cat: rows[0].cat, n: rows.length, mean: rows.reduce((a, r) => a + r.x, 0) / rows.length }]" }), udtf_name: "mean", udtf_version: "1", partition_by: "cat", input_columns: ["cat", "x"] },
  },
  "udtf python": {
    kind: "udtf", source_query: JSON.stringify({ table: "src" }), output_schema: schema([["cat", new arrow.Utf8()], ["n", new arrow.Int64()], ["mean", new arrow.Float64()]]),
    udtf_spec: { kind: "udtf", udtf: envelope({ backend: "python", source: "def mean(rows):\n    return [{'cat': rows[0]['cat'], 'n': len(rows), 'mean': sum(r['x'] for r in rows) / len(rows)}]" }), udtf_name: "mean", udtf_version: "1", partition_by: "cat", input_columns: ["cat", "x"] },
  },
  "udtf sql": {
    kind: "udtf", source_query: JSON.stringify({ table: "src" }), output_schema: schema([["cat", new arrow.Utf8()], ["n", new arrow.Int64()], ["mean", new arrow.Float64()]]),
    udtf_spec: { kind: "udtf", udtf: envelope({ backend: "sql", sql: "SELECT cat, count(*) AS n, avg(x) AS mean FROM source GROUP BY cat" }), udtf_name: "mean", udtf_version: "1", partition_by: "cat", input_columns: ["cat", "x"] },
  },
  chunker: {
    kind: "chunker", source_query: JSON.stringify({ table: "src", columns: ["id"] }), output_schema: schema([["id", new arrow.Int64()], ["word", new arrow.Utf8()]]),
    udtf_spec: { kind: "chunker", udtf: envelope({ backend: "js", source: "(row) => row.text.split(' ').map((w) => ({ word: w }))" }), udtf_name: "split", udtf_version: "1", input_columns: ["text"] },
  },
  "chunker python": {
    kind: "chunker", source_query: JSON.stringify({ table: "src", columns: ["id"] }), output_schema: schema([["id", new arrow.Int64()], ["word", new arrow.Utf8()]]),
    udtf_spec: { kind: "chunker", udtf: envelope({ backend: "python", source: "def split(row):\n    return [{'word': w} for w in row['text'].split(' ')]" }), udtf_name: "split", udtf_version: "1", input_columns: ["text"] },
  },
};

const call = (conn: Conn, p: string, b: object | Buffer, headers = H) => post(conn, headers, p, b);

async function refresh(conn: Conn, view: string): Promise<number> {
  const t0 = performance.now();
  const { job_id } = await call(conn, `/v1/materialized_view/${view}/refresh`, {});
  return (await untilSucceeded(conn, H, job_id, t0)).seconds;
}

console.log(`source: ${ROWS} rows (id, x, cat of 8 values, text of 2-6 words); source rows/s of a full refresh, from submit to done`);
console.log(`${"workers".padEnd(8)}${Object.keys(VIEWS).map((k) => k.padStart(16)).join("")}${"chunker incr. (1%)".padStart(20)}`);
for (const workers of values.workers!.split(",").map(Number)) {
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-bench-views-"));
  const q = await startQuiver(dir, KEY, ["--workers", String(workers)]);
  const url = new URL(q.url);
  const conn = new Conn(url.hostname, Number(url.port));
  await call(conn, "/v1/table/src/create", rows(0, ROWS), `x-api-key: ${KEY}\r\n`);
  const rates: string[] = [];
  for (const [name, body] of Object.entries(VIEWS)) {
    const id = name.replace(" ", "_");
    await call(conn, `/v1/materialized_view/${id}/create`, body);
    rates.push(Math.round(ROWS / (await refresh(conn, id))).toString().padStart(16));
  }
  const changed = Math.round(ROWS / 100);
  await call(conn, "/v1/table/src/update", { predicate: `id < ${changed}`, updates: [["text", "'fresh words here'"]] });
  const incr = await refresh(conn, "chunker");
  console.log(`${String(workers).padEnd(8)}${rates.join("")}${`${Math.round(changed / incr)} (${(incr * 1000).toFixed(0)} ms)`.padStart(20)}`);
  conn.close();
  await q.stop();
  rmSync(dir, { recursive: true, force: true });
}
