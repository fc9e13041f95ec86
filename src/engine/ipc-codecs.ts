// Compressed Arrow IPC bodies (the IPC format's per-buffer LZ4 frame or ZSTD compression, which
// LanceDB's remote client uses for every upload). The apache-arrow copy LanceDB pins cannot read
// them; apache-arrow 21 can, given codecs. So a compressed body is read by that newer copy with
// well-kept codec packages and written back as a plain stream for the usual decode: two more
// passes over the data, paid only by compressed bodies. The newer copy and the codecs load on the
// first compressed body (~75 ms), not at every start of the server and of each worker thread.
import { createRequire } from "node:module";

type Arrow21 = typeof import("apache-arrow-codecs");
const require = createRequire(import.meta.url);
let arrow21: Arrow21 | null = null;

function codecs(): Arrow21 {
  if (arrow21) return arrow21;
  const a = require("apache-arrow-codecs") as Arrow21;
  const { decompressFrameSync } = require("lz4-napi") as typeof import("lz4-napi");
  const { decompress } = require("fzstd") as typeof import("fzstd");
  a.compressionRegistry.set(a.CompressionType.LZ4_FRAME, {
    decode: (b) => decompressFrameSync(Buffer.from(b.buffer, b.byteOffset, b.byteLength)),
  });
  a.compressionRegistry.set(a.CompressionType.ZSTD, { decode: (b) => decompress(b) });
  return (arrow21 = a);
}

/** Whether apache-arrow's reader refused `err` only because record batches were compressed. */
export const isCompressedBatchError = (err: unknown) => /compression not implemented/i.test(String((err as Error)?.message));

/** The same data as an uncompressed Arrow IPC stream. */
export function decompressIpc(raw: Uint8Array): Uint8Array {
  const a = codecs();
  return a.tableToIPC(a.tableFromIPC(raw), "stream");
}
