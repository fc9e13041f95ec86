// Compressed Arrow IPC streams for tests, as LanceDB's remote client and other Arrow writers send
// them. LZ4 frames come from lz4-napi; ZSTD frames are built as "raw" (stored) blocks, which every
// ZSTD decoder must read, since the project has no ZSTD encoder.
import { compressionRegistry, CompressionType, tableFromIPC, tableToIPC } from "apache-arrow-codecs";
import { compressFrameSync, decompressFrameSync } from "lz4-napi";
import { decompress } from "fzstd";

const MAX_RAW_BLOCK = 128 * 1024;

/** One ZSTD frame holding `data` in raw blocks (frame header with a 4-byte content size). */
export function zstdStored(data: Uint8Array): Uint8Array {
  const parts: Buffer[] = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0])];
  const size = Buffer.alloc(4);
  size.writeUInt32LE(data.length);
  parts.push(size);
  let off = 0;
  do {
    const n = Math.min(MAX_RAW_BLOCK, data.length - off);
    const last = off + n >= data.length ? 1 : 0;
    const header = (n << 3) | last; // block type 0: raw
    parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff]), Buffer.from(data.subarray(off, off + n)));
    off += n;
  } while (off < data.length);
  return Buffer.concat(parts);
}

compressionRegistry.set(CompressionType.LZ4_FRAME, {
  encode: (b) => compressFrameSync(Buffer.from(b.buffer, b.byteOffset, b.byteLength)),
  decode: (b) => decompressFrameSync(Buffer.from(b.buffer, b.byteOffset, b.byteLength)),
});
compressionRegistry.set(CompressionType.ZSTD, { encode: zstdStored, decode: (b) => decompress(b) });

/** `ipc` (an uncompressed Arrow IPC stream) re-written with its record batches compressed. */
export function compressIpc(ipc: Uint8Array, codec: "lz4" | "zstd"): Uint8Array {
  return tableToIPC(tableFromIPC(ipc), "stream", codec === "lz4" ? CompressionType.LZ4_FRAME : CompressionType.ZSTD);
}
