// Concurrent single-row inserts (or upserts: merge_insert on id, updating a held key or inserting a
// new one) into one table: Quiver (group commit: writes that wait for a commit share the next one)
// against LanceDB in-process, one commit per write (concurrent `add` or `mergeInsert` on one
// handle), same row shape, same run, alternating rounds, at each client count; writes/s and p99 as
// ratios, and how many answers shared a version.
//   node dist/bench/writes.js [--op insert|upsert] [--clients 1,8,64] [--duration 5] [--rounds 3]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import * as lancedb from "@lancedb/lancedb";
import { arrow } from "../src/engine/arrow.js";
import { Conn } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line, summary, type Result } from "./stats.js";

const { values } = parseArgs({ options: { op: { type: "string", default: "insert" }, clients: { type: "string", default: "1,8,64" }, duration: { type: "string", default: "5" }, rounds: { type: "string", default: "3" } } });
const UPSERT = values.op === "upsert";
// Upserts cycle over this many keys: the first pass inserts, later ones update.
const KEYS = 5000;
const keyOf = (n: number) => (UPSERT ? n % KEYS : n);
const LEVELS = values.clients!.split(",").map(Number);
const D = Number(values.duration);
const KEY = "bench-writes-key";
const row = (i: number) => new arrow.Table({ id: arrow.vectorFromArray([i], new arrow.Int32()) });
const body = (i: number) => Buffer.from(arrow.tableToIPC(row(i), "stream"));

function sharedVersions(versions: number[]): number {
  const seen = new Map<number, number>();
  for (const v of versions) seen.set(v, (seen.get(v) ?? 0) + 1);
  return [...seen.values()].filter((n) => n > 1).reduce((a, n) => a + n, 0);
}

async function quiverRound(C: number): Promise<[Result, number]> {
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-writes-"));
  const q = await startQuiver(dir, KEY);
  const url = new URL(q.url);
  const conns = Array.from({ length: C }, () => new Conn(url.hostname, Number(url.port)));
  const h = `x-api-key: ${KEY}\r\ncontent-type: application/vnd.apache.arrow.stream\r\n`;
  await conns[0].request("POST", "/v1/table/t/create", h, body(0));
  const versions: number[] = [];
  let n = 1;
  const r = await closedLoop(`quiver ${values.op}`, C, D, async (loop) => {
    const reply = await conns[loop].request("POST", UPSERT ? "/v1/table/t/merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true" : "/v1/table/t/insert", h, body(keyOf(n++)));
    if (reply.status !== 200) return `${reply.status} ${reply.body}`;
    versions.push(JSON.parse(reply.body.toString()).version);
    return null;
  });
  conns.forEach((c) => c.close());
  await q.stop();
  rmSync(dir, { recursive: true, force: true });
  return [r, sharedVersions(versions)];
}

async function engineRound(C: number): Promise<[Result, number]> {
  const dir = mkdtempSync(path.join(tmpdir(), "engine-writes-"));
  const t = await (await lancedb.connect(dir)).createTable("t", row(0));
  const versions: number[] = [];
  let n = 1;
  const write = (d: ReturnType<typeof row>) => (UPSERT ? t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(d) : t.add(d));
  const r = await closedLoop(`engine ${UPSERT ? "mergeInsert" : "add"}`, C, D, async () => {
    versions.push((await write(row(keyOf(n++)))).version);
    return null;
  });
  rmSync(dir, { recursive: true, force: true });
  return [r, sharedVersions(versions)];
}

console.log(`${values.op}s; clients ${LEVELS.join(", ")}; ${D} s per phase, ${values.rounds} alternating rounds`);
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
for (const C of LEVELS) {
  console.log(`\n${C} clients\n${header()}  answers sharing a version`);
  const qps: number[] = [];
  const p99: number[] = [];
  for (let i = 0; i < Number(values.rounds); i++) {
    const [qr, qs] = await quiverRound(C);
    console.log(`${line(qr)}  ${qs}`);
    const [er, es] = await engineRound(C);
    console.log(`${line(er)}  ${es}`);
    qps.push(summary(qr).qps / summary(er).qps);
    p99.push(summary(qr).p99 / summary(er).p99);
  }
  console.log(`${C} clients: Quiver / engine ${values.op}s/s ${qps.map((x) => x.toFixed(2)).join(", ")} (median ${median(qps).toFixed(2)}); p99 ${p99.map((x) => x.toFixed(2)).join(", ")} (median ${median(p99).toFixed(2)})`);
}
