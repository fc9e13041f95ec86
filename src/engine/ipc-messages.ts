// The messages of an Arrow IPC body, as bytes: each message's flatbuffer metadata and its body,
// read from the framing alone (no flatbuffer is decoded here). A stream is messages to its
// end-of-stream marker; a file is the same stream behind the "ARROW1" magic, then a footer that
// repeats what the messages say (and is not read).

export interface RawMessage {
  metadata: Uint8Array;
  body: Uint8Array;
}

const FILE_MAGIC = "ARROW1";

/**
 * Each message of `raw` with its body, whose length `bodyLength` reads from the metadata. Throws
 * for framing that runs past the end of the bytes.
 */
export function* ipcMessages(raw: Uint8Array, bodyLength: (metadata: Uint8Array) => number): Generator<RawMessage> {
  const b = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  let at = b.length >= 8 && b.toString("latin1", 0, 6) === FILE_MAGIC ? 8 : 0;
  while (at + 4 <= b.length) {
    let length = b.readInt32LE(at);
    at += 4;
    // Since Arrow 0.15 a message starts with a continuation marker (-1) before its length.
    if (length === -1) {
      if (at + 4 > b.length) break;
      length = b.readInt32LE(at);
      at += 4;
    }
    if (length === 0) return; // end of stream
    if (length < 0 || at + length > b.length) throw new Error("an IPC message runs past the end of the body");
    const metadata = b.subarray(at, at + length);
    at += length;
    const n = bodyLength(metadata);
    if (!Number.isSafeInteger(n) || n < 0 || at + n > b.length) throw new Error("an IPC message body runs past the end of the body");
    yield { metadata, body: b.subarray(at, at + n) };
    at += n;
  }
}
