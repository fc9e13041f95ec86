// The trusted side's handle on one compute sandbox process (workers/processes/compute.ts), which
// runs one tenant's code: started on the first task (or by warm()), started again on the next
// task after it dies, killed by close() and gone with its owner. The owner keeps the tenant's
// queue and hands the sandbox no more tasks than it has threads, so each task's deadline counts
// from when it was sent. What the sandbox sends is hostile input (workers/sandbox-channel.ts), and
// its state is watched from outside (workers/sandbox-watch.ts). The whole process group is killed
// with SIGKILL, failing only this sandbox's tasks, when
// - a task passes its deadline (the sandbox's own abort comes first; this one holds when the
//   sandbox is stopped or wedged);
// - its bytes break the channel's protocol (a malformed or oversized frame, an answer to a task it
//   was not given);
// - it is stopped (SIGSTOP), runs more threads than it started with (a Worker that user code
//   made), or keeps computing with no task in flight;
// - its writable memory comes within 1/16 of --sandbox-memory-mb, the kernel's bound on it
//   (workers/sandbox-launch.ts), looked at every WATCH_MS and at each answer: code that holds
//   memory near the bound (typed arrays, a grown WebAssembly or Python memory, which never
//   shrinks) fails the tasks in flight with an error naming the bound, instead of leaving every
//   later allocation of the sandbox to fail;
// - it writes more than OUTPUT_MAX_BYTES to its stdout and stderr, which go to one log line (at
//   most OUTPUT_BYTES of them, JSON-escaped), never to the owner's own output: it cannot write,
//   forge lines in or truncate its owner's log.
// What a task answers is only data to check (workers/compute-answers.ts).
import type { ChildProcess } from "node:child_process";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { ApiError, Code } from "../src/errors.js";
import { log } from "../src/log.js";
import { recordPoolTask } from "../src/metrics.js";
import { boundedText, MAX_ERROR_CHARS } from "../src/util/bounded-text.js";
import type { ComputeSize, ComputeTask } from "./protocol.js";
import { answerReader, newTaskId, taskFrame, type Answer, type Awaited } from "./sandbox-channel.js";
import { isolation, launchSandbox, refusal } from "./sandbox-launch.js";
import { childOf, lookAt, writableBytes, type ProcessLook } from "./sandbox-watch.js";

/** The sandbox's answer: the computed columns as IPC bytes, a bare success (a check), or a failure in words. */
export type ComputeAnswer = Answer;

export interface Compute {
  /** Run `task` in the sandbox; it fails past `deadlineMs` of running. 503 past the bound of tasks admitted. */
  run(task: ComputeTask, deadlineMs: number): Promise<ComputeAnswer>;
  /** Start the sandbox now rather than on the first task (a job that will need it, while it reads). */
  warm(): void;
  /** Tasks admitted and not answered yet. */
  busy(): number;
  /** Kill the sandbox; tasks admitted fail, and later ones are refused. */
  close(): Promise<void>;
}

export interface SandboxOptions extends ComputeSize {
  /** Whose code it runs (the server's: a credential scope, src/auth/principal.ts, sandboxScope; a job's: its object's tenant), for its log lines and errors; null until assigned. */
  tenant: string | null;
  /** Tasks admitted at once, running and waiting; more are answered 503. */
  admitted: number;
  /** CPU priority of the sandbox process (0: the owner's). */
  niceness: number;
}

// dist/workers/compute-client.js → dist/workers/processes/compute.js
const COMPUTE_PROCESS = new URL("./processes/compute.js", import.meta.url);

/** The largest answer accepted for one task. */
export const MAX_ANSWER_BYTES = 512 << 20;
/** How long past its deadline a task's sandbox gets to answer (its own abort) before it is killed. */
const DEADLINE_GRACE_MS = 5_000;
/** How long a sandbox may take to start (a loaded machine at nice 19 is slow). */
const START_MS = 60_000;
/** How much of a sandbox's stdout and stderr is logged, and how long after its first byte; how much it may write. */
const OUTPUT_BYTES = 2048;
const OUTPUT_WAIT_MS = 1000;
const OUTPUT_MAX_BYTES = 1 << 20;
// The watch: how often, and how many looks in a row past a bound kill it.
const WATCH_MS = 500;
const STRIKES = 3;
/** CPU a sandbox with no task in flight may use, as a share of one core. */
const IDLE_CPU_SHARE = 0.5;
/** After a sandbox dies early, the next start waits this long, doubling up to RESTART_MAX_MS. */
const RESTART_MS = 250;
const RESTART_MAX_MS = 10_000;

interface Running {
  awaited: Awaited;
  /** It runs under a node:vm time limit, whose watchdog is a thread of its own while it runs. */
  watchdog: boolean;
  settle(a: ComputeAnswer): void;
  timer: NodeJS.Timeout;
}

interface Sandbox {
  child: ChildProcess;
  channel: Socket;
  /** Settles when it is ready, or dead. */
  ready: Promise<void>;
  settleReady(): void;
  running: Map<string, Running>;
  startedAt: number;
  dead: boolean;
}

interface Waiting {
  task: ComputeTask;
  deadlineMs: number;
  settle(a: ComputeAnswer): void;
}

/**
 * The sandbox's stdout and stderr into one log line: what came in the second after the first
 * byte, up to OUTPUT_BYTES (or less, when the streams end first). What follows is read and
 * dropped, up to OUTPUT_MAX_BYTES in all, past which `tooMuch` is called (its owner kills it).
 */
function captureOutput(streams: (Readable | null)[], fields: () => Record<string, unknown>, tooMuch: () => void): void {
  const kept: Buffer[] = [];
  let size = 0;
  let total = 0;
  let timer: NodeJS.Timeout | null = null;
  let logged = false;
  const flush = () => {
    if (logged) return;
    logged = true;
    if (timer) clearTimeout(timer);
    if (size > 0) log.warn("the compute sandbox wrote to its output", { ...fields(), output: Buffer.concat(kept).toString("utf8"), bytes: size });
  };
  for (const s of streams) {
    if (!s) continue;
    s.on("error", () => undefined);
    s.on("data", (chunk: Buffer) => {
      total += chunk.length;
      if (total > OUTPUT_MAX_BYTES) tooMuch();
      if (logged) return;
      kept.push(chunk.subarray(0, OUTPUT_BYTES - size));
      size += Math.min(chunk.length, OUTPUT_BYTES - size);
      timer ??= setTimeout(flush, OUTPUT_WAIT_MS);
      if (size >= OUTPUT_BYTES) flush();
    });
    s.once("close", flush);
  }
}

/** A sandbox started ahead of need and given to its tenant later, before it runs any code. */
export interface SpareCompute extends Compute {
  assign(tenant: string): void;
}

/** One tenant's sandbox: its queue, its process (when started) and what watches it. */
export function createCompute(options: SandboxOptions): SpareCompute {
  let tenant = options.tenant;
  const whose = () => (tenant === "" ? "the root namespace" : JSON.stringify(tenant));
  const fields = () => ({ tenant });
  let sandbox: Sandbox | null = null;
  let closed = false;
  const waiting: Waiting[] = [];
  let admitted = 0;
  let restartDelay = 0;
  let restartAt = 0;
  let pump: NodeJS.Timeout | null = null;

  /** Fail every task of `sb` with `why` and kill its whole process group; the next task starts another. */
  function kill(sb: Sandbox, why: string): void {
    if (sb.dead) return;
    sb.dead = true;
    sb.settleReady();
    if (sandbox === sb) sandbox = null;
    try {
      process.kill(-sb.child.pid!, "SIGKILL");
    } catch {
      // Gone already.
    }
    for (const r of sb.running.values()) {
      clearTimeout(r.timer);
      r.settle({ error: `${why}; the compute sandbox was stopped` });
    }
    sb.running.clear();
    // A sandbox that dies within 30 s of its start delays the next start, so a tenant whose code
    // kills its sandbox on purpose cannot make the host start sandboxes back to back.
    restartDelay = Date.now() - sb.startedAt < 30_000 ? Math.min(RESTART_MAX_MS, Math.max(RESTART_MS, restartDelay * 2)) : 0;
    restartAt = Date.now() + restartDelay;
    if (!closed) log.warn("compute sandbox stopped", { ...fields(), why });
    schedule();
  }

  /**
   * Look at the sandbox every WATCH_MS from its start: its launcher `outer` and, once started,
   * `node()` (its node process); `baseline()`: node's threads when it said it was ready, before
   * any task (null before that).
   */
  function watch(sb: Sandbox, outer: number, node: () => number | null, baseline: () => number | null, overMemory: () => boolean): void {
    let last: ProcessLook | null = null;
    let wasIdle = true;
    const strikes = { stopped: 0, threads: 0, idle: 0 };
    const strike = (k: keyof typeof strikes, over: boolean) => (strikes[k] = over ? strikes[k] + 1 : 0) >= STRIKES;
    const stopped = (p: ProcessLook | null) => p !== null && (p.state === "T" || p.state === "t");
    const tick = setInterval(() => {
      if (sb.dead) return clearInterval(tick);
      const pid = node();
      const now = pid === null ? null : lookAt(pid);
      const base = baseline();
      const idleCpu = now !== null && last !== null && wasIdle && sb.running.size === 0 && now.cpuMs - last.cpuMs > IDLE_CPU_SHARE * WATCH_MS;
      // A task under a node:vm time limit (JavaScript, WebAssembly, SQL) has a watchdog thread while it runs.
      const allowed = base === null ? Infinity : base + [...sb.running.values()].filter((r) => r.watchdog).length;
      if (overMemory()) return;
      if (strike("stopped", stopped(now) || (pid !== outer && stopped(lookAt(outer))))) kill(sb, "it was stopped (SIGSTOP)");
      else if (strike("threads", now !== null && now.threads > allowed)) kill(sb, `it ran ${now!.threads - allowed} threads more than its pool and its tasks' time limits need (user code started its own)`);
      else if (strike("idle", idleCpu)) kill(sb, "it kept computing with no task in flight");
      last = now;
      wasIdle = base !== null && sb.running.size === 0;
    }, WATCH_MS);
    tick.unref();
  }

  function start(launch: Parameters<typeof launchSandbox>[0]): Sandbox {
    // These numbers only: the owner's configuration holds keys.
    const child = launchSandbox(launch, COMPUTE_PROCESS, [JSON.stringify({ workers: options.workers, workerHeapMb: options.workerHeapMb })], options.niceness, options.sandboxMemoryMb);
    const running = new Map<string, Running>();
    let settleReady!: () => void;
    const ready = new Promise<void>((r) => (settleReady = r));
    const channel = child.stdio[3] as Socket;
    const sb: Sandbox = { child, channel, ready, settleReady, running, startedAt: Date.now(), dead: false };
    const startTimer = setTimeout(() => kill(sb, `it did not start within ${START_MS} ms`), START_MS);
    startTimer.unref();
    // Under unshare the sandbox's node is the launcher's one child; without namespaces, the launcher itself.
    let nodePid: number | null = launch.mode === "namespaces" ? null : (child.pid ?? null);
    const node = () => (nodePid ??= child.pid === undefined ? null : childOf(child.pid));
    let threads: number | null = null;
    /** Whether the sandbox's writable memory is within 1/16 of its bound: then it is killed, saying so. */
    const overMemory = (): boolean => {
      const pid = node();
      const bytes = pid === null ? null : writableBytes(pid);
      const bound = options.sandboxMemoryMb * 2 ** 20;
      if (bytes === null || bytes < bound - bound / 16) return false;
      kill(sb, `it reached its memory bound: ${Math.round(bytes / 2 ** 20)} MB of writable memory, within 1/16 of --sandbox-memory-mb ${options.sandboxMemoryMb} (typed arrays, WebAssembly, Python and SQL memory count toward it)`);
      return true;
    };
    if (child.pid !== undefined) watch(sb, child.pid, node, () => threads, overMemory);
    const reader = answerReader(
      { outputBytes: MAX_ANSWER_BYTES, errorBytes: 16 * MAX_ERROR_CHARS },
      (id) => running.get(id)?.awaited ?? null,
      {
        ready() {
          clearTimeout(startTimer);
          const pid = node();
          threads = pid === null ? null : (lookAt(pid)?.threads ?? null);
          settleReady();
        },
        answer(id, a) {
          if (overMemory()) return;
          const r = running.get(id)!;
          running.delete(id);
          clearTimeout(r.timer);
          restartDelay = 0;
          r.settle("error" in a ? { error: boundedText(a.error) } : a);
          schedule();
        },
      },
    );
    channel.on("data", (chunk: Buffer) => {
      if (sb.dead) return;
      const broken = reader.push(chunk);
      if (broken) kill(sb, `it broke its channel's protocol: ${broken}`);
    });
    channel.on("error", (err) => kill(sb, `its channel failed (${err.message})`));
    // A process that died closes its channel too: its exit, which says how, is waited for a moment.
    channel.on("close", () => setTimeout(() => kill(sb, "it closed its channel"), 1000).unref());
    child.on("error", (err) => kill(sb, `it could not be started (${err.message})`));
    // Past its memory bound the kernel refuses the allocation, and an allocation V8 cannot make ends
    // the process at once (abort), often before the watch's next look: such an end names the bound.
    child.once("exit", (code, signal) => {
      const crashed = signal !== null || (code ?? 0) >= 128;
      kill(sb, `its process ended (${signal ?? `exit code ${code}`})${crashed ? `, most likely at its memory bound (--sandbox-memory-mb ${options.sandboxMemoryMb}): past it the kernel refuses allocations` : ""}`);
    });
    captureOutput([child.stdout, child.stderr], fields, () => kill(sb, `it wrote more than ${OUTPUT_MAX_BYTES} bytes to its output`));
    return sb;
  }

  /** Hand waiting tasks to the sandbox, starting it when needed; called whenever something changed. */
  function schedule(): void {
    if (closed || waiting.length === 0 || pump) return;
    const wait = restartAt - Date.now();
    if (!sandbox && wait > 0) {
      pump = setTimeout(() => {
        pump = null;
        schedule();
      }, wait);
      return;
    }
    void dispatch();
  }

  let launching: Promise<Sandbox | null> | null = null;

  /** The sandbox, started when there is none; null (and every waiting task failed) where user code is refused. */
  function sandboxNow(): Promise<Sandbox | null> {
    if (sandbox && !sandbox.dead) return Promise.resolve(sandbox);
    launching ??= (options.isolation ? Promise.resolve(options.isolation) : isolation(options.unsafeSharedSandbox))
      .then((iso) => {
        if (iso.mode === "refused") {
          for (const w of waiting.splice(0)) w.settle({ error: refusal(iso.why) });
          return null;
        }
        return closed ? null : (sandbox = start(iso));
      })
      .finally(() => (launching = null));
    return launching;
  }

  async function dispatch(): Promise<void> {
    const sb = await sandboxNow();
    if (!sb) return;
    await sb.ready;
    while (!sb.dead && sandbox === sb && sb.running.size < options.workers && waiting.length > 0) {
      const w = waiting.shift()!;
      const id = newTaskId();
      const { input, ...request } = w.task.request as typeof w.task.request & { input?: Uint8Array };
      const timer = setTimeout(() => kill(sb, `a task passed its deadline of ${w.deadlineMs} ms`), w.deadlineMs + DEADLINE_GRACE_MS);
      const backend = w.task.name === "udf" ? w.task.request.udf.backend : w.task.request.fn.backend;
      sb.running.set(id, { awaited: w.task.request.op === "run" ? "output" : "ok", watchdog: backend !== "python", settle: w.settle, timer });
      sb.channel.cork();
      for (const part of taskFrame({ id, deadlineMs: w.deadlineMs, name: w.task.name, request }, input)) sb.channel.write(part);
      sb.channel.uncork();
    }
  }

  return {
    async run(task, deadlineMs) {
      if (closed) return { error: "the compute sandbox was closed" };
      if (admitted >= options.admitted) {
        throw new ApiError(Code.ServiceUnavailable, `the compute sandbox of ${whose()} is busy (${options.workers} workers, ${options.admitted} tasks admitted); retry later`, undefined, { reason: "pool_queue" });
      }
      admitted++;
      const started = performance.now();
      try {
        return await new Promise<ComputeAnswer>((settle) => {
          waiting.push({ task, deadlineMs, settle });
          schedule();
        });
      } finally {
        admitted--;
        recordPoolTask(task.name, (performance.now() - started) / 1000);
      }
    },
    warm() {
      if (!closed) void sandboxNow();
    },
    busy: () => admitted,
    assign(owner) {
      tenant = owner;
    },
    async close() {
      closed = true;
      if (pump) clearTimeout(pump);
      for (const w of waiting.splice(0)) w.settle({ error: "the compute sandbox was closed" });
      // Killed now, before anything is awaited (a job process may exit right after); a start
      // under way starts nothing once closed.
      const sb = sandbox;
      const exited = sb && !sb.dead && sb.child.exitCode === null && sb.child.signalCode === null ? new Promise((resolve) => sb.child.once("exit", resolve)) : null;
      if (sb) kill(sb, "its owner closed it");
      await Promise.all([exited, launching]);
    },
  };
}
