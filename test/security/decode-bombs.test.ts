// Decode bombs from a write key: 864 bytes (a dictionary column of an 8 MiB value and 4,096
// indices, as ZSTD RLE frames) grew the server to 22 GB until the kernel killed it; a 29 KB ZSTD
// buffer inflated to 900 MB; a 120 KB dictionary body stored 500 MB of strings. Bodies are now
// held to --max-decoded-body from their metadata before anything is decompressed or expanded
// (src/engine/ipc-codecs.ts, codec-frames.ts, dictionaries.ts), codecs write no more than the
// length a buffer declares, and compressed or dictionary bodies decode in the worker pool
// whatever their size. Each bomb is 400 and the server's peak RSS grows by less than 100 MB.
import { readFileSync } from "node:fs";
import * as arrow from "apache-arrow";
import { Schema as Schema21, Field as Field21, Binary as Binary21 } from "apache-arrow-codecs";
import { compressFrameSync } from "lz4-napi";
import { describe, expect, it } from "vitest";
import { compressIpc, rawCompressedStream, withLength, zstdRun } from "../helpers/compressed-ipc.js";
import { sample } from "../helpers/metrics.js";
import { serverForFile } from "../helpers/quiver.js";

const q = serverForFile();
const MB = 1 << 20;
/** Peak resident memory of the server process so far (VmHWM), in MB. */
const peakMb = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${q.proc.pid}/status`, "utf8"))![1]) / 1024;
const ingestTasks = async () => sample((await q.call("GET", "/metrics")).text, "quiver_pool_task_seconds_count", { task: "ingest" }) ?? 0;

/** A table of one dictionary-encoded string column: `rows` indices, all 0, into one value `value`. */
function dictionaryBody(value: string, rows: number): Uint8Array {
  const type = new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32());
  const dictionary = arrow.vectorFromArray([value], new arrow.Utf8());
  const data = arrow.makeData({ type, length: rows, nullCount: 0, data: new Int32Array(rows), dictionary });
  return arrow.tableToIPC(new arrow.Table({ s: arrow.makeVector(data) }), "stream");
}

/** One record batch of one binary row whose data buffer is `data` (a frame behind its declared length). */
function binaryRow(declaredOffsetsEnd: number, data: Uint8Array, codec: "lz4" | "zstd"): Uint8Array {
  const schema = new Schema21([new Field21("b", new Binary21(), true)]);
  const offsets = new Int32Array([0, declaredOffsetsEnd]);
  return rawCompressedStream(schema, 1, [[1, 0]], [new Uint8Array(0), withLength(new Uint8Array(offsets.buffer), -1), data], codec);
}

async function create(name: string, body: Uint8Array) {
  const r = await q.call("POST", `/v1/table/${name}/create`, body);
  expect(r.status, r.text).toBe(200);
}
const binaryTable = () => arrow.tableToIPC(new arrow.Table({ b: arrow.vectorFromArray([new Uint8Array([1, 2])], new arrow.Binary()) }), "stream");

describe("decode bombs", () => {
  it("a dictionary of one 8 MiB value under 4,096 indices, ZSTD-compressed to under 1 KB: 400, memory as it was", async () => {
    await create("d", dictionaryBody("seed", 1));
    const bomb = compressIpc(dictionaryBody("a".repeat(8 * MB), 4096), "zstd");
    expect(bomb.length).toBeLessThan(1024);
    const before = peakMb();
    const r = await q.call("POST", "/v1/table/d/insert", bomb);
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toMatch(/^column "s": its dictionary expands the body to \d+ bytes or more, past the limit of 268435456 \(--max-decoded-body\)$/);
    expect(peakMb() - before).toBeLessThan(100);
    expect((await q.call("POST", "/v1/table/d/count_rows", {})).json).toBe(1);
  });

  it("an uncompressed 120 KB dictionary body that expands to 500 MB: 400, memory as it was", async () => {
    await create("d2", dictionaryBody("seed", 1));
    const bomb = dictionaryBody("x".repeat(100_000), 5_000);
    expect(bomb.length).toBeLessThan(130_000);
    const before = peakMb();
    const r = await q.call("POST", "/v1/table/d2/insert", bomb);
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toMatch(/--max-decoded-body/);
    expect(peakMb() - before).toBeLessThan(100);
    expect((await q.call("POST", "/v1/table/d2/count_rows", {})).json).toBe(1);
  });

  it("a 29 KB ZSTD buffer that inflates to 900 MB: 400 whether it declares 900 MB or lies, memory as it was", async () => {
    await create("z", binaryTable());
    const big = 900 * MB;
    const before = peakMb();
    for (const contentSize of [true, false]) {
      const frame = zstdRun(0, big, contentSize);
      expect(frame.length).toBeLessThan(30_000);
      const honest = await q.call("POST", "/v1/table/z/insert", binaryRow(big, withLength(frame, big), "zstd"));
      expect(honest.status, honest.text).toBe(400);
      expect(honest.json.detail).toMatch(/^body: its compressed buffers declare \d+ bytes or more when decoded, past the limit of 268435456 \(--max-decoded-body\)$/);
      const lying = await q.call("POST", "/v1/table/z/insert", binaryRow(64, withLength(frame, 64), "zstd"));
      expect(lying.status, lying.text).toBe(400);
      expect(lying.json.detail).toBe(`body: a ZSTD buffer declares 64 bytes but its frame decodes to ${big}`);
    }
    expect(peakMb() - before).toBeLessThan(100);
    expect((await q.call("POST", "/v1/table/z/count_rows", {})).json).toBe(1);
  });

  it("an LZ4 frame of 64 MiB behind a declared length of 64 bytes: 400 before it is decoded", async () => {
    await create("z2", binaryTable());
    const frame = compressFrameSync(Buffer.alloc(64 * MB));
    const before = peakMb();
    const r = await q.call("POST", "/v1/table/z2/insert", binaryRow(64, withLength(frame, 64), "lz4"));
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toMatch(/^body: an LZ4 buffer declares 64 bytes but its frame holds blocks for up to \d+$/);
    expect(peakMb() - before).toBeLessThan(60);
    expect((await q.call("POST", "/v1/table/z2/count_rows", {})).json).toBe(1);
  });

  it("small compressed and dictionary bodies decode in the worker pool, and arrive intact", async () => {
    const rows = Array.from({ length: 50 }, (_, i) => `tag-${i % 7}`);
    const encoded = arrow.tableToIPC(arrow.tableFromArrays({ id: Int32Array.from(rows, (_, i) => i), tag: rows }), "stream");
    expect(encoded.length).toBeLessThan(32 * 1024);
    await create("p", encoded);
    const utf8 = arrow.tableToIPC(new arrow.Table({ id: arrow.vectorFromArray(rows.map((_, i) => i), new arrow.Int32()), tag: arrow.vectorFromArray(rows, new arrow.Utf8()) }), "stream");
    const bodies = [["dictionary", encoded], ["lz4", compressIpc(encoded, "lz4")], ["zstd", compressIpc(encoded, "zstd")], ["lz4 without dictionary", compressIpc(utf8, "lz4")]] as const;
    for (const [codec, body] of bodies) {
      const tasks = await ingestTasks();
      const r = await q.call("POST", "/v1/table/p/insert", body);
      expect(r.status, `${codec}: ${r.text}`).toBe(200);
      expect(await ingestTasks(), codec).toBe(tasks + 1);
    }
    const got = await q.call("POST", "/v1/table/p/query", { columns: ["tag"], filter: "id = 12", k: 10 });
    expect(arrow.tableFromIPC(got.bytes).toArray().map((x) => x.tag)).toEqual(["tag-5", "tag-5", "tag-5", "tag-5", "tag-5"]);
  });

  it("JSON rows: a null row of a fixed-size list of 10^9 floats is 400, not 4 GB", async () => {
    const schema = { fields: [{ name: "v", type: { type: "fixed_size_list", length: 1_000_000_000, fields: [{ name: "item", type: { type: "float32" }, nullable: true }] }, nullable: true }] };
    const before = peakMb();
    const r = await q.call("POST", "/v1/table/j/create", { schema, rows: [{ v: null }] });
    expect(r.status, r.text).toBe(400);
    expect(r.json.detail).toMatch(/^rows: 1 rows of \d+ bytes \(1 columns, absent and null values counted\) build \d+ bytes or more, past the limit of 268435456 \(--max-decoded-body\)$/);
    expect(peakMb() - before).toBeLessThan(100);
    expect(q.proc.exitCode).toBe(null);
  });
});
