// quiver-loadtest as users run it (the built bin, options in a YAML file) against a real Quiver,
// and its reports opened in Chromium (test/helpers/browser.ts, driven by playwright-core, as
// test/console.test.ts does): the plots are drawn, nothing is fetched from outside the page, no
// legend label overlaps another and every series of a chart has its own style, --compare puts two
// runs side by side, a dataset is loaded and swept for recall against throughput, and several
// generator processes merge into one run. Screenshots go to test-output/, for a person to look at;
// docs/loadtest*.png are not copies of them but rendered from the worked examples' own reports by
// bench/render-report.mts.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../loadtest/run.js";
import { chromiumLaunchOptions } from "./helpers/browser.js";
import { geometryProblems } from "./helpers/charts.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";
import { seedLoadTable } from "./helpers/loadtest.js";
import { paced } from "./helpers/pace.js";

const CLI = path.resolve(__dirname, "../dist/loadtest/cli.js");
// Written beside the console test's pictures, never over the tracked docs/loadtest*.png (bench/render-report.mts renders those).
const SCREENSHOT = path.resolve(__dirname, "../test-output/loadtest.png");
const q = serverForFile();
const dir = mkdtempSync(path.join(tmpdir(), "quiver-loadtest-report-"));
let browser: Browser;
let page: Page;

/** Runs the built bin; `onStderr` sees its stderr as it comes (and gets the process, to signal it). */
function cli(
  args: string[],
  env: Record<string, string> = {},
  onStderr?: (text: string, p: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  p.stdout!.on("data", (d) => (stdout += d));
  p.stderr!.on("data", (d) => {
    stderr += d;
    onStderr?.(stderr, p);
  });
  return new Promise((resolve) => p.on("exit", (code) => resolve({ code, stdout, stderr })));
}

/** Opens a report page; fails on any request that leaves the file. */
async function open(file: string): Promise<string[]> {
  const outside: string[] = [];
  page.removeAllListeners("request");
  page.on("request", (r) => !r.url().startsWith("file://") && outside.push(r.url()));
  await page.goto(`file://${file}`);
  return outside;
}

const count = (selector: string) => page.locator(selector).count();

/**
 * For every chart on the open page: legend entries whose boxes (as Chromium laid them out) overlap
 * each other or leave the chart, series drawn in the same style (colour, dash, marker) as another,
 * and the geometry problems of test/helpers/charts.ts (clipped or overlapping text, points off the plot).
 */
async function chartProblems(): Promise<string[]> {
  const legends = await page.locator("svg.chart").evaluateAll((charts) =>
    charts.flatMap((svg) => {
      const title = svg.getAttribute("aria-label");
      const out: string[] = [];
      const outer = svg.getBoundingClientRect();
      const boxes = [...svg.querySelectorAll("g.legend-item")].map((g) => ({ name: g.getAttribute("data-series"), r: g.getBoundingClientRect() }));
      for (const [i, a] of boxes.entries()) {
        if (a.r.left < outer.left || a.r.right > outer.right || a.r.top < outer.top || a.r.bottom > outer.bottom) out.push(`${title}: legend ${a.name} leaves the chart`);
        for (const b of boxes.slice(i + 1)) {
          if (a.r.left < b.r.right && b.r.left < a.r.right && a.r.top < b.r.bottom && b.r.top < a.r.bottom) out.push(`${title}: legend ${a.name} overlaps ${b.name}`);
        }
      }
      const styles = [...svg.querySelectorAll("path.series")].map((p) => `${p.getAttribute("stroke")} ${p.getAttribute("stroke-dasharray") ?? ""} ${p.getAttribute("data-marker")}`);
      if (new Set(styles).size !== styles.length) out.push(`${title}: two series share a style (${styles.join(" | ")})`);
      return out;
    }),
  );
  return [...legends, ...(await geometryProblems(page))];
}

beforeAll(async () => {
  await seedLoadTable(q);
  browser = await chromium.launch(chromiumLaunchOptions());
  page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("quiver-loadtest reports", () => {
  it("the bin runs an SLO search from a YAML file, with progress on stderr, and writes JSON and HTML", async () => {
    const config = path.join(dir, "ramp.yaml");
    writeFileSync(
      config,
      [`url: ${q.url}`, "table: ns$docs", "mode: ramp", "connections: 8", "slo-ms: 100", "ramp-start: 20", "ramp-factor: 2", "ramp-max: 160", "step-duration: 1", "bisect: 1", "warmup: 0.3",
        "workloads:", "  - kind: vector", "    weight: 3", "  - kind: fts", "  - kind: count"].join("\n"),
    );
    const r = await cli(["--config", config, "--out", path.join(dir, "ramp")], { QUIVER_API_KEY: ADMIN_KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/\[ramp [\d.]+\/s\] \d+\/\d+ s +\d+ req\/s +p50 [\d.]+ ms +p99 [\d.]+ ms +errors \d+ +\d+ s left/);
    expect(r.stdout).toMatch(/rate holding p99 <= 100 ms|no rate tried held/);
    const report = JSON.parse(readFileSync(path.join(dir, "ramp.json"), "utf8")) as Report;
    expect(report.ramp!.steps.length).toBeGreaterThanOrEqual(2);
    expect(report.server!.requests_counted).toBe(report.run!.requests);
    expect(JSON.stringify(report)).not.toContain(ADMIN_KEY);
    expect(existsSync(path.join(dir, "ramp.html"))).toBe(true);
  });

  it("the report page draws its plots with nothing from outside (screenshot: test-output/loadtest.png)", async () => {
    const html = readFileSync(path.join(dir, "ramp.html"), "utf8");
    expect(html).not.toMatch(/<script|<link|<img|url\(|src=/i);
    expect(await open(path.join(dir, "ramp.html"))).toEqual([]);
    // Client: throughput, latency over time, HDR percentiles, error rate; server: 6; table state: 3; the ramp curve.
    expect(await count("svg.chart")).toBeGreaterThanOrEqual(14);
    const report = JSON.parse(readFileSync(path.join(dir, "ramp.json"), "utf8")) as Report;
    for (const title of ["Throughput", "Latency over time", "Latency distribution (HDR percentiles)", "Error rate", "Server: CPU", "Server: event-loop delay p99", "Server: requests in flight", "Server: worker pool", "Server: 503s by reason", "Table: fragments and versions", "Rate against p99"]) {
      const chart = page.locator(`svg.chart[aria-label="${title}"]`);
      expect(await chart.locator("path.series").count(), title).toBeGreaterThanOrEqual(1);
      const d = await chart.locator("path.series").first().getAttribute("d");
      expect(d!.split("L").length, title).toBeGreaterThanOrEqual(2);
    }
    // A marker per step and series (legend markers are inside their legend entries).
    expect(await page.locator('svg.chart[aria-label="Rate against p99"] > .point').count()).toBe(2 * report.ramp!.steps.length);
    expect(await count('svg.chart[aria-label="Rate against p99"] line.slo')).toBe(1);
    // The failing step is marked.
    const finalAttempt = new Map(report.ramp!.steps.map((s) => [s.rate, s.pass]));
    expect(await count('svg.chart[aria-label="Rate against p99"] g.mark')).toBe([...finalAttempt.values()].filter((pass) => !pass).length);
    const latency = page.locator('svg.chart[aria-label="Latency over time"] path.series');
    expect(await latency.evaluateAll((ps) => ps.map((p) => p.getAttribute("data-series")))).toEqual(["p50", "p95", "p99", "p99.9", "service p99"]);
    expect(await chartProblems()).toEqual([]);
    // A time axis ends with the run: no tick past its last second.
    const lastTick = await page.locator('svg.chart[aria-label="Throughput"] text.xtick').evaluateAll((ts) => Math.max(...ts.map((t) => Number(t.textContent)).filter(Number.isFinite)));
    expect(lastTick).toBeLessThanOrEqual(report.run!.seconds);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(readFileSync(SCREENSHOT).subarray(1, 4).toString()).toBe("PNG");
  });

  it("--compare puts two runs side by side with their ratios", async () => {
    const run = (name: string, connections: string) =>
      cli(["--url", q.url, "--table", "ns$docs", "--workload", "count", "--connections", connections, "--duration", "1", "--warmup", "0", "--quiet", "--no-metrics", "--out", path.join(dir, name)], { QUIVER_API_KEY: ADMIN_KEY });
    const [a, b] = await Promise.all([run("a", "2"), run("b", "4")]);
    expect([a.code, b.code], a.stderr + b.stderr).toEqual([0, 0]);
    // Quiet: nothing on stderr but warnings (a busy machine may delay the harness's event loop).
    expect(a.stderr.split("\n").filter((l) => l && !l.startsWith("quiver-loadtest: client limit:"))).toEqual([]);
    const c = await cli(["--compare", path.join(dir, "a.json"), path.join(dir, "b.json"), "--out", path.join(dir, "compare")]);
    expect(c.code, c.stderr).toBe(0);
    expect(await open(path.join(dir, "compare.html"))).toEqual([]);
    const ra = JSON.parse(readFileSync(path.join(dir, "a.json"), "utf8")) as Report;
    const rb = JSON.parse(readFileSync(path.join(dir, "b.json"), "utf8")) as Report;
    const row = page.locator("tr", { hasText: "successful answers / s" });
    const cells = await row.locator("td").allTextContents();
    expect(Number(cells[3].replace(/[×,]/g, ""))).toBeCloseTo(rb.run!.throughput / ra.run!.throughput, 2);
    expect(await count('svg.chart[aria-label="Latency distribution (HDR percentiles)"] path.series')).toBe(2);
    expect(await count("svg.chart")).toBe(3);
    // Legend labels name the run and its file, and fit.
    expect(await page.locator("g.legend-item text").allTextContents()).toContain("A: a.json");
    expect(await chartProblems()).toEqual([]);
    expect(await row.locator("td").nth(4).textContent()).toBe("one run each: no noise estimate (--repeat)");
    // The same two reports as runs of two hosts at once: one report, counts added, histograms merged.
    const m = await cli(["--merge", path.join(dir, "a.json"), path.join(dir, "b.json"), "--out", path.join(dir, "merged")]);
    expect(m.code, m.stderr).toBe(0);
    const merged = JSON.parse(readFileSync(path.join(dir, "merged.json"), "utf8")) as Report;
    expect(merged.merged).toEqual({ parts: 2, sources: [path.join(dir, "a.json"), path.join(dir, "b.json")] });
    expect([merged.run!.requests, merged.run!.connections]).toEqual([ra.run!.requests + rb.run!.requests, 6]);
    expect(merged.run!.latency_ms.count).toBe(ra.run!.latency_ms.count + rb.run!.latency_ms.count);
    expect(existsSync(path.join(dir, "merged.html"))).toBe(true);
  });

  it("--dataset loads a table, builds its index, waits for the serving index and sweeps recall against throughput, with intervals; a second run reuses both", async () => {
    const args = ["--url", q.url, "--dataset", "lowrank-3k", "--dim", "16", "--query-count", "100", "--dataset-dir", path.join(dir, "sets"), "--recall-queries", "60",
      "--sweep", "nprobes=2,12", "refine_factor=0,5", "--repeat", "2", "--duration", "0.4", "--warmup", "0", "--connections", "2", "--quiet", "--out", path.join(dir, "sweep")];
    const r = await cli(args, { QUIVER_API_KEY: ADMIN_KEY });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(readFileSync(path.join(dir, "sweep.json"), "utf8")) as Report;
    expect(report.dataset).toMatchObject({ name: "lowrank-3k-d16", rows: 3000, dim: 16, queries: 100, truth_source: "computed" });
    expect(report.load).toMatchObject({ table: "lowrank_3k", rows: 3000, skipped: null, index: { type: "IVF_PQ", params: { num_partitions: 55, num_sub_vectors: 2 } } });
    expect(report.load!.rows_per_s).toBeGreaterThan(0);
    expect(report.load!.index!.build_s).toBeGreaterThan(0);
    expect(Number((await q.call("POST", "/v1/table/lowrank_3k/count_rows", {})).text)).toBe(3000);
    const points = report.sweep!.points;
    expect(points.map((p) => p.label)).toEqual(["nprobes=2 refine_factor=0", "nprobes=12 refine_factor=0", "nprobes=2 refine_factor=5", "nprobes=12 refine_factor=5"]);
    for (const p of points) {
      expect(p.runs).toHaveLength(2);
      expect(p.errors).toBe(0);
      expect(p.qps.min).toBeLessThanOrEqual(p.qps.median);
      expect(p.recall!.queries).toBe(60);
      expect(p.recall!.truth).toBe("dataset");
      expect(p.recall!.ci95[0]).toBeLessThanOrEqual(p.recall!.mean);
      expect(p.recall!.ci95[1]).toBeGreaterThanOrEqual(p.recall!.mean);
    }
    // The load phase waited for Quiver's serving index (built on a table's first search), so every
    // point measures it, not LanceDB answering while it builds.
    expect(report.load!.serving_ready_s).toBeGreaterThanOrEqual(0);
    for (const p of points) {
      expect(Object.keys(p.paths ?? {})).toEqual(["serving"]);
      expect(p.recall!.mean).toBeGreaterThan(0.9);
    }
    const again = await cli([...args, "--out", path.join(dir, "sweep2"), "--threshold", "recall>0.01,errors<1%"], { QUIVER_API_KEY: ADMIN_KEY });
    expect(again.code, again.stderr).toBe(0);
    const second = JSON.parse(readFileSync(path.join(dir, "sweep2.json"), "utf8")) as Report;
    expect(second.load!.skipped).toMatch(/already held the dataset's 3000 rows and a vector index/);
    expect(second.dataset!.truth_source).toBe("stored");
    expect(second.thresholds).toMatchObject({ pass: true, point: "nprobes=2 refine_factor=0" });
  });

  it("the sweep's page: load phase, recall–QPS curve with intervals, the per-point table, no overlapping labels (screenshot: test-output/loadtest-sweep.png)", async () => {
    expect(await open(path.join(dir, "sweep.html"))).toEqual([]);
    expect(await page.locator("h2").allTextContents()).toEqual(expect.arrayContaining(["Dataset and load phase", "Recall–QPS sweep", "Client", "Server (/metrics)", "Table state"]));
    const curve = page.locator('svg.chart[aria-label="Recall against throughput"]');
    expect(await curve.locator("path.series").evaluateAll((ps) => ps.map((p) => p.getAttribute("data-series")))).toEqual(["refine_factor=0", "refine_factor=5"]);
    // ann-benchmarks' form: throughput's range over the rounds as a bar per point, a log axis, the Pareto frontier.
    expect(await curve.locator("path.errorbar").count()).toBe(4);
    expect(await curve.getAttribute("data-ylog")).toBe("1");
    expect(await curve.locator("path.frontier").count()).toBe(1);
    expect(await curve.locator("circle.frontier-point").count()).toBeGreaterThanOrEqual(1);
    // Recall's interval and p99's range: a horizontal and a vertical bar per point.
    expect(await page.locator('svg.chart[aria-label="Recall against p99 latency"] path.errorbar').count()).toBe(8);
    // Labels name nprobes; one with no free place (two settings on one spot) is left out, never printed over another.
    const labels = await curve.locator("text.point-label").allTextContents();
    expect(labels.length).toBeGreaterThanOrEqual(3);
    expect(new Set(labels)).toEqual(new Set(["2", "12"]));
    expect(await page.locator("tr", { hasText: "nprobes=12 refine_factor=5" }).locator("td").count()).toBe(10);
    // The timeline shades each point's measured seconds, inside the time axis.
    const report = JSON.parse(readFileSync(path.join(dir, "sweep.json"), "utf8")) as Report;
    const runs = report.sweep!.points.flatMap((p) => p.runs);
    expect(await page.locator('svg.chart[aria-label="Throughput"] rect.band').count()).toBe(runs.length);
    for (const x of runs) expect(x.to! - x.from!).toBeGreaterThanOrEqual(x.seconds - 0.5);
    expect(await chartProblems()).toEqual([]);
    await page.screenshot({ path: path.resolve(__dirname, "../test-output/loadtest-sweep.png"), fullPage: true });
  });

  it("--generators 2: two processes' loops merged into one run, counted exactly as the server counted them (their warmups outside the count)", async () => {
    const r = await cli(["--url", q.url, "--table", "ns$docs", "--workload", "count", "--generators", "2", "--connections", "4", "--duration", "1", "--warmup", "1", "--quiet", "--out", path.join(dir, "gens")], { QUIVER_API_KEY: ADMIN_KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("merged from 2 generator processes");
    const report = JSON.parse(readFileSync(path.join(dir, "gens.json"), "utf8")) as Report;
    expect(report.merged).toEqual({ parts: 2, sources: ["generator 1", "generator 2"] });
    expect(report.run!.connections).toBe(4);
    expect(report.run!.errors).toBe(0);
    expect(report.run!.requests).toBeGreaterThan(10);
    expect(report.server!.requests_counted).toBe(report.run!.requests);
    expect(report.run!.timeline.reduce((a, p) => a + p.requests, 0)).toBe(report.run!.requests);
    // Its page draws no second past the run's end (the generators' last seconds differ).
    expect(await open(path.join(dir, "gens.html"))).toEqual([]);
    expect(await chartProblems()).toEqual([]);
  });

  it("Ctrl-C stops sending, waits for the answers in flight and writes the report of the time it ran", async () => {
    let signalled = false;
    const t0 = Date.now();
    const r = await cli(["--url", q.url, "--table", "ns$docs", "--workload", "vector", "--connections", "4", "--duration", "60", "--warmup", "0", "--out", path.join(dir, "int")], { QUIVER_API_KEY: ADMIN_KEY }, (text, p) => {
      if (!signalled && /req\/s/.test(text)) {
        signalled = true;
        p.kill("SIGINT");
      }
    });
    expect(r.code, r.stderr).toBe(0);
    expect(Date.now() - t0).toBeLessThan(paced(30_000));
    expect(r.stdout).toContain("interrupted");
    const report = JSON.parse(readFileSync(path.join(dir, "int.json"), "utf8")) as Report;
    expect(report.interrupted).toBe(true);
    expect(report.run!.seconds).toBeLessThan(30);
    expect(report.run!.requests).toBeGreaterThan(0);
    expect(report.server!.requests_counted).toBe(report.run!.requests);
  });

  it("the built bin runs as a program (shebang, executable), as npx quiver-loadtest runs it", async () => {
    const p = spawn(CLI, ["--help"], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout!.on("data", (d) => (out += d));
    const code = await new Promise((resolve) => (p.on("exit", resolve), p.on("error", (e: NodeJS.ErrnoException) => resolve(e.code))));
    expect(code).toBe(0);
    expect(out).toContain("quiver-loadtest --url http://127.0.0.1:8080");
  });

  it("a bad option is a one-line error and exit 2", async () => {
    const r = await cli(["--url", q.url, "--table", "ns$docs", "--mode", "open"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("quiver-loadtest: --rate is required in open mode");
  });
});
