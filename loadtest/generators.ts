// --generators N: the load sent by N child processes of the harness (one Node process tops out near
// one core), each with 1/N of the rate (open loop) or of the connections (closed loop), started at
// the same moment; their reports come back on stdout and merge exactly (merge.ts) while the parent
// scrapes the server's /metrics over the same time. A child is this program with its options in
// the environment (never on its command line, which other users can read).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Options } from "./options.js";
import type { Report } from "./report.js";

/** The environment variable a child reads its options from. */
export const GENERATOR_ENV = "QUIVER_LOADTEST_GENERATOR";

/** The built program (a child runs it whether the parent runs built or from sources). */
function program(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const built = path.join(here, "cli.js");
  return existsSync(built) ? built : path.resolve(here, "../dist/loadtest/cli.js");
}

/** Generator `i` of `n`'s share: an even split of the rate and of the connections (at least one each). */
export function share(o: Options, i: number, n: number): Options {
  const part = (total: number) => Math.floor(total / n) + (i < total % n ? 1 : 0);
  return { ...o, generators: 1, rate: o.rate / n, connections: Math.max(1, part(o.connections)), metrics: false, thresholds: [], repeat: 1 };
}

/** Runs the children; each one's report, in order. `log` gets each child's stderr lines. */
export function runGenerators(o: Options, startAt: number, log: (line: string) => void): Promise<Report[]> {
  return Promise.all(
    Array.from({ length: o.generators }, (_, i) => {
      const child = spawn(process.execPath, [program()], {
        env: { ...process.env, [GENERATOR_ENV]: JSON.stringify({ ...share(o, i, o.generators), startAt }) },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => {
        err += d;
        const lines = err.split("\n");
        err = lines.pop()!;
        for (const l of lines) if (l.trim()) log(`[generator ${i + 1}] ${l}`);
      });
      return new Promise<Report>((resolve, reject) => {
        child.on("error", reject);
        child.on("exit", (code) => {
          if (code !== 0) return reject(new Error(`generator ${i + 1} exited ${code}: ${err.trim()}`));
          try {
            resolve(JSON.parse(out) as Report);
          } catch (e) {
            reject(new Error(`generator ${i + 1}: unreadable report: ${(e as Error).message}`));
          }
        });
      });
    }),
  );
}
