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

  it("inserts decoded in the worker pool (past --ingest-inline-max-bytes) share commits too: each writer's rows intact in its version", async () => {
    const t = await fresh();
    const writers = 12;
    const rows = 3000;
    const ids = (w: number) => Array.from({ length: rows }, (_, i) => 10_000 * (w + 1) + i);
    const bodies = Array.from({ length: writers }, (_, w) => arrowRows(ids(w)));
    expect(bodies[0].byteLength).toBeGreaterThan(32 << 10);
    const replies = await Promise.all(bodies.map((b) => post(t, "insert", b)));
    for (const r of replies) expect(r.status, r.text).toBe(200);
    for (const r of replies) expect(r.json.num_inserted_rows).toBe(rows);
    const versions = replies.map((r) => r.json.version as number);
    expect(new Set(versions).size).toBeLessThan(writers);
    for (let w = 0; w < writers; w++) {
      const mine = `id >= ${ids(w)[0]} AND id <= ${ids(w)[rows - 1]}`;
      expect(await countAt(t, { version: versions[w], predicate: mine })).toBe(rows);
      expect(await countAt(t, { version: versions[w] - 1, predicate: mine })).toBe(0);
    }
    // The values arrive as sent, not only their count.
    const last = ids(writers - 1)[rows - 1];
    expect(await countAt(t, { predicate: `id = ${last} AND s = 'r${last}'` })).toBe(1);
    expect(await countAt(t, {})).toBe(writers * rows + 1);
  });

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

describe("group commit of concurrent merge inserts", () => {
  const merge = (t: string, rows: unknown) => q.call("POST", `/v1/table/${t}/merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true`, rows);

  for (const form of ["arrow", "json"] as const) {
    it(`${WRITERS} single-row ${form} upserts at once (half updates, half inserts): fewer commits than writers, each answered its own counts and a version that holds its row`, async () => {
      const t = await fresh();
      expect((await post(t, "insert", Array.from({ length: WRITERS / 2 }, (_, i) => ({ id: 1000 + i, s: "old" })))).status).toBe(200);
      const before = (await post(t, "describe", {})).json.version as number;
      // Even writers update a row the table holds; odd writers insert a new one.
      const ids = Array.from({ length: WRITERS }, (_, i) => (i % 2 === 0 ? 1000 + i / 2 : 2000 + i));
      const body = (id: number) => (form === "arrow" ? toStream(new Table({ id: vectorFromArray([id], new Int32()), s: vectorFromArray([`new${id}`], new Utf8()) })) : [{ id, s: `new${id}` }]);
      const replies = await Promise.all(ids.map((id) => merge(t, body(id))));
      for (const r of replies) expect(r.status, r.text).toBe(200);
      replies.forEach((r, i) => expect([r.json.num_updated_rows, r.json.num_inserted_rows], `writer ${i}`).toEqual(i % 2 === 0 ? [1, 0] : [0, 1]));
      const versions = replies.map((r) => r.json.version as number);
      const distinct = [...new Set(versions)];
      expect(distinct.length).toBeLessThan(WRITERS);
      expect((await post(t, "describe", {})).json.version - before).toBe(distinct.length);
      for (let i = 0; i < WRITERS; i++) expect(await countAt(t, { version: versions[i], predicate: `id = ${ids[i]} AND s = 'new${ids[i]}'` })).toBe(1);
      expect(await countAt(t, {})).toBe(1 + WRITERS / 2 + WRITERS / 2);
    });
  }

  it("upserts of keys the table does not hold yet share commits too (the held-keys look finds none)", async () => {
    const t = await fresh();
    const replies = await Promise.all(Array.from({ length: WRITERS }, (_, i) => merge(t, [{ id: 3000 + i, s: "n" }])));
    for (const r of replies) expect([r.status, r.json.num_inserted_rows, r.json.num_updated_rows]).toEqual([200, 1, 0]);
    expect(new Set(replies.map((r) => r.json.version)).size).toBeLessThan(WRITERS);
  });

  it("writers of the same key are never combined: the last committed wins, each answered as if alone", async () => {
    const t = await fresh();
    const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => merge(t, [{ id: 7, s: `v${i}` }])));
    for (const r of replies) expect(r.status, r.text).toBe(200);
    expect(replies.map((r) => r.json.num_inserted_rows + r.json.num_updated_rows)).toEqual(Array(12).fill(1));
    expect(replies.filter((r) => r.json.num_inserted_rows === 1)).toHaveLength(1);
    expect(new Set(replies.map((r) => r.json.version)).size).toBe(12);
    const last = await q.call("POST", `/v1/table/${t}/query`, { filter: "id = 7", columns: ["s"], k: 10 }, { accept: "application/json" });
    const newest = replies.reduce((a, r, i) => (r.json.version > replies[a].json.version ? i : a), 0);
    expect(last.json).toEqual([{ s: `v${newest}` }]);
  });

  it("a merge that does not fit the table is refused alone; its neighbours are stored", async () => {
    const t = await fresh();
    const good = Array.from({ length: 12 }, (_, i) => merge(t, [{ id: 500 + i, s: "ok" }]));
    const bad = q.call("POST", `/v1/table/${t}/merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true`, [{ id: "x", s: "bad" }]);
    const [badReply, ...goodReplies] = await Promise.all([bad, ...good]);
    expect(badReply.status).toBe(400);
    for (const r of goodReplies) expect(r.status, r.text).toBe(200);
    expect(await countAt(t, {})).toBe(13);
  });
});
