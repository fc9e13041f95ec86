// Concurrent single-row inserts into one table: Quiver (writes one at a time per table, each
// answering its own commit's version) against LanceDB in-process (concurrent `add` on one handle),
// same row shape, same run, alternating rounds; QPS and p99, and how many answers shared a version.
//   node dist/bench/writes.js [--clients 8] [--duration 5] [--rounds 3]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import * as lancedb from "@lancedb/lancedb";
import { arrow } from "../src/engine/arrow.js";
import { Conn } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line, summary, type Result } from "./stats.js";

const { values } = parseArgs({ options: { clients: { type: "string", default: "8" }, duration: { type: "string", default: "5" }, rounds: { type: "string", default: "3" } } });
const C = Number(values.clients);
const D = Number(values.duration);
const KEY = "bench-writes-key";
const row = (i: number) => new arrow.Table({ id: arrow.vectorFromArray([i], new arrow.Int32()) });
const body = (i: number) => Buffer.from(arrow.tableToIPC(row(i), "stream"));

function sharedVersions(versions: number[]): number {
  const seen = new Map<number, number>();
  for (const v of versions) seen.set(v, (seen.get(v) ?? 0) + 1);
  return [...seen.values()].filter((n) => n > 1).reduce((a, n) => a + n, 0);
}

async function quiverRound(): Promise<[Result, number]> {
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-writes-"));
  const q = await startQuiver(dir, KEY);
  const url = new URL(q.url);
  const conns = Array.from({ length: C }, () => new Conn(url.hostname, Number(url.port)));
  const h = `x-api-key: ${KEY}\r\ncontent-type: application/vnd.apache.arrow.stream\r\n`;
  await conns[0].request("POST", "/v1/table/t/create", h, body(0));
  const versions: number[] = [];
  let n = 1;
  const r = await closedLoop("quiver insert", C, D, async (loop) => {
    const reply = await conns[loop].request("POST", "/v1/table/t/insert", h, body(n++));
    if (reply.status !== 200) return `${reply.status} ${reply.body}`;
    versions.push(JSON.parse(reply.body.toString()).version);
    return null;
  });
  conns.forEach((c) => c.close());
  await q.stop();
  rmSync(dir, { recursive: true, force: true });
  return [r, sharedVersions(versions)];
}

async function engineRound(): Promise<[Result, number]> {
  const dir = mkdtempSync(path.join(tmpdir(), "engine-writes-"));
  const t = await (await lancedb.connect(dir)).createTable("t", row(0));
  const versions: number[] = [];
  let n = 1;
  const r = await closedLoop("engine add", C, D, async () => {
    versions.push((await t.add(row(n++))).version);
    return null;
  });
  rmSync(dir, { recursive: true, force: true });
  return [r, sharedVersions(versions)];
}

console.log(`${C} clients, ${D} s per phase, ${values.rounds} alternating rounds`);
console.log(`${header()}  answers sharing a version`);
const ratios: number[] = [];
for (let i = 0; i < Number(values.rounds); i++) {
  const [qr, qs] = await quiverRound();
  console.log(`${line(qr)}  ${qs}`);
  const [er, es] = await engineRound();
  console.log(`${line(er)}  ${es}`);
  ratios.push(summary(qr).qps / summary(er).qps);
}
console.log(`Quiver / engine QPS, per round: ${ratios.map((x) => x.toFixed(2)).join(", ")}`);
