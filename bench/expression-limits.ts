// Where the engine's SQL parser and planner crash on deep expressions, measured shape by shape.
// Each probe runs in its own child process (a crash there is SIGSEGV, the stack overflowing in
// native code), and a binary search finds the largest size that still answers for each shape and
// each place an expression reaches the engine (a scan filter, a count predicate, a projection).
// The limits in src/schemas/expression.ts are chosen against these figures.
//   node dist/bench/expression-limits.js            (this Node)
//   node dist/bench/expression-limits.js --probe <dir> <place> <shape> <n>   (one probe; internal)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as lancedb from "@lancedb/lancedb";
import { expressionCost } from "../src/schemas/expression.js";

/** Expression shapes of size n; each is valid SQL over a table with an integer column `id`. */
const SHAPES: Record<string, (n: number) => string> = {
  or: (n) => Array.from({ length: n }, (_, i) => `id = ${i}`).join(" OR "),
  and: (n) => Array.from({ length: n }, (_, i) => `id <> ${i + 1000000}`).join(" AND "),
  parens: (n) => "(".repeat(n) + "id = 1" + ")".repeat(n),
  not: (n) => "NOT ".repeat(n) + "(id = 1)",
  arith: (n) => "id" + " + 1".repeat(n) + " > 0",
  mul: (n) => "id" + " * 1".repeat(n) + " >= 0",
  concat: (n) => "'a'" + " || 'a'".repeat(n) + " <> 'b'",
  minus: (n) => "-".repeat(n).split("").join(" ") + " id < 0",
  func: (n) => "abs(".repeat(n) + "id" + ")".repeat(n) + " >= 0",
  case: (n) => "CASE WHEN id = 0 THEN 1 ELSE ".repeat(n) + "0" + " END".repeat(n) + " = 1",
  in: (n) => `id IN (${Array.from({ length: n }, (_, i) => i).join(", ")})`,
};

const PLACES = ["filter", "predicate", "projection"] as const;
type Place = (typeof PLACES)[number];

async function probe(dir: string, place: Place, shape: string, n: number): Promise<void> {
  const db = await lancedb.connect(dir);
  const table = (await db.tableNames()).includes("t") ? await db.openTable("t") : await db.createTable("t", Array.from({ length: 100 }, (_, i) => ({ id: i })));
  const expr = SHAPES[shape](n);
  try {
    if (place === "filter") await table.query().where(expr).limit(1).toArray();
    else if (place === "predicate") await table.countRows(expr);
    else await table.query().select({ x: expr }).limit(1).toArray();
    process.stdout.write("ok");
  } catch (e) {
    // A refusal by the engine (an error, not a crash) is an answer too.
    process.stdout.write(`error ${String((e as Error).message).slice(0, 120).replace(/\s+/g, " ")}`);
  }
}

type Outcome = "ok" | "error" | "crash";

function run(dir: string, place: Place, shape: string, n: number): { outcome: Outcome; detail: string } {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--probe", dir, place, shape, String(n)], { encoding: "utf8", timeout: 120_000 });
  if (r.signal || (r.status !== 0 && r.status !== null)) return { outcome: "crash", detail: r.signal ?? `exit ${r.status}` };
  if (r.stdout.startsWith("ok")) return { outcome: "ok", detail: "" };
  return { outcome: "error", detail: r.stdout.slice(6) };
}

/** The smallest crashing n (binary search to ~3% after doubling), or null when none up to `max`. */
function firstCrash(dir: string, place: Place, shape: string, max: number): { crash: number | null; lastSafe: number; note: string } {
  let lo = 0;
  let hi: number | null = null;
  let note = "";
  for (let n = 64; n <= max; n *= 2) {
    const r = run(dir, place, shape, n);
    if (r.outcome === "crash") {
      hi = n;
      break;
    }
    if (r.outcome === "error" && !note) note = `error from n=${n}: ${r.detail}`;
    lo = n;
  }
  if (hi === null) return { crash: null, lastSafe: lo, note };
  while (hi - lo > Math.max(8, lo * 0.03)) {
    const mid = Math.floor((lo + hi) / 2);
    if (run(dir, place, shape, mid).outcome === "crash") hi = mid;
    else lo = mid;
  }
  return { crash: hi, lastSafe: lo, note };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === "--probe") return probe(args[1], args[2] as Place, args[3], Number(args[4]));
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-exprlimits-"));
  const max = Number(process.env.EXPR_MAX ?? 1 << 17);
  const shapes = process.env.EXPR_SHAPES ? process.env.EXPR_SHAPES.split(",") : Object.keys(SHAPES);
  const places = process.env.EXPR_PLACES ? (process.env.EXPR_PLACES.split(",") as Place[]) : PLACES;
  console.log(`node ${process.version}; probes up to n=${max}; cost = src/schemas/expression.ts expressionCost`);
  console.log("place       shape   first crash n   its length   its cost   note");
  try {
    for (const place of places) {
      for (const shape of shapes) {
        const { crash, lastSafe, note } = firstCrash(dir, place, shape, max);
        const at = crash ?? lastSafe;
        const expr = SHAPES[shape](at);
        const cost = expressionCost(expr);
        console.log(
          `${place.padEnd(11)} ${shape.padEnd(7)} ${String(crash ?? `none ≤ ${lastSafe}`).padEnd(15)} ${String(expr.length).padEnd(12)} ${String(cost).padEnd(10)} ${note}`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
