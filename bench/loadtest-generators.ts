// The load tester's own ceiling, and what --generators adds to it: quiver-loadtest (the built bin)
// against the bare uWS echo server (bench/echo-server.ts), closed loops of raw 7-byte POSTs, one
// generator process and then N, alternating for --rounds rounds; per setting the median and range
// of the answers a second and of the harness's CPU a request, and the per-round ratio of N to one.
//   node dist/bench/loadtest-generators.js [--generators 2] [--connections 16] [--duration 5] [--rounds 5]
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { Report } from "../loadtest/report.js";
import { interval, median, type Interval } from "../loadtest/noise.js";
import { startEcho } from "./quiver-process.js";

const { values } = parseArgs({
  strict: false,
  options: {
    generators: { type: "string", default: "2" },
    connections: { type: "string", default: "16" },
    duration: { type: "string", default: "5" },
    rounds: { type: "string", default: "5" },
  },
});
const N = Number(values.generators);
const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../loadtest/cli.js");
const dir = mkdtempSync(path.join(tmpdir(), "quiver-loadtest-generators-"));

/** One run of the bin with `generators` processes; its answers a second and CPU µs a request. */
function run(url: string, generators: number, out: string): Promise<{ rate: number; cpuUs: number }> {
  const args = [CLI, "--url", url, "--workload", "raw", "--path", "/echo", "--body", '"hello"', "--no-metrics", "--quiet",
    "--connections", String(values.connections), "--duration", String(values.duration), "--warmup", "1", "--generators", String(generators), "--out", out];
  const p = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "inherit"] });
  return new Promise((resolve, reject) =>
    p.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`quiver-loadtest exited ${code}`));
      const r = JSON.parse(readFileSync(`${out}.json`, "utf8")) as Report;
      resolve({ rate: r.run!.throughput, cpuUs: r.client!.cpu_us_per_request });
    }),
  );
}

const fmt = (i: Interval, digits = 0) => `${i.median.toFixed(digits)} (${i.min.toFixed(digits)}–${i.max.toFixed(digits)})`;

const echo = await startEcho();
try {
  console.log(`quiver-loadtest against the uWS echo server: ${values.connections} connections, ${values.duration} s runs, ${values.rounds} rounds; ${cpus().length} × ${cpus()[0]?.model}, load ${loadavg().map((x) => x.toFixed(1)).join(" ")}`);
  const one: { rate: number; cpuUs: number }[] = [];
  const many: { rate: number; cpuUs: number }[] = [];
  for (let r = 0; r < Number(values.rounds); r++) {
    one.push(await run(echo.url, 1, path.join(dir, `one-${r}`)));
    many.push(await run(echo.url, N, path.join(dir, `many-${r}`)));
    console.log(`round ${r + 1}: 1 generator ${one[r].rate.toFixed(0)}/s, ${N} generators ${many[r].rate.toFixed(0)}/s (${(many[r].rate / one[r].rate).toFixed(2)}×)`);
  }
  const ratios = many.map((m, i) => m.rate / one[i].rate);
  console.log(`1 generator:  ${fmt(interval(one.map((x) => x.rate)))} answers/s, ${fmt(interval(one.map((x) => x.cpuUs)))} µs of harness CPU a request`);
  console.log(`${N} generators: ${fmt(interval(many.map((x) => x.rate)))} answers/s, ${fmt(interval(many.map((x) => x.cpuUs)))} µs of harness CPU a request`);
  console.log(`ratio ${N} / 1 by round: median ${median(ratios).toFixed(2)}×, range ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}×; load now ${loadavg().map((x) => x.toFixed(1)).join(" ")}`);
} finally {
  await echo.stop();
  rmSync(dir, { recursive: true, force: true });
}
