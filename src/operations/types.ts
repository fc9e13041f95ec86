// What every operation receives and returns: plain data, no transport detail.
import type { Principal } from "../auth/principal.js";
import type { Bound, Deadline, Work } from "../engine/deadline.js";
import type { JsonRowsBody } from "../engine/rows-in.js";
import type { UnavailableReason } from "../metrics.js";
import type { Services } from "../services.js";

/** How a query answer's rows are encoded, from the request's Accept header. */
export type RowFormat = "arrow" | "json" | "ndjson";

/**
 * What an operation receives. `P` is the caller: a Principal on routes that need a credential, null
 * on public routes (src/operations/define.ts, publicOp).
 */
export interface OpContext<B = any, P extends Principal | null = Principal> {
  /** Path object id, already split (root namespace = []). */
  id: string[];
  /** Other path parameters, decoded (e.g. index_name). */
  params: Record<string, string>;
  query: URLSearchParams;
  /** The query parameters the operation's `query` schema describes, validated and coerced ({} without one). */
  args: any;
  /** Validated JSON body ({} when the request had none), or undefined for Arrow bodies. */
  body: B;
  /** Raw Arrow IPC body, for operations that take rows… */
  raw?: Uint8Array;
  /** …or the rows sent as JSON instead (Content-Type application/json or application/x-ndjson). */
  rows?: JsonRowsBody;
  delimiter: string;
  principal: P;
  context: Record<string, string>;
  requestId: string;
  /** Sent by LanceDB's remote (Cloud) client (it adds `x-lancedb-database`), which reads a few
   *  response shapes in LanceDB's older vocabulary rather than lance-namespace's. */
  lancedbClient: boolean;
  /** Rows of query answers: Arrow IPC (the default) or JSON. */
  rowFormat: RowFormat;
  /** The version the request's token (x-quiver-min-version) asks a read to include, checked already; null without one. */
  minVersion: number | null;
  /** Aborted when the client goes away, so long work can stop early; made on first call. */
  signal: () => AbortSignal;
  /** Whether the client has gone, without making a signal: for polls on a hot path. */
  gone: () => boolean;
  /** When a query must have answered: --query-timeout-ms from the request's start, or its x-request-timeout-ms if less. */
  deadline: Deadline;
  /** A write request's work, handed to each commit it begins (tables.ts, WriteOf); null for reads. */
  work: Work | null;
  /**
   * Wait for a turn of the large-result budget before computing a result that may be large (the
   * engine reads ahead of it, outside any byte count: docs/security.md, "Slow readers"); throws
   * the 503 when none frees in time. The turn is held until the response ends.
   */
  largeResult: () => Promise<void>;
  svc: Services;
}

export type OpResult =
  /** `reason`: why a 503 was answered (the metrics' reason label). */
  | { kind: "json"; status?: number; body: unknown; reason?: UnavailableReason }
  | { kind: "empty"; status: number }
  | {
      kind: "bytes";
      status?: number;
      contentType: string;
      /** Headers of the answer besides the content type. */
      headers?: Record<string, string>;
      /** Chunks written in order, with backpressure. */
      chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
    };

export type Handler<B = any, P extends Principal | null = Principal> = (ctx: OpContext<B, P>) => Promise<OpResult>;

export const json = (body: unknown, status = 200, reason?: UnavailableReason): OpResult => ({ kind: "json", status, body, reason });
export const empty = (status: number): OpResult => ({ kind: "empty", status });

/** What stops an engine query of this request: its deadline, and its client leaving. */
export const boundOf = (ctx: Pick<OpContext<unknown, Principal | null>, "deadline" | "signal">): Bound => ({ deadline: ctx.deadline, signal: ctx.signal() });
