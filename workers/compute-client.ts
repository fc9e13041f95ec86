// The trusted side's handle on the compute sandbox process (workers/processes/compute.ts): started
// on the first task, started again on the next task after it dies (the tasks in flight fail with
// a clear error), killed by close() and gone with its owner. Tasks and answers cross its IPC
// channel with Node's "advanced" serialization (the structured clone of Uint8Arrays). Measured on
// the shared 2-core machine under load 18-26 (median of 30 round trips, so only rough): 1 MiB 88 ms
// against 21 ms through a length-framed stdin/stdout pipe, 8 MiB 230 ms against 1,145 ms (a naive
// framer that re-concatenates); too noisy to choose on, so the simpler channel stays.
// What comes back is only data to check (workers/compute-answers.ts).
import type { ChildProcess } from "node:child_process";
import { ApiError, Code } from "../src/errors.js";
import { recordPoolTask } from "../src/metrics.js";
import type { ComputeCommand, ComputeMessage, ComputeSize, ComputeTask } from "./protocol.js";
import { launchSandbox } from "./sandbox-launch.js";

/** The sandbox's answer: the computed columns as IPC bytes, a bare success (a check), or a failure in words. */
export type ComputeAnswer = { output: Uint8Array } | { ok: true } | { error: string };

export interface Compute {
  /** Run `task` in the sandbox; it is aborted past `deadlineMs`. 503 past the bound of tasks in flight. */
  run(task: ComputeTask, deadlineMs: number): Promise<ComputeAnswer>;
  /** Start the sandbox now rather than on the first task (a job that will need it, while it reads). */
  warm(): void;
  close(): Promise<void>;
}

// dist/workers/compute-client.js → dist/workers/processes/compute.js
const COMPUTE_PROCESS = new URL("./processes/compute.js", import.meta.url);

interface Sandbox {
  child: ChildProcess;
  ready: Promise<void>;
  pending: Map<number, (a: ComputeAnswer) => void>;
}

export function createCompute(size: ComputeSize): Compute {
  // Batches come from jobs, each with a bounded number in flight: a generous bound.
  const bound = size.workers * 64;
  let sandbox: Sandbox | null = null;
  let nextId = 0;
  let inFlight = 0;

  function start(): Sandbox {
    const child = launchSandbox(COMPUTE_PROCESS, [JSON.stringify(size)]);
    const pending = new Map<number, (a: ComputeAnswer) => void>();
    const ready = new Promise<void>((resolve, reject) => {
      child.on("message", (m: ComputeMessage) => {
        if (m.type === "ready") return resolve();
        const settle = pending.get(m.id);
        pending.delete(m.id);
        settle?.("output" in m ? { output: m.output } : "error" in m ? { error: String(m.error) } : { ok: true });
      });
      child.once("error", reject);
      child.once("exit", (code, signal) => {
        if (sandbox?.child === child) sandbox = null;
        const why = `the compute sandbox process ended (${signal ?? `exit code ${code}`})`;
        reject(new Error(why));
        for (const settle of pending.values()) settle({ error: `${why} while running this task` });
        pending.clear();
      });
    });
    // A sandbox that dies before it is ready fails the tasks waiting for it, not the process.
    ready.catch(() => undefined);
    return { child, ready, pending };
  }

  return {
    async run(task, deadlineMs) {
      if (inFlight >= bound) {
        throw new ApiError(Code.ServiceUnavailable, `the compute sandbox is busy (${size.workers} workers, ${bound} tasks admitted); retry later`, undefined, { reason: "pool_queue" });
      }
      inFlight++;
      const started = performance.now();
      try {
        const sb = (sandbox ??= start());
        await sb.ready;
        const id = nextId++;
        return await new Promise<ComputeAnswer>((resolve) => {
          sb.pending.set(id, resolve);
          sb.child.send({ type: "task", id, deadlineMs, ...task } satisfies ComputeCommand);
        });
      } catch (err) {
        return { error: String((err as Error).message ?? err) };
      } finally {
        inFlight--;
        recordPoolTask(task.name, (performance.now() - started) / 1000);
      }
    },
    warm() {
      sandbox ??= start();
    },
    async close() {
      const sb = sandbox;
      sandbox = null;
      if (!sb || sb.child.exitCode !== null || sb.child.signalCode !== null) return;
      const exited = new Promise((resolve) => sb.child.once("exit", resolve));
      sb.child.kill("SIGKILL");
      await exited;
    },
  };
}
