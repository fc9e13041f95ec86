// Expressions are bounded before the engine sees them: a deep expression used to crash the server
// (SIGSEGV) with a read key. An expression at the limit is answered by the engine; one past it is
// 400 naming the field and the limit, and the server stays up. The limits' values are measured
// by bench/expression-limits.ts (never by crashing a server here).
import { Field, Int64, Schema, Table } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { toStream } from "../helpers/arrow.js";
import { expressionCost } from "../../src/schemas/expression.js";
import { READ_KEY, serverForFile } from "../helpers/quiver.js";
import { seedTable } from "../helpers/seed.js";

const COST = 160;
const q = serverForFile({ seed: (dir) => seedTable(dir, ["e"], Array.from({ length: 50 }, (_, i) => ({ id: i, name: `n${i}` }))) });
const read = (op: string, body: unknown) => q.call("POST", `/v1/table/e/${op}`, body, { "x-api-key": READ_KEY });

/** `id + 1 + … > 0` of exactly `cost` units (the shape that crashes the engine soonest). */
const arith = (cost: number) => "id" + " + 1".repeat(cost - 1) + " > 0";
const idSchema = Buffer.from(toStream(new Table(new Schema([new Field("id", new Int64(), true)])))).toString("base64");
/** The attack of the finding: 40,000 `id = i` terms joined by OR (about 550 KB). */
const orAttack = Array.from({ length: 40_000 }, (_, i) => `id = ${i}`).join(" OR ");

describe("expression limits", () => {
  it("counts operators, keywords and parentheses, not quoted text", () => {
    expect(expressionCost(arith(COST))).toBe(COST);
    expect(expressionCost("name = 'a + b OR (c)' AND \"x-y\" > 1")).toBe(3);
    expect(expressionCost("id IN (1, 2, 3)")).toBe(2);
    expect(expressionCost("NOT (a <= 1) OR b <> 2")).toBe(5);
  });

  it("an expression at the limit is answered by the engine", async () => {
    expect((await read("count_rows", { predicate: arith(COST) })).json).toBe(50);
    const r = await read("query", { filter: arith(COST), k: 100 });
    expect(r.status).toBe(200);
  });

  it("one past it is 400 naming the field and the limit", async () => {
    for (const [op, body, field] of [
      ["count_rows", { predicate: arith(COST + 1) }, "predicate"],
      ["query", { filter: arith(COST + 1) }, "filter"],
      ["query", { columns: { x: arith(COST + 1) } }, "columns.x"],
    ] as const) {
      const r = await read(op, body);
      expect(r.status, op).toBe(400);
      expect(r.json.detail).toMatch(new RegExp(`^${field.replace(".", "\\.")}: expression too complex: ${COST + 1} .* limit of ${COST} \\(--max-expression-cost\\)`));
    }
  });

  it("write routes' expressions are bounded too", async () => {
    const deep = arith(COST + 1);
    const cases: [string, unknown, string][] = [
      ["delete", { predicate: deep }, "predicate"],
      ["update", { predicate: "id = 1", updates: [["id", deep]] }, "updates[0][1]"],
      ["add_columns", { new_columns: [{ name: "z", expression: deep }] }, "new_columns[0].expression"],
    ];
    for (const [op, body, field] of cases) {
      const r = await q.call("POST", `/v1/table/e/${op}`, body);
      expect(r.status, op).toBe(400);
      expect(r.json.detail.startsWith(`${field}: expression too complex`), r.json.detail).toBe(true);
    }
    const merge = await q.call("POST", `/v1/table/e/merge_insert?on=id&when_matched_update_all_filt=${encodeURIComponent(deep)}`, new Uint8Array(0), { "content-type": "application/vnd.apache.arrow.stream" });
    expect(merge.status).toBe(400);
    expect(merge.json.detail).toMatch(/^when_matched_update_all_filt: expression too complex/);
    const view = await q.call("POST", "/v1/materialized_view/v/create", { kind: "query", source_query: JSON.stringify({ table: "e", filter: deep }), output_schema: idSchema });
    expect(view.status).toBe(400);
    expect(view.json.detail).toMatch(/^source_query\.filter: expression too complex/);
    expect((await q.call("POST", "/v1/table/e/count_rows", {})).json).toBe(50);
  });

  it("the 40,000-term OR attack is 400 and the server stays up", async () => {
    for (const [op, body] of [
      ["count_rows", { predicate: orAttack }],
      ["query", { filter: orAttack }],
    ] as const) {
      const r = await read(op, body);
      expect(r.status).toBe(400);
      expect(r.json.detail).toMatch(/expression of \d+ characters is longer than the limit of 65536 \(--max-expression-length\)/);
    }
    expect(q.proc.exitCode).toBe(null);
    expect((await read("count_rows", { predicate: "id < 10" })).json).toBe(10);
  });
});
