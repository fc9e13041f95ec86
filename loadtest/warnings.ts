// When the harness, not the server, may have been what limited a run: its own CPU saturated (one
// Node process tops out near one core), or in an open loop due requests queued in the harness
// while the server had fewer in flight than the harness could send, or while each took far less
// once sent (service time) than it waited. Each warning names the fix.
import type { ClientFigures, RunResult, ServerFigures } from "./report.js";

/** Harness CPU, in cores per generator process, from which it counts as saturated. */
const SATURATED_CORES = 0.9;
/** Harness event-loop delay p99 from which its timings carry its own stalls. */
const STALLED_MS = 20;

const f = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));

/** Above this share of failed answers a run measures the errors, not the server: say so, with one of them. */
const MOSTLY_FAILED = 0.5;

export function failures(run: RunResult): string[] {
  if (!run.requests || run.errors / run.requests <= MOSTLY_FAILED) return [];
  const statuses = Object.entries(run.by_status).filter(([s]) => !/^2\d\d$/.test(s)).map(([s, n]) => `${n} × ${s}`).join(", ");
  return [`most requests failed (${run.errors} of ${run.requests}: ${statuses}), so the latencies describe the few that succeeded; first failure: ${run.error_sample ?? "none kept"}`];
}

/** `processes`: generator processes the client figures add up (1 for one harness). */
export function clientLimit(run: RunResult, client: ClientFigures, server: ServerFigures | null, processes = 1): string[] {
  const out: string[] = [];
  const perProcess = client.cpu_cores / processes;
  if (perProcess >= SATURATED_CORES) {
    out.push(
      `client limit: the harness's CPU was saturated (${perProcess.toFixed(2)} cores a process; one Node process tops out near 1), so it may have sent and read answers late: ` +
        `spread the load over more processes (--generators ${processes * 2}) or another machine`,
    );
  } else if (client.event_loop_p99_ms >= STALLED_MS) {
    out.push(`client limit: the harness's event loop was delayed (p99 ${f(client.event_loop_p99_ms)} ms), which its latencies include: give it a quieter machine or more processes (--generators ${processes * 2})`);
  }
  if (run.target_rate === null) return out;
  const grew = run.unsent > 0 || run.max_backlog > run.connections;
  const waited = run.latency_ms.p50 > 2 * run.service_ms.p50;
  if (!grew || !waited) return out;
  const peaks = (server?.points ?? []).map((p) => p.in_flight_max).filter((v): v is number => v !== null);
  const peak = peaks.length ? Math.max(...peaks) : null;
  const wait = `due requests waited in the harness (up to ${run.max_backlog} at once${run.unsent ? `, ${run.unsent} never sent` : ""}); the latency counts that wait (p50 ${f(run.latency_ms.p50)} ms) while each request took p50 ${f(run.service_ms.p50)} ms once sent (service time)`;
  if (peak !== null && peak < run.connections) {
    out.push(`client limit: ${wait}, and the server never had more than ${peak} requests in flight of the ${run.connections} the harness could send: the harness could not send fast enough; add generator processes (--generators ${processes * 2}) or machines`);
  } else {
    out.push(`client limit: ${wait}: the harness's ${run.connections} connections were all busy; raise --connections so the server sees the load (its queue then shows as service time), or add generator processes (--generators N)`);
  }
  return out;
}
