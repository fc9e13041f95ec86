// Compressed Arrow IPC streams for tests, as LanceDB's remote client and other Arrow writers send
// them. LZ4 frames come from lz4-napi; ZSTD frames are built from "raw" (stored) blocks, and "RLE"
// blocks for runs of one byte, which every ZSTD decoder must read, since the project has no ZSTD
// encoder. apache-arrow 21 writes the batches, but puts each buffer's compressed length where the
// IPC format wants its decoded length, so the lengths are put right afterwards (compressed
// buffers), and can be made to lie (compressed buffers that claim another length).
import { createRequire } from "node:module";
import { compressionRegistry, CompressionType, tableFromIPC, tableToIPC } from "apache-arrow-codecs";
import { compressFrameSync, decompressFrameSync } from "lz4-napi";
import { decompress } from "fzstd";
import { ipcMessages } from "../../src/engine/ipc-messages.js";

const MAX_BLOCK = 128 * 1024;

/** One ZSTD frame holding `data` in raw and RLE blocks (frame header with an 8-byte content size unless `contentSize` is false). */
export function zstdFrame(data: Uint8Array, contentSize = true): Uint8Array {
  const parts: Buffer[] = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd])];
  if (contentSize) {
    const size = Buffer.alloc(9);
    size[0] = 0xe0; // 8-byte content size, single segment
    size.writeBigUInt64LE(BigInt(data.length), 1);
    parts.push(size);
  } else parts.push(Buffer.from([0x00, 0x58])); // no content size; window 2^21
  let off = 0;
  do {
    const n = Math.min(MAX_BLOCK, data.length - off);
    const last = off + n >= data.length ? 1 : 0;
    const chunk = data.subarray(off, off + n);
    const rle = n > 0 && chunk.every((b) => b === chunk[0]);
    const header = (n << 3) | ((rle ? 1 : 0) << 1) | last;
    parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff]), rle ? Buffer.from([chunk[0]]) : Buffer.from(chunk));
    off += n;
  } while (off < data.length);
  return Buffer.concat(parts);
}

const lz4 = (b: Uint8Array) => compressFrameSync(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
compressionRegistry.set(CompressionType.LZ4_FRAME, { encode: lz4, decode: (b) => decompressFrameSync(Buffer.from(b.buffer, b.byteOffset, b.byteLength)) });
compressionRegistry.set(CompressionType.ZSTD, { encode: (b) => zstdFrame(b), decode: (b) => decompress(b) });

// apache-arrow 21's CommonJS metadata classes (the package entry first: it patches their decoders in).
const require = createRequire(import.meta.url);
require("apache-arrow-codecs");
const meta = require("apache-arrow-codecs/ipc/metadata/message") as typeof import("apache-arrow-codecs/ipc/metadata/message");

/** Each compressed buffer of a compressed stream: its frame (after the 8-byte length) and where that length is. */
export function compressedBuffers(ipc: Uint8Array): { frame: Buffer; lengthAt: number }[] {
  const out: { frame: Buffer; lengthAt: number }[] = [];
  const whole = Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength);
  for (const { metadata, body } of ipcMessages(ipc, (m) => Number(meta.Message.decode(m).bodyLength))) {
    const m = meta.Message.decode(metadata);
    const header = m.headerType === 2 ? m.header().data : m.headerType === 3 ? m.header() : null;
    if (!header?.compression) continue;
    const base = body.byteOffset - ipc.byteOffset;
    for (const r of header.buffers) {
      const at = base + Number(r.offset);
      if (Number(r.length) === 0 || whole.readBigInt64LE(at) === -1n) continue;
      out.push({ frame: whole.subarray(at + 8, at + Number(r.length)), lengthAt: at });
    }
  }
  return out;
}

/** One ZSTD frame of `n` bytes of `byte`, in RLE blocks (4 bytes each 128 KiB), built without holding the bytes. */
export function zstdRun(byte: number, n: number, contentSize = true): Uint8Array {
  const blocks = Math.max(1, Math.ceil(n / MAX_BLOCK));
  const head = contentSize ? Buffer.alloc(13) : Buffer.alloc(6);
  head.writeUInt32LE(0xfd2fb528, 0);
  if (contentSize) {
    head[4] = 0xe0;
    head.writeBigUInt64LE(BigInt(n), 5);
  } else head.set([0x00, 0x58], 4);
  const body = Buffer.alloc(blocks * 4);
  for (let i = 0; i < blocks; i++) {
    const size = Math.min(MAX_BLOCK, n - i * MAX_BLOCK);
    const header = (size << 3) | (1 << 1) | (i === blocks - 1 ? 1 : 0);
    body.set([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff, byte], i * 4);
  }
  return Buffer.concat([head, body]);
}

/** `ipc` (an uncompressed Arrow IPC stream) re-written with its batches (dictionaries too) compressed. */
export function compressIpc(ipc: Uint8Array, codec: "lz4" | "zstd"): Uint8Array {
  const out = Buffer.from(tableToIPC(tableFromIPC(ipc), "stream", codec === "lz4" ? CompressionType.LZ4_FRAME : CompressionType.ZSTD));
  for (const { frame, lengthAt } of compressedBuffers(out)) {
    const decoded = codec === "lz4" ? decompressFrameSync(frame) : decompress(frame);
    out.writeBigInt64LE(BigInt(decoded.length), lengthAt);
  }
  return out;
}

/**
 * An Arrow IPC stream of one record batch of `rows` rows of `schema`, whose body is `buffers` as
 * given (each compressed one already behind its 8-byte length): for bodies no writer would make.
 */
export function rawCompressedStream(schema: import("apache-arrow-codecs").Schema, rows: number, nodes: [number, number][], buffers: Uint8Array[], codec: "lz4" | "zstd"): Uint8Array {
  const frame = (flatbuffer: Uint8Array) => {
    const size = (flatbuffer.byteLength + 8 + 7) & ~7;
    const b = Buffer.alloc(size);
    b.writeInt32LE(-1, 0);
    b.writeInt32LE(size - 8, 4);
    b.set(flatbuffer, 8);
    return b;
  };
  const regions: InstanceType<typeof meta.BufferRegion>[] = [];
  const parts: Buffer[] = [];
  let at = 0;
  for (const buf of buffers) {
    regions.push(new meta.BufferRegion(at, buf.byteLength));
    const padded = Buffer.alloc((buf.byteLength + 7) & ~7);
    padded.set(buf);
    parts.push(padded);
    at += padded.length;
  }
  const compression = new meta.BodyCompression(codec === "lz4" ? CompressionType.LZ4_FRAME : CompressionType.ZSTD);
  const batch = new meta.RecordBatch(rows, nodes.map(([n, nulls]) => new meta.FieldNode(n, nulls)), regions, compression);
  return Buffer.concat([
    frame(meta.Message.encode(meta.Message.from(schema))),
    frame(meta.Message.encode(meta.Message.from(batch, at))),
    ...parts,
    Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]),
  ]);
}

/** `frame` behind an 8-byte length that says `declared`. */
export function withLength(frame: Uint8Array, declared: number): Uint8Array {
  const b = Buffer.alloc(8 + frame.byteLength);
  b.writeBigInt64LE(BigInt(declared));
  b.set(frame, 8);
  return b;
}
