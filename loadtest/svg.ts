// Line charts as inline SVG, written by hand so the report page needs nothing from outside. Every
// series has its own colour, dash pattern and marker shape, so a series lying on another stays
// visible (and one equal to another says so in the legend); the legend flows over as many rows as
// its labels need (long ones shortened in the middle, a "(same as …)" one at its end); a time axis ends with the run and drops
// points past it. Points may carry error bars (cut at the plot's edge) and labels (placed where
// they cover no other text, marker, line, error bar or frontier, else left out), and marks (a cross with a label) point
// at single points such as a ramp's failing step. The recall–QPS form: a log y axis, series joined
// by rising x (never between equal x), the Pareto frontier marked.

export interface Series {
  name: string;
  points: [number, number][];
  /** A marker at every point (sparse data); otherwise markers are thinned along the line. */
  dots?: boolean;
  /** Per point: the x and y ranges to draw as error bars (null: none). */
  xErr?: ([number, number] | null)[];
  yErr?: ([number, number] | null)[];
  /** Per point: a label written beside it. */
  labels?: (string | null)[];
}

export interface ChartSpec {
  title: string;
  x: string;
  y: string;
  series: Series[];
  hline?: { y: number; label: string };
  /** Ticks of the x axis at these values with these labels (else round numbers). */
  xTicks?: [number, string][];
  /** The x axis ends exactly here (a run's last second) rather than at the next round tick. */
  xMax?: number;
  /** The x axis starts at the data (rounded down) rather than at 0. */
  xFromData?: boolean;
  marks?: { x: number; y: number; label: string }[];
  /** Stretches of the x axis to shade, alternately, each named at the top when its name fits (a sweep's points over time). */
  bands?: { from: number; to: number; label: string }[];
  /** A logarithmic y axis, ticked at decades (throughput over settings that differ by orders of magnitude). */
  yLog?: boolean;
  /** Each series joined by rising x rather than in the given order. */
  sortX?: boolean;
  /** Mark the Pareto frontier over every series' points (higher x and higher y both better). */
  frontier?: boolean;
}

export const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];
const DASHES = ["", "7 3", "2 3", "9 3 2 3", "1 3", "12 4", "5 2 1 2 1 2", "3 6"];
const MARKERS = ["circle", "square", "triangle", "diamond", "cross", "asterisk", "triangle-down", "plus"] as const;

/** Series i's colour, dash and marker; distinct for every i (past 8 the three cycle at different offsets). */
export function seriesStyle(i: number): { color: string; dash: string; marker: (typeof MARKERS)[number] } {
  const lap = Math.floor(i / COLORS.length);
  return { color: COLORS[i % COLORS.length], dash: DASHES[(i + lap) % DASHES.length], marker: MARKERS[(i + 2 * lap) % MARKERS.length] };
}

export const esc = (s: unknown) =>
  String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** Round tick values covering [lo, hi]. */
function ticks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  // From the first tick at or below lo to the first at or above hi, so the data stay inside.
  const out: number[] = [];
  const last = Math.ceil(hi / step - 1e-9) * step;
  for (let v = Math.floor(lo / step + 1e-9) * step; v <= last + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/** A tick's label: its value as it is (ticks are round numbers: 0.9925 stays 0.9925, never 0.993), thousands as k. */
const fmt = (v: number) => (Math.abs(v) >= 1000 ? `${Number((v / 1000).toPrecision(12))}k` : String(Number(v.toPrecision(12))));

/** Width of a label at the charts' 11px font, on the generous side (so estimated boxes never overlap drawn ones). */
const textWidth = (s: string) => 6.8 * [...s].length;

/** A label shortened in the middle to at most `max` characters (file paths keep their ends). */
export const shorten = (s: string, max: number) => ([...s].length <= max ? s : `${[...s].slice(0, Math.ceil((max - 1) / 2)).join("")}…${[...s].slice(-Math.floor((max - 1) / 2)).join("")}`);

/** `name (same as other)` in at most `max` characters: the name whole, the other's start cut at a word with an ellipsis (a cut in the middle reads as nonsense). */
function sameAsLabel(name: string, other: string, max: number): string {
  const full = `${name} (same as ${other})`;
  if ([...full].length <= max) return full;
  const room = max - [...name].length - " (same as …)".length;
  const cut = [...other].slice(0, Math.max(0, room + 1)).join("").replace(/\s*\S*$/, "");
  return cut ? `${name} (same as ${cut}…)` : shorten(`${name} (same as …)`, max);
}

function marker(kind: (typeof MARKERS)[number], x: number, y: number, color: string, r = 3.5): string {
  const p = (pts: [number, number][]) => pts.map(([a, b]) => `${(x + a * r).toFixed(1)},${(y + b * r).toFixed(1)}`).join(" ");
  switch (kind) {
    case "circle":
      return `<circle class="point" cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${r}" fill="${color}"/>`;
    case "square":
      return `<rect class="point" x="${(x - r).toFixed(1)}" y="${(y - r).toFixed(1)}" width="${2 * r}" height="${2 * r}" fill="${color}"/>`;
    case "triangle":
      return `<polygon class="point" points="${p([[0, -1.2], [1.1, 0.9], [-1.1, 0.9]])}" fill="${color}"/>`;
    case "triangle-down":
      return `<polygon class="point" points="${p([[0, 1.2], [1.1, -0.9], [-1.1, -0.9]])}" fill="${color}"/>`;
    case "diamond":
      return `<polygon class="point" points="${p([[0, -1.3], [1.1, 0], [0, 1.3], [-1.1, 0]])}" fill="${color}"/>`;
    case "cross":
    case "plus": {
      const d = kind === "plus" ? `M${x - r} ${y}h${2 * r}M${x} ${y - r}v${2 * r}` : `M${x - r} ${y - r}l${2 * r} ${2 * r}M${x - r} ${y + r}l${2 * r} ${-2 * r}`;
      return `<path class="point" d="${d}" stroke="${color}" stroke-width="2" fill="none"/>`;
    }
    case "asterisk":
      return `<path class="point" d="M${x - r} ${y - r}l${2 * r} ${2 * r}M${x - r} ${y + r}l${2 * r} ${-2 * r}M${x} ${y - r}v${2 * r}" stroke="${color}" stroke-width="1.6" fill="none"/>`;
  }
}

/** Indices of the points that get a marker: all when few (or asked), else about a dozen, staggered by series. */
function markedPoints(n: number, s: Series, i: number, count: number): number[] {
  if (s.dots || n <= 30) return Array.from({ length: n }, (_, j) => j);
  const step = Math.max(1, Math.floor(n / 12));
  const out: number[] = [];
  for (let j = Math.floor((i * step) / Math.max(1, count)); j < n; j += step) out.push(j);
  return out;
}

const W = 560;
const LEGEND_ROW = 16;

/** Ticks of a log axis covering [lo, hi] (lo > 0): the decades, with 2 and 5 between them when the data span two decades or less. */
export function logTicks(lo: number, hi: number): number[] {
  const a = Math.floor(Math.log10(lo) + 1e-9);
  const b = Math.max(a + 1, Math.ceil(Math.log10(hi) - 1e-9));
  const steps = b - a <= 2 ? [1, 2, 5] : [1];
  const out: number[] = [];
  for (let e = a; e <= b; e++) for (const m of steps) if (e < b || m === 1) out.push(Number((m * 10 ** e).toPrecision(12)));
  return out;
}

/** The points no other point beats in both x and y (higher is better in both), by rising x: the Pareto frontier. */
export function paretoFrontier(points: [number, number][]): [number, number][] {
  const sorted = points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)).sort((p, q) => q[0] - p[0] || q[1] - p[1]);
  const out: [number, number][] = [];
  let best = -Infinity;
  for (const p of sorted) {
    if (p[1] > best) {
      out.push(p);
      best = p[1];
    }
  }
  return out.reverse();
}

type Box = { l: number; t: number; r: number; b: number };
const overlapBox = (a: Box, b: Box) => a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b;

/** Whether the segment from p to q crosses the box (Liang–Barsky clipping). */
function crosses(box: Box, [x1, y1]: [number, number], [x2, y2]: [number, number]): boolean {
  let t0 = 0;
  let t1 = 1;
  const dx = x2 - x1;
  const dy = y2 - y1;
  for (const [pk, qk] of [[-dx, x1 - box.l], [dx, box.r - x1], [-dy, y1 - box.t], [dy, box.b - y1]]) {
    if (pk === 0) {
      if (qk < 0) return false;
    } else {
      const t = qk / pk;
      if (pk < 0) t0 = Math.max(t0, t);
      else t1 = Math.min(t1, t);
      if (t0 > t1) return false;
    }
  }
  return true;
}

export function lineChart(c: ChartSpec): string {
  // The legend first: it decides the chart's height.
  const maxLabel = Math.floor((W - 80) / 6.8) - 4;
  // A series equal to an earlier one lies exactly on it: the legend says so, as the line cannot.
  const sameAs = c.series.map((s, i) => c.series.slice(0, i).find((o) => s.points.length > 0 && JSON.stringify(o.points) === JSON.stringify(s.points))?.name);
  const names = c.series.map((s, i) => (sameAs[i] !== undefined ? `${s.name} (same as ${sameAs[i]})` : s.name));
  const frontier = c.frontier ? paretoFrontier(c.series.flatMap((s) => s.points).filter(([, y]) => !c.yLog || y > 0)) : [];
  const items = [...c.series.map((s, i) => (sameAs[i] !== undefined ? sameAsLabel(s.name, sameAs[i]!, maxLabel) : shorten(s.name, maxLabel))), ...(frontier.length ? [shorten("Pareto frontier", maxLabel)] : [])];
  const legend: { x: number; row: number }[] = [];
  let lx = 56;
  let row = 0;
  for (const label of items) {
    const w = 32 + textWidth(label);
    if (lx > 56 && lx + w > W - 8) {
      row++;
      lx = 56;
    }
    legend.push({ x: lx, row });
    lx += w + 14;
  }
  const rows = items.length ? row + 1 : 0;
  const H = 240 + rows * LEGEND_ROW;
  const m = { l: 56, r: 16, t: 30, b: 46 + rows * LEGEND_ROW };
  const finite = ([x, y]: [number, number]) => Number.isFinite(x) && Number.isFinite(y) && (!c.yLog || y > 0);
  // The axes cover the points (error bars are cut at the plot's edge, so a wide interval cannot squash the data).
  const pts = c.series.flatMap((s) => s.points).filter(finite);
  const xs = pts.map((p) => p[0]);
  const ys = pts.map((p) => p[1]).concat(c.hline ? [c.hline.y] : [], (c.marks ?? []).map((k) => k.y));
  let xLo = c.xFromData && xs.length ? Math.min(...xs) : Math.min(0, ...xs);
  let xHi = c.xMax ?? Math.max(xLo, ...xs);
  // Every point at one x: from data (a sweep whose settings all reach recall 1), a tenth of it to its left; else one to its right.
  if (xHi - xLo < 1e-9) {
    if (c.xFromData) xLo = xHi - (Math.abs(xHi) / 10 || 1);
    else xHi = xLo + 1;
  }
  let xT: [number, string][] = c.xTicks ?? ticks(xLo, xHi, 6).map((v) => [v, fmt(v)]);
  if (c.xMax !== undefined) xT = xT.filter(([v]) => v <= c.xMax! + 1e-9);
  const x0 = xT[0][0];
  const x1 = c.xMax ?? xT[xT.length - 1][0];
  const yMax = Math.max(...ys.filter(Number.isFinite), 0) || 1;
  const yT = c.yLog ? logTicks(Math.min(...ys.filter((y) => y > 0), yMax), yMax) : ticks(0, yMax);
  const y0 = c.yLog ? yT[0] : 0;
  const y1 = yT[yT.length - 1];
  const plot: Box = { l: m.l, t: m.t, r: W - m.r, b: H - m.b };
  const sx = (x: number) => m.l + ((x - x0) / (x1 - x0 || 1)) * (W - m.l - m.r);
  const sy = c.yLog
    ? (y: number) => H - m.b - ((Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0) || 1)) * (H - m.t - m.b)
    : (y: number) => H - m.b - (y / (y1 || 1)) * (H - m.t - m.b);
  const cx = (x: number) => Math.min(plot.r, Math.max(plot.l, sx(x)));
  const cy = (y: number) => Math.min(plot.b, Math.max(plot.t, c.yLog && y <= 0 ? plot.b : sy(y)));
  const parts: string[] = [
    `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(c.title)}"${c.yLog ? ' data-ylog="1"' : ""}>`,
    `<text x="${W / 2}" y="18" class="title" text-anchor="middle">${esc(c.title)}</text>`,
  ];
  for (const v of yT) {
    parts.push(`<line class="grid" x1="${m.l}" x2="${W - m.r}" y1="${sy(v)}" y2="${sy(v)}"/>`);
    parts.push(`<text class="ytick" x="${m.l - 6}" y="${sy(v) + 4}" text-anchor="end">${fmt(v)}</text>`);
  }
  for (const [v, label] of xT) {
    parts.push(`<line class="grid" x1="${sx(v)}" x2="${sx(v)}" y1="${m.t}" y2="${H - m.b}"/>`);
    // A label at the axis' end stays inside the picture.
    const half = textWidth(label) / 2;
    parts.push(`<text class="xtick" x="${Math.min(W - 2 - half, Math.max(2 + half, sx(v))).toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle">${esc(label)}</text>`);
  }
  parts.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - m.b + 32}" text-anchor="middle" class="axis">${esc(c.x)}</text>`);
  parts.push(`<text transform="translate(14 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">${esc(c.y)}</text>`);
  // What point labels must not cover: other text (never), markers (if they can help it).
  const texts: Box[] = [];
  const taken: Box[] = [];
  (c.bands ?? []).forEach((band, i) => {
    const l = cx(band.from);
    const r = cx(band.to);
    if (r <= l) return;
    parts.push(`<rect class="band" x="${l.toFixed(1)}" y="${plot.t}" width="${(r - l).toFixed(1)}" height="${plot.b - plot.t}" fill="${i % 2 ? "#e0e7ff" : "#f3f4f6"}" fill-opacity="0.7"><title>${esc(band.label)}</title></rect>`);
    const box = { l: (l + r) / 2 - textWidth(band.label) / 2, t: plot.t + 1, r: (l + r) / 2 + textWidth(band.label) / 2, b: plot.t + 13 };
    if (box.l >= l && box.r <= r && !texts.some((t) => overlapBox(t, box))) {
      texts.push(box);
      parts.push(`<text class="band-label" x="${((l + r) / 2).toFixed(1)}" y="${plot.t + 11}" text-anchor="middle">${esc(band.label)}</text>`);
    }
  });
  if (c.hline) {
    const y = sy(c.hline.y);
    parts.push(`<line class="slo" x1="${m.l}" x2="${W - m.r}" y1="${y}" y2="${y}"/>`);
    parts.push(`<text x="${W - m.r - 4}" y="${y - 4}" text-anchor="end" class="slo-label">${esc(c.hline.label)}</text>`);
    texts.push({ l: W - m.r - 4 - textWidth(c.hline.label), t: y - 14, r: W - m.r, b: y - 1 });
  }
  // Each series' points in the plot, by rising x when asked, with their index in the spec.
  const drawn = c.series.map((s) => {
    const keep = s.points.map((p, j) => [p, j] as const).filter(([p]) => finite(p) && p[0] >= x0 - 1e-9 && p[0] <= x1 + 1e-9);
    if (c.sortX) keep.sort((a, b) => a[0][0] - b[0][0] || a[0][1] - b[0][1]);
    return keep;
  });
  const segments: [[number, number], [number, number]][] = [];
  const labels: { text: string; x: number; y: number; color: string }[] = [];
  c.series.forEach((s, i) => {
    const { color, dash, marker: kind } = seriesStyle(i);
    const keep = drawn[i];
    const p = keep.map(([pt]) => pt);
    const dashAttr = dash ? ` stroke-dasharray="${dash}"` : "";
    if (p.length) {
      // Points of equal x are not joined: a vertical line between them would read as an error bar.
      const d = p.map(([x, y], j) => `${j && x !== p[j - 1][0] ? "L" : "M"}${sx(x).toFixed(1)} ${sy(y).toFixed(1)}`).join("");
      for (let j = 1; j < p.length; j++) if (p[j][0] !== p[j - 1][0]) segments.push([[sx(p[j - 1][0]), sy(p[j - 1][1])], [sx(p[j][0]), sy(p[j][1])]]);
      parts.push(`<path class="series" data-series="${esc(s.name)}" data-marker="${kind}" d="${d}" stroke="${color}"${dashAttr} fill="none"/>`);
      for (const [[x, y], j] of keep) {
        const xe = s.xErr?.[j];
        const ye = s.yErr?.[j];
        if (xe) {
          // Caps end at the plot's edge too: a point on the top or bottom grid line keeps its caps inside.
          const [t, b] = [Math.max(plot.t, sy(y) - 3), Math.min(plot.b, sy(y) + 3)];
          parts.push(`<path class="errorbar" d="M${cx(xe[0]).toFixed(1)} ${sy(y).toFixed(1)}H${cx(xe[1]).toFixed(1)}M${cx(xe[0]).toFixed(1)} ${t.toFixed(1)}V${b.toFixed(1)}M${cx(xe[1]).toFixed(1)} ${t.toFixed(1)}V${b.toFixed(1)}" stroke="${color}" fill="none"/>`);
          segments.push([[cx(xe[0]), sy(y)], [cx(xe[1]), sy(y)]], [[cx(xe[0]), t], [cx(xe[0]), b]], [[cx(xe[1]), t], [cx(xe[1]), b]]);
        }
        if (ye) {
          const [l, r] = [Math.max(plot.l, sx(x) - 3), Math.min(plot.r, sx(x) + 3)];
          parts.push(`<path class="errorbar" d="M${sx(x).toFixed(1)} ${cy(ye[0]).toFixed(1)}V${cy(ye[1]).toFixed(1)}M${l.toFixed(1)} ${cy(ye[0]).toFixed(1)}H${r.toFixed(1)}M${l.toFixed(1)} ${cy(ye[1]).toFixed(1)}H${r.toFixed(1)}" stroke="${color}" fill="none"/>`);
          segments.push([[sx(x), cy(ye[0])], [sx(x), cy(ye[1])]], [[l, cy(ye[0])], [r, cy(ye[0])]], [[l, cy(ye[1])], [r, cy(ye[1])]]);
        }
        const label = s.labels?.[j];
        if (label) labels.push({ text: label, x: sx(x), y: sy(y), color });
      }
      for (const j of markedPoints(p.length, s, i, c.series.length)) {
        parts.push(marker(kind, sx(p[j][0]), sy(p[j][1]), color));
        taken.push({ l: sx(p[j][0]) - 4, t: sy(p[j][1]) - 4, r: sx(p[j][0]) + 4, b: sy(p[j][1]) + 4 });
      }
    }
  });
  if (frontier.length) {
    const d = frontier.map(([x, y], j) => `${j ? "L" : "M"}${sx(x).toFixed(1)} ${sy(y).toFixed(1)}`).join("");
    parts.push(`<path class="frontier" d="${d}" stroke="#111" stroke-width="5" stroke-opacity="0.18" stroke-linejoin="round" fill="none"/>`);
    for (const [x, y] of frontier) parts.push(`<circle class="frontier-point" cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="6.5" stroke="#111" stroke-width="1.2" fill="none"/>`);
    // The band and its rings are data too: labels keep off them.
    for (let j = 1; j < frontier.length; j++) segments.push([[sx(frontier[j - 1][0]), sy(frontier[j - 1][1])], [sx(frontier[j][0]), sy(frontier[j][1])]]);
    for (const [x, y] of frontier) taken.push({ l: sx(x) - 7.5, t: sy(y) - 7.5, r: sx(x) + 7.5, b: sy(y) + 7.5 });
  }
  // Labels last, each at the first place beside its point (near, then a little further) that stays
  // in the plot and covers no other text, marker, line, error bar or frontier; failing that, none
  // (the report's table has every point). A mark's label (a single point such as a ramp's failing
  // step) comes first and, with no such place, takes the first that covers no text.
  const place = (text: string, x: number, y: number, gap: number, mustFit: boolean) => {
    const w = textWidth(text);
    const offsets = [gap, 2 * gap, 3 * gap].flatMap((g) => [[g, -g, "start"], [g, g + 8, "start"], [-g, -g, "end"], [-g, g + 8, "end"], [0, -g - 3, "middle"], [0, g + 12, "middle"]] as const);
    // Each place shifted into the plot where it would leave it (a point at its edge).
    const boxes = offsets.map(([dx, dy, anchor]) => {
      const l0 = anchor === "start" ? x + dx : anchor === "end" ? x + dx - w : x - w / 2;
      const sxh = Math.max(plot.l, Math.min(plot.r - w, l0)) - l0;
      const syv = Math.max(plot.t + 10, Math.min(plot.b - 3, y + dy)) - (y + dy);
      return { box: { l: l0 + sxh, t: y + dy + syv - 10, r: l0 + sxh + w, b: y + dy + syv + 3 }, x: x + dx + sxh, y: y + dy + syv, anchor };
    });
    const free = boxes.filter(({ box }) => !texts.some((t) => overlapBox(t, box)));
    const clear = free.find(({ box }) => !taken.some((t) => overlapBox(t, box)) && !segments.some(([a, b]) => crosses(box, a, b)));
    const at = clear ?? (mustFit ? free[0] : undefined);
    if (at) texts.push(at.box);
    return at;
  };
  for (const k of c.marks ?? []) {
    const x = sx(k.x);
    const y = sy(k.y);
    taken.push({ l: x - 6, t: y - 6, r: x + 6, b: y + 6 });
    const at = place(k.label, x, y, 8, true) ?? { x: Math.min(x, plot.r - textWidth(k.label) / 2), y: Math.max(plot.t + 10, y - 10), anchor: "middle" };
    parts.push(`<g class="mark"><path d="M${x - 6} ${y - 6}l12 12M${x - 6} ${y + 6}l12 -12" stroke="#111" stroke-width="2.5" fill="none"/><text x="${at.x.toFixed(1)}" y="${at.y.toFixed(1)}" text-anchor="${at.anchor}" class="mark-label">${esc(k.label)}</text></g>`);
  }
  for (const k of labels) {
    const at = place(k.text, k.x, k.y, 6, false);
    if (at) parts.push(`<text class="point-label" x="${at.x.toFixed(1)}" y="${at.y.toFixed(1)}" text-anchor="${at.anchor}" fill="${k.color}">${esc(k.text)}</text>`);
  }
  items.forEach((label, i) => {
    const { x: ix, row: r } = legend[i];
    const ly = H - 12 - (rows - 1 - r) * LEGEND_ROW;
    const name = i < c.series.length ? names[i] : label;
    const key =
      i < c.series.length
        ? (() => {
            const { color, dash, marker: kind } = seriesStyle(i);
            return `<line x1="${ix}" x2="${ix + 24}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ""}/>${marker(kind, ix + 12, ly - 4, color, 3)}`;
          })()
        : `<line x1="${ix}" x2="${ix + 24}" y1="${ly - 4}" y2="${ly - 4}" stroke="#111" stroke-width="5" stroke-opacity="0.18"/><circle cx="${ix + 12}" cy="${ly - 4}" r="5" stroke="#111" stroke-width="1.2" fill="none"/>`;
    parts.push(`<g class="legend-item" data-series="${esc(name)}"><title>${esc(name)}</title>${key}<text x="${ix + 30}" y="${ly}">${esc(label)}</text></g>`);
  });
  if (!pts.length) parts.push(`<text x="${W / 2}" y="${(m.t + H - m.b) / 2}" text-anchor="middle" class="empty">no data</text>`);
  parts.push("</svg>");
  return parts.join("");
}

/** The x ticks of an HDR percentile plot: x = log10(1 / (1 − p)), labelled as percentiles. */
export const PERCENTILE_TICKS: [number, string][] = [
  [0, "0%"],
  [1, "90%"],
  [2, "99%"],
  [3, "99.9%"],
  [4, "99.99%"],
  [5, "99.999%"],
];

export const percentileX = (p: number) => Math.min(5, -Math.log10(Math.max(1e-5, 1 - p / 100)));
