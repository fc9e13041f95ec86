// quiver-loadtest as users run it (the built bin, options in a YAML file) against a real Quiver,
// and its reports opened in Chromium (Debian's, driven by playwright-core, as test/console.test.ts
// does): the plots are drawn, nothing is fetched from outside the page, and --compare puts two runs
// side by side. The SLO-search report's screenshot goes to test-output/ (docs/loadtest.png is a copy of one).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../loadtest/run.js";
import { ADMIN_KEY, serverForFile } from "./helpers/quiver.js";
import { seedLoadTable } from "./helpers/loadtest.js";

const CLI = path.resolve(__dirname, "../dist/loadtest/cli.js");
// Written beside the console test's pictures, never over the tracked docs/loadtest.png (which is a copy of one).
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

beforeAll(async () => {
  await seedLoadTable(q);
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
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
    // Client: throughput, latency over time, HDR percentiles, error rate; server: 5; the ramp curve.
    expect(await count("svg.chart")).toBeGreaterThanOrEqual(10);
    const report = JSON.parse(readFileSync(path.join(dir, "ramp.json"), "utf8")) as Report;
    for (const title of ["Throughput", "Latency over time", "Latency distribution (HDR percentiles)", "Error rate", "Server: CPU", "Server: event-loop delay p99", "Server: in flight and worker pool", "Server: 503s by reason", "Rate against p99"]) {
      const chart = page.locator(`svg.chart[aria-label="${title}"]`);
      expect(await chart.locator("path.series").count(), title).toBeGreaterThanOrEqual(1);
      const d = await chart.locator("path.series").first().getAttribute("d");
      expect(d!.split("L").length, title).toBeGreaterThanOrEqual(2);
    }
    expect(await page.locator('svg.chart[aria-label="Rate against p99"] circle.point').count()).toBe(2 * report.ramp!.steps.length);
    expect(await count("line.slo")).toBe(1);
    const latency = page.locator('svg.chart[aria-label="Latency over time"] path.series');
    expect(await latency.evaluateAll((ps) => ps.map((p) => p.getAttribute("data-series")))).toEqual(["p50", "p95", "p99", "p99.9"]);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(readFileSync(SCREENSHOT).subarray(1, 4).toString()).toBe("PNG");
  });

  it("--compare puts two runs side by side with their ratios", async () => {
    const run = (name: string, connections: string) =>
      cli(["--url", q.url, "--table", "ns$docs", "--workload", "count", "--connections", connections, "--duration", "1", "--warmup", "0", "--quiet", "--no-metrics", "--out", path.join(dir, name)], { QUIVER_API_KEY: ADMIN_KEY });
    const [a, b] = await Promise.all([run("a", "2"), run("b", "4")]);
    expect([a.code, b.code], a.stderr + b.stderr).toEqual([0, 0]);
    expect(a.stderr).toBe("");
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
    expect(Date.now() - t0).toBeLessThan(30_000);
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
