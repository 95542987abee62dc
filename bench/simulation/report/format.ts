/** The simulation report's shared pieces: number formats, the scenario table, and a run's figures as its tables show them. */
import { percent, table } from "../../lib/stats";
import type { ChartSpec } from "../../lib/section";
import type { ScenarioResult } from "../summary";

export const n = (x: number) => Math.round(x).toLocaleString("en-US");
export const f3 = (x: number | null) => (x === null ? "—" : x.toFixed(3));
export const img = (charts: ChartSpec[], file: string) => {
  const c = charts.find((x) => x.file === file);
  return c ? `![${c.title}](charts/simulation/${c.file}.svg)\n\n` : "";
};

/** Columns a family's table adds to the scenario table's. */
export interface Extra {
  headers: string[];
  cells(r: ScenarioResult): string[];
}

/** One row per scenario, the fields first. */
export function scenarioTable(rows: ScenarioResult[], extra?: Extra): string {
  return table(
    ["scenario", "isolates", "load", "traffic", "max window ÷ limit", "token excess", "under-admission", "calls/s peak", "calls per 100", "waited", "wait p50 / p99", "errors", "object busy", "peers", ...(extra?.headers ?? [])],
    rows.map((r) => [
      `\`${r.name}\``,
      n(r.isolates),
      `${r.load}×`,
      r.detail.traffic,
      f3(r.maxPerWindowOverLimit),
      f3(r.tokenExcess),
      percent(r.underAdmission),
      n(r.objectCallsPerSecondPeak),
      r.objectCallsPer100Requests.toFixed(2),
      percent(r.waitedForObject),
      waitText(r),
      n(r.errors),
      percent(r.detail.objectBusy),
      n(r.detail.objectMaxPeers),
      ...(extra?.cells(r) ?? []),
    ]),
    ["l", "r", "r", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", ...(extra?.headers.map(() => "r" as const) ?? [])],
  );
}

/** A figure of a run beside the same figure of one or more others, "before → after" ("—" for a run that did not happen). */
export function beside(before: ScenarioResult | undefined | (ScenarioResult | undefined)[], after: ScenarioResult, f: (x: ScenarioResult) => string): string {
  return [...[before].flat(), after].map((x) => (x ? f(x) : "—")).join(" → ");
}

/** The range of a figure over runs, "lo–hi" (one value when they agree, "—" for none). */
export function span(rows: ScenarioResult[], f: (x: ScenarioResult) => number, format: (x: number) => string): string {
  if (!rows.length) return "—";
  const [lo, hi] = [Math.min(...rows.map(f)), Math.max(...rows.map(f))];
  return lo === hi ? format(lo) : `${format(lo)}–${format(hi)}`;
}

/** A run's bound as its algorithm reads it: the most in a window ÷ limit (sliding window), or the token excess. */
export function boundText(r: ScenarioResult): string {
  return r.maxPerWindowOverLimit !== null ? f3(r.maxPerWindowOverLimit) : f3(r.tokenExcess);
}

/** How long the requests that waited waited, "12 / 340 ms" (median / 99th percentile), or "—" when none did. */
export function waitText(r: ScenarioResult): string {
  const w = r.detail.waitMs;
  return w ? `${Math.round(w.p50)} / ${Math.round(w.p99)} ms` : "—";
}
