// Compressed Arrow IPC bodies (the IPC format's per-buffer LZ4 frame or ZSTD compression, which
// LanceDB's remote client uses for every upload). The apache-arrow copy LanceDB pins cannot read
// them, so a compressed body is rewritten here as a plain stream: each message's metadata is read
// with apache-arrow 21 (which knows the compression field), each buffer decompressed into its
// place, and the record batch headers written again without compression. apache-arrow 21 and the
// codecs load on the first compressed body, not at every start of the server and worker threads.
//
// Decoding is bounded before anything is decompressed: every compressed buffer starts with its
// decoded length (8 bytes), and their sum must be within `maxDecoded`; each frame's headers must
// be able to give exactly that length (codec-frames.ts); and no codec writes more than it (a
// ZSTD frame decodes into a buffer of that size, an LZ4 frame's result must have that size).
import { createRequire } from "node:module";
import { FrameError, lz4Bounds, zstdBounds, type FrameBounds } from "./codec-frames.js";
import { ipcMessages } from "./ipc-messages.js";
import { ApiError, invalid } from "../errors.js";
import { frameMessage } from "./ipc-out.js";

type MessageModule = typeof import("apache-arrow-codecs/ipc/metadata/message");
interface Codecs {
  meta: MessageModule;
  lz4: (b: Buffer) => Buffer;
  zstdInto: (b: Uint8Array, out: Uint8Array) => void;
}
const require = createRequire(import.meta.url);
let loaded: Codecs | null = null;

function codecs(): Codecs {
  if (loaded) return loaded;
  // The package entry first: it patches the metadata classes' decoders in.
  require("apache-arrow-codecs");
  const meta = require("apache-arrow-codecs/ipc/metadata/message") as MessageModule;
  const { decompressFrameSync } = require("lz4-napi") as typeof import("lz4-napi");
  const { decompress } = require("fzstd") as typeof import("fzstd");
  return (loaded = { meta, lz4: decompressFrameSync, zstdInto: (b, out) => void decompress(b, out) });
}

const MessageHeader = { Schema: 1, DictionaryBatch: 2, RecordBatch: 3 } as const;
const CompressionType = { LZ4_FRAME: 0, ZSTD: 1 } as const;
// A buffer's decoded length is -1 where its writer left it uncompressed.
const NOT_COMPRESSED = -1n;

type Meta = MessageModule;
type Batch = InstanceType<Meta["RecordBatch"]>;

/** Whether apache-arrow's reader refused `err` only because record batches were compressed. */
export const isCompressedBatchError = (err: unknown) => /compression not implemented/i.test(String((err as Error)?.message));

/** One buffer of a compressed batch: where its frame is, and the length it declares. */
interface Part {
  frame: Buffer;
  declared: number;
  stored: boolean;
}

/** A message as it will be written: its batch header (null for a schema), and its buffers' parts. */
interface Planned {
  metadata: Uint8Array;
  body: Uint8Array;
  header: Batch | null;
  dictionary: { id: number; isDelta: boolean } | null;
  codec: number;
  parts: Part[];
}

const pad8 = (n: number) => (n + 7) & ~7;

function plan(raw: Uint8Array, maxDecoded: number): { messages: Planned[]; decoded: number } {
  const { meta } = codecs();
  const messages: Planned[] = [];
  let decoded = 0;
  const decodedMessages = new Map<Uint8Array, InstanceType<Meta["Message"]>>();
  const bodyLength = (m: Uint8Array) => {
    const message = meta.Message.decode(m);
    decodedMessages.set(m, message);
    return Number(message.bodyLength);
  };
  for (const { metadata, body } of ipcMessages(raw, bodyLength)) {
    const message = decodedMessages.get(metadata)!;
    const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    let header: Batch | null = null;
    let dictionary: Planned["dictionary"] = null;
    if (message.headerType === MessageHeader.RecordBatch) header = message.header() as Batch;
    else if (message.headerType === MessageHeader.DictionaryBatch) {
      const d = message.header() as InstanceType<Meta["DictionaryBatch"]>;
      header = d.data;
      dictionary = { id: Number(d.id), isDelta: d.isDelta };
    } else if (message.headerType !== MessageHeader.Schema) throw invalid("body: an Arrow IPC message of an unknown type");
    const parts: Part[] = [];
    const codec = header?.compression?.type ?? -1;
    for (const region of header?.buffers ?? []) {
      const [offset, length] = [Number(region.offset), Number(region.length)];
      if (offset < 0 || offset + length > b.length) throw invalid("body: an Arrow IPC buffer lies outside its message body");
      const frame = b.subarray(offset, offset + length);
      if (codec < 0 || length === 0) {
        parts.push({ frame, declared: length, stored: true });
      } else {
        if (length < 8) throw invalid("body: a compressed Arrow IPC buffer is shorter than its 8-byte length");
        const n = frame.readBigInt64LE(0);
        const stored = n === NOT_COMPRESSED;
        if (!stored && (n < 0n || n > BigInt(Number.MAX_SAFE_INTEGER))) throw invalid(`body: a compressed Arrow IPC buffer declares ${n} bytes`);
        parts.push({ frame: frame.subarray(8), declared: stored ? length - 8 : Number(n), stored });
      }
      decoded += pad8(parts[parts.length - 1].declared);
    }
    if (decoded > maxDecoded) {
      throw invalid(`body: its compressed buffers declare ${decoded} bytes or more when decoded, past the limit of ${maxDecoded} (--max-decoded-body)`);
    }
    messages.push({ metadata, body, header, dictionary, codec, parts });
  }
  return { messages, decoded };
}

/** Checks that `frame` can decode to exactly `declared` bytes, then decodes it into `out` (that long). */
function decodeInto(codec: number, frame: Buffer, declared: number, out: Uint8Array): void {
  const { lz4, zstdInto } = codecs();
  const fits = (b: FrameBounds, name: string) => {
    if (declared < b.min || declared > b.max) {
      const can = b.exact !== null ? `${b.exact}` : `${b.min} to ${b.max}`;
      throw invalid(`body: a ${name} buffer declares ${declared} bytes but its frame decodes to ${can}`);
    }
  };
  try {
    if (codec === CompressionType.ZSTD) {
      fits(zstdBounds(frame), "ZSTD");
      // fzstd writes into `out` and never past it.
      zstdInto(frame, out);
    } else if (codec === CompressionType.LZ4_FRAME) {
      const bounds = lz4Bounds(frame);
      fits(bounds, "LZ4");
      // lz4-napi decodes a frame to its end: the frame may hold no more blocks than the declared
      // length needs (writers fill every block but the last), so it decodes to less than one
      // block more than declared.
      if (bounds.max - declared >= bounds.blockMax) throw invalid(`body: an LZ4 buffer declares ${declared} bytes but its frame holds blocks for up to ${bounds.max}`);
      const data = lz4(frame);
      if (data.length !== declared) throw invalid(`body: an LZ4 buffer declares ${declared} bytes but decodes to ${data.length}`);
      out.set(data);
    } else throw invalid(`body: Arrow IPC compression type ${codec} is not supported (LZ4_FRAME and ZSTD are)`);
  } catch (e) {
    if (e instanceof ApiError) throw e;
    if (e instanceof FrameError) throw invalid(`body: ${e.message}`);
    // The codecs' own errors (fzstd's carry a numeric code, lz4-napi's a string one); a frame
    // that decodes past its buffer makes fzstd write out of range.
    if (e instanceof RangeError || (e as { code?: unknown }).code !== undefined) throw invalid(`body: a compressed buffer does not decode to its declared length (${(e as Error).message})`);
    throw e;
  }
}

/**
 * The same data as an uncompressed Arrow IPC stream, decoded within `maxDecoded` bytes; 400 for a
 * body past it, a frame that does not decode to its declared length, or malformed framing.
 */
export function decompressIpc(raw: Uint8Array, maxDecoded: number): Uint8Array {
  const { meta } = codecs();
  let messages: Planned[];
  try {
    messages = plan(raw, maxDecoded).messages;
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw invalid(`body: not a valid Arrow IPC stream (${(e as Error).message})`);
  }
  const chunks: Uint8Array[] = [];
  for (const m of messages) {
    if (!m.header || m.codec < 0) {
      chunks.push(frameMessage(m.metadata), m.body);
      continue;
    }
    const regions: InstanceType<Meta["BufferRegion"]>[] = [];
    let size = 0;
    for (const p of m.parts) {
      regions.push(new meta.BufferRegion(size, p.declared));
      size += pad8(p.declared);
    }
    const body = Buffer.alloc(size);
    m.parts.forEach((p, i) => {
      const out = body.subarray(Number(regions[i].offset), Number(regions[i].offset) + p.declared);
      if (p.stored || p.declared === 0) out.set(p.frame.subarray(0, p.declared));
      else decodeInto(m.codec, p.frame, p.declared, out);
    });
    const batch = new meta.RecordBatch(m.header.length, m.header.nodes, regions, null, m.header.variadicBufferCounts);
    const header = m.dictionary ? new meta.DictionaryBatch(batch, m.dictionary.id, m.dictionary.isDelta) : batch;
    chunks.push(frameMessage(meta.Message.encode(meta.Message.from(header, size))), body);
  }
  chunks.push(new Uint8Array(8).fill(0xff, 0, 4));
  return Buffer.concat(chunks);
}
