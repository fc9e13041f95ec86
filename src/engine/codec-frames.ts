// The sizes a compressed buffer can decode to, read from its frame's headers before anything is
// decompressed: an Arrow IPC body declares each buffer's decoded length, and neither codec
// package checks a frame against it (fzstd allocates the length a frame header claims; lz4-napi
// decodes to the end). A frame whose structure cannot give the declared length is refused, so
// that a few hundred bytes cannot ask for gigabytes.
//   ZSTD (RFC 8878): frame header, then blocks of ≤ 128 KiB each: raw and RLE blocks say their
//   decoded size exactly; a compressed block decodes to at most 128 KiB.
//   LZ4 frame (lz4 Frame Format 1.6.x): header with a maximum block size, then blocks that are
//   stored (exact size) or compressed (at most the maximum block size).

/** What a frame decodes to: exactly `exact` bytes when the frame says so, else between min and max. */
export interface FrameBounds {
  min: number;
  max: number;
  exact: number | null;
}

const ZSTD_MAGIC = 0xfd2fb528;
const ZSTD_BLOCK_MAX = 128 << 10;
const LZ4_MAGIC = 0x184d2204;
const LZ4_BLOCK_MAX = [0, 0, 0, 0, 64 << 10, 256 << 10, 1 << 20, 4 << 20];

/** Thrown for a frame that is malformed or cannot decode to its declared length (a 400 upstream). */
export class FrameError extends Error {}
const bad = (why: string): never => {
  throw new FrameError(why);
};

function need(b: Buffer, end: number, codec: string): void {
  if (end > b.length) bad(`a ${codec} frame ends early`);
}

/** The bounds of one ZSTD frame filling all of `b`. */
export function zstdBounds(b: Buffer): FrameBounds {
  need(b, 6, "ZSTD");
  if (b.readUInt32LE(0) !== ZSTD_MAGIC) bad("not a ZSTD frame");
  const fhd = b[4];
  const single = (fhd >> 5) & 1;
  const fcsFlag = fhd >> 6;
  const dictBytes = [0, 1, 2, 4][fhd & 3];
  if (fhd & 8) bad("a ZSTD frame header with its reserved bit set");
  let at = 5 + (single ? 0 : 1);
  need(b, at + dictBytes, "ZSTD");
  for (let i = 0; i < dictBytes; i++) if (b[at + i] !== 0) bad("a ZSTD frame that needs a dictionary");
  at += dictBytes;
  const fcsBytes = fcsFlag === 0 ? single : 1 << fcsFlag;
  need(b, at + fcsBytes, "ZSTD");
  let content: number | null = null;
  if (fcsBytes === 1) content = b[at];
  else if (fcsBytes === 2) content = b.readUInt16LE(at) + 256;
  else if (fcsBytes === 4) content = b.readUInt32LE(at);
  else if (fcsBytes === 8) content = Number(b.readBigUInt64LE(at));
  at += fcsBytes;
  let min = 0;
  let compressed = 0;
  for (let last = 0; !last; ) {
    need(b, at + 3, "ZSTD");
    const header = b[at] | (b[at + 1] << 8) | (b[at + 2] << 16);
    at += 3;
    last = header & 1;
    const type = (header >> 1) & 3;
    const size = header >>> 3;
    if (size > ZSTD_BLOCK_MAX) bad("a ZSTD block larger than 128 KiB");
    if (type === 0) {
      min += size;
      at += size;
    } else if (type === 1) {
      min += size;
      at += 1;
    } else if (type === 2) {
      compressed++;
      at += size;
    } else bad("a ZSTD block of the reserved type");
    need(b, at, "ZSTD");
  }
  if ((fhd >> 2) & 1) at += 4;
  need(b, at, "ZSTD");
  if (at !== b.length) bad("bytes after the ZSTD frame (one frame per buffer is read)");
  const exact = content ?? (compressed === 0 ? min : null);
  return exact !== null ? { min: exact, max: exact, exact } : { min, max: min + compressed * ZSTD_BLOCK_MAX, exact: null };
}

/** The bounds of one LZ4 frame filling all of `b`, and its largest block. */
export function lz4Bounds(b: Buffer): FrameBounds & { blockMax: number } {
  need(b, 7, "LZ4");
  if (b.readUInt32LE(0) !== LZ4_MAGIC) bad("not an LZ4 frame");
  const flg = b[4];
  if (flg >> 6 !== 1) bad("an LZ4 frame of an unknown version");
  const blockChecksum = (flg >> 4) & 1;
  const contentSize = (flg >> 3) & 1;
  const contentChecksum = (flg >> 2) & 1;
  if (flg & 1) bad("an LZ4 frame that needs a dictionary");
  const blockMax = LZ4_BLOCK_MAX[(b[5] >> 4) & 7];
  if (!blockMax) bad("an LZ4 frame with an invalid maximum block size");
  let at = 6;
  let content: number | null = null;
  if (contentSize) {
    need(b, at + 8, "LZ4");
    content = Number(b.readBigUInt64LE(at));
    at += 8;
  }
  at += 1; // header checksum
  let min = 0;
  let compressed = 0;
  for (;;) {
    need(b, at + 4, "LZ4");
    const word = b.readUInt32LE(at);
    at += 4;
    if (word === 0) break;
    const size = word & 0x7fffffff;
    if (size > blockMax) bad("an LZ4 block larger than the frame's maximum block size");
    if (word >>> 31) min += size;
    else compressed++;
    at += size + (blockChecksum ? 4 : 0);
    need(b, at, "LZ4");
  }
  if (contentChecksum) at += 4;
  need(b, at, "LZ4");
  if (at !== b.length) bad("bytes after the LZ4 frame (one frame per buffer is read)");
  const exact = content ?? (compressed === 0 ? min : null);
  return exact !== null ? { min: exact, max: exact, exact, blockMax } : { min, max: min + compressed * blockMax, exact: null, blockMax };
}
