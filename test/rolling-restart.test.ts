// A rolling restart under load, as an operator runs one: three replicas on one data directory
// behind HAProxy configured exactly as docs/haproxy.cfg says (readiness every 2 s, out after 3
// failures, back after 2 successes), each replica with its default --drain-delay-ms. Each in turn
// gets SIGTERM, drains, exits, starts again and comes back into rotation, while four clients query
// and one inserts through the balancer, none with an Idempotency-Key: not one request fails.
import { expect, it } from "vitest";
import { options } from "../src/config.js";
import { replicasForFile } from "./helpers/replicas.js";
import { ADMIN_KEY, request } from "./helpers/quiver.js";

// "" is no value: the replicas take the default delay, not the test servers' 0.
const bed = replicasForFile({ replicas: 3, store: "local", checks: "documented", env: { QUIVER_DRAIN_DELAY_MS: "" }, args: ["--workers", "1"] });

const DIM = 8;
const row = (id: number) => ({ id, vector: Array.from({ length: DIM }, (_, d) => Math.sin(id + d)) });
const json = { "x-api-key": ADMIN_KEY, accept: "application/json" };
/** Each querying client's pause between its requests, and the writer's (each insert is a fragment LanceDB reads on every later query until maintenance compacts them). */
const QUERY_PAUSE_MS = 100;
const INSERT_PAUSE_MS = 200;

it("SIGTERM to each replica in turn under query and insert load through HAProxy: 0 failed requests", { timeout: 300_000 }, async () => {
  expect(options.find((o) => o.key === "drain-delay-ms")!.def).toBe(10_000);
  const created = await bed.call("POST", "/v1/table/rolling/create", Array.from({ length: 500 }, (_, i) => row(i)));
  expect(created.status, created.text).toBe(200);

  const failed: string[] = [];
  const answeredBy = new Map<string, number>();
  let answered = 0;
  let inserted = 0;
  let lastVersion = 0;
  let going = true;
  /** One client: `send` in a loop until the restarts are over; anything but a 200 is a failure. */
  const client = async (pauseMs: number, send: (n: number) => Promise<{ status: number; headers: Headers; text: string }>) => {
    for (let n = 0; going; n++) {
      try {
        const r = await send(n);
        if (r.status !== 200) failed.push(`${r.status} ${r.text.slice(0, 200)}`);
        else {
          answered++;
          const by = r.headers.get("x-quiver-replica") ?? "?";
          answeredBy.set(by, (answeredBy.get(by) ?? 0) + 1);
        }
      } catch (err) {
        failed.push(String((err as Error).cause ?? err));
      }
      // A steady stream, not a flood: the restarts are what is tested, and a flood's CPU slowed
      // every other test file running beside this one.
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  };
  const queries = [0, 1, 2, 3].map((c) =>
    client(QUERY_PAUSE_MS, (n) => {
      const path = ["/query", "/count_rows", "/describe", "/query"][(c + n) % 4];
      const body = path === "/query" ? { vector: row(n).vector, k: 5, columns: ["id"] } : {};
      return request(`${bed.url}/v1/table/rolling${path}`, "POST", body, json);
    }),
  );
  const writer = client(INSERT_PAUSE_MS, async (n) => {
    const r = await request(`${bed.url}/v1/table/rolling/insert`, "POST", [row(10_000 + n)], json);
    if (r.status === 200) {
      inserted++;
      lastVersion = Math.max(lastVersion, r.json.version as number);
    }
    return r;
  });

  for (let i = 0; i < bed.replicas.length; i++) {
    const before = answered;
    await bed.restart(i);
    // The others kept answering while replica i drained and restarted.
    expect(answered).toBeGreaterThan(before);
  }
  going = false;
  await Promise.all([...queries, writer]);

  expect(failed).toEqual([]);
  expect(answered).toBeGreaterThan(100);
  // Every replica answered (balancing went on), and every acknowledged insert is there.
  expect([...answeredBy.keys()].sort()).toEqual(["r0", "r1", "r2"]);
  const count = await bed.call("POST", "/v1/table/rolling/count_rows", {}, { "x-quiver-min-version": String(lastVersion) });
  expect(count.json).toBe(500 + inserted);
});
