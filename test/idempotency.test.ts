// Idempotency-Key on mutations: a retry with the same key and body returns the first answer
// instead of applying again, also after a restart within the window; the same key with another
// body is 409; after the window the key is free again.
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { beforeAll, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { READ_KEY, WRITE_KEY, removeDir, serverForFile, startQuiver } from "./helpers/quiver.js";

const q = serverForFile({ args: ["--idempotency-window-ms", "600000"] });
const rows = (ids: number[]) => toStream(new Table({ id: vectorFromArray(ids, new Int32()) }));
const insert = (body: Uint8Array, key?: string, apiKey = WRITE_KEY) =>
  q.call("POST", "/v1/table/idem/insert", body, { "x-api-key": apiKey, ...(key ? { "idempotency-key": key } : {}) });
const count = async () => (await q.call("POST", "/v1/table/idem/count_rows", {})).json as number;

beforeAll(async () => {
  expect((await q.call("POST", "/v1/table/idem/create", rows([0]))).status).toBe(200);
});

it("insert retried with the same Idempotency-Key and body is applied once and answers the first result", async () => {
  const first = await insert(rows([1, 2]), "k-1");
  expect(first.status).toBe(200);
  const retry = await insert(rows([1, 2]), "k-1");
  expect(retry.status).toBe(200);
  expect(retry.json).toEqual(first.json);
  expect(retry.headers.get("idempotent-replayed")).toBe("true");
  expect(await count()).toBe(3);
  // Without a key, the same insert applies again.
  expect((await insert(rows([1, 2]))).status).toBe(200);
  expect(await count()).toBe(5);
});

it("the same key with a different body is 409 naming the key, and changes nothing", async () => {
  const r = await insert(rows([7]), "k-1");
  expect(r.status).toBe(409);
  expect(r.json.detail).toMatch(/Idempotency-Key "k-1" was used for a different request/);
  expect(await count()).toBe(5);
});

it("concurrent retries under one key apply once", async () => {
  const replies = await Promise.all(Array.from({ length: 5 }, () => insert(rows([3]), "k-2")));
  for (const r of replies) expect(r.status).toBe(200);
  expect(new Set(replies.map((r) => JSON.stringify(r.json))).size).toBe(1);
  expect(await count()).toBe(6);
});

it("keys are per credential: another credential's same key is a new request", async () => {
  const admin = await q.call("POST", "/v1/table/idem/insert", rows([1, 2]), { "idempotency-key": "k-1" });
  expect(admin.status).toBe(200);
  expect(admin.headers.get("idempotent-replayed")).toBeNull();
  expect(await count()).toBe(8);
});

it("a key longer than 255 characters is 400 naming the header; reads ignore the header", async () => {
  const r = await insert(rows([1]), "x".repeat(256));
  expect(r.status).toBe(400);
  expect(r.json.detail).toMatch(/Idempotency-Key/);
  const read = await q.call("POST", "/v1/table/idem/count_rows", {}, { "x-api-key": READ_KEY, "idempotency-key": "r" });
  expect(read.json).toBe(8);
});

it("a retry after a restart within the window still returns the first answer", async () => {
  const first = await insert(rows([9]), "k-restart");
  expect(first.status).toBe(200);
  await q.restart();
  const retry = await insert(rows([9]), "k-restart");
  expect(retry.json).toEqual(first.json);
  expect(retry.headers.get("idempotent-replayed")).toBe("true");
  expect(await count()).toBe(9);
});

it("after a 1 s window the key is free again: the same request applies anew", async () => {
  const s = await startQuiver({ args: ["--idempotency-window-ms", "1000"] });
  try {
    expect((await s.call("POST", "/v1/table/w/create", rows([0]))).status).toBe(200);
    const call = () => s.call("POST", "/v1/table/w/insert", rows([1]), { "idempotency-key": "k" });
    expect((await call()).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1100));
    const later = await call();
    expect(later.status).toBe(200);
    expect(later.headers.get("idempotent-replayed")).toBeNull();
    expect((await s.call("POST", "/v1/table/w/count_rows", {})).json).toBe(3);
  } finally {
    await s.stop();
    removeDir(s.dataDir);
  }
});
