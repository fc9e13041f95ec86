// The compute sandbox: the one process where user code (JavaScript, Python and WebAssembly UDFs,
// udtf and chunker bodies, SQL table functions) runs, for one tenant only. It is started by
// workers/compute-client.ts through workers/sandbox-launch.ts (its own namespaces and root, no
// secrets, Node's permission model, an unprivileged user) and holds nothing worth reaching: no
// LanceDB handle, no key, no file it could write. It runs its owner's tasks in a Piscina pool of
// `workers` threads, one task per thread at a time (the owner sends no more than that); each task
// is aborted past its deadline (Piscina then terminates the thread), the backstop behind the time
// limits the tasks set themselves, and the owner's own deadline is behind that. Tasks and answers
// cross fd 3 as frames of workers/sandbox-channel.ts; the process exits when its owner closes it.
import { access } from "node:fs/promises";
import net from "node:net";
import type { Worker } from "node:worker_threads";
import { Piscina } from "piscina";
import { boundedText } from "../../src/util/bounded-text.js";
import type { ComputeCommand } from "../protocol.js";
import { ANSWER, answerFrame, taskReader } from "../sandbox-channel.js";
import type { TableReply } from "../threads/table-functions.js";
import type { UdfTaskReply } from "../threads/udf.js";

const { workers, workerHeapMb } = JSON.parse(process.argv[2]) as { workers: number; workerHeapMb: number };

const channel = new net.Socket({ fd: 3, readable: true, writable: true });
channel.on("error", () => process.exit(0));
channel.on("close", () => process.exit(0));

const pool = new Piscina({
  // dist/workers/processes/compute.js → dist/workers/threads/compute-tasks.js
  filename: new URL("../threads/compute-tasks.js", import.meta.url).href,
  // The threads start with the process, while its owner still reads the first batch.
  minThreads: workers,
  maxThreads: workers,
  idleTimeout: 60_000,
  // A task past the heap limit fails alone; Piscina replaces its worker.
  resourceLimits: { maxOldGenerationSizeMb: workerHeapMb },
});

const send = (parts: Uint8Array[]): void => {
  channel.cork();
  for (const p of parts) channel.write(p);
  channel.uncork();
};

/** What ran: "the UDF", "the udtf", "the chunker". */
const subject = (m: ComputeCommand) => (m.name === "udf" ? "the UDF" : `the ${m.request.kind}`);

function failure(err: unknown, m: ComputeCommand, timedOut: boolean): string {
  const e = err as { code?: string; message?: string };
  if (timedOut) return `${subject(m)} ran past its time limit; its worker was stopped`;
  if (e?.code === "ERR_WORKER_OUT_OF_MEMORY" || /out of memory|memory limit/i.test(String(e?.message))) {
    return `${subject(m)} ran out of memory: it exceeded the worker heap limit (--worker-heap-mb ${workerHeapMb}); its worker was replaced`;
  }
  return `${subject(m)} failed: ${boundedText(String(e?.message ?? err))}`;
}

/** A Python task's time limit, in ms; null for other tasks. */
function pythonLimit(m: ComputeCommand): number | null {
  if (m.name === "udf") return m.request.udf.backend === "python" ? m.request.udf.timeoutMs : null;
  return m.request.fn.backend === "python" ? m.request.timeoutMs : null;
}

// How often the time limit of a running Python call is looked at. A Python interpreter's memory
// is WebAssembly memory, outside the worker's heap limit: the sandbox's own memory bound holds it,
// kept by the kernel and watched by the owner from outside (workers/compute-client.ts), where
// escaped code cannot turn the watch off.
const PYTHON_TICK_MS = 20;

/**
 * Python's time limit, kept from here: the worker thread is busy in the interpreter, which looks at
 * a shared interrupt buffer; past the limit of a call in progress (`buffer[1]` set by the worker)
 * this thread sets SIGINT there. A worker's first Python task loads the interpreter first, which
 * does not count.
 */
function pythonTimer(limitMs: number): { buffer: Int32Array; stop(): void } {
  const buffer = new Int32Array(new SharedArrayBuffer(8));
  let since: number | null = null;
  const tick = setInterval(() => {
    if (Atomics.load(buffer, 1) === 0) since = null;
    else if (since === null) since = Date.now();
    else if (Date.now() - since >= limitMs) Atomics.store(buffer, 0, 2);
  }, PYTHON_TICK_MS);
  return { buffer, stop: () => clearInterval(tick) };
}

/** The answer to task `id`: its output bytes, ok, or its failure (a few KB at most). */
function answer(id: string, r: UdfTaskReply | TableReply, m: ComputeCommand): void {
  if (r instanceof Uint8Array) return send(answerFrame(ANSWER.output, id, r));
  if (r.ok) return send(answerFrame(ANSWER.ok, id));
  send(answerFrame(ANSWER.error, id, Buffer.from(boundedText(r.error ?? `${subject(m)} failed`))));
}

function runTask(m: ComputeCommand): Promise<void> {
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, m.deadlineMs);
  const input = m.request.op === "run" ? m.request.input! : undefined;
  const limit = pythonLimit(m);
  const python = limit === null ? null : pythonTimer(limit);
  const request = { ...m.request, ...(input ? { input } : {}), ...(python ? { interrupt: python.buffer } : {}) };
  return pool
    .run(request, { name: m.name, signal: abort.signal, transferList: input ? [input.buffer as ArrayBuffer] : [] })
    .then(
      (r: UdfTaskReply | TableReply) => answer(m.id, r, m),
      (err: unknown) => send(answerFrame(ANSWER.error, m.id, Buffer.from(failure(err, m, timedOut)))),
    )
    .finally(() => {
      clearTimeout(timer);
      python?.stop();
    });
}

const waiting: ComputeCommand[] = [];
let running = 0;
function next(): void {
  while (running < workers && waiting.length > 0) {
    running++;
    void runTask(waiting.shift()!).finally(() => {
      running--;
      next();
    });
  }
}

channel.on(
  "data",
  taskReader((header, input) => {
    const m = header as ComputeCommand;
    if (input) (m.request as { input?: Uint8Array }).input = input;
    waiting.push(m);
    next();
  }),
);

// Ready once every thread is online and libuv's thread pool has started (Python's loader reads
// files through it): from then on the process's thread count is fixed, and the owner, which
// counts it from outside, takes any thread more as one that user code started.
const online = pool.threads.map((w: Worker) => new Promise((resolve) => w.once("online", resolve)));
void Promise.all([...online, access(new URL(import.meta.url))]).then(() => send(answerFrame(ANSWER.ready)));
