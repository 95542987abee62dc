/** Renders a bench ChartSpec as a small, self-contained SVG: axes, ticks, grid, legend; no dependencies. */
import type { ChartSpec } from "./section";

/**
 * Okabe–Ito: distinguishable with the common colour-vision deficiencies. Lines also differ by dash
 * and marker, and bars carry their series in the legend order and a tooltip, so little relies on colour alone.
 */
const COLOURS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#B8A000"];
const DASHES = ["", "7 4", "2 3", "10 3 2 3", "4 4", "1 2", "12 4", "6 2 2 2"];
const MARKERS = ["circle", "square", "triangle", "diamond"] as const;

const WIDTH = 760;
const HEIGHT = 440;
const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
/** average glyph width at 12 px, for layout without a font engine */
const CHAR = 6.6;

interface Scale {
  min: number;
  max: number;
  log: boolean;
  ticks: number[];
  /** value to pixel */
  at(value: number): number;
}

/**
 * One chart as an SVG document.
 *
 * - `line`: x and y are numbers; points are joined in x order. An axis whose values are all
 *   positive and span three orders of magnitude or more is drawn on a log scale (and says so).
 * - `bar`: `categories` name the groups along x, and a point's x is a category's index; each series
 *   is one bar in every group (grouped bars), with its value printed above it when there is room.
 *   Without `categories`, the distinct x values are the groups. Bars start at zero.
 *
 * Non-finite values are skipped. A chart with nothing to draw says "no data".
 *
 * @example
 * renderChart({ file: "f", title: "Throughput", kind: "bar", xLabel: "variant", yLabel: "× bare",
 *   categories: ["strict", "fast"], series: [{ name: "1000 IPs", points: [[0, 0.7], [1, 0.96]] }] });
 */
export function renderChart(spec: ChartSpec): string {
  const series = spec.series.map((s) => ({
    name: s.name,
    points: s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)),
  }));
  const legend = layoutLegend(series.map((s) => s.name));
  const groups = spec.kind === "bar" ? barGroups(spec, series) : [];
  const slot = (WIDTH - 24 - 78) / Math.max(1, groups.length);
  const rotate = groups.some((g) => g.length * CHAR > slot - 6);
  // Slanted category names need room below the axis: the chart grows rather than clip them.
  const extra = rotate ? Math.min(120, Math.max(...groups.map((g) => g.length)) * CHAR * Math.sin((25 * Math.PI) / 180)) : 0;
  const height = Math.round(HEIGHT + extra);
  const plot = { left: 78, right: WIDTH - 24, top: 52 + legend.height, bottom: HEIGHT - 62, height };
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="${FONT}" font-size="12">`,
    `<title>${esc(spec.title)}</title>`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="26" text-anchor="middle" font-size="16" font-weight="600" fill="#111">${esc(spec.title)}</text>`,
  );
  const hasData = series.some((s) => s.points.length > 0);
  if (!hasData) {
    parts.push(`<text x="${WIDTH / 2}" y="${HEIGHT / 2}" text-anchor="middle" fill="#666">no data</text>`, "</svg>");
    return `${parts.join("\n")}\n`;
  }
  if (spec.kind === "bar") drawBars(spec, series, groups, rotate, plot, parts);
  else drawLines(spec, series, plot, parts);
  drawLegend(series.map((s) => s.name), spec.kind, legend, parts);
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}

type Plot = { left: number; right: number; top: number; bottom: number; height: number };
type Series = { name: string; points: [number, number][] };

function drawLines(spec: ChartSpec, series: Series[], plot: Plot, out: string[]): void {
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  const x = scale(xs, plot.left, plot.right, false);
  const y = scale(ys, plot.bottom, plot.top, false);
  drawAxes(spec, x, y, plot, out);
  for (const tick of x.ticks) {
    const px = x.at(tick);
    out.push(`<line x1="${f(px)}" y1="${plot.bottom}" x2="${f(px)}" y2="${plot.bottom + 5}" stroke="#333"/>`);
    out.push(`<text x="${f(px)}" y="${plot.bottom + 19}" text-anchor="middle" fill="#333">${esc(formatTick(tick))}</text>`);
  }
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    const dash = DASHES[i % DASHES.length]!;
    const points = [...s.points].sort((a, b) => a[0] - b[0]).map(([px, py]) => [x.at(px), y.at(py)] as const);
    if (points.length > 1) {
      out.push(
        `<polyline fill="none" stroke="${colour}" stroke-width="2.2" stroke-linejoin="round"${dash ? ` stroke-dasharray="${dash}"` : ""} points="${points.map(([a, b]) => `${f(a)},${f(b)}`).join(" ")}"><title>${esc(s.name)}</title></polyline>`,
      );
    }
    if (points.length <= 60) for (const [px, py] of points) out.push(marker(MARKERS[i % MARKERS.length]!, px, py, colour));
  });
}

/** The bar groups along x: the categories, or else the distinct x values. */
function barGroups(spec: ChartSpec, series: Series[]): string[] {
  return spec.categories ?? [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b).map(formatTick);
}

function drawBars(spec: ChartSpec, series: Series[], groups: string[], rotate: boolean, plot: Plot, out: string[]): void {
  const groupValue = (x: number): number => (spec.categories ? x : groups.indexOf(formatTick(x)));
  const ys = [0, ...series.flatMap((s) => s.points.map((p) => p[1]))];
  const y = scale(ys, plot.bottom, plot.top, true);
  const slot = (plot.right - plot.left) / Math.max(1, groups.length);
  const barWidth = Math.min(56, (slot * 0.8) / Math.max(1, series.length));
  drawAxes(spec, null, y, plot, out);
  groups.forEach((name, g) => {
    const cx = plot.left + slot * (g + 0.5);
    out.push(
      rotate
        ? `<text x="${f(cx)}" y="${plot.bottom + 14}" text-anchor="end" transform="rotate(-25 ${f(cx)} ${plot.bottom + 14})" fill="#333">${esc(name)}</text>`
        : `<text x="${f(cx)}" y="${plot.bottom + 19}" text-anchor="middle" fill="#333">${esc(name)}</text>`,
    );
  });
  const zero = y.at(Math.max(y.min, 0));
  const labelled = groups.length * series.length <= 32 && barWidth >= 18;
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    for (const [px, py] of s.points) {
      const g = groupValue(px);
      if (!Number.isInteger(g) || g < 0 || g >= groups.length) continue;
      const left = plot.left + slot * (g + 0.5) - (barWidth * series.length) / 2 + barWidth * i;
      const top = Math.min(zero, y.at(py));
      const height = Math.abs(zero - y.at(py));
      out.push(
        `<rect x="${f(left + 1)}" y="${f(top)}" width="${f(barWidth - 2)}" height="${f(Math.max(height, 0.5))}" fill="${colour}"${hatch(i)}><title>${esc(`${s.name}, ${groups[g]}: ${formatValue(py)}`)}</title></rect>`,
      );
      if (labelled) {
        const ly = py >= 0 ? top - 4 : top + height + 12;
        out.push(`<text x="${f(left + barWidth / 2)}" y="${f(ly)}" text-anchor="middle" font-size="10.5" fill="#222">${esc(formatValue(py))}</text>`);
      }
    }
  });
  if (series.some((s) => s.points.some(([px]) => !Number.isInteger(groupValue(px))))) {
    out.push(`<!-- some points had an x that is not a category index and were skipped -->`);
  }
}

/** Series past the fourth get a dashed white outline, so they stay apart from the first ones in greyscale. */
function hatch(i: number): string {
  return i >= 4 ? ` stroke="#ffffff" stroke-width="1" stroke-dasharray="3 2"` : "";
}

function drawAxes(spec: ChartSpec, x: Scale | null, y: Scale, plot: Plot, out: string[]): void {
  for (const tick of y.ticks) {
    const py = y.at(tick);
    out.push(`<line x1="${plot.left}" y1="${f(py)}" x2="${plot.right}" y2="${f(py)}" stroke="#e3e3e3"/>`);
    out.push(`<text x="${plot.left - 8}" y="${f(py + 4)}" text-anchor="end" fill="#333">${esc(formatTick(tick))}</text>`);
  }
  if (x) for (const tick of x.ticks) out.push(`<line x1="${f(x.at(tick))}" y1="${plot.top}" x2="${f(x.at(tick))}" y2="${plot.bottom}" stroke="#f0f0f0"/>`);
  out.push(
    `<line x1="${plot.left}" y1="${plot.bottom}" x2="${plot.right}" y2="${plot.bottom}" stroke="#333"/>`,
    `<line x1="${plot.left}" y1="${plot.top}" x2="${plot.left}" y2="${plot.bottom}" stroke="#333"/>`,
  );
  const xLabel = spec.xLabel + (x?.log ? " (log scale)" : "");
  const yLabel = spec.yLabel + (y.log ? " (log scale)" : "");
  const midY = (plot.top + plot.bottom) / 2;
  out.push(
    `<text x="${f((plot.left + plot.right) / 2)}" y="${plot.height - 14}" text-anchor="middle" font-size="13" fill="#111">${esc(xLabel)}</text>`,
    `<text x="18" y="${f(midY)}" text-anchor="middle" font-size="13" fill="#111" transform="rotate(-90 18 ${f(midY)})">${esc(yLabel)}</text>`,
  );
}

interface LegendLayout {
  height: number;
  rows: { name: string; index: number; x: number; y: number }[];
}

function layoutLegend(names: string[]): LegendLayout {
  const rows: LegendLayout["rows"] = [];
  let x = 78;
  let y = 44;
  names.forEach((name, index) => {
    const width = 34 + name.length * CHAR + 18;
    if (x + width > WIDTH - 24 && x > 78) {
      x = 78;
      y += 18;
    }
    rows.push({ name, index, x, y });
    x += width;
  });
  return { height: names.length ? y - 44 + 18 : 0, rows };
}

function drawLegend(names: string[], kind: ChartSpec["kind"], legend: LegendLayout, out: string[]): void {
  if (names.length < 2 && kind === "bar") return;
  for (const { name, index, x, y } of legend.rows) {
    const colour = COLOURS[index % COLOURS.length]!;
    if (kind === "bar") {
      out.push(`<rect x="${x}" y="${y - 9}" width="22" height="11" fill="${colour}"${hatch(index)}/>`);
    } else {
      const dash = DASHES[index % DASHES.length]!;
      out.push(`<line x1="${x}" y1="${y - 4}" x2="${x + 26}" y2="${y - 4}" stroke="${colour}" stroke-width="2.2"${dash ? ` stroke-dasharray="${dash}"` : ""}/>`);
      out.push(marker(MARKERS[index % MARKERS.length]!, x + 13, y - 4, colour));
    }
    out.push(`<text x="${x + 32}" y="${y}" fill="#111">${esc(name)}</text>`);
  }
}

function marker(kind: (typeof MARKERS)[number], x: number, y: number, colour: string): string {
  const r = 3.6;
  switch (kind) {
    case "circle":
      return `<circle cx="${f(x)}" cy="${f(y)}" r="${r}" fill="${colour}"/>`;
    case "square":
      return `<rect x="${f(x - r)}" y="${f(y - r)}" width="${f(2 * r)}" height="${f(2 * r)}" fill="${colour}"/>`;
    case "triangle":
      return `<path d="M${f(x)} ${f(y - r - 0.8)}L${f(x + r + 0.6)} ${f(y + r)}L${f(x - r - 0.6)} ${f(y + r)}Z" fill="${colour}"/>`;
    case "diamond":
      return `<path d="M${f(x)} ${f(y - r - 1)}L${f(x + r + 1)} ${f(y)}L${f(x)} ${f(y + r + 1)}L${f(x - r - 1)} ${f(y)}Z" fill="${colour}"/>`;
  }
}

/** An axis over `values`, from pixel `from` (the minimum) to `to`; log when the values span three decades. */
function scale(values: number[], from: number, to: number, fromZero: boolean): Scale {
  let min = Math.min(...values);
  let max = Math.max(...values);
  const log = !fromZero && min > 0 && max / min >= 1000;
  if (log) {
    const lo = Math.floor(Math.log10(min));
    const hi = Math.ceil(Math.log10(max));
    const ticks = range(lo, hi === lo ? hi + 1 : hi).map((e) => 10 ** e);
    const a = Math.log10(ticks[0]!);
    const b = Math.log10(ticks[ticks.length - 1]!);
    return { min: ticks[0]!, max: ticks[ticks.length - 1]!, log, ticks, at: (v) => from + ((Math.log10(v) - a) / (b - a)) * (to - from) };
  }
  if (fromZero) {
    min = Math.min(min, 0);
    max = Math.max(max, 0);
  }
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    min -= fromZero && min === 0 ? 0 : pad;
    max += pad;
  }
  const step = niceStep((max - min) / 5);
  const lo = Math.floor(min / step + 1e-9) * step;
  // Leave headroom above bars for their value labels.
  const hi = Math.ceil((fromZero ? max + (max - min) * 0.06 : max) / step - 1e-9) * step;
  const ticks = range(0, Math.round((hi - lo) / step)).map((k) => round(lo + k * step));
  return { min: lo, max: hi, log, ticks, at: (v) => from + ((v - lo) / (hi - lo)) * (to - from) };
}

function niceStep(raw: number): number {
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / magnitude;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 2.5 ? 2.5 : fraction <= 5 ? 5 : 10;
  return nice * magnitude;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

function round(value: number): number {
  return Number.parseFloat(value.toPrecision(12));
}

/** Axis ticks: 0.05, 2.5, 1.5k, 25k, 3M. */
function formatTick(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${trim(value / 1e9)}G`;
  if (abs >= 1e6) return `${trim(value / 1e6)}M`;
  if (abs >= 1e3) return `${trim(value / 1e3)}k`;
  return trim(value);
}

/** Bar labels: three significant figures. */
function formatValue(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${trim(Number((value / 1e6).toPrecision(3)))}M`;
  if (abs >= 1e4) return `${trim(Number((value / 1e3).toPrecision(3)))}k`;
  if (abs >= 100) return Math.round(value).toString();
  return trim(Number(value.toPrecision(3)));
}

function trim(value: number): string {
  return Number.parseFloat(value.toPrecision(6)).toString();
}

function f(n: number): string {
  return (Math.round(n * 10) / 10).toString();
}

function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
