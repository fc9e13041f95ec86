// Re-framing LanceDB's result buffers into ONE Arrow IPC file without decoding the data.
// nativeExecute() yields each record batch as a complete little IPC file (magic, schema message,
// one batch message, footer). The batch messages are 8-byte aligned and self-contained, so they
// are passed through as slices of the engine's buffers; only a new footer listing their offsets
// is encoded. Chunks are produced one engine batch at a time, so a consumer that writes with
// backpressure holds about one batch in memory, never the whole result twice.
import { createRequire } from "node:module";
import { arrow } from "./arrow.js";

// The CommonJS copy (the one LanceDB loaded), whose metadata classes are fully initialised; the ESM
// deep module imported on its own would miss the Schema decoder its package entry patches in.
type FileModule = typeof import("apache-arrow/ipc/metadata/file");
export const { FileBlock, Footer } = createRequire(import.meta.url)("apache-arrow/ipc/metadata/file") as FileModule;
type FileBlock = InstanceType<FileModule["FileBlock"]>;
type Footer = InstanceType<FileModule["Footer"]>;
type MessageModule = typeof import("apache-arrow/ipc/metadata/message");
const { Message } = createRequire(import.meta.url)("apache-arrow/ipc/metadata/message") as MessageModule;
type BatchHeader = InstanceType<MessageModule["RecordBatch"]>;

export const MAGIC = Buffer.from("ARROW1\0\0");
export const TAIL_MAGIC = Buffer.from("ARROW1");
const CONTINUATION = 0xffffffff;

/** An encoded message's flatbuffer as an IPC message: continuation, length, the bytes, padded to 8. */
export function frameMessage(flatbuffer: Uint8Array): Uint8Array {
  const size = (flatbuffer.byteLength + 8 + 7) & ~7;
  const out = Buffer.alloc(size);
  out.writeUInt32LE(CONTINUATION, 0);
  out.writeInt32LE(size - 8, 4);
  out.set(flatbuffer, 8);
  return out;
}

interface Parsed {
  footer: Footer;
  blocks: FileBlock[];
}

function parse(b: Buffer): Parsed {
  if (b.length < 22 || b.toString("latin1", b.length - 6) !== "ARROW1") {
    throw new Error("engine result is not an Arrow IPC file");
  }
  const flen = b.readInt32LE(b.length - 10);
  const footer = Footer.decode(b.subarray(b.length - 10 - flen, b.length - 10));
  if (footer.numDictionaries > 0) throw new Error("dictionary-encoded engine results cannot be re-framed");
  return { footer, blocks: [...footer.recordBatches()] };
}

/** The schema message of an engine buffer: after the magic and the writer's zero padding. */
function schemaMessage(b: Buffer, end: number): Buffer {
  let start = 8;
  while (start < end && b.readUInt32LE(start) !== CONTINUATION) start += 8;
  return b.subarray(start, end);
}

/** The header (length, nodes, buffers) of the record batch message at `block` of IPC file `b`. */
export function batchHeader(b: Buffer, block: FileBlock): BatchHeader {
  const start = Number(block.offset);
  return Message.decode(b.subarray(start + 8, start + block.metaDataLength)).header() as BatchHeader;
}

/** Rows in an engine buffer's record batches, read from their message headers. */
const rowsOf = (b: Buffer, p: Parsed): number => p.blocks.reduce((n, blk) => n + Number(batchHeader(b, blk).length), 0);

/** Rows in one engine buffer (a little IPC file), from its headers alone. */
export const rowsIn = (b: Buffer): number => rowsOf(b, parse(b));

/**
 * One IPC file from the engine's buffers: `first` plus whatever `next()` yields until null. When
 * `first` alone holds `most` rows (the query's limit), the answer does not wait for the engine's
 * last pull, which only says the end (~70 µs a search). `first` is checked at once (so a bad one
 * fails before any byte is sent); the chunks are then the header, each batch message in turn, and
 * the footer.
 */
export function ipcFile(first: Buffer, next: () => Promise<Buffer | null>, most: number | null = null): AsyncGenerator<Uint8Array> {
  const head = parse(first);
  if (most === null || rowsOf(first, head) !== most) return chunks(first, head, next);
  // The pull still runs, off the answer's path, so the engine ends its stream itself rather than
  // when the garbage collector drops it.
  next().catch(() => undefined);
  return chunks(first, head, async () => null);
}

/**
 * A first engine buffer up to this size waits for the engine's next: a result of one buffer (a
 * top-k search's) is then sent as the engine wrote it, a complete IPC file, with no footer to
 * encode (~20 µs of the event loop a search). A larger first buffer streams at once.
 */
const WHOLE_BYTES = 1024 * 1024;

async function* chunks(first: Buffer, head: Parsed, next: () => Promise<Buffer | null>): AsyncGenerator<Uint8Array> {
  let ahead = first.length <= WHOLE_BYTES ? await next() : undefined;
  if (ahead === null) {
    yield first;
    return;
  }
  const schemaEnd = head.blocks.length ? head.blocks[0].offset : first.length - 10 - first.readInt32LE(first.length - 10);
  const schema = schemaMessage(first, Number(schemaEnd));
  const blocks: FileBlock[] = [];
  let offset = MAGIC.length + schema.length;
  yield MAGIC;
  yield schema;
  for (let b: Buffer | null = first, p: Parsed | null = head; b; ) {
    for (const blk of p!.blocks) {
      const start = Number(blk.offset);
      const len = blk.metaDataLength + Number(blk.bodyLength);
      blocks.push(new FileBlock(blk.metaDataLength, blk.bodyLength, offset));
      offset += len;
      yield b.subarray(start, start + len);
    }
    b = ahead ?? (await next());
    ahead = undefined;
    p = b ? parse(b) : null;
  }
  const footer = Footer.encode(new Footer(head.footer.schema, head.footer.version, blocks, []));
  const len = Buffer.alloc(4);
  len.writeInt32LE(footer.length);
  yield footer;
  yield Buffer.concat([len, TAIL_MAGIC]);
}

/** An IPC file with a schema and no batches, for empty results (the engine sends no buffer then). */
export function emptyIpcFile(schema: import("apache-arrow").Schema | null): Uint8Array {
  const s = schema ?? new arrow.Schema([]);
  return arrow.tableToIPC(new arrow.Table(s as never), "file");
}

/** An engine result as one IPC file in one fresh buffer (the view spans it whole); null for no rows. */
export async function ipcFileBytes(it: { next(): Promise<Buffer | null> }): Promise<Uint8Array | null> {
  const first = await it.next();
  if (!first) return null;
  const parts: Uint8Array[] = [];
  for await (const c of ipcFile(first, () => it.next())) parts.push(c);
  return new Uint8Array(Buffer.concat(parts));
}
