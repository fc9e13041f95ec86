// Bounded decoding of Arrow IPC bodies, piece by piece: what a compressed frame can decode to,
// read from its headers (codec-frames.ts); a compressed body rewritten as a plain stream within
// the limit (ipc-codecs.ts); dictionary columns expanded by copying bytes, within the limit
// (dictionaries.ts). test/security/decode-bombs.test.ts sends the bombs over HTTP.
import { compressFrameSync } from "lz4-napi";
import { describe, expect, it } from "vitest";
import { arrow } from "../../src/engine/arrow.js";
import { lz4Bounds, zstdBounds } from "../../src/engine/codec-frames.js";
import { plainDictionaries } from "../../src/engine/dictionaries.js";
import { decompressIpc } from "../../src/engine/ipc-codecs.js";
import { isPlainIpc, normaliseIpc } from "../../src/engine/ipc-in.js";
import { compressIpc, compressedBuffers, zstdFrame, zstdRun } from "../helpers/compressed-ipc.js";

const MB = 1 << 20;
const rowsTable = (n: number) =>
  new arrow.Table({
    id: arrow.vectorFromArray(Array.from({ length: n }, (_, i) => i), new arrow.Int32()),
    text: arrow.vectorFromArray(Array.from({ length: n }, (_, i) => (i % 5 === 0 ? null : `text ${i}`)), new arrow.Utf8()),
  });
const json = (t: InstanceType<typeof arrow.Table>) => t.toArray().map((r) => r.toJSON());

describe("frame bounds", () => {
  it("ZSTD: raw and RLE blocks say their size exactly, with or without a content size", () => {
    const data = Buffer.concat([Buffer.alloc(200_000, 7), Buffer.from("mixed bytes")]);
    expect(zstdBounds(Buffer.from(zstdFrame(data)))).toEqual({ min: data.length, max: data.length, exact: data.length });
    expect(zstdBounds(Buffer.from(zstdRun(0, 900 * MB, false))).exact).toBe(900 * MB);
  });

  it("ZSTD: malformed frames are refused", () => {
    const frame = Buffer.from(zstdFrame(Buffer.from("abc")));
    expect(() => zstdBounds(Buffer.concat([frame, Buffer.from([0])]))).toThrow(/bytes after the ZSTD frame/);
    expect(() => zstdBounds(frame.subarray(0, frame.length - 1))).toThrow(/ends early/);
    const dict = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x21, 0x09, 0x01, 0x00, 0x00]);
    expect(() => zstdBounds(dict)).toThrow(/needs a dictionary/);
    const huge = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x01, 0x00, 0x40, 0x00]); // an RLE block of 2^20 bytes
    expect(() => zstdBounds(huge)).toThrow(/larger than 128 KiB/);
  });

  it("LZ4: compressed blocks decode to at most the frame's block size; stored ones exactly", () => {
    const b = lz4Bounds(compressFrameSync(Buffer.alloc(200_000, 1)));
    expect(b.exact).toBe(null);
    expect(b.min).toBe(0);
    expect(b.max).toBeGreaterThanOrEqual(200_000);
    expect(b.max - 200_000).toBeLessThan(b.blockMax);
  });
});

describe("compressed bodies", () => {
  it("decode to the same rows as the plain stream, for both codecs", () => {
    const plain = arrow.tableToIPC(rowsTable(1000), "stream");
    for (const codec of ["lz4", "zstd"] as const) {
      const out = arrow.tableFromIPC(decompressIpc(compressIpc(plain, codec), 256 * MB));
      expect(json(out), codec).toEqual(json(rowsTable(1000)));
    }
  });

  it("the file format is read as well as the stream, compressed or not; only a plain body counts as plain", () => {
    const file = arrow.tableToIPC(rowsTable(300), "file");
    expect(isPlainIpc(file)).toBe(true);
    expect(json(normaliseIpc(file, { maxDecodedBody: MB, maxValueBytes: MB }).table)).toEqual(json(rowsTable(300)));
    const zeros = new arrow.Table({ z: arrow.vectorFromArray(new Array(4000).fill(0), new arrow.Int32()) });
    const compressed = compressIpc(arrow.tableToIPC(zeros, "stream"), "zstd");
    expect(isPlainIpc(compressed)).toBe(false);
    expect(isPlainIpc(arrow.tableToIPC(new arrow.Table({ s: arrow.vectorFromArray(["a", "b"]) }), "stream"))).toBe(false);
    expect(isPlainIpc(Buffer.from("not arrow at all"))).toBe(false);
    expect(json(normaliseIpc(compressed, { maxDecodedBody: MB, maxValueBytes: MB }).table)).toEqual(json(zeros));
  });

  it("the declared lengths are summed against the limit before anything is decompressed", () => {
    const body = compressIpc(arrow.tableToIPC(rowsTable(1000), "stream"), "zstd");
    expect(() => decompressIpc(body, 1000)).toThrow(/^body: its compressed buffers declare \d+ bytes or more when decoded, past the limit of 1000 \(--max-decoded-body\)$/);
  });

  it("a buffer whose frame cannot give its declared length is 400, for either codec", () => {
    for (const codec of ["lz4", "zstd"] as const) {
      const zeros = new arrow.Table({ z: arrow.vectorFromArray(new Array(4000).fill(0), new arrow.Int32()) });
      const body = Buffer.from(compressIpc(arrow.tableToIPC(zeros, "stream"), codec));
      const [first] = compressedBuffers(body);
      const declared = Number(body.readBigInt64LE(first.lengthAt));
      body.writeBigInt64LE(BigInt(declared - 1), first.lengthAt);
      expect(() => decompressIpc(body, 256 * MB), codec).toThrow(new RegExp(`^body: an? ${codec === "lz4" ? "LZ4" : "ZSTD"} buffer declares ${declared - 1} bytes but`));
    }
  });
});

describe("dictionary columns", () => {
  const dict = (values: (string | null)[], indices: (number | null)[], type = new arrow.Dictionary(new arrow.Utf8(), new arrow.Int16())) => {
    const nullBitmap = new Uint8Array(Math.ceil(indices.length / 8));
    indices.forEach((k, i) => k !== null && (nullBitmap[i >> 3] |= 1 << (i & 7)));
    return arrow.makeVector(
      arrow.makeData({ type, length: indices.length, nullCount: indices.filter((k) => k === null).length, nullBitmap, data: Int16Array.from(indices, (k) => k ?? 0), dictionary: arrow.vectorFromArray(values, new arrow.Utf8()) }),
    );
  };

  it("expand to their value type, nulls (of the index or of the value) included, schema kept", () => {
    const t = new arrow.Table({ s: dict(["a", null, "ccc"], [2, 0, null, 1, 2, 0]), n: arrow.vectorFromArray([1, 2, 3, 4, 5, 6], new arrow.Int32()) });
    const out = plainDictionaries(t, 0, 1 * MB);
    expect(String(out.schema.fields[0].type)).toBe("Utf8");
    expect(out.schema.fields.map((f) => f.name)).toEqual(["s", "n"]);
    expect(json(out)).toEqual([
      { s: "ccc", n: 1 },
      { s: "a", n: 2 },
      { s: null, n: 3 },
      { s: null, n: 4 },
      { s: "ccc", n: 5 },
      { s: "a", n: 6 },
    ]);
  });

  it("fixed-width values and several batches with their own dictionaries", () => {
    const ints = arrow.makeVector(arrow.makeData({ type: new arrow.Dictionary(new arrow.Int64(), new arrow.Int32()), length: 4, nullCount: 0, data: Int32Array.from([1, 1, 0, 2]), dictionary: arrow.vectorFromArray([10n, 20n, 30n], new arrow.Int64()) }));
    expect(json(plainDictionaries(new arrow.Table({ x: ints }), 0, MB)).map((r) => r.x)).toEqual([20n, 20n, 10n, 30n]);
    const type = new arrow.Dictionary(new arrow.Utf8(), new arrow.Int16());
    const stream = arrow.tableToIPC(new arrow.Table({ s: dict(["x", "y"], [1, 0], type).concat(dict(["z"], [0, null], type)) }), "stream");
    expect(json(normaliseIpc(stream, { maxDecodedBody: MB, maxValueBytes: MB }).table).map((r) => r.s)).toEqual(["y", "x", "z", null]);
  });

  it("the expanded size is held to the limit before anything is built; bad indices and unsupported values are 400", () => {
    const big = new arrow.Table({ s: dict(["x".repeat(1000)], Array(2000).fill(0)) });
    expect(() => plainDictionaries(big, 0, MB)).toThrow(/^column "s": its dictionary expands the body to \d+ bytes or more, past the limit of 1048576 \(--max-decoded-body\)$/);
    expect(plainDictionaries(big, 0, 3 * MB).getChild("s")!.get(1999)).toBe("x".repeat(1000));
    expect(() => plainDictionaries(new arrow.Table({ s: dict(["a"], [0, 5]) }), 0, MB)).toThrow(/^column "s": dictionary index 5 is outside its dictionary of 1 values$/);
    const lists = arrow.makeVector(arrow.makeData({ type: new arrow.Dictionary(new arrow.List(new arrow.Field("item", new arrow.Int32())), new arrow.Int32()), length: 1, nullCount: 0, data: Int32Array.from([0]), dictionary: arrow.vectorFromArray([[1]], new arrow.List(new arrow.Field("item", new arrow.Int32()))) }));
    expect(() => plainDictionaries(new arrow.Table({ l: lists }), 0, MB)).toThrow(/^column "l": dictionary-encoded List<Int32> values are not supported/);
  });
});

describe("one value's size (--max-value-bytes)", () => {
  const limits = { maxDecodedBody: MB, maxValueBytes: 100 };
  const ipc = (columns: Record<string, InstanceType<typeof arrow.Vector>>) => arrow.tableToIPC(new arrow.Table(columns), "stream");
  const strings = new arrow.List(new arrow.Field("item", new arrow.Utf8(), true));
  const pair = new arrow.Struct([new arrow.Field("a", new arrow.Utf8(), true), new arrow.Field("b", new arrow.Int64(), true)]);

  it("counts a list's strings, a struct's fields and a later batch's rows; values at the bound pass", () => {
    const list = arrow.vectorFromArray([["x"], ["y".repeat(50), "z".repeat(51)]], strings);
    expect(() => normaliseIpc(ipc({ l: list }), limits)).toThrow(/^column "l": row 1 holds a value of 101 bytes, past the limit of 100 \(--max-value-bytes\)$/);
    const struct = arrow.vectorFromArray([{ a: "a".repeat(92), b: 1n }, { a: "a".repeat(93), b: 2n }], pair);
    expect(() => normaliseIpc(ipc({ s: struct }), limits)).toThrow(/^column "s": row 1 holds a value of 101 bytes/);
    const batches = arrow.vectorFromArray(["ok"], new arrow.Utf8()).concat(arrow.vectorFromArray(["fine", "w".repeat(101)], new arrow.Utf8()));
    expect(() => normaliseIpc(ipc({ t: batches }), limits)).toThrow(/^column "t": row 2 holds a value of 101 bytes/);
    expect(json(normaliseIpc(ipc({ t: arrow.vectorFromArray(["v".repeat(100), null], new arrow.Utf8()) }), limits).table).map((r) => r.t)).toEqual(["v".repeat(100), null]);
  });

  it("a fixed-width column is held to it by its width", () => {
    const wide = new arrow.FixedSizeList(13, new arrow.Field("item", new arrow.Float64(), true));
    expect(() => normaliseIpc(ipc({ v: arrow.vectorFromArray([new Array(13).fill(1)], wide) }), limits)).toThrow(/^column "v": row 0 holds a value of 104 bytes/);
  });
});
