// Line charts as inline SVG, written by hand so the report page needs nothing from outside: axes with
// round ticks, one path per series (class "series", with a circle per point when `dots`), a legend
// and an optional horizontal line (the SLO).

export interface Series {
  name: string;
  points: [number, number][];
  dots?: boolean;
}

export interface ChartSpec {
  title: string;
  x: string;
  y: string;
  series: Series[];
  hline?: { y: number; label: string };
  /** Ticks of the x axis at these values with these labels (else round numbers). */
  xTicks?: [number, string][];
}

export const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];

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

export function lineChart(c: ChartSpec): string {
  const W = 560;
  const H = 280;
  const m = { l: 56, r: 16, t: 30, b: 62 };
  const pts = c.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const xs = pts.map((p) => p[0]);
  const ys = pts.map((p) => p[1]).concat(c.hline ? [c.hline.y] : []);
  const xT: [number, string][] = c.xTicks ?? ticks(Math.min(0, ...xs), Math.max(1, ...xs), 6).map((v) => [v, fmt(v)]);
  const x0 = xT[0][0];
  const x1 = xT[xT.length - 1][0];
  const yT = ticks(0, Math.max(...ys, 0) || 1);
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
    parts.push(`<text x="${sx(v)}" y="${H - m.b + 16}" text-anchor="middle">${esc(label)}</text>`);
  }
  parts.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - m.b + 34}" text-anchor="middle" class="axis">${esc(c.x)}</text>`);
  parts.push(`<text transform="translate(14 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">${esc(c.y)}</text>`);
  if (c.hline) {
    parts.push(`<line class="slo" x1="${m.l}" x2="${W - m.r}" y1="${sy(c.hline.y)}" y2="${sy(c.hline.y)}"/>`);
    parts.push(`<text x="${W - m.r - 4}" y="${sy(c.hline.y) - 4}" text-anchor="end" class="slo-label">${esc(c.hline.label)}</text>`);
  }
  c.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const p = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (p.length) {
      const d = p.map(([x, y], j) => `${j ? "L" : "M"}${sx(x).toFixed(1)} ${sy(y).toFixed(1)}`).join("");
      parts.push(`<path class="series" data-series="${esc(s.name)}" d="${d}" stroke="${color}" fill="none"/>`);
      if (s.dots || p.length === 1) for (const [x, y] of p) parts.push(`<circle class="point" cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="3" fill="${color}"/>`);
    }
    const lx = m.l + (i % 4) * 125;
    const ly = H - 12 - Math.floor(i / 4) * 14;
    parts.push(`<rect x="${lx}" y="${ly - 8}" width="10" height="10" fill="${color}"/><text x="${lx + 14}" y="${ly + 1}">${esc(s.name)}</text>`);
  });
  if (!pts.length) parts.push(`<text x="${W / 2}" y="${H / 2}" text-anchor="middle" class="empty">no data</text>`);
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
