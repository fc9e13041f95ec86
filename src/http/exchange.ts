// One HTTP exchange on uWS: abort tracking, body reading with limits, and corked, abort-safe
// responses. uWS terminates the process if a response is touched after an abort, or if a handler
// returns without responding and without onAborted, so every write goes through here.
import type { HttpResponse } from "uws-pack";
import { ApiError, Code, transport } from "../errors.js";
import type { ResponseBudget } from "./response-budget.js";
import { statusLine } from "./status.js";
import { clearAlarm, setAlarm, type Alarm } from "../util/alarms.js";

export interface Exchange {
  res: HttpResponse;
  aborted: boolean;
  done: boolean;
  /** The request body has been read to its end (or there was none). */
  bodyRead: boolean;
  /**
   * The rest of an unread body may be left for uWS to read and drop after a 413 (see holdBody):
   * it is announced, and at most DRAIN_BYTES.
   */
  drainable: boolean;
  /** The socket is paused (a body held until its request is admitted); uWS sends nothing on a paused socket. */
  paused: boolean;
  /** Status sent, for the access log. */
  status: number;
  /** Made by signalOf on first use: most requests never ask. */
  controller: AbortController | null;
  /** The body reader's: stop waiting for a body that will never come. */
  onAbort?: () => void;
  /** Quiver closed the connection because the client took no response bytes for too long. */
  cut: boolean;
  onWritable?: () => void;
}

export function openExchange(res: HttpResponse): Exchange {
  const x: Exchange = { res, aborted: false, done: false, bodyRead: false, drainable: false, paused: false, status: 0, controller: null, cut: false };
  res.onAborted(() => {
    x.aborted = true;
    x.controller?.abort();
    x.onAbort?.();
    x.onWritable?.();
  });
  return x;
}

/** Fires when the client goes away mid-request. */
export function signalOf(x: Exchange): AbortSignal {
  if (!x.controller) {
    x.controller = new AbortController();
    if (x.aborted) x.controller.abort();
  }
  return x.controller.signal;
}

/** The most of a body that is read, what kind of body it is, and the option (or rule) that sets the limit. */
export interface BodyLimit {
  limit: number;
  what: string;
  rule: string;
  /** Past the limit, answer and close at once rather than drop the rest (DRAIN_BYTES). */
  closeAtOnce?: boolean;
}

const tooLarge = ({ limit, what, rule }: BodyLimit) => transport.bodyTooLarge(`${what} body larger than the limit of ${limit} bytes (${rule})`);

/** How long a body may take: `timeoutMs` plus one second per `minRate` bytes of it. */
export interface BodyPace {
  timeoutMs: number;
  minRate: number;
}

const allowedMs = (pace: BodyPace, bytes: number) => pace.timeoutMs + (bytes / pace.minRate) * 1000;

const tooSlow = (pace: BodyPace, what: string, size: number, declared: number | null, ms: number) =>
  transport.bodyTooSlow(
    `${what} body: ${size} of ${declared ?? "an unknown number of"} bytes arrived in ${(ms / 1000).toFixed(1)} s; ` +
      `a body may take ${pace.timeoutMs} ms plus 1 s per ${pace.minRate} bytes`,
  );

/** A request body held at the door: nothing is admitted until `admit`, and it can be turned away. */
export interface BodyGate {
  /** Read the body (up to its limit), paced; resolves to its bytes. */
  admit(body: BodyLimit): Promise<Uint8Array>;
}

/**
 * Bodies announced at most this long are not paused for: they all but always arrive in the
 * socket's first read, with their headers, so pausing and resuming the socket would hold back
 * nothing, at a cost of ~4.7 µs of a namespace describe's ~24 µs of server CPU (measured).
 */
export const UNPAUSED_BODY_BYTES = 16 * 1024;

/**
 * The most of a body refused as too large (413) that is read and dropped after the answer. Closing
 * at once, while the client still wrote, reset the connection: Node's fetch and Python's requests
 * write the whole body before they read, so they saw EPIPE and never the 413. A body announced at
 * most this long is left to uWS, which reads it to its end and drops it (the connection is then
 * free for the next request; a stalled one is cut by uWS's idle timeout, ~10 s, like any other);
 * it holds no reader place or execution slot. A longer one, one without a Content-Length, or one
 * from a client that sent no credential header (which costs little: BodyLimit.closeAtOnce) is
 * answered and closed at once.
 */
export const DRAIN_BYTES = 32 << 20;

/**
 * Hold the request body until the request is admitted (its credentials checked): the socket is
 * paused (unless the body is announced small, see UNPAUSED_BODY_BYTES), so a client that is
 * never admitted sends no more than what already arrived with its headers, and memory grows
 * only as bytes arrive (chunks, joined once at the end), never by the announced Content-Length.
 * Must be called synchronously inside the uWS handler, before any await, or data is lost. Chunks
 * are copied: uWS reuses their memory.
 */
export function holdBody(x: Exchange, declared: number | null, pace: BodyPace): BodyGate {
  let parts: Buffer[] = [];
  let size = 0;
  let last = declared === 0;
  /** Failed or complete: later data is dropped. */
  let over = false;
  let onChunk: (() => void) | null = null;
  if (!last) {
    x.res.onData((chunk, isLast) => {
      // Answered without reading the body (401, 403, 413…): the rest is dropped.
      if (over || x.done) return;
      parts.push(Buffer.from(chunk.slice(0)));
      size += chunk.byteLength;
      last = isLast;
      onChunk?.();
    });
    if (declared === null || declared > UNPAUSED_BODY_BYTES) {
      x.res.pause();
      x.paused = true;
    }
  }
  const admit = (body: BodyLimit) => {
    const { limit, what } = body;
    x.drainable = !body.closeAtOnce && declared !== null && declared <= DRAIN_BYTES;
    const p = new Promise<Uint8Array>((resolve, reject) => {
      if (declared !== null && declared > limit) return reject(tooLarge(body));
      let alarm: Alarm | null = null;
      const fail = (err: ApiError) => {
        clearAlarm(alarm);
        onChunk = null;
        over = true;
        parts = [];
        reject(err);
      };
      const started = performance.now();
      // Without a Content-Length the allowance grows with what has arrived.
      const check = () => {
        const elapsed = performance.now() - started;
        const allowed = allowedMs(pace, declared ?? size);
        if (elapsed < allowed) alarm = setAlarm(started + allowed, check);
        else fail(tooSlow(pace, what, size, declared, Math.round(elapsed)));
      };
      onChunk = () => {
        if (size > limit || (declared !== null && size > declared)) return fail(size > limit ? tooLarge(body) : new ApiError(Code.InvalidInput, "body longer than its Content-Length"));
        if (!last) return;
        clearAlarm(alarm);
        onChunk = null;
        over = true;
        const out = parts.length === 1 ? parts[0] : Buffer.concat(parts, size);
        parts = [];
        x.bodyRead = true;
        resolve(out);
      };
      // A client that leaves mid-body never sends the rest: stop waiting for it.
      x.onAbort = () => fail(new ApiError(Code.InvalidInput, "client closed the connection"));
      onChunk();
      // Most bodies arrived with their headers; only one still arriving is timed.
      if (!over) alarm = setAlarm(started + allowedMs(pace, declared ?? 0), check);
      if (!x.aborted) unpause(x);
    });
    // The caller may fail before awaiting the body; that is not an unhandled rejection.
    p.catch(() => undefined);
    return p;
  };
  return { admit };
}

function unpause(x: Exchange): void {
  if (!x.paused) return;
  x.paused = false;
  x.res.resume();
}

function head(x: Exchange, status: number, contentType: string | null, headers: Record<string, string>) {
  unpause(x);
  x.status = status;
  x.res.writeStatus(statusLine(status));
  if (contentType) x.res.writeHeader("content-type", contentType);
  for (const k in headers) x.res.writeHeader(k, headers[k]);
}

export function sendBody(
  x: Exchange,
  status: number,
  contentType: string | null,
  body: string | Uint8Array,
  headers: Record<string, string> = {},
  closeConnection = false,
): void {
  if (x.aborted || x.done) return;
  x.done = true;
  // Answering before the body was read to its end leaves the connection mid-request: close it,
  // unless the answer is a 413 whose body uWS can still read to its announced end and drop.
  const close = closeConnection || (!x.bodyRead && !(status === 413 && x.drainable));
  x.res.cork(() => {
    head(x, status, contentType, headers);
    x.res.end(body, close);
  });
}

export function sendEmpty(x: Exchange, status: number, headers: Record<string, string> = {}, closeConnection = false): void {
  if (x.aborted || x.done) return;
  x.done = true;
  x.res.cork(() => {
    head(x, status, null, headers);
    // 204 must not carry a Content-Length; other statuses say 0.
    if (status === 204) x.res.endWithoutBody(undefined, closeConnection);
    else x.res.end(undefined, closeConnection);
  });
}

/** How a streamed response is paced: the idle cut and the shared budget of unread bytes. */
export interface StreamFlow {
  idleMs: number;
  budget: ResponseBudget;
}

/** Wait until the socket takes more; a client that takes nothing for `idleMs` is disconnected. */
const waitWritable = (x: Exchange, idleMs: number, drained: (offset: number) => void) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      if (x.aborted) return;
      x.cut = true;
      x.res.close();
    }, idleMs);
    x.onWritable = () => {
      clearTimeout(timer);
      resolve();
    };
    x.res.onWritable((offset) => {
      clearTimeout(timer);
      x.onWritable = undefined;
      drained(offset);
      resolve();
      return true;
    });
  });

// Chunks are gathered up to this size before a write: a small result (a top-k query) leaves in
// one write with a Content-Length, a large one streams in chunks of about this size.
export const FLUSH_BYTES = 64 * 1024;

/**
 * Stream chunks (chunked encoding past FLUSH_BYTES). The next chunk is pulled only once the
 * socket has taken the previous write, so a response holds about one write plus one engine batch;
 * what uWS holds unsent is counted in the shared budget.
 */
export async function sendStream(
  x: Exchange,
  status: number,
  contentType: string,
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  headers: Record<string, string>,
  flow: StreamFlow,
): Promise<void> {
  if (x.aborted || x.done) return;
  x.done = true;
  // An answer already whole in one small chunk (the serving index's): the one write the loop below
  // would make, without its async iteration and closures (garbage of every search).
  if (Array.isArray(chunks) && chunks.length === 1 && chunks[0].byteLength < FLUSH_BYTES) {
    const only: Uint8Array = chunks[0];
    x.res.cork(() => {
      head(x, status, contentType, headers);
      x.res.end(only);
    });
    return;
  }
  let started = false;
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let written = 0;
  let held = 0;
  const account = (offset: number) => {
    const now = x.aborted ? 0 : Math.max(0, written - offset);
    flow.budget.hold(now - held);
    held = now;
  };
  const flush = async () => {
    const data = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    let ok = true;
    x.res.cork(() => {
      if (!started) head(x, status, contentType, headers);
      started = true;
      ok = x.res.write(data);
    });
    written += data.byteLength;
    if (ok) return;
    account(x.res.getWriteOffset());
    await waitWritable(x, flow.idleMs, account);
  };
  try {
    await pump();
  } finally {
    flow.budget.hold(-held);
  }

  async function pump(): Promise<void> {
    try {
      for await (const chunk of chunks) {
        if (x.aborted) return;
        pending.push(chunk);
        pendingBytes += chunk.byteLength;
        if (pendingBytes >= FLUSH_BYTES) await flush();
        if (x.aborted) return;
      }
    } catch (err) {
      // Before the first byte the caller can still answer with an error body; after it, only
      // cutting the connection tells the client the body is incomplete.
      if (!started) x.done = false;
      else if (!x.aborted) x.res.close();
      throw err;
    }
    const rest = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
    x.res.cork(() => {
      if (!started) head(x, status, contentType, headers);
      x.res.end(rest);
    });
  }
}
