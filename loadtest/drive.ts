// The two ways of sending load. A closed loop keeps `connections` requests outstanding, each sent
// when the one before it on its connection is answered, and times each from its own send: a slow
// answer holds the next request back, so the waiting it causes is never seen (coordinated
// omission). The open loop sends on a schedule, request i due at start + i / rate, whatever the
// answers do, and times each from when it was due; when every connection is busy, due requests wait
// in the client and that wait counts in their latency, as it would for users arriving at that rate.
import type { Client } from "./http.js";
import type { Recorder } from "./recorder.js";
import type { Next } from "./workload.js";

/** Where a driver reports answers (latency from due, service time from send) and its queue. */
export type Sink = Pick<Recorder, "record" | "outstanding" | "backlog">;

/** A sink that keeps nothing (the warmup's). */
export const DISCARD: Sink = { record() {}, outstanding() {}, backlog() {} };

export interface Driven {
  /** Requests sent (all answered before the driver returns). */
  sent: number;
  seconds: number;
  /** Open loop: requests due within the duration but not sent by its end plus max(1 s, 10%) (the client fell behind). */
  unsent: number;
  /** Open loop: requests sent more than 1 ms after they were due. */
  late: number;
  /** Open loop: the most requests that were due and waiting for a connection at once. */
  max_backlog: number;
}

export interface Load {
  client: Client;
  next: (i: number) => Next;
  sink: Sink;
  connections: number;
  seconds: number;
  /** The number of the first request (so a run after its warmup goes on through the sources). */
  first: number;
  /** Stops sending early (Ctrl-C); requests in flight are still waited for and counted. */
  signal?: AbortSignal;
}

export async function closedLoop(l: Load): Promise<Driven> {
  const t0 = performance.now();
  const end = t0 + l.seconds * 1000;
  let i = l.first;
  let outstanding = 0;
  await Promise.all(
    Array.from({ length: l.connections }, async () => {
      while (performance.now() < end && !l.signal?.aborted) {
        const { workload, req } = l.next(i++);
        const sent = performance.now();
        l.sink.outstanding(++outstanding);
        const a = await l.client.send(req);
        outstanding--;
        const us = (performance.now() - sent) * 1000;
        l.sink.record(workload, a.status, a.error, us, us, a.body);
      }
    }),
  );
  return { sent: i - l.first, seconds: (performance.now() - t0) / 1000, unsent: 0, late: 0, max_backlog: 0 };
}

export function openLoop(l: Load, rate: number): Promise<Driven> {
  const t0 = performance.now();
  const interval = 1000 / rate;
  let total = Math.floor(rate * l.seconds);
  const end = t0 + l.seconds * 1000;
  // Requests due before the end are still sent, late, for a while after it (so a stall of the
  // client near the end does not drop them); past that the client is too far behind and stops.
  const sendUntil = end + Math.max(1000, 100 * l.seconds);
  let n = 0;
  let inFlight = 0;
  let late = 0;
  let maxBacklog = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  return new Promise((resolve) => {
    const finish = () => resolve({ sent: n, seconds: (performance.now() - t0) / 1000, unsent: total - n, late, max_backlog: maxBacklog });
    const fire = (due: number, now: number) => {
      if (now - due > 1) late++;
      const { workload, req } = l.next(l.first + n++);
      l.sink.outstanding(++inFlight);
      const sent = performance.now();
      void l.client.send(req).then((a) => {
        const answered = performance.now();
        l.sink.record(workload, a.status, a.error, (answered - due) * 1000, (answered - sent) * 1000, a.body);
        inFlight--;
        pump();
      });
    };
    const pump = () => {
      clearTimeout(timer);
      const now = performance.now();
      if (!stopped && l.signal?.aborted) {
        stopped = true;
        // Interrupted: only what was due by now counts as due.
        total = Math.min(total, Math.floor((now - t0) / interval) + 1);
      }
      if (now >= sendUntil) stopped = true;
      while (!stopped && n < total && inFlight < l.connections) {
        const due = t0 + n * interval;
        if (due > now) break;
        fire(due, now);
      }
      const due = Math.min(total, Math.floor((now - t0) / interval) + 1);
      maxBacklog = Math.max(maxBacklog, due - n);
      l.sink.backlog(Math.max(0, due - n));
      if (stopped || n >= total) {
        if (inFlight === 0) finish();
        return;
      }
      // Wake at the next due time; an answer arriving first wakes us too (it may free a connection).
      if (inFlight < l.connections) timer = setTimeout(pump, Math.max(0, t0 + n * interval - now));
      else timer = setTimeout(pump, Math.max(0, sendUntil - now));
    };
    l.signal?.addEventListener("abort", () => pump(), { once: true });
    pump();
  });
}
