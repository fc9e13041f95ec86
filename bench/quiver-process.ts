// Server processes for the bench harnesses: Quiver (dist/src/main.js) on a free port with one
// admin API key, and the bare uWS echo baseline (dist/bench/echo-server.js).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { V8_FLAGS } from "../src/util/v8-flags.js";

export interface QuiverProcess {
  url: string;
  proc: ChildProcess;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * A Quiver server on `dataDir`; unless `args` name one, a state directory of its own (servers
 * compared on one data directory are replicas). `checkout`: another built checkout's server.
 */
export function startQuiver(dataDir: string, key: string, args: string[] = [], checkout?: string): Promise<QuiverProcess> {
  const state = args.includes("--state-dir") ? [] : ["--state-dir", mkdtempSync(path.join(tmpdir(), "quiver-bench-state-"))];
  // No drain delay: no balancer waits for one, and a bench stops its servers between rounds.
  return startServer(checkout ? path.resolve(checkout, "dist/src/main.js") : path.resolve(here, "../src/main.js"), ["--port", "0", "--data-dir", dataDir, "--api-keys", `${key}:admin`, "--log-level", "warn", "--drain-delay-ms", "0", ...state, ...args], V8_FLAGS);
}

/** CPU seconds a process (or, with `tid`, one of its threads) has used (user + system), from /proc; null where there is no /proc. */
export function cpuSeconds(pid: number, tid?: number): number | null {
  try {
    const f = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}

export const startEcho = (): Promise<QuiverProcess> => startServer(path.resolve(here, "echo-server.js"), []);

/** A node script, run with node's flags `flags`, that prints `listening on http://host:port` once it listens. */
async function startServer(script: string, args: string[], flags: string[] = []): Promise<QuiverProcess> {
  const proc = spawn(process.execPath, [...flags, script, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.on("exit", (c) => reject(new Error(`${path.basename(script)} exited with ${c}: ${out}`)));
  });
  const exited = new Promise<void>((r) => proc.on("exit", () => r()));
  return {
    url: `http://127.0.0.1:${port}`,
    proc,
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGTERM");
      await exited;
    },
  };
}
