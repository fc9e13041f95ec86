// Latency samples → QPS and percentiles, and a fixed-width report line.

export interface Result {
  name: string;
  ok: number;
  errors: number;
  seconds: number;
  /** Latencies of successful operations, ms. */
  lat: number[];
  firstError?: string;
}

export const pct = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;

export function summary(r: Result) {
  const s = [...r.lat].sort((a, b) => a - b);
  return { qps: r.ok / r.seconds, p50: pct(s, 50), p95: pct(s, 95), p99: pct(s, 99) };
}

export function header(): string {
  return `${"operation".padEnd(28)}${"QPS".padStart(10)}${"p50 ms".padStart(10)}${"p95 ms".padStart(10)}${"p99 ms".padStart(10)}${"errors".padStart(9)}`;
}

export function line(r: Result): string {
  const { qps, p50, p95, p99 } = summary(r);
  const f = (x: number) => x.toFixed(2).padStart(10);
  const err = r.errors ? `  (${r.firstError})` : "";
  return `${r.name.padEnd(28)}${qps.toFixed(0).padStart(10)}${f(p50)}${f(p95)}${f(p99)}${String(r.errors).padStart(9)}${err}`;
}

/** Closed loop: `concurrency` loops each run `op` back to back for `seconds`. */
export async function closedLoop(
  name: string,
  concurrency: number,
  seconds: number,
  op: (loop: number, i: number) => Promise<string | null>,
): Promise<Result> {
  const r: Result = { name, ok: 0, errors: 0, seconds, lat: [] };
  const stopAt = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      for (let i = 0; performance.now() < stopAt; i++) {
        const t0 = performance.now();
        let err: string | null;
        try {
          err = await op(loop, i);
        } catch (e) {
          err = String((e as Error).message ?? e);
        }
        if (err === null) {
          r.ok++;
          r.lat.push(performance.now() - t0);
        } else {
          r.errors++;
          r.firstError ??= err;
        }
      }
    }),
  );
  r.seconds = (performance.now() - start) / 1000;
  return r;
}
