// Group commit: single-row inserts sent at once share commits (fewer versions than writers), yet
// each writer is answered only once its rows are committed, with a version that holds them and its
// own row count; a bad batch is refused alone; Idempotency-Key retries replay, never apply twice.
import { Int32, Table, Utf8, vectorFromArray } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { ADMIN_KEY, request, serverForFile } from "./helpers/quiver.js";

const q = serverForFile();
const WRITERS = 32;

const post = (id: string, op: string, body?: unknown, headers?: Record<string, string>) =>
  headers ? request(`${q.url}/v1/table/${id}/${op}`, "POST", body, { "x-api-key": ADMIN_KEY, ...headers }) : q.call("POST", `/v1/table/${id}/${op}`, body);
const arrowRows = (ids: number[]) => toStream(new Table({ id: vectorFromArray(ids, new Int32()), s: vectorFromArray(ids.map((i) => `r${i}`), new Utf8()) }));
const countAt = async (t: string, body: Record<string, unknown>) => (await post(t, "count_rows", body)).json as number;

let tables = 0;
async function fresh(): Promise<string> {
  const t = `gc${++tables}`;
  expect((await post(t, "create", arrowRows([0]))).status).toBe(200);
  return t;
}

describe("group commit of concurrent inserts", () => {
  for (const form of ["arrow", "json"] as const) {
    it(`${WRITERS} single-row ${form} inserts at once: fewer commits than writers, each answered a version that holds its row, nothing lost`, async () => {
      const t = await fresh();
      const before = (await post(t, "describe", {})).json.version as number;
      const ids = Array.from({ length: WRITERS }, (_, i) => i + 1);
      const body = (id: number) => (form === "arrow" ? arrowRows([id]) : [{ id, s: `r${id}` }]);
      const replies = await Promise.all(ids.map((id) => post(t, "insert", body(id))));
      for (const r of replies) expect(r.status, r.text).toBe(200);
      for (const r of replies) expect(r.json.num_inserted_rows).toBe(1);
      const versions = replies.map((r) => r.json.version as number);
      const distinct = [...new Set(versions)].sort((a, b) => a - b);
      expect(distinct.length).toBeLessThan(WRITERS);
      // Each commit's version is the next one: the table has exactly one version per commit.
      const after = (await post(t, "describe", {})).json.version as number;
      expect(after - before).toBe(distinct.length);
      // A writer's row is in its version and in none before it.
      for (const v of distinct) {
        const mine = ids.filter((_, i) => versions[i] === v);
        expect(await countAt(t, { version: v, predicate: `id IN (${mine.join(",")})` })).toBe(mine.length);
        expect(await countAt(t, { version: v - 1, predicate: `id IN (${mine.join(",")})` })).toBe(0);
      }
      expect(await countAt(t, {})).toBe(WRITERS + 1);
    });
  }

  it("a batch that does not fit the table is refused alone, naming the column; its neighbours are stored", async () => {
    const t = await fresh();
    const good = Array.from({ length: 16 }, (_, i) => post(t, "insert", [{ id: i + 100, s: "ok" }]));
    const bad = post(t, "insert", [{ id: "not a number", s: "bad" }]);
    const [badReply, ...goodReplies] = await Promise.all([bad, ...good]);
    expect(badReply.status).toBe(400);
    expect(badReply.json.detail).toContain("id");
    for (const r of goodReplies) expect(r.status, r.text).toBe(200);
    expect(await countAt(t, {})).toBe(17);
  });

  it("retries with the same Idempotency-Key replay the first answer and add nothing", async () => {
    const t = await fresh();
    const ids = Array.from({ length: 12 }, (_, i) => i + 200);
    const send = () => Promise.all(ids.map((id) => post(t, "insert", [{ id, s: "k" }], { "idempotency-key": `gc-${id}` })));
    const first = await send();
    const again = await send();
    for (let i = 0; i < ids.length; i++) {
      expect(first[i].status, first[i].text).toBe(200);
      expect(again[i].status).toBe(200);
      expect(again[i].headers.get("idempotent-replayed")).toBe("true");
      expect(again[i].json).toEqual(first[i].json);
    }
    expect(await countAt(t, {})).toBe(13);
  });
});
