/** Small statistics and formatting helpers shared by the bench parts. */

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The value below which a share `q` (0 to 1) of `values` lies: the nearest rank, so always one of them. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** A share in percent with enough digits to tell small shares apart: 12.3 %, 0.0412 %, 0 %. */
export function percent(share: number): string {
  if (!Number.isFinite(share)) return "—";
  if (share === 0) return "0 %";
  const p = share * 100;
  if (p >= 10) return `${p.toFixed(1)} %`;
  if (p >= 1) return `${p.toFixed(2)} %`;
  return `${p.toPrecision(3)} %`;
}

/** A large count with thin-space thousands: 12 345 678. */
export function count(n: number): string {
  return Math.round(n).toLocaleString("en-US").replaceAll(",", "\u202f");
}

/** Decisions per second, rounded to three significant figures: 1.23 M/s, 845 k/s. */
export function rate(perSecond: number): string {
  if (perSecond >= 1e6) return `${(perSecond / 1e6).toPrecision(3)} M/s`;
  if (perSecond >= 1e3) return `${(perSecond / 1e3).toPrecision(3)} k/s`;
  return `${perSecond.toPrecision(3)}/s`;
}

/** A ratio such as 3.2×; an infinite one (nothing to divide by) reads "∞". */
export function times(ratio: number): string {
  if (ratio === Infinity) return "∞";
  if (!Number.isFinite(ratio)) return "—";
  return `${ratio >= 10 ? ratio.toFixed(0) : ratio.toFixed(1)}×`;
}

/** A markdown table from a header row and body rows. */
export function table(header: readonly string[], rows: readonly (readonly string[])[], align?: readonly ("l" | "r")[]): string {
  const rule = header.map((_, i) => ((align?.[i] ?? "l") === "r" ? "---:" : "---"));
  return [header, rule, ...rows].map((row) => `| ${row.join(" | ")} |`).join("\n");
}
