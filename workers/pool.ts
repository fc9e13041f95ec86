// The server's worker pool: one Piscina pool of `--workers` threads for the trusted work it does off
// the event loop (decoding large Arrow uploads and large bodies of JSON rows and large query-shaped bodies, checking long expressions). User code never runs
// here: UDFs and table functions run in the compute sandbox process (workers/compute-client.ts).
// Tasks are named exports of workers/threads/ingest.ts; each task has its own admission
// bound, counted here (Piscina 5.3 at maxQueue 0 rejects a task it could not hand to a busy worker
// yet still runs it later), so one kind of work cannot take every queue slot from another.
// Queries run elsewhere (only their long expressions are checked here): LanceDB runs them on its own native threads (docs/design.md, "Where the work runs").
import type * as A from "apache-arrow";
import { Piscina } from "piscina";
import type { Config } from "../src/config.js";
import { arrow } from "../src/engine/arrow.js";
import { isPlainIpc, normaliseIpc } from "../src/engine/ipc-in.js";
import { jsonRowsTable, type JsonRowsBody, type RowsTarget } from "../src/engine/rows-in.js";
import { schemaToIpc } from "../src/engine/schema-ipc.js";
import { fromMessage, uploadOf, type Upload } from "../src/engine/upload.js";
import { ApiError, Code } from "../src/errors.js";
import { recordPoolTask } from "../src/metrics.js";
import { ownBuffer } from "../src/util/own-buffer.js";
import type { ExpressionLimits } from "../src/schemas/expression.js";
import type { QueryAt, QueryBodyRead, Refusal } from "../src/schemas/query-body.js";
import type { ExpressionsTask, IngestReply, IngestTask, JoinedFiles, JsonIngestTask, QueryBodyTask } from "./threads/ingest.js";

/**
 * The most values a body of JSON rows decoded on the calling thread may build (about a millisecond
 * of work). A few bytes a row build one value for each of the table's columns: 32 KiB of `{}` lines
 * into a 2,001-column table is 22 million, seconds of the event loop.
 */
const INLINE_CELLS = 16_384;
/** The values a body of `bytes` can build: at most one row per 3 bytes (`{}` and a separator), each as wide as the table. */
const inlineCells = (bytes: number, schema: A.Schema | null) => (bytes / 3) * Math.max(1, schema?.fields.length ?? 1);

export interface WorkerPool {
  /**
   * The request body as a storable table. Plain bodies up to `--ingest-inline-max-bytes` are
   * decoded on the calling thread; larger ones, and compressed or dictionary-encoded ones of any
   * size (a few bytes can expand to the decoded-body limit), in a worker, so their decoding never
   * stalls the event loop serving queries. `raw` is moved to the worker: do not use it afterwards.
   */
  ingest(raw: Uint8Array | undefined): Promise<A.Table>;
  /**
   * A body of JSON rows as a table read into `to` (rows-in.ts): up to `--ingest-inline-max-bytes`
   * on the calling thread, larger ones in a worker (parsing and building are O(bytes)). The bytes
   * are moved to the worker: do not use them afterwards.
   */
  jsonRows(body: JsonRowsBody, to: Omit<RowsTarget, "limits" | "maxJsonDepth">): Promise<A.Table>;
  /** Each text's fault as an expression, or null (`checked` of ExpressionLimits), in a worker. */
  expressionFaults(texts: string[], limits: ExpressionLimits): Promise<ReadonlyMap<string, string | null>>;
  /** The request body, decoded as `ingest` decodes it, as an upload to commit (engine/upload.ts), its file written where it was decoded. */
  upload(raw: Uint8Array | undefined): Promise<Upload>;
  /** A body of JSON rows, read as `jsonRows` reads it, as an upload to commit. */
  jsonUpload(body: JsonRowsBody, to: Omit<RowsTarget, "limits" | "maxJsonDepth">): Promise<Upload>;
  /**
   * Uploads' files (of one schema) as one file, written in a worker, for a commit they share. The
   * parts are moved there and back: use the ones answered, not those given.
   */
  joinFiles(parts: Uint8Array[]): Promise<JoinedFiles>;
  /** A large query-shaped body, its query `at`, read in a worker (src/schemas/query-body.ts); a malformed or too deep one rejects with its 400. */
  queryBody(bytes: Uint8Array, at: QueryAt, limits: ExpressionLimits): Promise<QueryBodyRead>;
  /** Run task `name` with `data`, moving `transfer` (no copies); 503 past the task's bound. */
  run<T>(name: string, data: unknown, transfer?: ArrayBuffer[]): Promise<T>;
  /** Threads started, threads running a task, tasks waiting for a thread. */
  stats(): { threads: number; busy: number; queued: number; max: number };
  destroy(): Promise<void>;
}

type PoolConfig = Pick<Config, "workers" | "maxQueue" | "ingestInlineMaxBytes" | "maxDecodedBody" | "maxValueBytes" | "maxJsonDepth"> & Partial<Pick<Config, "workerHeapMb">>;

export function createWorkerPool(config: PoolConfig, bounds: Record<string, number> = {}): WorkerPool {
  const pool = new Piscina({
    // dist/workers/pool.js → dist/workers/threads/ingest.js
    filename: new URL("./threads/ingest.js", import.meta.url).href,
    // Workers start on the first task and retire when the work stops.
    minThreads: 0,
    maxThreads: config.workers,
    idleTimeout: 60_000,
    // A task past the heap limit fails alone; Piscina replaces its worker.
    ...(config.workerHeapMb ? { resourceLimits: { maxOldGenerationSizeMb: config.workerHeapMb } } : {}),
  });
  const limits: Record<string, number> = { ingest: config.workers + config.maxQueue, ingestJson: config.workers + config.maxQueue, ...bounds };
  const admitted: Record<string, number> = {};

  async function run<T>(name: string, data: unknown, transfer: ArrayBuffer[] = []): Promise<T> {
    const limit = limits[name] ?? config.workers + config.maxQueue;
    if ((admitted[name] ?? 0) >= limit) {
      throw new ApiError(Code.ServiceUnavailable, `${name} pool is busy (${config.workers} workers, ${limit} ${name} tasks admitted); retry later`, undefined, { reason: "pool_queue" });
    }
    admitted[name] = (admitted[name] ?? 0) + 1;
    const started = performance.now();
    try {
      return (await pool.run(data, { name, transferList: transfer })) as T;
    } finally {
      admitted[name]--;
      recordPoolTask(name, (performance.now() - started) / 1000);
    }
  }

  const decoded = (reply: IngestReply): A.Table | Upload => {
    if (reply instanceof Uint8Array) return arrow.tableFromIPC(reply);
    if ("file" in reply) return fromMessage(reply);
    throw new ApiError(reply.code, reply.error, reply.status);
  };
  const decodeLimits = { maxDecodedBody: config.maxDecodedBody, maxValueBytes: config.maxValueBytes };

  async function arrowBody(raw: Uint8Array | undefined, upload: boolean): Promise<A.Table | Upload> {
    if (!raw || (raw.length <= config.ingestInlineMaxBytes && isPlainIpc(raw))) {
      const { table } = normaliseIpc(raw, decodeLimits);
      return upload ? uploadOf(table) : table;
    }
    const own = ownBuffer(raw);
    const task: IngestTask = { body: own, upload, ...decodeLimits };
    return decoded(await run<IngestReply>("ingest", task, [own.buffer as ArrayBuffer]));
  }

  async function jsonBody(body: JsonRowsBody, target: Omit<RowsTarget, "limits" | "maxJsonDepth">, upload: boolean): Promise<A.Table | Upload> {
    const to = { ...target, limits: decodeLimits, maxJsonDepth: config.maxJsonDepth };
    if (body.bytes.length <= config.ingestInlineMaxBytes && inlineCells(body.bytes.length, to.schema) <= INLINE_CELLS) {
      const table = jsonRowsTable(body, to);
      return upload ? uploadOf(table) : table;
    }
    const own = ownBuffer(body.bytes);
    const task: JsonIngestTask = { body: { bytes: own, ndjson: body.ndjson }, to: { ...to, schema: to.schema && schemaToIpc(to.schema) }, upload };
    return decoded(await run<IngestReply>("ingestJson", task, [own.buffer as ArrayBuffer]));
  }

  // One task per thread at a time: the admitted tasks not waiting in Piscina's queue are running.
  const stats = () => {
    let total = 0;
    for (const k in admitted) total += admitted[k];
    return { threads: pool.threads.length, busy: Math.max(0, total - pool.queueSize), queued: pool.queueSize, max: config.workers };
  };

  return {
    ingest: (raw) => arrowBody(raw, false) as Promise<A.Table>,
    jsonRows: (body, target) => jsonBody(body, target, false) as Promise<A.Table>,
    upload: (raw) => arrowBody(raw, true) as Promise<Upload>,
    jsonUpload: (body, target) => jsonBody(body, target, true) as Promise<Upload>,
    joinFiles: (parts) => run<JoinedFiles>("joinFiles", parts, parts.map((p) => p.buffer as ArrayBuffer)),
    async expressionFaults(texts, { maxExpressionLength, maxExpressionCost, maxExpressionArray, maxExpressionCopies }) {
      const task: ExpressionsTask = { texts, limits: { maxExpressionLength, maxExpressionCost, maxExpressionArray, maxExpressionCopies } };
      const faults = await run<(string | null)[]>("expressionFaults", task);
      return new Map(texts.map((t, i) => [t, faults[i]]));
    },
    async queryBody(bytes, at, { maxExpressionLength, maxExpressionCost, maxExpressionArray, maxExpressionCopies }) {
      const task: QueryBodyTask = { bytes, at, maxJsonDepth: config.maxJsonDepth, limits: { maxExpressionLength, maxExpressionCost, maxExpressionArray, maxExpressionCopies } };
      const reply = await run<QueryBodyRead | Refusal>("queryBody", task);
      if ("error" in reply) throw new ApiError(reply.code, reply.error, reply.status);
      return reply;
    },
    run,
    stats,
    destroy: () => pool.destroy(),
  };
}
