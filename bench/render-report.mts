// Renders quiver-loadtest HTML reports to PNG for docs/ (docs/loadtest*.png), in the Chromium the
// browser tests use (test/helpers/browser.ts), so a picture is exactly what the report shows.
// Run with vite-node (vitest's runner, which the helper is written for), not tsc: the .mts suffix
// keeps it out of the build.
//   npx vite-node bench/render-report.mts REPORT.html OUT.png [--sections 'Summary,Recall'] [--charts 'Throughput,...']
// Without --sections and --charts the whole page. With them: the title, the meta lines and the
// warnings, the sections (h2) named whole, and of the other sections only the charts named (by
// their aria-label), so one picture shows what its paragraph describes.
import path from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { chromiumLaunchOptions } from "../test/helpers/browser.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { sections: { type: "string", default: "" }, charts: { type: "string", default: "" } },
});
if (positionals.length !== 2) throw new Error("usage: render-report.mts REPORT.html OUT.png [--sections A,B] [--charts C,D]");
const [report, out] = positionals.map((p) => path.resolve(p));
const list = (s: string) => s.split(",").map((x) => x.trim()).filter(Boolean);
const sections = list(values.sections);
const charts = list(values.charts);

const browser = await chromium.launch(chromiumLaunchOptions());
try {
  const page = await browser.newPage({ viewport: { width: 1240, height: 600 } });
  await page.goto(`file://${report}`);
  if (sections.length || charts.length) {
    const missing = await page.evaluate(
      ({ sections, charts }) => {
        const found = new Set<string>();
        let keepWhole = true; // what precedes the first h2: title, meta lines, warnings
        let current: Element[] = [];
        const groups: { whole: boolean; els: Element[] }[] = [{ whole: true, els: current }];
        for (const el of Array.from(document.body.children)) {
          if (el.tagName === "H2") {
            const name = el.textContent ?? "";
            keepWhole = sections.includes(name);
            if (keepWhole) found.add(name);
            current = [el];
            groups.push({ whole: keepWhole, els: current });
          } else current.push(el);
        }
        const hide = (el: Element) => ((el as HTMLElement).style.display = "none");
        for (const g of groups.slice(1)) {
          if (g.whole) continue;
          let kept = 0;
          for (const el of g.els.slice(1)) {
            const svgs = Array.from(el.querySelectorAll("svg.chart"));
            const wanted = svgs.filter((s) => charts.includes(s.getAttribute("aria-label") ?? ""));
            if (!wanted.length) {
              hide(el);
              continue;
            }
            for (const child of Array.from(el.children)) if (!wanted.includes(child)) hide(child);
            for (const s of wanted) found.add(s.getAttribute("aria-label")!);
            kept += wanted.length;
          }
          if (!kept) hide(g.els[0]);
        }
        return [...sections, ...charts].filter((n) => !found.has(n));
      },
      { sections, charts },
    );
    if (missing.length) throw new Error(`${report}: no section or chart named ${missing.join(", ")}`);
  }
  await page.screenshot({ path: out, fullPage: true });
  console.log(`${out}`);
} finally {
  await browser.close();
}
