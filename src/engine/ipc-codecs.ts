// Compressed Arrow IPC bodies (the IPC format's per-buffer LZ4 frame or ZSTD compression, which
// LanceDB's remote client uses for every upload). The apache-arrow copy LanceDB pins cannot read
// them; apache-arrow 21 can, given codecs. So a compressed body is read by that newer copy with
// well-kept codec packages and written back as a plain stream for the usual decode: two more
// passes over the data, paid only by compressed bodies.
import { compressionRegistry, CompressionType, tableFromIPC, tableToIPC } from "apache-arrow-codecs";
import { decompress as zstd } from "fzstd";
import { decompressFrameSync as lz4Frame } from "lz4-napi";

compressionRegistry.set(CompressionType.LZ4_FRAME, {
  decode: (b) => lz4Frame(Buffer.from(b.buffer, b.byteOffset, b.byteLength)),
});
compressionRegistry.set(CompressionType.ZSTD, { decode: (b) => zstd(b) });

/** Whether apache-arrow's reader refused `err` only because record batches were compressed. */
export const isCompressedBatchError = (err: unknown) => /compression not implemented/i.test(String((err as Error)?.message));

/** The same data as an uncompressed Arrow IPC stream. */
export function decompressIpc(raw: Uint8Array): Uint8Array {
  return tableToIPC(tableFromIPC(raw), "stream");
}
