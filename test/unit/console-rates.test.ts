// The console's server chart behind a balancer: scrapes alternate between replicas, and a rate
// is computed only between two scrapes of one replica (console/metrics-rates.ts).
import { describe, expect, it } from "vitest";
import { parseMetrics, replicaRates } from "../../console/metrics-rates.js";

/** A scrape of replica `replica` that has answered `total` requests, `fast` of them within 1 ms. */
const scrape = (replica: string, total: number, fast = total) =>
  parseMetrics(
    [
      `quiver_requests_in_flight{replica="${replica}"} 1`,
      `quiver_requests_total{operation="QueryTable",status_class="2xx",replica="${replica}"} ${total}`,
      `quiver_request_duration_seconds_bucket{le="0.001",operation="QueryTable",replica="${replica}"} ${fast}`,
      `quiver_request_duration_seconds_bucket{le="0.01",operation="QueryTable",replica="${replica}"} ${total}`,
      `quiver_request_duration_seconds_bucket{le="+Inf",operation="QueryTable",replica="${replica}"} ${total}`,
    ].join("\n"),
  );

describe("console rates", () => {
  it("round robin over two replicas with very different totals: each rate is one replica's own, never a jump between them", () => {
    const rates = replicaRates();
    // a has served 100,000 requests, b 1,000; each serves 100 requests/s; scrapes 2 s apart alternate.
    const seen = [
      rates(scrape("a", 100_000), 0),
      rates(scrape("b", 1_000), 2_000),
      rates(scrape("a", 100_400), 4_000),
      rates(scrape("b", 1_400), 6_000),
      rates(scrape("a", 100_800, 100_400 + 390), 8_000),
    ];
    expect(seen.map((r) => [r.replica, r.qps])).toEqual([
      ["a", null],
      ["b", null],
      ["a", 100],
      ["b", 100],
      ["a", 100],
    ]);
    // a's last 400 requests: 390 within 1 ms, 10 within 10 ms, so its p99 lies in the second bucket.
    expect(seen[4].p99Ms).toBeGreaterThan(1);
    expect(seen[4].p99Ms).toBeLessThanOrEqual(10);
  });

  it("a replica whose counter went down (restarted) gives no rate for that pair", () => {
    const rates = replicaRates();
    rates(scrape("a", 5_000), 0);
    expect(rates(scrape("a", 10), 2_000).qps).toBeNull();
    expect(rates(scrape("a", 210), 4_000).qps).toBe(100);
  });
});
