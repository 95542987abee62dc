/** This isolate's counters and histograms, rendered in the Prometheus text exposition format. */
import type { Rule } from "../config/types";

/** Every counter floodgate keeps, with its help text; the names are the exported metric names. */
const COUNTERS = {
  floodgate_decisions_total: "Rate-limit decisions, by rule and outcome (allowed, denied, dry_run_denied for a dry-run rule's would-be denial, or unlimited for a request of a key the rule's overrides leave unlimited, which it sat out).",
  floodgate_durable_object_calls_total: "Calls made to RateLimiter Durable Objects, by method.",
  floodgate_local_decisions_total: "Decisions made in the isolate without a Durable Object call (fast mode), by rule.",
  floodgate_syncs_total: "Fast-path reconciliations with a Durable Object, by result.",
  floodgate_errors_total: "Failures, by kind.",
  floodgate_ip_refusals_total: "Requests refused with a 403 because their address is in DENY_IPS.",
  floodgate_admin_refusals_total: "Admin API calls refused with a 401: no bearer token, or the wrong one.",
  floodgate_key_evictions_total: "Fast-path keys evicted from this isolate's table.",
  floodgate_log_lines_dropped_total: "Structured log lines left out because their kind had used up its lines for the second, by event.",
  floodgate_key_overflows_total: "Requests counted under a rule's shared #overflow key: their own key was new past the rule's newKeysPerSecond.",
  floodgate_charged_units_total: "Units admitted requests were charged once their real cost was known (a LimitResult's charge, or a rule's responseCost), by rule and direction: taken, or given_back.",
  floodgate_holds_total: "Requests admitted with a hold (gcra delay), by the rule that held longest and outcome: released when the hold ran out, abandoned when the client went away first (its units given back).",
} as const;

export type CounterName = keyof typeof COUNTERS;
type Labels = Record<string, string>;

/** Every histogram floodgate keeps, with its help text. */
const HISTOGRAMS = {
  floodgate_object_wait_seconds:
    "Seconds a request waited on a Durable Object call for its decision (a strict decision, or a fast one its lease could not make), until the answer or the timeout, by rule and mode. Requests decided in the isolate are not counted: this count over floodgate_decisions_total is the share that waited.",
} as const;

export type HistogramName = keyof typeof HISTOGRAMS;

/** Upper bounds of the buckets, in seconds: a nearby object answers within 5–50 ms, one across the world in 100–300 ms, and timeouts default to 1 s. */
export const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const;

interface Histogram {
  labels: Labels;
  /** observations at or below each bound of WAIT_BUCKETS, not yet cumulative */
  buckets: number[];
  sum: number;
  count: number;
}

/**
 * A registry of counters and histograms. One lives per isolate (see {@link metrics}); tests make their own.
 *
 * @example
 * metrics.count("floodgate_decisions_total", { rule: "login", decision: "denied" });
 */
export class Metrics {
  private readonly values = new Map<CounterName, Map<string, number>>();
  private readonly histograms = new Map<HistogramName, Map<string, Histogram>>();

  count(name: CounterName, labels: Labels = {}, by = 1): void {
    let series = this.values.get(name);
    if (!series) this.values.set(name, (series = new Map()));
    const key = renderLabels(labels);
    series.set(key, (series.get(key) ?? 0) + by);
  }

  /** Adds one observation of `seconds` to a histogram. */
  observe(name: HistogramName, labels: Labels, seconds: number): void {
    let series = this.histograms.get(name);
    if (!series) this.histograms.set(name, (series = new Map()));
    const key = renderLabels(labels);
    let histogram = series.get(key);
    if (!histogram) series.set(key, (histogram = { labels, buckets: WAIT_BUCKETS.map(() => 0), sum: 0, count: 0 }));
    const bucket = WAIT_BUCKETS.findIndex((bound) => seconds <= bound);
    if (bucket >= 0) histogram.buckets[bucket]!++;
    histogram.sum += seconds;
    histogram.count++;
  }

  /** How many observations one histogram series holds; 0 when it has none. */
  observations(name: HistogramName, labels: Labels = {}): number {
    return this.histograms.get(name)?.get(renderLabels(labels))?.count ?? 0;
  }

  /** The current value of one series; 0 when it has not been counted. */
  value(name: CounterName, labels: Labels = {}): number {
    return this.values.get(name)?.get(renderLabels(labels)) ?? 0;
  }

  /**
   * Every counter, with HELP and TYPE lines, as Prometheus scrapes it. A counter without labels,
   * and each of `rules`' decision series, is there from the start at 0, so that a rate or an alert
   * over it has a series before the first event.
   */
  render(rules: readonly Pick<Rule, "name" | "dryRun" | "overrides">[] = []): string {
    const lines: string[] = [];
    const unlimited = (r: Pick<Rule, "overrides">) => [...(r.overrides?.values() ?? [])].some((o) => "unlimited" in o);
    const zeros: Partial<Record<CounterName, Labels[]>> = {
      floodgate_decisions_total: rules.flatMap((r) => ["allowed", "denied", ...(r.dryRun ? ["dry_run_denied"] : []), ...(unlimited(r) ? ["unlimited"] : [])].map((decision) => ({ rule: r.name, decision }))),
      floodgate_ip_refusals_total: [{}],
      floodgate_admin_refusals_total: [{}],
      floodgate_key_evictions_total: [{}],
    };
    for (const [name, help] of Object.entries(COUNTERS) as [CounterName, string][]) {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      const series = new Map(this.values.get(name) ?? []);
      for (const labels of zeros[name] ?? []) if (!series.has(renderLabels(labels))) series.set(renderLabels(labels), 0);
      for (const [labels, value] of series) lines.push(`${name}${labels} ${value}`);
    }
    for (const [name, help] of Object.entries(HISTOGRAMS) as [HistogramName, string][]) {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
      for (const { labels, buckets, sum, count } of this.histograms.get(name)?.values() ?? []) {
        let below = 0;
        WAIT_BUCKETS.forEach((bound, i) => lines.push(`${name}_bucket${render({ ...labels, le: String(bound) })} ${(below += buckets[i]!)}`));
        lines.push(`${name}_bucket${render({ ...labels, le: "+Inf" })} ${count}`, `${name}_sum${render(labels)} ${sum}`, `${name}_count${render(labels)} ${count}`);
      }
    }
    return `${lines.join("\n")}\n`;
  }
}

/** Rendered label sets by a cheap id: counting happens on every request, and the sets are few. */
const rendered = new Map<string, string>();
const MAX_RENDERED = 1_000;

function renderLabels(labels: Labels): string {
  let id = "";
  for (const name in labels) id += `${name}\u0000${labels[name]}\u0001`;
  let text = rendered.get(id);
  if (text === undefined) {
    if (rendered.size >= MAX_RENDERED) rendered.clear();
    rendered.set(id, (text = render(labels)));
  }
  return text;
}

function render(labels: Labels): string {
  const pairs = Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`);
  return pairs.length ? `{${pairs.join(",")}}` : "";
}

/** The isolate's own registry, exported by `GET /__floodgate/metrics`. */
export const metrics = new Metrics();

/** Notes that a request under `rule` waited on a Durable Object from `since` (ms) until now, answered or not. */
export function observeWait(rule: Pick<Rule, "name" | "mode">, since: number): void {
  metrics.observe("floodgate_object_wait_seconds", { rule: rule.name, mode: rule.mode }, Math.max(0, Date.now() - since) / 1000);
}
