// The load-test charts (loadtest/svg.ts) drawn from data that broke them before, opened in
// Chromium: no text clipped at the edge or printed over another, no point or line outside its
// axes, the recall–QPS chart in ann-benchmarks' form (log throughput axis at decades, Pareto
// frontier marked, points joined by rising recall, never vertically); and the pure functions behind it.
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lineChart, logTicks, paretoFrontier, type ChartSpec } from "../loadtest/svg.js";
import { chromiumLaunchOptions } from "./helpers/browser.js";
import { geometryProblems } from "./helpers/charts.js";

let browser: Browser;
let page: Page;

beforeAll(async () => {
  browser = await chromium.launch(chromiumLaunchOptions());
  page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

/** The chart on a page styled as the reports are (11px text, 13px bold title). */
async function show(spec: ChartSpec): Promise<void> {
  const style = "body{font-family:system-ui,sans-serif}svg.chart{font-size:11px}svg .title{font-size:13px;font-weight:600}svg .slo-label,svg .mark-label{font-weight:600}";
  await page.setContent(`<!doctype html><style>${style}</style>${lineChart(spec)}`);
}

// A sweep of ef on two builds: recall reaching 1 (labels at the right edge), two settings of equal
// recall, a wide recall interval, throughput over three decades.
const efs = [8, 16, 32, 64, 128, 256];
const sweep: ChartSpec = {
  title: "Recall against throughput",
  x: "recall@10",
  y: "searches / s (log scale)",
  xFromData: true,
  yLog: true,
  sortX: true,
  frontier: true,
  series: [
    { name: "A: before.json", dots: true, points: [[0.62, 9100], [0.8, 5200], [0.93, 2100], [0.98, 900], [1, 310], [1, 120]], labels: efs.map(String), xErr: efs.map(() => [0.2, 1]) },
    { name: "B: after.json", dots: true, points: [[1, 150], [0.64, 8800], [0.81, 5600], [0.94, 2500], [0.985, 1100], [1, 400]], labels: [256, 8, 16, 32, 64, 128].map(String) },
  ],
};

describe("load-test charts in Chromium", () => {
  it("the recall–QPS chart: no label clipped or over another, every point inside its axes", async () => {
    await show(sweep);
    expect(await geometryProblems(page)).toEqual([]);
    // Labels that had no room are left out, never squeezed: most are there.
    expect(await page.locator("text.point-label").count()).toBeGreaterThanOrEqual(8);
  });

  it("error bars' caps stay inside the plot where a point sits on its edge (the highest p99 on the top grid line, the lowest recall on the left)", async () => {
    // A sweep's recall against p99: the slowest point is the y axis' top tick exactly.
    await show({
      title: "Recall against p99 latency",
      x: "recall@10",
      y: "p99 ms",
      xFromData: true,
      sortX: true,
      series: [{ name: "ef", points: [[0.9, 4], [0.95, 6], [0.99, 10]], xErr: [[0.85, 0.95], [0.9, 1], [0.97, 1]], yErr: [[3, 5], [5, 8], [9, 10]] }],
    });
    expect(await page.locator("path.errorbar").count()).toBe(6);
    expect(await geometryProblems(page)).toEqual([]);
  });

  it("the recall–QPS chart's throughput axis is logarithmic, ticked at decades", async () => {
    await show(sweep);
    const ticks = await page.locator("text.ytick").evaluateAll((ts) => ts.map((t) => ({ label: t.textContent!, y: Number(t.getAttribute("y")) })));
    const value = (s: string) => (s.endsWith("k") ? 1000 * Number(s.slice(0, -1)) : Number(s));
    const decades = ticks.filter((t) => Number.isInteger(Math.log10(value(t.label))));
    expect(decades.map((t) => t.label)).toEqual(["100", "1k", "10k"]);
    // Equal distance per decade.
    expect(Math.abs(decades[0].y - decades[1].y - (decades[1].y - decades[2].y))).toBeLessThan(0.5);
    for (const t of ticks) expect(String(value(t.label))).toMatch(/^[125]0*$/);
  });

  it("the Pareto frontier is drawn through the points no other beats in recall and throughput, and named in the legend", async () => {
    await show(sweep);
    const circles = await page.locator("circle.frontier-point").count();
    expect(circles).toBe(paretoFrontier(sweep.series.flatMap((s) => s.points)).length);
    expect(circles).toBeGreaterThanOrEqual(5);
    expect(await page.locator("path.frontier").count()).toBe(1);
    expect(await page.locator('g.legend-item[data-series="Pareto frontier"]').count()).toBe(1);
  });

  it("a series is joined by rising recall, with no vertical segment between points of equal recall", async () => {
    await show(sweep);
    for (const d of await page.locator("path.series").evaluateAll((ps) => ps.map((p) => p.getAttribute("d")!))) {
      const pts = (d.match(/[ML][^ML]+/g) ?? []).map((c) => ({ cmd: c[0], x: Number(c.slice(1).split(" ")[0]) }));
      for (let j = 1; j < pts.length; j++) {
        expect(pts[j].x).toBeGreaterThanOrEqual(pts[j - 1].x);
        if (pts[j].x === pts[j - 1].x) expect(pts[j].cmd).toBe("M");
      }
    }
  });

  it("a wide recall interval is cut at the plot's edge and does not stretch the axis", async () => {
    await show(sweep);
    const first = await page.locator("text.xtick").first().textContent();
    expect(Number(first)).toBeGreaterThanOrEqual(0.6);
  });

  it("a time axis ends with the run: later points (a second generator's last second) are not drawn past it", async () => {
    await show({ title: "Throughput", x: "seconds", y: "answers / s", xMax: 3, series: [{ name: "all generators", points: [[0, 10], [1, 40], [2, 41], [3, 39], [4, 20]] }] });
    expect(await geometryProblems(page)).toEqual([]);
    // 0 to 3 s drawn; 4 s lies off the axis.
    expect((await page.locator("path.series").getAttribute("d"))!.match(/[ML]/g)).toHaveLength(4);
  });

  it("a sweep whose every setting reaches recall 1 gets an x axis of distinct ticks ending at 1", async () => {
    await show({ ...sweep, series: [{ name: "nprobes", dots: true, points: [[1, 300], [1, 900]], labels: ["12", "2"] }] });
    const ticks = await page.locator("text.xtick").allTextContents();
    expect(new Set(ticks).size).toBe(ticks.length);
    expect(ticks.at(-1)).toBe("1");
    expect(await geometryProblems(page)).toEqual([]);
  });

  it("a sweep's timeline shades each point's seconds and names it where the name fits", async () => {
    const bands = [0, 1, 2, 3].map((i) => ({ from: 1 + 3 * i, to: 3 + 3 * i, label: `ef=${8 << i}` }));
    await show({ title: "Throughput", x: "seconds", y: "answers / s", xMax: 13, bands, series: [{ name: "successful", points: Array.from({ length: 14 }, (_, t) => [t, 100 + (t % 3) * 10] as [number, number]) }] });
    expect(await page.locator("rect.band").count()).toBe(4);
    expect(await page.locator("text.band-label").allTextContents()).toEqual(["ef=8", "ef=16", "ef=32", "ef=64"]);
    expect(await geometryProblems(page)).toEqual([]);
  });

  it("a series identical to another says so in the legend (the line cannot)", async () => {
    const pts: [number, number][] = [[0, 1], [1, 2], [2, 3]];
    await show({ title: "Throughput", x: "seconds", y: "answers / s", series: [{ name: "server count", points: pts }, { name: "harness answers", points: pts }] });
    expect(await page.locator('g.legend-item[data-series="harness answers (same as server count)"]').count()).toBe(1);
    expect(await geometryProblems(page)).toEqual([]);
  });

  // docs/loadtest.md's sweep (lowrank-20k, recall@100): the widest points crowd the right edge.
  const p99: ChartSpec = {
    title: "Recall against p99 latency",
    x: "recall@100 (bars: 95% interval over the queries)",
    y: "p99 ms",
    xFromData: true,
    sortX: true,
    series: [
      {
        name: "ef",
        dots: true,
        points: [[0.9877, 398.59], [0.9949, 332.8], [0.9998, 575.49], [1, 372.74]],
        xErr: [[0.985, 0.9904], [0.9935, 0.9963], [0.9995, 1], [1, 1]],
        yErr: [[252.03, 663.55], [191.87, 335.87], [525.31, 638.85], [305.41, 519.68]],
        labels: ["64", "128", "256", "512"],
      },
    ],
  };

  it("recall against p99: no label over a marker, a line or an error bar, its own included", async () => {
    await show(p99);
    expect(await geometryProblems(page)).toEqual([]);
    expect(await page.locator("text.point-label").count()).toBeGreaterThanOrEqual(2);
  });

  it("recall ticks are labelled with the values they stand at: evenly spaced labels for evenly spaced ticks", async () => {
    await show(p99);
    const ticks = await page.locator("text.xtick").allTextContents();
    const values = ticks.map(Number);
    expect(new Set(ticks).size).toBe(ticks.length);
    expect(values).toContain(0.9925);
    for (let j = 2; j < values.length; j++) expect(values[j] - values[j - 1]).toBeCloseTo(values[1] - values[0], 9);
  });

  it("a long '(same as …)' legend label keeps its start and says whose copy it is, cut at a word with an ellipsis", async () => {
    const pts: [number, number][] = [[0, 1], [1, 3], [2, 2]];
    await show({ title: "Server: requests in flight", x: "seconds", y: "requests", series: [{ name: "server: most in flight in the second", points: pts }, { name: "harness: most outstanding in the second", points: pts }] });
    const labels = await page.locator("g.legend-item text").allTextContents();
    expect(labels[1]).toMatch(/^harness: most outstanding in the second \(same as server: [^…]*\w…\)$/);
    expect(await geometryProblems(page)).toEqual([]);
  });

  it("point labels avoid the data and each other in a dense linear chart with a threshold line", async () => {
    const points: [number, number][] = Array.from({ length: 12 }, (_, i) => [i * 10, 50 + (i % 3) * 2]);
    await show({ title: "Rate against p99", x: "rate", y: "ms", hline: { y: 52, label: "SLO 52 ms" }, series: [{ name: "p99", dots: true, points, labels: points.map(([x]) => `${x}/s`) }], marks: [{ x: 110, y: 54, label: "fails" }] });
    expect(await geometryProblems(page)).toEqual([]);
  });
});

describe("svg.ts", () => {
  it("logTicks: decades covering the data, with 2 and 5 between them over at most two decades", () => {
    expect(logTicks(120, 9100)).toEqual([100, 200, 500, 1000, 2000, 5000, 10000]);
    expect(logTicks(3, 40000)).toEqual([1, 10, 100, 1000, 10000, 100000]);
    expect(logTicks(40, 80)).toEqual([10, 20, 50, 100]);
  });

  it("paretoFrontier: the points not dominated in both coordinates, by rising x", () => {
    expect(paretoFrontier([[0.9, 100], [0.8, 50], [0.7, 300], [1, 20], [1, 10], [0.9, 90]])).toEqual([[0.7, 300], [0.9, 100], [1, 20]]);
    expect(paretoFrontier([])).toEqual([]);
  });
});
