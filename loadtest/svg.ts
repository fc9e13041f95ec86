// Line charts as inline SVG, written by hand so the report page needs nothing from outside. Every
// series has its own colour, dash pattern and marker shape, so a series lying on another stays
// visible; the legend flows over as many rows as its labels need (long ones shortened in the
// middle), so labels never print over each other; a time axis ends with the run. Points may carry
// error bars and labels, and marks (a cross with a label) point at single points such as a ramp's
// failing step.

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

const fmt = (v: number) => (Math.abs(v) >= 1000 ? `${Number((v / 1000).toPrecision(3))}k` : String(Number(v.toPrecision(3))));

/** Width of a label at the charts' 11px font, on the generous side (so estimated boxes never overlap drawn ones). */
const textWidth = (s: string) => 6.8 * [...s].length;

/** A label shortened in the middle to at most `max` characters (file paths keep their ends). */
export const shorten = (s: string, max: number) => ([...s].length <= max ? s : `${[...s].slice(0, Math.ceil((max - 1) / 2)).join("")}…${[...s].slice(-Math.floor((max - 1) / 2)).join("")}`);

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

export function lineChart(c: ChartSpec): string {
  // The legend first: it decides the chart's height.
  const maxLabel = Math.floor((W - 80) / 6.8) - 4;
  const items = c.series.map((s) => shorten(s.name, maxLabel));
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
  const finite = ([x, y]: [number, number]) => Number.isFinite(x) && Number.isFinite(y);
  const pts = c.series.flatMap((s) => s.points).filter(finite);
  const xs = pts.map((p) => p[0]).concat(c.series.flatMap((s) => (s.xErr ?? []).flatMap((e) => e ?? [])));
  const ys = pts.map((p) => p[1]).concat(c.hline ? [c.hline.y] : [], c.series.flatMap((s) => (s.yErr ?? []).flatMap((e) => e ?? [])), (c.marks ?? []).map((k) => k.y));
  const xLo = c.xFromData && xs.length ? Math.min(...xs) : Math.min(0, ...xs);
  const xHi = c.xMax ?? Math.max(xLo + 1e-9, ...xs);
  let xT: [number, string][] = c.xTicks ?? ticks(xLo, xHi, 6).map((v) => [v, fmt(v)]);
  if (c.xMax !== undefined) xT = xT.filter(([v]) => v <= c.xMax! + 1e-9);
  const x0 = xT[0][0];
  const x1 = c.xMax ?? xT[xT.length - 1][0];
  const yT = ticks(0, Math.max(...ys.filter(Number.isFinite), 0) || 1);
  const y1 = yT[yT.length - 1];
  const sx = (x: number) => m.l + ((x - x0) / (x1 - x0 || 1)) * (W - m.l - m.r);
  const sy = (y: number) => H - m.b - (y / (y1 || 1)) * (H - m.t - m.b);
  const parts: string[] = [
    `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(c.title)}">`,
    `<text x="${W / 2}" y="18" class="title" text-anchor="middle">${esc(c.title)}</text>`,
  ];
  for (const v of yT) {
    parts.push(`<line class="grid" x1="${m.l}" x2="${W - m.r}" y1="${sy(v)}" y2="${sy(v)}"/>`);
    parts.push(`<text x="${m.l - 6}" y="${sy(v) + 4}" text-anchor="end">${fmt(v)}</text>`);
  }
  for (const [v, label] of xT) {
    parts.push(`<line class="grid" x1="${sx(v)}" x2="${sx(v)}" y1="${m.t}" y2="${H - m.b}"/>`);
    parts.push(`<text class="xtick" x="${sx(v)}" y="${H - m.b + 16}" text-anchor="middle">${esc(label)}</text>`);
  }
  parts.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - m.b + 32}" text-anchor="middle" class="axis">${esc(c.x)}</text>`);
  parts.push(`<text transform="translate(14 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">${esc(c.y)}</text>`);
  if (c.hline) {
    parts.push(`<line class="slo" x1="${m.l}" x2="${W - m.r}" y1="${sy(c.hline.y)}" y2="${sy(c.hline.y)}"/>`);
    parts.push(`<text x="${W - m.r - 4}" y="${sy(c.hline.y) - 4}" text-anchor="end" class="slo-label">${esc(c.hline.label)}</text>`);
  }
  c.series.forEach((s, i) => {
    const { color, dash, marker: kind } = seriesStyle(i);
    const keep = s.points.map((p, j) => [p, j] as const).filter(([p]) => finite(p));
    const p = keep.map(([pt]) => pt);
    const dashAttr = dash ? ` stroke-dasharray="${dash}"` : "";
    if (p.length) {
      const d = p.map(([x, y], j) => `${j ? "L" : "M"}${sx(x).toFixed(1)} ${sy(y).toFixed(1)}`).join("");
      parts.push(`<path class="series" data-series="${esc(s.name)}" data-marker="${kind}" d="${d}" stroke="${color}"${dashAttr} fill="none"/>`);
      for (const [[x, y], j] of keep) {
        const xe = s.xErr?.[j];
        const ye = s.yErr?.[j];
        if (xe) parts.push(`<path class="errorbar" d="M${sx(xe[0]).toFixed(1)} ${sy(y).toFixed(1)}H${sx(xe[1]).toFixed(1)}M${sx(xe[0]).toFixed(1)} ${(sy(y) - 3).toFixed(1)}v6M${sx(xe[1]).toFixed(1)} ${(sy(y) - 3).toFixed(1)}v6" stroke="${color}" fill="none"/>`);
        if (ye) parts.push(`<path class="errorbar" d="M${sx(x).toFixed(1)} ${sy(ye[0]).toFixed(1)}V${sy(ye[1]).toFixed(1)}M${(sx(x) - 3).toFixed(1)} ${sy(ye[0]).toFixed(1)}h6M${(sx(x) - 3).toFixed(1)} ${sy(ye[1]).toFixed(1)}h6" stroke="${color}" fill="none"/>`);
        const label = s.labels?.[j];
        // Labels of alternate series above and below their points, so neighbours do not collide.
        if (label) parts.push(`<text class="point-label" x="${(sx(x) + 5).toFixed(1)}" y="${(sy(y) + (i % 2 ? 14 : -7)).toFixed(1)}" fill="${color}">${esc(label)}</text>`);
      }
      for (const j of markedPoints(p.length, s, i, c.series.length)) parts.push(marker(kind, sx(p[j][0]), sy(p[j][1]), color));
    }
    const { x: ix, row: r } = legend[i];
    const ly = H - 12 - (rows - 1 - r) * LEGEND_ROW;
    parts.push(
      `<g class="legend-item" data-series="${esc(s.name)}"><title>${esc(s.name)}</title><line x1="${ix}" x2="${ix + 24}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2"${dashAttr}/>${marker(kind, ix + 12, ly - 4, color, 3)}<text x="${ix + 30}" y="${ly}">${esc(items[i])}</text></g>`,
    );
  });
  for (const k of c.marks ?? []) {
    const x = sx(k.x);
    const y = sy(k.y);
    // The label stays inside the plot: beside the cross, on the side with room.
    const anchor = x > W - m.r - 40 ? "end" : x < m.l + 40 ? "start" : "middle";
    const ty = y - 10 < m.t + 10 ? y + 20 : y - 10;
    parts.push(`<g class="mark"><path d="M${x - 6} ${y - 6}l12 12M${x - 6} ${y + 6}l12 -12" stroke="#111" stroke-width="2.5" fill="none"/><text x="${x}" y="${ty}" text-anchor="${anchor}" class="mark-label">${esc(k.label)}</text></g>`);
  }
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
