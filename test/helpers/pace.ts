// Bounds on elapsed time that hold on a busy machine: a bound written for an idle one, times how
// much slower this machine runs now (other suites, other files of this one). Measured twice: the
// 1-minute load average per core, and, for what the average has not caught up with yet, how long
// 20 ms of this process's CPU took on the wall clock.
import os from "node:os";

const BURN_US = 20_000;

/** How many times slower than on an idle machine work runs now; at least 1. */
export function slowdown(): number {
  const c0 = process.cpuUsage();
  const w0 = performance.now();
  while (process.cpuUsage(c0).user < BURN_US);
  const burn = ((performance.now() - w0) * 1000) / BURN_US;
  return Math.max(1, os.loadavg()[0] / os.availableParallelism(), burn);
}

/** `ms`, a bound that holds on an idle machine, scaled to this machine's present load. */
export const paced = (ms: number): number => Math.round(ms * slowdown());

/** Ask `probe` every 100 ms until it answers something other than null; past `timeoutMs` (paced), fail naming `what`. */
export async function probeUntil<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + paced(timeoutMs);
  for (;;) {
    const got = await probe();
    if (got !== null) return got;
    if (Date.now() > end) throw new Error(`not within ${timeoutMs} ms (paced): ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The timeout of a test that runs several servers, their job processes and sandboxes, or many
 * commits one after another: it only ends a hang, its own waits being paced. Beside a second suite
 * (load average 12–25 on 2 cores) such tests ran past 60–240 s where they take 10–80 s on an idle
 * machine.
 */
export const SLOW_TEST_MS = 600_000;
