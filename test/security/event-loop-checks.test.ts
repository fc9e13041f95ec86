// Issue 50, rows 3 and 12: work the event loop did in proportion to a request's text or to the
// tables stored. A filter's text (row 3 sent 56 KB: `id > -1 AND id IN (8,000 values)`) was
// checked against the expression bounds on the event loop, ~1 µs a character; a long one is now
// checked in the worker pool, with the same answer. Each catalog check looked into two directories
// of every table (row 12: 734 tables, a create took 114 → 500 ms); tables the catalog's rows name
// are no longer looked into, only the datasets no row names.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { scanRootDatasets } from "../../src/catalog/root-listing.js";
import { CHECKED_AHEAD } from "../../src/schemas/expression.js";
import { sample } from "../helpers/metrics.js";
import { READ_KEY, serverForFile } from "../helpers/quiver.js";
import { seedTable } from "../helpers/seed.js";

const q = serverForFile({ seed: (dir) => seedTable(dir, ["e"], Array.from({ length: 50 }, (_, i) => ({ id: i, name: `n${i}` }))) });
const read = (op: string, body: unknown) => q.call("POST", `/v1/table/e/${op}`, body, { "x-api-key": READ_KEY });
const checks = async () => sample((await q.call("GET", "/metrics")).text, "quiver_pool_task_seconds_count", { task: "expressionFaults" }) ?? 0;

/** Row 3's filter, scaled: `id > -1 AND id IN (n values)`, of which ids 0, 3, 6, … are stored. */
const inList = (n: number) => `id > -1 AND id IN (${Array.from({ length: n }, (_, i) => i * 3).join(", ")})`;

describe("JSON rows into a wide table", () => {
  it("a small body that would build a value for every one of many columns is decoded in the pool (it was on the event loop below --ingest-inline-max-bytes)", async () => {
    const decodes = async () => sample((await q.call("GET", "/metrics")).text, "quiver_pool_task_seconds_count", { task: "ingestJson" }) ?? 0;
    const wide = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`c${i}`, i]));
    expect((await q.call("POST", "/v1/table/wide/create", [wide])).status).toBe(200);
    const before = await decodes();
    // 2 KB of empty rows: 700 rows × 300 columns.
    const body = "{}\n".repeat(700);
    const r = await q.call("POST", "/v1/table/wide/insert", body, { "content-type": "application/x-ndjson" });
    expect(r.status, r.text).toBe(200);
    expect(await decodes()).toBe(before + 1);
    expect((await q.call("POST", "/v1/table/wide/count_rows", {})).json).toBe(701);
    // A small body into a narrow table is decoded where it arrives, as before.
    expect((await q.call("POST", "/v1/table/narrow/create", [{ id: 1, name: "z" }])).status).toBe(200);
    expect((await q.call("POST", "/v1/table/narrow/insert", "{\"id\":2,\"name\":\"y\"}\n".repeat(100), { "content-type": "application/x-ndjson" })).status).toBe(200);
    expect(await decodes()).toBe(before + 1);
  });
});

describe("a long filter's check", () => {
  it("runs in the worker pool, and the filter is answered as a short one is", async () => {
    const filter = inList(2000);
    expect(filter.length).toBeGreaterThan(CHECKED_AHEAD);
    const before = await checks();
    const r = await read("count_rows", { predicate: filter });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toBe(17);
    expect(await checks()).toBe(before + 1);
    // A short filter is checked where it is, as before.
    expect((await read("count_rows", { predicate: inList(10) })).json).toBe(10);
    expect(await checks()).toBe(before + 1);
  });

  it("past a bound, is 400 naming the field and the limit, as a short one is", async () => {
    // 161 operators (--max-expression-cost 160), made long by a quoted string the cost does not count.
    const long = `name = '${"x".repeat(CHECKED_AHEAD)}' OR id${" + 1".repeat(158)} > 0`;
    const before = await checks();
    for (const [op, body, field] of [
      ["count_rows", { predicate: long }, "predicate"],
      ["query", { filter: long, k: 3 }, "filter"],
      ["query", { columns: { x: long } }, "columns.x"],
    ] as const) {
      const r = await read(op, body);
      expect(r.status, r.text).toBe(400);
      expect(r.json.detail).toMatch(new RegExp(`^${field.replace(".", "\\.")}: expression too complex: 161 .* limit of 160 \\(--max-expression-cost\\)`));
    }
    expect(await checks()).toBe(before + 3);
    const text = `id IN (${"1, ".repeat(30_000)}1)`;
    const tooLong = await read("count_rows", { predicate: text });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json.detail).toBe(`predicate: expression of ${text.length} characters is longer than the limit of 65536 (--max-expression-length)`);
  });
});

describe("the catalog's look at the data directory", () => {
  it("looks into the datasets no row names, not into those the rows name", async () => {
    const root = mkdtempSync(path.join(tmpdir(), "quiver-root-scan-"));
    for (const name of ["named", "unnamed"]) {
      mkdirSync(path.join(root, `${name}.lance`, "_versions"), { recursive: true });
      writeFileSync(path.join(root, `${name}.lance`, "_versions", "1.manifest"), "");
    }
    expect([...(await scanRootDatasets(root, new Set()))].sort()).toEqual(["named.lance", "unnamed.lance"]);
    expect([...(await scanRootDatasets(root, new Set(["named.lance"])))]).toEqual(["unnamed.lance"]);
  });
});
