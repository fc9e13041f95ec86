// Geometry checks of the load-test charts as Chromium laid them out (run in the page): every text
// inside its svg's viewBox, no two texts overlapping, every drawn point and line inside the plot
// area (where its grid lines run), and no point label over data (a marker, a series' line, an error
// bar or the Pareto frontier).
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
      // Point labels against the data, in the svg's own units (getBBox), with half a pixel of slack.
      type Box = { l: number; t: number; r: number; b: number };
      const boxOf = (e: Element): Box => {
        const b = (e as SVGGraphicsElement).getBBox();
        return { l: b.x + 0.5, t: b.y + 0.5, r: b.x + b.width - 0.5, b: b.y + b.height - 0.5 };
      };
      const hit = (a: Box, b: Box) => a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b;
      /** Whether the segment from (x1, y1) to (x2, y2) enters the box (Liang–Barsky). */
      const crosses = (box: Box, x1: number, y1: number, x2: number, y2: number) => {
        let t0 = 0;
        let t1 = 1;
        for (const [pk, qk] of [[x1 - x2, x1 - box.l], [x2 - x1, box.r - x1], [y1 - y2, y1 - box.t], [y2 - y1, box.b - y1]]) {
          if (pk === 0) {
            if (qk < 0) return false;
          } else if (pk < 0) t0 = Math.max(t0, qk / pk);
          else t1 = Math.min(t1, qk / pk);
          if (t0 > t1) return false;
        }
        return true;
      };
      const segments: [number, number, number, number, string][] = [];
      for (const p of svg.querySelectorAll("path.series, path.errorbar, path.frontier")) {
        let x = 0;
        let y = 0;
        for (const cmd of (p.getAttribute("d") ?? "").match(/[MLHVhv][^MLHVhv]*/g) ?? []) {
          const v = cmd.slice(1).trim().split(/[ ,]+/).map(Number);
          const [nx, ny] = cmd[0] === "M" || cmd[0] === "L" ? [v[0], v[1]] : cmd[0] === "H" ? [v[0], y] : cmd[0] === "V" ? [x, v[0]] : cmd[0] === "h" ? [x + v[0], y] : [x, y + v[0]];
          if (cmd[0] !== "M") segments.push([x, y, nx, ny, p.getAttribute("class")!]);
          [x, y] = [nx, ny];
        }
      }
      const markers = [...svg.querySelectorAll(".point, circle.frontier-point")].filter((e) => !e.closest("g.legend-item")).map(boxOf);
      for (const t of svg.querySelectorAll("text.point-label")) {
        const box = boxOf(t);
        if (markers.some((mk) => hit(box, mk))) out.push(`${title}: label "${t.textContent}" over a marker`);
        const line = segments.find(([x1, y1, x2, y2]) => crosses(box, x1, y1, x2, y2));
        if (line) out.push(`${title}: label "${t.textContent}" over a line (${line[4]})`);
      }
      return out;
    }),
  );
}
