// --generators N: the load sent by N child processes of the harness (one Node process tops out near
// one core), each with 1/N of the rate (open loop) or of the connections (closed loop), started
// together (handshake.ts); their reports come back on stdout and merge exactly (merge.ts) while the
// parent scrapes the server's /metrics over the same time. A child is this program with its options
// in the environment (never on its command line, which other users can read).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { GO, WAITING } from "./handshake.js";
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

/** The children at work: `waiting()` resolves once every child waits for the word, `go()` gives it. */
export interface Generators {
  waiting(): Promise<void>;
  go(): void;
  reports: Promise<Report[]>;
}

/** Starts the children; `log` gets each child's stderr lines. */
export function runGenerators(o: Options, log: (line: string) => void): Generators {
  const children = Array.from({ length: o.generators }, (_, i) => {
    const child = spawn(process.execPath, [program()], {
      env: { ...process.env, [GENERATOR_ENV]: JSON.stringify({ ...share(o, i, o.generators), startAt: null }) },
      stdio: ["pipe", "pipe", "pipe"],
    });
    // The child's "waiting" lines not yet taken, and the takers waiting for one.
    let said = 0;
    const takers: (() => void)[] = [];
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => {
      err += d;
      const lines = err.split("\n");
      err = lines.pop()!;
      for (const l of lines) {
        if (l === WAITING) takers.length ? takers.shift()!() : said++;
        else if (l.trim()) log(`[generator ${i + 1}] ${l}`);
      }
    });
    // A child that has gone reads no word: writing to it must not end the parent.
    child.stdin.on("error", () => undefined);
    const report = new Promise<Report>((resolve, reject) => {
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
    const ended = report.then(() => Promise.reject(new Error(`generator ${i + 1} ended before its start`)));
    const waiting = (): Promise<void> => (said > 0 ? (said--, Promise.resolve()) : Promise.race([new Promise<void>((res) => takers.push(res)), ended]));
    return { child, report, waiting };
  });
  return {
    waiting: () => Promise.all(children.map((c) => c.waiting())).then(() => undefined),
    go: () => children.forEach((c) => c.child.stdin.write(`${GO}\n`)),
    reports: Promise.all(children.map((c) => c.report)),
  };
}
