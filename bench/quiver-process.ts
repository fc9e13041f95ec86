// A Quiver process for the bench harnesses: dist/src/main.js on a free port with one admin API key.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export interface QuiverProcess {
  url: string;
  proc: ChildProcess;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
}

export async function startQuiver(dataDir: string, key: string, args: string[] = []): Promise<QuiverProcess> {
  const main = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src/main.js");
  const argv = [main, "--port", "0", "--data-dir", dataDir, "--api-keys", `${key}:admin`, "--log-level", "warn", ...args];
  const proc = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.on("exit", (c) => reject(new Error(`quiver exited with ${c}: ${out}`)));
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
