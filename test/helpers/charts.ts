// Geometry checks of the load-test charts as Chromium laid them out (run in the page): every text
// inside its svg's viewBox, no two texts overlapping, every drawn point and line inside the plot
// area (where its grid lines run).
import type { Page } from "playwright-core";

export async function geometryProblems(page: Page): Promise<string[]> {
  return page.locator("svg.chart").evaluateAll((charts) =>
    charts.flatMap((el) => {
      const svg = el as SVGSVGElement;
      const title = svg.getAttribute("aria-label");
      const out: string[] = [];
      const outer = svg.getBoundingClientRect();
      const texts = [...svg.querySelectorAll("text")].map((t) => ({ text: t.textContent, r: t.getBoundingClientRect() }));
      for (const [i, a] of texts.entries()) {
        if (a.r.left < outer.left - 0.5 || a.r.right > outer.right + 0.5 || a.r.top < outer.top - 0.5 || a.r.bottom > outer.bottom + 0.5) out.push(`${title}: text "${a.text}" clipped`);
        for (const b of texts.slice(i + 1)) {
          // Glyph boxes include the font's line gap: 1px of slack on each side.
          if (a.r.left + 1 < b.r.right && b.r.left + 1 < a.r.right && a.r.top + 1 < b.r.bottom && b.r.top + 1 < a.r.bottom) out.push(`${title}: text "${a.text}" overlaps "${b.text}"`);
        }
      }
      // The plot area: where the grid lines run.
      const grid = [...svg.querySelectorAll("line.grid")];
      const coord = (a: string) => grid.map((g) => Number(g.getAttribute(a)));
      const l = Math.min(...coord("x1"), ...coord("x2"));
      const r = Math.max(...coord("x1"), ...coord("x2"));
      const t = Math.min(...coord("y1"), ...coord("y2"));
      const b = Math.max(...coord("y1"), ...coord("y2"));
      const inside = (x: number, y: number) => x >= l - 0.6 && x <= r + 0.6 && y >= t - 0.6 && y <= b + 0.6;
      for (const c of svg.querySelectorAll("circle.point, circle.frontier-point")) {
        if (c.closest("g.legend-item")) continue;
        const x = Number(c.getAttribute("cx"));
        const y = Number(c.getAttribute("cy"));
        if (!inside(x, y)) out.push(`${title}: point ${x},${y} outside the plot`);
      }
      for (const p of svg.querySelectorAll("path.series, path.frontier, path.errorbar")) {
        const nums = (p.getAttribute("d") ?? "").match(/[MLHV][^MLHVhv]*/g) ?? [];
        for (const cmd of nums) {
          const v = cmd.slice(1).trim().split(/[ ,]+/).map(Number);
          if ((cmd[0] === "M" || cmd[0] === "L") && !inside(v[0], v[1])) out.push(`${title}: line to ${v[0]},${v[1]} outside the plot`);
          if (cmd[0] === "H" && !inside(v[0], t)) out.push(`${title}: bar to x ${v[0]} outside the plot`);
          if (cmd[0] === "V" && !inside(l, v[0])) out.push(`${title}: bar to y ${v[0]} outside the plot`);
        }
      }
      return out;
    }),
  );
}
