// The compute sandbox's channel: one Unix socket pair (fd 3 in the sandbox) carrying frames both
// ways, each a little-endian u32 body length and the body. Tasks go in as a JSON header and the
// input bytes; answers come out as a one-byte kind, the task's 16-byte id and a binary payload.
// What the sandbox sends is hostile input (escaped user code can write any bytes to fd 3): the
// owner's reader checks each frame's kind, length and task id before it keeps a byte of its body,
// takes answers only for tasks it gave that sandbox, under ids drawn at random, and answers every
// other byte with a violation in words; it never throws.
import { randomBytes } from "node:crypto";

/** A task's id: random, so no sandbox can name another's task. */
export const ID_BYTES = 16;
export const newTaskId = (): string => randomBytes(ID_BYTES).toString("hex");

/** What a sandbox's frame says (its first body byte). */
export const ANSWER = { ready: 1, output: 2, ok: 3, error: 4 } as const;

/** What a task may be answered with: its output (a run) or only ok (a check); either may be an error. */
export type Awaited = "output" | "ok";

export type Answer = { output: Uint8Array } | { ok: true } | { error: string };

export interface AnswerLimits {
  /** The largest output a run may answer, bytes. */
  outputBytes: number;
  /** The longest error text, bytes. */
  errorBytes: number;
}

const HEAD = 4;

/** One frame: its length prefix and its body parts (written as they are, no copy). */
function framed(parts: Uint8Array[]): Uint8Array[] {
  const length = Buffer.alloc(HEAD);
  length.writeUInt32LE(parts.reduce((n, p) => n + p.byteLength, 0));
  return [length, ...parts];
}

/** The owner's task frame: `header` as JSON, then `input` (the bytes the task computes over). */
export function taskFrame(header: object, input?: Uint8Array): Uint8Array[] {
  const json = Buffer.from(JSON.stringify(header));
  const size = Buffer.alloc(HEAD);
  size.writeUInt32LE(json.byteLength);
  return framed(input ? [size, json, input] : [size, json]);
}

/** The sandbox's answer frame: ready (no id), or task `id`'s output, ok or error. */
export function answerFrame(kind: (typeof ANSWER)[keyof typeof ANSWER], id?: string, payload?: Uint8Array): Uint8Array[] {
  return framed([Uint8Array.of(kind), ...(id ? [Buffer.from(id, "hex")] : []), ...(payload ? [payload] : [])]);
}

/** Bytes arriving in chunks, taken from the front. */
function byteQueue() {
  const chunks: Buffer[] = [];
  let size = 0;
  return {
    get size() {
      return size;
    },
    push(b: Buffer) {
      chunks.push(b);
      size += b.length;
    },
    /** The first `n` bytes (n <= size), copied only when they span chunks. */
    peek(n: number): Buffer {
      if (chunks[0].length >= n) return chunks[0].subarray(0, n);
      return Buffer.concat(chunks, Math.max(n, 0)).subarray(0, n);
    },
    /** Take `n` bytes (n <= size) off the front, as the chunks they were. */
    take(n: number): Buffer[] {
      const out: Buffer[] = [];
      while (n > 0) {
        const c = chunks[0];
        if (c.length <= n) {
          out.push(chunks.shift()!);
          n -= c.length;
          size -= c.length;
        } else {
          out.push(c.subarray(0, n));
          chunks[0] = c.subarray(n);
          size -= n;
          n = 0;
        }
      }
      return out;
    },
  };
}

/** The trusted side of a sandbox's tasks: the task's header and its input bytes. */
export function taskReader(onTask: (header: unknown, input: Uint8Array | undefined) => void): (chunk: Buffer) => void {
  const q = byteQueue();
  return (chunk) => {
    q.push(chunk);
    while (q.size >= HEAD) {
      const length = q.peek(HEAD).readUInt32LE(0);
      if (q.size < HEAD + length) return;
      q.take(HEAD);
      const jsonLength = Buffer.concat(q.take(HEAD)).readUInt32LE(0);
      const header = JSON.parse(Buffer.concat(q.take(jsonLength)).toString("utf8")) as unknown;
      // The input in a buffer of its own, so it moves to a worker thread without a copy.
      const rest = length - HEAD - jsonLength;
      let input: Uint8Array | undefined;
      if (rest > 0) {
        input = new Uint8Array(rest);
        let at = 0;
        for (const part of q.take(rest)) {
          input.set(part, at);
          at += part.length;
        }
      }
      onTask(header, input);
    }
  };
}

export interface AnswerReader {
  /** Take the sandbox's next bytes: null while they keep to the protocol, else what broke it (feed no more). */
  push(chunk: Buffer): string | null;
}

/**
 * The owner's reader of one sandbox's bytes. `awaited(id)` says what task `id` (hex) of this
 * sandbox waits for, or null when it gave it no such task. The first frame must be `ready`, and
 * only the first; an answer is checked (kind, length, id) before its body is kept.
 */
export function answerReader(limits: AnswerLimits, awaited: (id: string) => Awaited | null, on: { ready(): void; answer(id: string, a: Answer): void }): AnswerReader {
  const q = byteQueue();
  let ready = false;
  // The frame whose body is arriving: its kind, task id and body bytes still to come.
  let current: { kind: number; id: string; left: number; parts: Buffer[] } | null = null;

  /** A frame's kind and length, checked before anything else of it is kept. */
  function check(kind: number, length: number): string | null {
    if (!ready) return kind === ANSWER.ready && length === 1 ? null : "its first frame is not `ready`";
    const body = length - 1 - ID_BYTES;
    if (kind === ANSWER.ok) return body === 0 ? null : `an ok frame of ${length} bytes`;
    if (kind === ANSWER.error) return body > 0 && body <= limits.errorBytes ? null : `an error frame of ${length} bytes (at most ${1 + ID_BYTES + limits.errorBytes})`;
    if (kind === ANSWER.output) return body >= 0 && body <= limits.outputBytes ? null : `an output frame of ${length} bytes (at most ${1 + ID_BYTES + limits.outputBytes})`;
    return kind === ANSWER.ready ? "a second `ready` frame" : `a frame of unknown kind ${kind}`;
  }

  function finish(c: { kind: number; id: string; parts: Buffer[] }): void {
    current = null;
    if (c.kind === ANSWER.ok) return on.answer(c.id, { ok: true });
    const body = c.parts.length === 1 ? c.parts[0] : Buffer.concat(c.parts);
    if (c.kind === ANSWER.error) return on.answer(c.id, { error: body.toString("utf8") });
    on.answer(c.id, { output: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) });
  }

  return {
    push(chunk) {
      q.push(chunk);
      for (;;) {
        if (current) {
          const n = Math.min(current.left, q.size);
          current.parts.push(...q.take(n));
          current.left -= n;
          if (current.left > 0) return null;
          finish(current);
          continue;
        }
        if (q.size < HEAD + 1) return null;
        const head = q.peek(HEAD + 1);
        const length = head.readUInt32LE(0);
        const kind = head[HEAD];
        const broken = check(kind, length);
        if (broken) return broken;
        if (kind === ANSWER.ready) {
          q.take(HEAD + 1);
          ready = true;
          on.ready();
          continue;
        }
        if (q.size < HEAD + 1 + ID_BYTES) return null;
        const id = q.peek(HEAD + 1 + ID_BYTES).subarray(HEAD + 1).toString("hex");
        const wanted = awaited(id);
        if (wanted === null) return "an answer to a task it was not given";
        if (kind === ANSWER.output && wanted !== "output") return "an output for a task that awaits none";
        q.take(HEAD + 1 + ID_BYTES);
        current = { kind, id, left: length - 1 - ID_BYTES, parts: [] };
        if (current.left === 0) finish(current);
      }
    },
  };
}
