// docs/alerts.yml, the example alerting rules of docs/operations.md: every rule is complete, and
// every Quiver or Node series a rule reads is one a server declares in /metrics, so a renamed
// series cannot leave a rule that never fires.
import * as lancedb from "@lancedb/lancedb";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import { batches, queryVectors } from "../bench/dataset.js";
import { AZURITE_ACCOUNT, startAzurite } from "./helpers/azurite.js";
import { hang } from "./helpers/hang.js";
import { probeUntil } from "./helpers/pace.js";
import { ADMIN_KEY, removeDir, request, serverForFile, startQuiver, type Quiver } from "./helpers/quiver.js";

const q = serverForFile();

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  annotations: { summary: string };
}

const rules = (YAML.parse(readFileSync(path.resolve(__dirname, "../docs/alerts.yml"), "utf8")) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

/** The metric families an expression reads (a histogram's _bucket, _sum and _count are its own family). */
const familiesOf = (expr: string) => [...expr.matchAll(/\b((?:quiver|nodejs|process)_[a-z0-9_]+)/g)].map((m) => m[1].replace(/_(bucket|sum|count)$/, ""));

it("every rule has a name, an expression and a summary; the names are unique", () => {
  expect(rules.length).toBeGreaterThan(10);
  for (const r of rules) {
    expect(r.alert).toMatch(/^Quiver[A-Za-z]+$/);
    expect(r.expr.trim().length).toBeGreaterThan(0);
    expect(r.annotations.summary.length).toBeGreaterThan(10);
  }
  expect(new Set(rules.map((r) => r.alert)).size).toBe(rules.length);
});

it("every series the rules read is declared by a server's /metrics", async () => {
  const declared = new Set([...(await q.call("GET", "/metrics")).text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
  const read = new Set(rules.flatMap((r) => familiesOf(r.expr)));
  expect(read.size).toBeGreaterThan(8);
  expect([...read].filter((f) => !declared.has(f))).toEqual([]);
});

// ---- The rules fire: Prometheus's own `promtool test rules` (Debian's prometheus package) runs
// docs/alerts.yml on input series derived from scrapes of real servers put in each state. Two
// scrapes of a state give each series' value and slope; the state is taken to last (the series go
// on along that line, one sample a minute), which is what a rule's `for` waits out.

const PROMTOOL = "/usr/bin/promtool";
const STEPS = 20;

interface Scrape {
  /** ms (performance.now) when it was answered. */
  at: number;
  /** series (`name{labels}`) to value; null when the scrape failed (nothing listening). */
  series: Map<string, number> | null;
}

async function scrapeOf(url: string): Promise<Scrape> {
  try {
    const r = await request(`${url}/metrics`, "GET", undefined, { "x-api-key": ADMIN_KEY });
    if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${r.text}`);
    const series = new Map<string, number>();
    for (const line of r.text.split("\n")) {
      const m = /^([a-z_:][\w:]*(?:\{.*\})?) (\S+)$/i.exec(line);
      // promtool's series notation has no NaN nor infinity (a summary's quantiles before any sample).
      if (m && Number.isFinite(Number(m[2]))) series.set(m[1], Number(m[2]));
    }
    return { at: performance.now(), series };
  } catch (err) {
    if ((err as Error).message.startsWith("/metrics answered")) throw err;
    return { at: performance.now(), series: null };
  }
}

const num = (v: number) => String(Math.round(v * 1e6) / 1e6);

/** A steady state: each series of `b` goes on from `b` along the line from `a` to `b`, a minute a step (never below 0). */
function steady(a: Scrape, b: Scrape): { series: string; values: string }[] {
  const perMinute = 60_000 / (b.at - a.at);
  return [...b.series!].map(([series, v1]) => {
    const slope = (v1 - (a.series!.get(series) ?? 0)) * perMinute;
    return { series, values: Array.from({ length: STEPS }, (_, i) => num(Math.max(0, v1 + slope * i))).join(" ") };
  });
}

/** A sequence of scrapes a minute apart, the last one lasting: a failed scrape marks every series stale (what Prometheus does). */
function sequence(scrapes: Scrape[]): { series: string; values: string }[] {
  const names = new Set(scrapes.flatMap((s) => [...(s.series?.keys() ?? [])]));
  const steps = [...scrapes, ...Array.from({ length: STEPS - scrapes.length }, () => scrapes[scrapes.length - 1])];
  return [...names].map((series) => ({ series, values: steps.map((s) => (!s.series ? "stale" : s.series.has(series) ? num(s.series.get(series)!) : "_")).join(" ") }));
}

const summaryOf = (alert: string, labels: Record<string, string>) =>
  (rules.find((r) => r.alert === alert)?.annotations.summary ?? "").replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, l: string) => labels[l] ?? "");

/**
 * `promtool test rules` on docs/alerts.yml: at `evalMinutes`, each alert in `fires` is firing with
 * these labels (and its summary), each in `quiet` is not. Returns promtool's output when it fails.
 */
function promtool(input: { series: string; values: string }[], evalMinutes: number, fires: Record<string, Record<string, string>>, quiet: string[]): string | null {
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-alerts-"));
  try {
    const test = {
      rule_files: [path.resolve(__dirname, "../docs/alerts.yml")],
      evaluation_interval: "1m",
      tests: [
        {
          interval: "1m",
          input_series: input,
          alert_rule_test: [
            ...Object.entries(fires).map(([alertname, labels]) => ({ eval_time: `${evalMinutes}m`, alertname, exp_alerts: [{ exp_labels: labels, exp_annotations: { summary: summaryOf(alertname, labels) } }] })),
            ...quiet.map((alertname) => ({ eval_time: `${evalMinutes}m`, alertname, exp_alerts: [] })),
          ],
        },
      ],
    };
    writeFileSync(path.join(dir, "test.yml"), JSON.stringify(test));
    const r = spawnSync(PROMTOOL, ["test", "rules", path.join(dir, "test.yml")], { encoding: "utf8" });
    if (r.error) throw r.error;
    return r.status === 0 ? null : `${r.stdout}\n${r.stderr}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const NEW_RULES = ["QuiverWedged", "QuiverHungRequests", "QuiverCold", "QuiverObjectStoreThrottled", "QuiverStuckDraining"];
const ROWS = Array.from({ length: 20 }, (_, i) => ({ id: i, x: i }));

describe("the rules fire on what real servers export in each state (promtool test rules)", () => {
  it("a serving replica fires none; one whose slots are held by requests that do not end fires QuiverWedged and QuiverHungRequests", { timeout: 180_000 }, async () => {
    const s = await startQuiver({ args: ["--replica-name", "r-wedged", "--max-in-flight", "2", "--udf-timeout-ms", "120000", "--workers", "2", "--shutdown-deadline-ms", "1000", "--drain-delay-ms", "0"] });
    try {
      expect((await s.call("POST", "/v1/table/t/create", ROWS)).status).toBe(200);
      const calm = await scrapeOf(s.url);
      for (let i = 0; i < 5; i++) expect((await s.call("POST", "/v1/table/t/count_rows", {})).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1000));
      expect(promtool(steady(calm, await scrapeOf(s.url)), 15, {}, NEW_RULES)).toBeNull();

      const hung = [hang(s, "a", 60_000), hang(s, "b", 60_001)];
      const a = await probeUntil("both slots held", async () => {
        const got = await scrapeOf(s.url);
        return got.series!.get('quiver_requests_in_flight{replica="r-wedged"}') === 2 ? got : null;
      });
      await new Promise((r) => setTimeout(r, 3000));
      const b = await scrapeOf(s.url);
      expect(b.series!.get('quiver_oldest_request_seconds{replica="r-wedged"}')).toBeGreaterThan(2);
      const labels = { replica: "r-wedged" };
      expect(promtool(steady(a, b), 12, { QuiverWedged: labels, QuiverHungRequests: labels }, ["QuiverCold", "QuiverObjectStoreThrottled", "QuiverStuckDraining"])).toBeNull();
      void Promise.allSettled(hung);
    } finally {
      await s.kill();
      removeDir(s.dataDir);
    }
  });

  it("a replica answering searches while its serving index builds fires QuiverCold", { timeout: 300_000 }, async () => {
    // Enough rows that searches go on while the build runs; 20,000 spent CPU on a longer build and its searches.
    const spec = { rows: 5_000, dim: 32, rank: 8, seed: 3 };
    const s = await startQuiver({
      args: ["--replica-name", "r-cold", "--workers", "2"],
      seed: async (dir) => {
        const db = await lancedb.connectNamespace("dir", { root: dir });
        await (await db.createTable("v", [...batches(spec, spec.rows)][0], [])).createIndex("vector", { config: lancedb.Index.ivfPq({ numPartitions: 4, numSubVectors: 4 }) });
      },
    });
    try {
      const a = await scrapeOf(s.url);
      const vectors = queryVectors(spec, 8).map((v) => Array.from(v));
      // Searches until the serving index answers one (it is built on the table's first search).
      let served = false;
      for (let round = 0; !served && round < 2000; round++) {
        const answers = await Promise.all(vectors.slice(0, 4).map((vector) => s.call("POST", "/v1/table/v/query", { vector, k: 10 })));
        for (const r of answers) expect(r.status, r.text).toBe(200);
        served = answers.some((r) => r.headers.get("x-quiver-search-path") === "serving");
      }
      const b = await scrapeOf(s.url);
      const cold = b.series!.get('quiver_search_path_total{path="engine",reason="not_built",replica="r-cold"}') ?? 0;
      expect(cold).toBeGreaterThanOrEqual(4);
      expect(promtool(steady(a, b), 12, { QuiverCold: { replica: "r-cold" } }, ["QuiverWedged", "QuiverHungRequests", "QuiverObjectStoreThrottled", "QuiverStuckDraining"])).toBeNull();
    } finally {
      await s.stop();
      removeDir(s.dataDir);
    }
  });

  it("a replica seen draining that stops listening and does not come back fires QuiverStuckDraining; one restarted does not", { timeout: 180_000 }, async () => {
    const args = ["--replica-name", "r-drain", "--drain-delay-ms", "3000", "--shutdown-deadline-ms", "60000", "--udf-timeout-ms", "120000"];
    let s = await startQuiver({ args });
    const dataDir = s.dataDir;
    try {
      expect((await s.call("POST", "/v1/table/t/create", ROWS)).status).toBe(200);
      const serving = await scrapeOf(s.url);
      // A request that outlasts the drain: the process goes on stopping after it stops listening.
      const hung = hang(s, "a", 30_000);
      await probeUntil("the request in flight", async () => ((await scrapeOf(s.url)).series!.get('quiver_requests_in_flight{replica="r-drain"}') === 1 ? true : null));
      s.proc.kill("SIGTERM");
      const draining = await probeUntil("draining", async () => {
        const got = await scrapeOf(s.url);
        return got.series?.get('quiver_draining{replica="r-drain"}') === 1 ? got : null;
      });
      const gone = await probeUntil("the listener closed", async () => {
        const got = await scrapeOf(s.url);
        return got.series === null ? got : null;
      });
      expect(s.proc.exitCode).toBeNull();
      const others = ["QuiverWedged", "QuiverHungRequests", "QuiverCold", "QuiverObjectStoreThrottled"];
      expect(promtool(sequence([serving, serving, draining, gone]), 12, { QuiverStuckDraining: { replica: "r-drain" } }, others)).toBeNull();
      // Killed now, not once the request ends: its UDF spins a core for the rest of its 30 s.
      await Promise.all([s.kill(), hung.catch(() => undefined)]);
      s = await startQuiver({ args, dataDir });
      const back = await scrapeOf(s.url);
      expect(promtool(sequence([serving, serving, draining, gone, back]), 12, {}, [...others, "QuiverStuckDraining"])).toBeNull();
    } finally {
      await s.kill();
      removeDir(dataDir);
    }
  });
});

describe("QuiverObjectStoreThrottled (promtool test rules)", () => {
  it("fires on a replica whose object store (Azurite, behind a proxy that answers its listings 503 ServerBusy) throttles it", { timeout: 300_000 }, async () => {
    const az = await startAzurite();
    let throttle = false;
    // Azure's own answer to a request over the account's rate limits; every other request passes to Azurite.
    const proxy = http.createServer((req, res) => {
      if (throttle && /[?&]comp=list/.test(req.url ?? "")) {
        res.writeHead(503, { "x-ms-error-code": "ServerBusy", "content-type": "application/xml" });
        return res.end('<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Ingress is over the account limit.</Message></Error>');
      }
      const target = new URL(az.url);
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on("error", () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/${AZURITE_ACCOUNT}`;
    let s: Quiver | undefined;
    try {
      await az.createContainer("throttled");
      const options = { ...az.storageOptions(), azure_storage_endpoint: endpoint };
      s = await startQuiver({ dataUri: "az://throttled/q", args: [...Object.entries(options).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]), "--replica-name", "r-store", "--auto-maintenance", "off"] });
      expect((await s.call("POST", "/v1/admin/reclaim", {})).status).toBe(200);
      const a = await scrapeOf(s.url);
      throttle = true;
      // Its listings are refused (after the engine's own retries): the answer is 503, saying so.
      const refused = await s.call("POST", "/v1/admin/reclaim", {});
      expect(refused.status, refused.text).toBe(503);
      expect(refused.json.detail).toMatch(/object store refuses requests for load/);
      const b = await scrapeOf(s.url);
      const throttled = [...b.series!].filter(([k, v]) => k.startsWith("quiver_object_store_throttled_total{") && v > 0);
      expect(throttled.length).toBeGreaterThan(0);
      const store = /store="([^"]+)"/.exec(throttled[0][0])![1];
      expect(promtool(steady(a, b), 12, { QuiverObjectStoreThrottled: { replica: "r-store", store } }, ["QuiverWedged", "QuiverHungRequests", "QuiverCold", "QuiverStuckDraining"])).toBeNull();
    } finally {
      await s?.stop();
      if (s) removeDir(s.dataDir);
      proxy.close();
      await az.stop();
    }
  });
});
