// An open-loop load generator for the bench harnesses: requests start at a fixed rate whether or
// not earlier ones have been answered (as independent clients would send them), each on a free
// keep-alive connection (a new one when all are busy), and the answers are counted per second by
// kind. A closed loop would slow down with the server and hide a drop in throughput.
import { Conn } from "./http-client.js";

export interface OpenLoopRequest {
  kind: string;
  method: string;
  path: string;
  headers: string;
  body: Buffer | null;
}

export interface OpenLoopResult {
  /** Answers per second of the run (index: second), by kind: 2xx ones only. */
  perSecond: Map<string, number[]>;
  /** Latencies in ms, by kind (2xx answers). */
  latencies: Map<string, number[]>;
  /** The second of the run each of `latencies` was sent in, by kind. */
  sentIn: Map<string, number[]>;
  /** Non-2xx answers and failed connections, by kind. */
  errors: Map<string, number>;
}

/** Send `next(i)` at `rate` requests a second for `seconds`, then wait for the answers still due. */
export async function openLoop(port: number, rate: number, seconds: number, next: (i: number) => OpenLoopRequest, onSecond?: (s: number) => void): Promise<OpenLoopResult> {
  const idle: Conn[] = [];
  const all: Conn[] = [];
  const perSecond = new Map<string, number[]>();
  const latencies = new Map<string, number[]>();
  const sentIn = new Map<string, number[]>();
  const errors = new Map<string, number>();
  const inFlight = new Set<Promise<void>>();
  const t0 = performance.now();
  const total = Math.round(rate * seconds);
  const send = (i: number) => {
    const r = next(i);
    let c = idle.pop();
    while (c?.closed) c = idle.pop();
    c ??= new Conn("127.0.0.1", port);
    if (!all.includes(c)) all.push(c);
    const start = performance.now();
    const p = c.request(r.method, r.path, r.headers, r.body).then(
      (reply) => {
        const end = performance.now();
        if (reply.status >= 200 && reply.status < 300) {
          const s = Math.floor((end - t0) / 1000);
          const counts = perSecond.get(r.kind) ?? [];
          counts[s] = (counts[s] ?? 0) + 1;
          perSecond.set(r.kind, counts);
          if (!latencies.has(r.kind)) {
            latencies.set(r.kind, []);
            sentIn.set(r.kind, []);
          }
          latencies.get(r.kind)!.push(end - start);
          sentIn.get(r.kind)!.push(Math.floor((start - t0) / 1000));
        } else errors.set(r.kind, (errors.get(r.kind) ?? 0) + 1);
        idle.push(c);
      },
      () => void errors.set(r.kind, (errors.get(r.kind) ?? 0) + 1),
    );
    const tracked = p.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  };
  let sent = 0;
  let second = -1;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate));
    while (sent < due) send(sent++);
    const s = Math.floor((performance.now() - t0) / 1000);
    if (s !== second) {
      second = s;
      onSecond?.(s);
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  await Promise.all(inFlight);
  for (const c of all) c.close();
  for (const counts of perSecond.values()) for (let s = 0; s < seconds; s++) counts[s] ??= 0;
  return { perSecond, latencies, sentIn, errors };
}
