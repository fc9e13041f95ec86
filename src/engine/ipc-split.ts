// Splitting a batched search's result (one Arrow IPC file whose rows carry a `query_index`) into
// one IPC file per member without decoding it into apache-arrow vectors: each run of rows of one
// query becomes a record batch message whose buffers are byte ranges of the engine's body (offsets
// rebased, validity bits copied only where a column has nulls); only the small metadata is
// encoded. Decoding the batch and re-encoding 32 tables cost ~1.4 ms a batch (bench:micro).
import { createRequire } from "node:module";
import type { DataType, Field, Schema } from "apache-arrow";
import { arrow } from "./arrow.js";
import { FileBlock, Footer, MAGIC, TAIL_MAGIC, batchHeader, frameMessage } from "./ipc-out.js";

// The CommonJS copy's metadata classes, as ipc-out.ts explains.
type MessageModule = typeof import("apache-arrow/ipc/metadata/message");
const { Message, RecordBatch: BatchHeader, FieldNode, BufferRegion } = createRequire(import.meta.url)("apache-arrow/ipc/metadata/message") as MessageModule;
type FieldNode = InstanceType<MessageModule["FieldNode"]>;
type BufferRegion = InstanceType<MessageModule["BufferRegion"]>;

const T = arrow.Type;
const ZEROS = new Uint8Array(8);

/** A record batch being read: its nodes and buffers in depth-first order, and its body. */
interface Reader {
  nodes: FieldNode[];
  buffers: BufferRegion[];
  body: Buffer;
  node: number;
  buffer: number;
}

/** A record batch being written: nodes, buffer regions, and the body's parts (8-byte padded). */
export interface Writer {
  nodes: FieldNode[];
  regions: BufferRegion[];
  parts: Uint8Array[];
  bytes: number;
}

export const newWriter = (): Writer => ({ nodes: [], regions: [], parts: [], bytes: 0 });

/** A field node (its length and null count) of the batch being written. */
export function node(w: Writer, length: number, nulls: number): void {
  w.nodes.push(new FieldNode(length, nulls));
}

/** Append one buffer to the batch being written (an empty one for an absent validity bitmap). */
export function put(w: Writer, b: Uint8Array): void {
  w.regions.push(new BufferRegion(w.bytes, b.byteLength));
  if (b.byteLength === 0) return;
  w.parts.push(b);
  const pad = (8 - (b.byteLength % 8)) % 8;
  if (pad) w.parts.push(ZEROS.subarray(0, pad));
  w.bytes += b.byteLength + pad;
}

const bufferOf = (r: Reader, region: BufferRegion) => r.body.subarray(region.offset, region.offset + region.length);

/** Bits [s, s + n) of a bitmap as a new bitmap, and how many of them are set. */
function bits(src: Buffer, s: number, n: number): { bytes: Uint8Array; set: number } {
  const out = new Uint8Array(Math.ceil(n / 8));
  let set = 0;
  for (let i = 0; i < n; i++) {
    const j = s + i;
    if (src[j >> 3] & (1 << (j & 7))) {
      out[i >> 3] |= 1 << (i & 7);
      set++;
    }
  }
  return { bytes: out, set };
}

/** Offsets [s, e] rebased to start at 0, and the range of the values they cover. */
function offsets(src: Buffer, s: number, e: number, large: boolean): { bytes: Uint8Array; from: number; to: number } {
  const width = large ? 8 : 4;
  const at = (i: number) => (large ? Number(src.readBigInt64LE(i * 8)) : src.readInt32LE(i * 4));
  const from = at(s);
  const out = Buffer.allocUnsafe((e - s + 1) * width);
  for (let i = 0; i <= e - s; i++) {
    if (large) out.writeBigInt64LE(BigInt(at(s + i) - from), i * 8);
    else out.writeInt32LE(at(s + i) - from, i * 4);
  }
  return { bytes: out, from, to: at(e) };
}

/** Bytes per value of a fixed-width type. */
export function widthOf(type: DataType): number {
  switch (type.typeId) {
    case T.Decimal:
      return (type as import("apache-arrow").Decimal).bitWidth / 8;
    case T.Interval:
      return [4, 8, 16][(type as import("apache-arrow").Interval).unit];
    case T.FixedSizeBinary:
      return (type as import("apache-arrow").FixedSizeBinary).byteWidth;
    default:
      // Int, Float, Date, Time, Timestamp, Duration: one element of the type's typed array.
      return (type as unknown as { ArrayType: { BYTES_PER_ELEMENT: number } }).ArrayType.BYTES_PER_ELEMENT;
  }
}

/**
 * Rows [s, e) of one field (and its children) from `r` into `w`, or only past it when `w` is null.
 * Types without a plain row-range layout (unions, dictionaries) throw: the batch's members then
 * run alone.
 */
function field(f: Field, r: Reader, s: number, e: number, w: Writer | null): void {
  const node = r.nodes[r.node++];
  const type = f.type;
  const n = e - s;
  if (type.typeId === T.Null) {
    w?.nodes.push(new FieldNode(n, n));
    return;
  }
  if (type.typeId === T.Union || type.typeId === T.Dictionary) throw new Error(`a ${type} column cannot be split by rows`);
  const validity = r.buffers[r.buffer++];
  if (w) {
    if (Number(node.nullCount) === 0) {
      w.nodes.push(new FieldNode(n, 0));
      put(w, new Uint8Array(0));
    } else {
      const v = bits(bufferOf(r, validity), s, n);
      w.nodes.push(new FieldNode(n, n - v.set));
      put(w, v.bytes);
    }
  }
  switch (type.typeId) {
    case T.Bool: {
      const data = r.buffers[r.buffer++];
      if (w) put(w, bits(bufferOf(r, data), s, n).bytes);
      return;
    }
    case T.Utf8:
    case T.Binary:
    case T.LargeUtf8:
    case T.LargeBinary: {
      const [offs, data] = [r.buffers[r.buffer++], r.buffers[r.buffer++]];
      if (!w) return;
      const o = offsets(bufferOf(r, offs), s, e, type.typeId === T.LargeUtf8 || type.typeId === T.LargeBinary);
      put(w, o.bytes);
      put(w, bufferOf(r, data).subarray(o.from, o.to));
      return;
    }
    case T.List:
    case T.Map: {
      const offs = r.buffers[r.buffer++];
      const o = offsets(bufferOf(r, offs), s, e, false);
      if (w) put(w, o.bytes);
      field(f.type.children[0], r, o.from, o.to, w);
      return;
    }
    case T.FixedSizeList: {
      const size = (type as import("apache-arrow").FixedSizeList).listSize;
      field(f.type.children[0], r, s * size, e * size, w);
      return;
    }
    case T.Struct:
      for (const c of f.type.children) field(c, r, s, e, w);
      return;
    default: {
      const data = r.buffers[r.buffer++];
      const width = widthOf(type);
      if (w) put(w, bufferOf(r, data).subarray(s * width, e * width));
    }
  }
}

/** The framed record batch message of `rows` rows written to `w` (its body is w.parts). */
export function batchMessage(rows: number, w: Writer): Uint8Array {
  return frameMessage(Message.encode(Message.from(new BatchHeader(rows, w.nodes, w.regions), w.bytes)));
}

/** One member's answer as it is assembled: its record batch messages and their file blocks. */
interface Answer {
  chunks: Uint8Array[];
  blocks: InstanceType<typeof FileBlock>[];
  offset: number;
}

export function schemaMessage(schema: Schema): Uint8Array {
  return frameMessage(Message.encode(Message.from(schema)));
}

// A footer's one record batch block is a flatbuffer struct (offset int64, metadata length int32,
// 4 bytes of padding, body length int64): a footer encoded once with a recognisable offset is
// copied and patched for each answer of one batch, instead of encoding the schema again for each.
const MARK = 0x5a5a5a5a5a5an;

/** The footer of an answer of one record batch, as a patched copy of one encoded with MARK. */
export function footerTemplate(schema: Schema, version: number): ((b: InstanceType<typeof FileBlock>) => Uint8Array) | null {
  const bytes = Buffer.from(Footer.encode(new Footer(schema, version, [new FileBlock(0, 0, MARK)], [])));
  let at = -1;
  for (let i = 0; i + 24 <= bytes.length && at < 0; i++) if (bytes.readBigInt64LE(i) === MARK) at = i;
  if (at < 0) return null;
  return (b) => {
    const out = Buffer.from(bytes);
    out.writeBigInt64LE(BigInt(b.offset), at);
    out.writeInt32LE(b.metaDataLength, at + 8);
    out.writeBigInt64LE(BigInt(b.bodyLength), at + 16);
    return out;
  };
}

/**
 * Each member's answer from a batch's result (one IPC file): member i sent `counts[i]` vectors,
 * numbered after those of the members before it. Its rows keep the engine's order; the
 * query_index column is dropped for a one-vector member (the engine adds none to a one-vector
 * search) and renumbered from 0 for a member that sent several. Each answer is the chunks of one
 * IPC file.
 */
export function splitByQuery(ipc: Uint8Array, counts: number[], column: string): Uint8Array[][] {
  const file = Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength);
  const footerLength = file.readInt32LE(file.length - 10);
  const footer = Footer.decode(file.subarray(file.length - 10 - footerLength, file.length - 10));
  if (footer.numDictionaries > 0) throw new Error("a result with dictionaries cannot be split by rows");
  const schema = footer.schema;
  const fields = schema.fields;
  const qi = fields.findIndex((f) => f.name === column);
  if (qi < 0) throw new Error(`multi-vector result without a ${column} column`);
  const single = new arrow.Schema(fields.filter((_, i) => i !== qi), schema.metadata);
  const head = [schemaMessage(single), schemaMessage(schema)].map((m) => [MAGIC, m]);
  const owner: number[] = [];
  const base: number[] = [];
  counts.forEach((n, m) => {
    base.push(owner.length);
    for (let j = 0; j < n; j++) owner.push(m);
  });
  const answers: Answer[] = counts.map((n) => ({ chunks: [...head[n > 1 ? 1 : 0]], blocks: [], offset: MAGIC.length + head[n > 1 ? 1 : 0][1].byteLength }));

  for (const block of footer.recordBatches()) {
    const start = Number(block.offset);
    const header = batchHeader(file, block);
    const body = file.subarray(start + block.metaDataLength, start + block.metaDataLength + Number(block.bodyLength));
    const reader: Reader = { nodes: header.nodes, buffers: header.buffers, body, node: 0, buffer: 0 };
    // The query_index column's values, to find each query's runs of rows.
    for (let i = 0; i < qi; i++) field(fields[i], reader, 0, 0, null);
    reader.buffer++; // its validity (never null)
    const index = bufferOf(reader, reader.buffers[reader.buffer]);
    const rows = Number(header.length);
    for (let s = 0; s < rows; ) {
      const q = index.readInt32LE(s * 4);
      let e = s + 1;
      while (e < rows && index.readInt32LE(e * 4) === q) e++;
      const m = owner[q];
      const w = newWriter();
      reader.node = 0;
      reader.buffer = 0;
      fields.forEach((f, i) => {
        if (i !== qi) return field(f, reader, s, e, w);
        field(f, reader, s, e, null);
        if (counts[m] === 1) return;
        w.nodes.push(new FieldNode(e - s, 0));
        put(w, new Uint8Array(0));
        put(w, new Uint8Array(new Int32Array(e - s).fill(q - base[m]).buffer));
      });
      const message = batchMessage(e - s, w);
      const a = answers[m];
      a.blocks.push(new FileBlock(message.byteLength, w.bytes, a.offset));
      a.chunks.push(message, ...w.parts);
      a.offset += message.byteLength + w.bytes;
      s = e;
    }
  }
  const templates = [footerTemplate(single, footer.version), footerTemplate(schema, footer.version)];
  return answers.map((a, m) => {
    const template = templates[counts[m] > 1 ? 1 : 0];
    const footerBytes = a.blocks.length === 1 && template ? template(a.blocks[0]) : Footer.encode(new Footer(counts[m] > 1 ? schema : single, footer.version, a.blocks, []));
    const tail = Buffer.alloc(10);
    tail.writeInt32LE(footerBytes.byteLength);
    TAIL_MAGIC.copy(tail, 4);
    return [...a.chunks, footerBytes, tail];
  });
}
