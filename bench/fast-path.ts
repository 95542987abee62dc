/**
 * Fast path: fast mode's accuracy and cost measured on the multi-isolate harness (test/harness/):
 * how many requests a fast rule admits per fixed window at 10× its limit, how much of the traffic it
 * lets through at exactly its limit compared with strict mode, and how many Durable Object calls
 * it makes per request, with 1, 4, 8 and 16 isolates in front of one RateLimiter namespace.
 */
import { loadavg } from "node:os";
import { decide, type LimiterState, type Policy } from "../src/algorithms/index";
import { parseConfig } from "../src/config/rules";
import { startCluster, type Cluster } from "../test/harness/cluster";
import { drive, type DriveResult } from "../test/harness/load";
import { startOrigin } from "../test/setup/origin-server";
import type { ChartSpec, RunOptions, Section } from "./lib/section";
import { count, percent, table } from "./lib/stats";
import { byLabel } from "./lib/workers";

/** The issue's targets, for 8 isolates at 10× the limit (period 60 s, sync 1 s). */
const TARGETS = { overAdmission: 0.01, underAdmission: 0.02, callsPer100: 2 } as const;

/** One measured traffic pattern: a rule of its own (so a key and object of its own), driven at a fixed pace. */
interface Config {
  /** rule suffix and path tag, e.g. "x8u" */
  id: string;
  label: string;
  mode: "fast" | "strict";
  /** offered load in multiples of the limit per period */
  load: 1 | 10;
  distribution: "uniform" | "skewed";
  /** the front isolates that receive its traffic */
  isolates: number[];
  /** windows counted from the schedule's first boundary: traffic starts near the start of window `from` (see {@link startOffset}) */
  from: number;
  /** the window that is counted; traffic runs until `tailMs` (plus `extraMs`) after it ends */
  counted: number;
  extraMs?: number;
  /**
   * whether its Durable Object calls can be told apart: its isolates serve no other config of the
   * same mode (strict and fast calls are counted under different `method` labels)
   */
  ownCalls: boolean;
}

interface Sizes {
  periodMs: number;
  syncMs: number;
  limit: number;
  /** how long before its first window a 1× run starts */
  leadMs: number;
  /** how long after its counted window a run goes on (see also {@link startOffset}) */
  tailMs: number;
  configs: Config[];
  /** front isolates in the cluster */
  isolates: number;
}

/**
 * The buckets a fast rule of this size gets by default (src/config/rules.ts); the strict runs are
 * given the same, so strict and fast are compared on one algorithm and the exact model matches both.
 */
function bucketsFor(size: Pick<Sizes, "periodMs" | "syncMs">): number {
  const probe = { name: "probe", limit: 1, period: `${size.periodMs}ms`, mode: "fast", sync: `${size.syncMs}ms` };
  return parseConfig([probe]).rules[0]!.buckets;
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** One run of the schedule, labelled from what it is: "8 isolates, 10×, skewed", "1 isolate, 10×", "8 isolates, 1×, strict". */
function config(id: string, isolates: number[], load: 1 | 10, run: Pick<Config, "from" | "counted" | "ownCalls"> & Partial<Pick<Config, "mode" | "distribution" | "extraMs">>): Config {
  const { mode = "fast", distribution = "uniform" } = run;
  const parts = [`${isolates.length} isolate${isolates.length === 1 ? "" : "s"}`, `${load}×`];
  if (load === 10 && isolates.length > 1) parts.push(distribution);
  if (mode === "strict") parts.push("strict");
  return { ...run, id, label: parts.join(", "), mode, load, distribution, isolates };
}

/**
 * The schedule. Every 10× run has a window to itself and its own isolates, and never overlaps
 * another; each 1× run spans two windows (the first fills the sliding window to the limit, the
 * second is counted) alongside the 10× runs, on other isolates.
 */
function fullSizes(): Sizes {
  const configs: Config[] = [
    config("x16u", range(0, 16), 10, { from: 0, counted: 0, ownCalls: true }),
    config("x4u", range(16, 4), 10, { from: 1, counted: 1, ownCalls: true }),
    config("x1u", [20], 10, { from: 2, counted: 2, ownCalls: true }),
    config("x8s", range(21, 8), 10, { distribution: "skewed", from: 3, counted: 3, ownCalls: true }),
    config("x8u", range(29, 8), 10, { from: 4, counted: 4, extraMs: 10_000, ownCalls: true }),
    // 1×: the 16-, 4- and 1-isolate runs share a pool of isolates, so their calls are not told apart.
    config("f16", range(45, 16), 1, { from: 0, counted: 1, ownCalls: false }),
    config("f4", range(45, 4), 1, { from: 1, counted: 2, ownCalls: false }),
    config("f1", [49], 1, { from: 2, counted: 3, ownCalls: false }),
    config("f8", range(37, 8), 1, { from: 3, counted: 4, ownCalls: true }),
    config("s8", range(37, 8), 1, { mode: "strict", from: 3, counted: 4, ownCalls: true }),
  ];
  return { periodMs: 60_000, syncMs: 1_000, limit: 3_000, leadMs: 1_000, tailMs: 500, configs, isolates: 61 };
}

/** Quick: a 6 s period and 100 ms sync (the same ratio), the same rates; no 4-isolate run and no 1× runs but 8 isolates'. */
function quickSizes(): Sizes {
  const configs: Config[] = [
    config("x16u", range(0, 16), 10, { from: 0, counted: 0, ownCalls: true }),
    config("x1u", [16], 10, { from: 1, counted: 1, ownCalls: true }),
    config("x8s", range(17, 8), 10, { distribution: "skewed", from: 2, counted: 2, ownCalls: true }),
    config("x8u", range(25, 8), 10, { from: 3, counted: 3, extraMs: 1_500, ownCalls: true }),
    config("f8", range(33, 8), 1, { from: 2, counted: 3, ownCalls: true }),
    config("s8", range(33, 8), 1, { mode: "strict", from: 2, counted: 3, ownCalls: true }),
  ];
  return { periodMs: 6_000, syncMs: 100, limit: 300, leadMs: 300, tailMs: 200, configs, isolates: 41 };
}

/**
 * When a run starts, relative to the start of its first window. A 10× run starts on a fresh key
 * just after the boundary, past the window's first bucket: it reaches the limit within a tenth of a
 * period and then denies, and what it admitted starts coming free only once the window has ended,
 * so no admission falls near either boundary and its count by decision time is exact. A 1× run
 * starts just before the boundary, so the window it fills is fully covered.
 */
function startOffset(c: Config, size: Pick<Sizes, "leadMs" | "tailMs" | "periodMs" | "syncMs">): number {
  if (c.load === 1) return -size.leadMs;
  const buckets = bucketsFor(size);
  const bucketMs = buckets > 1 ? Math.min(size.periodMs / buckets, size.periodMs / 20) : 0;
  return Math.ceil(bucketMs) + size.tailMs;
}

/** What one config's run gave: its send times, what the origin received, and its share of the counters. */
interface Observed {
  config: Config;
  startedAt: number;
  /** when its traffic was planned to stop, epoch ms */
  endsAt: number;
  result: DriveResult;
  /** epoch ms at which request n was sent (recorded when the driver built its URL) */
  sentAt: number[];
  /** request n → epoch ms at which the origin received it, for the admitted ones */
  arrivedAt: Map<number, number>;
  /** Durable Object calls from its isolates under its mode's method, when they are its alone */
  calls: number | null;
  /**
   * for a 10× run: requests sent and calls made by the end of its window plus tail, read then, so
   * neither the extra time of the chart's run nor a lagging driver's catching up (both admit the
   * next window's units again) counts in its cost
   */
  atWindowEnd?: { sent: number; calls: number };
  /** for a 10× run: the same a fifth of a period into its window, when its burst of admissions is over */
  afterBurst?: { sent: number; calls: number };
  decisions: number;
  localDecisions: number;
  /** failed or timed-out Durable Object calls on its isolates, after which `onError` decided */
  objectErrors: number;
}

/** The numbers reported for one config. */
export interface ConfigResult {
  id: string;
  label: string;
  mode: "fast" | "strict";
  load: number;
  distribution: string;
  isolates: number;
  ratePerSecond: number;
  /** the counted window, epoch ms [start, end) */
  window: [number, number];
  sent: number;
  allowed: number;
  denied: number;
  errors: number;
  maxLagMs: number;
  latencyMs: { p50: number; p99: number; max: number } | null;
  /** requests sent inside the counted window, and the rate that makes */
  offered: number;
  offeredPerSecond: number;
  /** admitted in the counted window by decision time: certainly inside it, and possibly inside it */
  admittedLower: number;
  admittedUpper: number;
  /** admitted in the counted window by the origin's arrival time, and of those sent inside it */
  admittedByArrival: number;
  admittedOfOffered: number;
  /** admitted requests sent before the window's start (end) that reached the origin after it */
  straddle: [number, number];
  /** what the exact sliding window (strict's algorithm, zero latency) admits from the same send times */
  exact: number;
  /**
   * the most admitted in any span of one period, anywhere in the run: requests certainly decided
   * inside it (sent after its start, received by its end); and the same for the exact model
   */
  mostInAnyPeriod: number;
  exactMostInAnyPeriod: number;
  overAdmission: number;
  /** calls over the requests sent, both counted to the end of the window plus tail */
  calls: number | null;
  callsSent: number;
  callsPer100: number | null;
  callsPer1000: number | null;
  /** for the run that goes on past its window: what the time after it cost */
  afterWindow: { sent: number; calls: number; per1000: number } | null;
  /** the first fifth of the window (the burst of admissions, then denials) and the rest (denials only) */
  phases: { burst: { sent: number; calls: number }; rest: { sent: number; calls: number } } | null;
  /** share of this rule's decisions made in the isolate with no call on the request's path */
  localShare: number | null;
  /** Durable Object calls that failed or timed out on its isolates (then `onError: local` decided); null when shared */
  objectErrors: number | null;
  /** admitted per second, by arrival, in bins of period/60, x in seconds from the counted window's start */
  perSecond: [number, number][];
  exactPerSecond: [number, number][];
  /** requests sent per second, same bins */
  sentPerSecond: [number, number][];
}

export interface FastPathData {
  quick: boolean;
  limit: number;
  periodMs: number;
  syncMs: number;
  leadMs: number;
  tailMs: number;
  /** how long after its window's start a 10× run starts */
  tenStartMs: number;
  buckets: number;
  isolates: number;
  startupMs: number;
  /** the 1-minute load average when the runs began and when they ended (2 cores) */
  load: [number, number];
  firstBoundary: number;
  seconds: number;
  configs: ConfigResult[];
  errors: Record<string, number>;
  syncs: Record<string, number>;
  targets: { name: string; target: string; measured: string; verdict: Verdict }[];
}

/**
 * "undecided": the decision-time bounds straddle the target (latency made too many requests
 * ambiguous); "not read": quick mode's sync interval is not the one the target is set for.
 */
type Verdict = "met" | "not met" | "undecided" | "not read";

const ruleName = (c: Config) => `fp-${c.id}`;

/**
 * The Durable Object calls one isolate's metrics count for a run's mode: strict's `decide`; fast
 * mode's `sync` to the key's object and `relay` to a relay (a global key's first sync goes through
 * its continent's relay under `aggregate: "auto"`).
 */
function callsIn(text: string, mode: Config["mode"]): number {
  const byMethod = byLabel(text, "floodgate_durable_object_calls_total", "method");
  return mode === "fast" ? (byMethod.sync ?? 0) + (byMethod.relay ?? 0) : (byMethod.decide ?? 0);
}

export async function run(options: RunOptions): Promise<Section> {
  const size = options.quick ? quickSizes() : fullSizes();
  const { periodMs, syncMs, limit, leadMs, tailMs } = size;
  const began = Date.now();
  const rules = size.configs.map((c) => ({
    name: ruleName(c),
    match: { path: `/${c.id}/*` },
    key: "global",
    limit,
    period: `${periodMs}ms`,
    mode: c.mode,
    buckets: bucketsFor(size),
    ...(c.mode === "fast" ? { sync: `${syncMs}ms` } : {}),
  }));

  const origin = await startOrigin();
  const originUrl = `http://127.0.0.1:${origin.port}`;
  let cluster: Cluster | undefined;
  try {
    const startup = performance.now();
    // Cloudflare sets request.cf.continent on every request; a global fast key's first sync in each isolate goes through its relay.
    cluster = await startCluster({ isolates: size.isolates, rules, originUrl, continents: ["NA"] });
    const started = cluster;
    // Each isolate's first request pays for parsing the rules and compiling: none of the measured ones should.
    await Promise.all(started.fronts.map((_, i) => started.fetch(i, `/fp-warm/${i}`).then((r) => r.arrayBuffer())));
    const startupMs = performance.now() - startup;
    options.log(`cluster of ${size.isolates} isolates ready and warm in ${(startupMs / 1000).toFixed(1)} s`);

    // The schedule starts on the first window boundary that leaves room for the lead.
    const lead = Math.max(...size.configs.map((c) => -startOffset(c, size) - c.from * periodMs));
    const first = Math.ceil((Date.now() + lead + 200) / periodMs) * periodMs;
    const windows = Math.max(...size.configs.map((c) => c.counted)) + 1;
    options.log(
      `first counted window starts in ${((first - Date.now()) / 1000).toFixed(1)} s; ${windows} windows of ${periodMs / 1000} s follow`,
    );
    const loadBefore = loadavg()[0]!;
    const observed = await Promise.all(size.configs.map((c) => runConfig(started, c, size, first, options.log)));
    // Background syncs still in flight finish before the counters are read.
    await sleep(Math.max(300, syncMs));

    const perIsolate = await Promise.all(started.fronts.map((_, i) => started.metrics(i)));
    const sumOver = (isolates: number[], name: string, label: string, value: string) =>
      isolates.reduce((sum, i) => sum + (byLabel(perIsolate[i]!, name, label)[value] ?? 0), 0);
    for (const o of observed) {
      const c = o.config;
      o.calls = c.ownCalls ? c.isolates.reduce((sum, i) => sum + callsIn(perIsolate[i]!, c.mode), 0) : null;
      o.decisions = sumOver(c.isolates, "floodgate_decisions_total", "rule", ruleName(c));
      o.localDecisions = sumOver(c.isolates, "floodgate_local_decisions_total", "rule", ruleName(c));
      o.objectErrors = c.ownCalls ? sumOver(c.isolates, "floodgate_errors_total", "kind", "durable_object") : 0;
    }
    const totals = (name: string, label: string) => {
      const out: Record<string, number> = {};
      for (const text of perIsolate) for (const [k, v] of Object.entries(byLabel(text, name, label))) out[k] = (out[k] ?? 0) + v;
      return out;
    };
    const errors = totals("floodgate_errors_total", "kind");
    const syncs = totals("floodgate_syncs_total", "result");

    for (const o of observed) {
      const log = (await (await fetch(`${originUrl}/__origin/log?tag=${o.config.id}`)).json()) as { at: number; url: string }[];
      for (const { at, url } of log) o.arrivedAt.set(Number(url.split("/")[2]), at);
    }

    const results = observed.map((o) => analyse(o, size, first));
    const data: FastPathData = {
      quick: options.quick,
      limit,
      periodMs,
      syncMs,
      leadMs,
      tailMs,
      tenStartMs: startOffset(size.configs.find((c) => c.load === 10)!, size),
      buckets: bucketsFor(size),
      isolates: size.isolates,
      startupMs: Math.round(startupMs),
      load: [round(loadBefore, 2), round(loadavg()[0]!, 2)],
      firstBoundary: first,
      seconds: Math.round((Date.now() - began) / 100) / 10,
      configs: results,
      errors,
      syncs,
      targets: [],
    };
    data.targets = targets(data);
    return {
      id: "fast-path",
      title: "Fast path: accuracy and cost across isolates",
      markdown: render(data),
      charts: charts(data),
      data,
      verdicts: data.targets.map((t) => ({
        target: `fast path: ${t.name}, ${t.target}`,
        measured: t.measured,
        met: t.verdict === "met" ? true : t.verdict === "not met" ? false : undefined,
      })),
      headline: headline(data),
    };
  } finally {
    await cluster?.dispose();
    await origin.close();
  }
}

/** Waits for the config's start, then drives it until its end, recording when each request went out. */
async function runConfig(cluster: Cluster, c: Config, size: Sizes, first: number, log: (line: string) => void): Promise<Observed> {
  const { periodMs, tailMs, limit } = size;
  const start = first + c.from * periodMs + startOffset(c, size);
  const end = first + (c.counted + 1) * periodMs + tailMs + (c.extraMs ?? 0);
  await sleep(start - Date.now());
  const startedAt = Date.now();
  const sentAt: number[] = [];
  const weights: number[] = cluster.fronts.map((_, i) => (c.isolates.includes(i) ? 1 : 0));
  if (c.distribution === "skewed" && c.isolates.length > 1) {
    // drive()'s "skewed": the first isolate takes 60 %, the others share the rest evenly.
    c.isolates.forEach((i, k) => (weights[i] = k === 0 ? 0.6 : 0.4 / (c.isolates.length - 1)));
  }
  const ratePerSecond = (c.load * limit * 1000) / periodMs;
  // The counters read while the run goes on, for its cost in one stretch of it.
  const snapshot = (at: number) =>
    sleep(at - Date.now()).then(async () => {
      const sent = sentAt.length;
      const texts = await Promise.all(c.isolates.map((i) => cluster.metrics(i)));
      return { sent, calls: texts.reduce((sum, t) => sum + callsIn(t, c.mode), 0) };
    });
  const atWindowEnd = c.load === 10 && c.ownCalls ? snapshot(end - (c.extraMs ?? 0)) : undefined;
  const afterBurst = c.load === 10 && c.ownCalls ? snapshot(first + c.counted * periodMs + periodMs / 5) : undefined;
  const result = await drive(cluster, {
    durationMs: end - startedAt,
    ratePerSecond,
    distribution: { weights },
    latencies: true,
    path: (n) => {
      sentAt[n] = Date.now();
      return `/${c.id}/${n}`;
    },
  });
  log(
    `${c.label}${c.mode === "strict" ? "" : ", fast"}: ${count(result.sent)} sent, ${count(result.allowed)} allowed, ` +
      `${count(result.errors)} errors, latency p99 ${result.latencies?.p99 ?? "?"} ms, lag up to ${result.maxLagMs.toFixed(0)} ms`,
  );
  return {
    config: c,
    startedAt,
    endsAt: end,
    result,
    sentAt,
    arrivedAt: new Map(),
    calls: null,
    ...(atWindowEnd ? { atWindowEnd: await atWindowEnd } : {}),
    ...(afterBurst ? { afterBurst: await afterBurst } : {}),
    decisions: 0,
    localDecisions: 0,
    objectErrors: 0,
  };
}

function analyse(o: Observed, size: Sizes, first: number): ConfigResult {
  const { config: c, result, sentAt, arrivedAt } = o;
  const { periodMs, limit } = size;
  const ws = first + c.counted * periodMs;
  const we = ws + periodMs;
  const inWindow = (t: number) => t >= ws && t < we;
  let offered = 0;
  let admittedOfOffered = 0;
  let lower = 0;
  let upper = 0;
  let byArrival = 0;
  let straddleStart = 0;
  let straddleEnd = 0;
  sentAt.forEach((sent, n) => {
    if (inWindow(sent)) offered++;
    const at = arrivedAt.get(n);
    if (at === undefined) return;
    if (inWindow(sent)) admittedOfOffered++;
    // The decision was made after the request was sent and before it reached the origin.
    if (sent >= ws && at < we) lower++;
    if (sent < we && at >= ws) upper++;
    if (inWindow(at)) byArrival++;
    if (sent < ws && at >= ws) straddleStart++;
    if (sent < we && at >= we) straddleEnd++;
  });

  // Strict's algorithm with no latency at all, fed the same send times: the exact limiter's answer.
  const policy: Policy = { algorithm: "sliding-window", limit, periodMs, burst: limit, buckets: bucketsFor(size) };
  let state: LimiterState | undefined;
  let exact = 0;
  const exactTimes: number[] = [];
  const bin = periodMs / 60;
  const fromStart = o.startedAt - ws;
  const bins = new Map<number, number>();
  const exactBins = new Map<number, number>();
  const sentBins = new Map<number, number>();
  const add = (into: Map<number, number>, t: number) => {
    const b = Math.floor((t - ws) / bin);
    into.set(b, (into.get(b) ?? 0) + 1);
  };
  for (const sent of sentAt) {
    add(sentBins, sent);
    const outcome = decide(policy, state, 1, sent);
    state = outcome.state;
    if (!outcome.decision.allowed) continue;
    if (inWindow(sent)) exact++;
    exactTimes.push(sent);
    add(exactBins, sent);
  }
  for (const at of arrivedAt.values()) add(bins, at);
  const firstBin = Math.floor(fromStart / bin);
  const lastBin = Math.ceil((o.endsAt - ws) / bin) - 1;
  const series = (from: Map<number, number>) =>
    range(firstBin, lastBin - firstBin + 1).map((b): [number, number] => [round((b * bin) / 1000, 3), ((from.get(b) ?? 0) * 1000) / bin]);

  const calls = o.atWindowEnd?.calls ?? o.calls;
  const callsSent = o.atWindowEnd?.sent ?? result.sent;
  const after = o.atWindowEnd && o.calls !== null ? { sent: result.sent - o.atWindowEnd.sent, calls: o.calls - o.atWindowEnd.calls } : null;
  return {
    id: c.id,
    label: c.label,
    mode: c.mode,
    load: c.load,
    distribution: c.distribution,
    isolates: c.isolates.length,
    ratePerSecond: (c.load * limit * 1000) / periodMs,
    window: [ws, we],
    sent: result.sent,
    allowed: result.allowed,
    denied: result.denied,
    errors: result.errors,
    maxLagMs: Math.round(result.maxLagMs),
    latencyMs: result.latencies ? { p50: result.latencies.p50, p99: result.latencies.p99, max: result.latencies.max } : null,
    offered,
    offeredPerSecond: round((offered * 1000) / (Math.min(we, o.endsAt) - Math.max(ws, o.startedAt)), 1),
    admittedLower: lower,
    admittedUpper: upper,
    admittedByArrival: byArrival,
    admittedOfOffered,
    straddle: [straddleStart, straddleEnd],
    exact,
    mostInAnyPeriod: mostInSpan([...arrivedAt].map(([n, at]) => [sentAt[n]!, at]), periodMs),
    exactMostInAnyPeriod: mostInSpan(exactTimes.map((t) => [t, t]), periodMs),
    overAdmission: upper / limit - 1,
    calls,
    callsSent,
    callsPer100: calls === null ? null : round((calls * 100) / callsSent, 3),
    callsPer1000: calls === null ? null : round((calls * 1000) / callsSent, 2),
    afterWindow: after ? { ...after, per1000: round((after.calls * 1000) / Math.max(1, after.sent), 1) } : null,
    phases:
      o.afterBurst && calls !== null
        ? { burst: o.afterBurst, rest: { sent: callsSent - o.afterBurst.sent, calls: calls - o.afterBurst.calls } }
        : null,
    localShare: c.mode === "fast" && o.decisions > 0 ? o.localDecisions / o.decisions : null,
    objectErrors: c.ownCalls ? o.objectErrors : null,
    perSecond: series(bins),
    exactPerSecond: series(exactBins),
    sentPerSecond: series(sentBins),
  };
}

function targets(d: FastPathData): FastPathData["targets"] {
  const at10 = d.configs.filter((c) => c.mode === "fast" && c.load === 10 && c.isolates === 8);
  const f8 = d.configs.find((c) => c.id === "f8");
  const s8 = d.configs.find((c) => c.id === "s8");
  const worst = at10.reduce((a, b) => (b.admittedUpper > a.admittedUpper ? b : a));
  const bound = d.limit * (1 + TARGETS.overAdmission);
  const out: FastPathData["targets"] = [
    {
      name: "admitted per window, 8 isolates, 10×",
      target: `≤ 1.01 × limit (${count(bound)})`,
      measured:
        worst.admittedLower === worst.admittedUpper
          ? `at most ${count(worst.admittedUpper)} by decision time (${worst.distribution}) = ${ratio(worst.admittedUpper / d.limit)} × limit`
          : `at most ${count(worst.admittedLower)}–${count(worst.admittedUpper)} by decision time (${worst.distribution}), ` +
            `${ratio(worst.admittedLower / d.limit)}–${ratio(worst.admittedUpper / d.limit)} × limit`,
      verdict: at10.every((c) => c.admittedUpper <= bound) ? "met" : at10.some((c) => c.admittedLower > bound) ? "not met" : "undecided",
    },
  ];
  if (f8 && s8) {
    const vsStrict = 1 - f8.admittedOfOffered / s8.admittedOfOffered;
    out.push({
      name: "under-admission at 1×, 8 isolates (against strict)",
      target: "< 2 %",
      measured: `${percent(Math.max(0, vsStrict))}${vsStrict < 0 ? " (fast admitted more than strict)" : ""}; against what was offered ${percent(1 - f8.admittedOfOffered / f8.offered)}`,
      verdict: vsStrict < TARGETS.underAdmission ? "met" : "not met",
    });
  }
  for (const c of at10) {
    out.push({
      name: `Durable Object calls, 8 isolates, 10×, ${c.distribution}`,
      target: `≤ 2 per 100 requests${d.quick ? " (at sync 1 s)" : ""}`,
      measured: `${c.callsPer100?.toFixed(2) ?? "—"} per 100 (${count(c.calls ?? NaN)} calls, ${count(c.callsSent)} requests)`,
      // Quick mode syncs ten times as often, so its calls are not read against a target set for 1 s.
      verdict: d.quick ? "not read" : (c.callsPer100 ?? Infinity) <= TARGETS.callsPer100 ? "met" : "not met",
    });
  }
  return out;
}

/** Where fast mode stands across isolates, in one sentence. */
function headline(d: FastPathData): string {
  const at10 = d.configs.filter((c) => c.mode === "fast" && c.load === 10 && c.isolates === 8);
  const most = Math.max(...at10.map((c) => c.admittedUpper));
  const calls = [...new Set(at10.map((c) => c.callsPer100?.toFixed(2)).filter((c) => c !== undefined))].sort();
  return (
    `Fast mode on 8 isolates at 10× the limit admits at most ${ratio(most / d.limit)} × the limit per window` +
    (calls.length ? `, with ${calls.join("–")} Durable Object calls per 100 requests.` : ".")
  );
}

function charts(d: FastPathData): ChartSpec[] {
  const x8u = d.configs.find((c) => c.id === "x8u")!;
  const rate = (d.limit * 1000) / d.periodMs;
  const xs = x8u.perSecond.map((p) => p[0]);
  const boundary: ChartSpec = {
    file: "fast-path-boundary",
    title: `Admitted per second at 10× the limit, 8 isolates, around a ${d.periodMs / 1000} s window`,
    kind: "line",
    xLabel: "seconds from the start of the counted window",
    yLabel: "requests per second",
    series: [
      { name: "fast mode, admitted (by arrival at the origin)", points: x8u.perSecond },
      { name: "exact sliding window on the same send times (model)", points: x8u.exactPerSecond },
      { name: "sent (offered)", points: x8u.sentPerSecond },
      { name: `limit rate (${count(rate)}/s)`, points: [[Math.min(...xs), rate], [Math.max(...xs), rate]] },
    ],
  };
  const uniform = [1, 4, 8, 16]
    .map((n) => d.configs.find((c) => c.mode === "fast" && c.load === 10 && c.distribution === "uniform" && c.isolates === n))
    .filter((c): c is ConfigResult => c !== undefined);
  const skewed = d.configs.find((c) => c.id === "x8s");
  const bars = [...uniform, ...(skewed ? [skewed] : [])];
  const calls: ChartSpec = {
    file: "fast-path-calls",
    title: `Durable Object calls per 1,000 requests at 10× the limit (sync ${duration(d.syncMs)})`,
    kind: "bar",
    xLabel: "isolates",
    yLabel: "calls per 1,000 requests",
    categories: bars.map((c) => `${c.isolates}${c.distribution === "skewed" ? ", skewed" : ""}`),
    series: [
      { name: "measured", points: bars.map((c, i): [number, number] => [i, c.callsPer1000 ?? NaN]) },
      { name: "one sync per isolate per interval", points: bars.map((c, i): [number, number] => [i, modelPer1000(d, c)]) },
    ],
  };
  return [boundary, calls];
}

/** Calls per 1,000 requests if every isolate synced exactly once per interval and never otherwise. */
function modelPer1000(d: FastPathData, c: ConfigResult): number {
  return round((c.isolates * (1000 / d.syncMs) * 1000) / c.ratePerSecond, 1);
}

function render(d: FastPathData): string {
  const P = d.periodMs / 1000;
  const rate1 = (d.limit * 1000) / d.periodMs;
  const fast10 = d.configs.filter((c) => c.mode === "fast" && c.load === 10);
  const at1 = d.configs.filter((c) => c.load === 1);
  const s8 = d.configs.find((c) => c.id === "s8");
  const x8u = d.configs.find((c) => c.id === "x8u")!;
  const lat = (c: ConfigResult) => (c.latencyMs ? `${c.latencyMs.p50} / ${c.latencyMs.p99}` : "—");
  const mark = (v: Verdict) => (v === "met" || v === "not met" ? `**${v}**` : v === "not read" ? "not read (quick: sync 100 ms)" : "undecided (see below)");
  const failedSyncs = d.syncs.failed ?? 0;
  const errorTotal = Object.values(d.errors).reduce((a, b) => a + b, 0);
  const requestErrors = d.configs.reduce((a, c) => a + c.errors, 0);

  const targetTable = table(
    ["target", "wanted", "measured", ""],
    d.targets.map((t) => [t.name, t.target, t.measured, mark(t.verdict)]),
  );

  const runTable = table(
    [
      "run",
      "offered in window",
      "admitted in window, by decision time (by arrival)",
      "÷ limit",
      "exact model",
      `most in any ${P} s (exact model)`,
      "straddling",
      "DO calls",
      "per 1,000 req.",
      "decided locally",
      "object errors",
      "latency p50 / p99 ms",
      "driver lag ms",
    ],
    fast10.map((c) => [
      c.label,
      `${count(c.offered)} (${c.offeredPerSecond}/s)`,
      `${c.admittedLower === c.admittedUpper ? count(c.admittedLower) : `${count(c.admittedLower)}–${count(c.admittedUpper)}`} (${count(c.admittedByArrival)})`,
      c.admittedLower === c.admittedUpper ? ratio(c.admittedUpper / d.limit) : `${ratio(c.admittedLower / d.limit)}–${ratio(c.admittedUpper / d.limit)}`,
      count(c.exact),
      `${count(c.mostInAnyPeriod)} (${count(c.exactMostInAnyPeriod)})`,
      `${c.straddle[0]} / ${c.straddle[1]}`,
      c.calls === null ? "—" : count(c.calls),
      c.callsPer1000 === null ? "—" : c.callsPer1000.toFixed(1),
      c.localShare === null ? "—" : percent(c.localShare),
      c.objectErrors === null ? "—" : count(c.objectErrors),
      lat(c),
      String(c.maxLagMs),
    ]),
    ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"],
  );

  const phased = fast10.filter((c) => c.phases !== null);
  const per1000 = (x: { sent: number; calls: number }) => ((x.calls * 1000) / Math.max(1, x.sent)).toFixed(1);
  const phaseTable = phased.length
    ? table(
        ["run", `first ${P / 5} s of the window: calls (per 1,000 req.)`, `last ${(P * 4) / 5} s: calls (per 1,000 req.)`, "one sync per isolate per interval, per 1,000"],
        phased.map((c) => [
          c.label,
          `${count(c.phases!.burst.calls)} (${per1000(c.phases!.burst)})`,
          `${count(c.phases!.rest.calls)} (${per1000(c.phases!.rest)})`,
          modelPer1000(d, c).toFixed(1),
        ]),
        ["l", "r", "r", "r"],
      )
    : undefined;

  const oneTable = table(
    ["run", "offered in window", "admitted of those", "÷ offered", "÷ strict's", "exact model ÷ offered", `most in any ${P} s (exact model)`, "DO calls per 1,000 req.", "latency p50 / p99 ms"],
    at1.map((c) => [
      c.mode === "strict" ? `**${c.label}**` : c.label,
      count(c.offered),
      count(c.admittedOfOffered),
      percent(c.admittedOfOffered / c.offered),
      s8 && c.mode === "fast" ? percent(c.admittedOfOffered / c.offered / (s8.admittedOfOffered / s8.offered)) : "—",
      percent(c.exact / c.offered),
      `${count(c.mostInAnyPeriod)} (${count(c.exactMostInAnyPeriod)})`,
      c.callsPer1000 === null ? "— (shared isolates)" : c.callsPer1000.toFixed(1),
      lat(c),
    ]),
    ["l", "r", "r", "r", "r", "r", "r", "r", "r"],
  );

  const windowStarts = [...new Set(d.configs.map((c) => c.window[0]))].sort((a, b) => a - b);
  const schedule = table(
    ["window", "10× run (its own isolates)", "1× runs beside it"],
    windowStarts.map((at, w) => {
      const ten = d.configs.filter((c) => c.load === 10 && c.window[0] === at).map((c) => c.label);
      const ones = d.configs
        .filter((c) => c.load === 1 && c.window[0] - d.periodMs <= at && at <= c.window[0])
        .map((c) => `${c.label} (${c.window[0] === at ? "counted" : "filling"})`);
      return [String(w + 1), ten.join(", ") || "—", ones.join(", ") || "—"];
    }),
  );

  const describe = (s: Sizes) => {
    const windows = Math.max(...s.configs.map((c) => c.counted)) + 1;
    const counts = [...new Set(s.configs.filter((c) => c.load === 10 && c.distribution === "uniform").map((c) => c.isolates.length))].sort((a, b) => a - b);
    const ones = s.configs.filter((c) => c.load === 1 && c.mode === "fast").map((c) => c.isolates.length);
    return (
      `period ${s.periodMs / 1000} s, sync ${duration(s.syncMs)}, limit ${count(s.limit)}, ${s.isolates} isolates, ${windows} windows: ` +
      `10× uniform on ${counts.join(", ")} isolates and skewed on 8, 1× on ${ones.join(", ")} isolates and strict 1× on 8`
    );
  };
  const reproduce =
    `**Reproduce.** \`npm run bench\` (${describe(fullSizes())}; about 6 minutes) or \`npm run bench -- --quick\` ` +
    `(${describe(quickSizes())}; about 40 s, indicative only). One run of each configuration: a window of 60 s cannot ` +
    `be repeated within the bench's time budget. This run took ${Math.round(d.seconds)} s, of which ` +
    `${(d.startupMs / 1000).toFixed(1)} s starting and warming the cluster.`;

  return [
    `Fast mode's accuracy and cost in the multi-isolate harness (\`test/harness/cluster.ts\`): one workerd with ` +
      `${d.isolates} front Workers built from floodgate's bundle, each its own isolate, all bound to one \`RateLimiter\` ` +
      `namespace hosted by another Worker, in front of a Node origin on loopback that records when each request arrives. ` +
      `Load comes from \`test/harness/load.ts\`, paced (request *k* is due *k* / rate seconds after the start), ` +
      `spread over a run's isolates by smooth weighted round-robin.`,
    `### Targets`,
    `Read on 8 isolates at 10× the limit, period 60 s, sync 1 s${d.quick ? ` (this quick run: period ${P} s, sync ${duration(d.syncMs)})` : ""}.`,
    targetTable,
    ...missedNote(d),
    ...(d.targets.some((t) => t.verdict === "undecided")
      ? [
          `*Undecided:* requests whose trip from the driver to the origin spanned a window boundary could have been ` +
            `decided on either side of it. On this run the latency reached ${Math.max(...d.configs.map((c) => c.latencyMs?.max ?? 0))} ms ` +
            `(the machine was shared; see "Health of the runs"), so the count by decision time is only known to lie in the ` +
            `range shown, and the range straddles the target.`,
        ]
      : []),
    `### Method`,
    `**Rule.** \`{ key: "global", limit: ${d.limit}, period: "${P}s", mode: "fast", sync: "${duration(d.syncMs).replace(" ", "")}" }\`, ` +
      `sliding window with ${d.buckets} bucket${d.buckets === 1 ? " (the two-window counter)" : "s"}, a fast rule's default for this period and sync interval (strict runs get the same); every run ` +
      `has a rule of its own, matched by path, so its own key and Durable Object. **Why ${count(d.limit)}:** 10× must be ` +
      `a rate this machine sustains with room to spare. The harness manages about 1,500 requests/s with no rules on 2 ` +
      `cores (workerd runs every isolate on one thread), and 1× runs go on beside each 10× run. ${count(d.limit)} ` +
      `per ${P} s makes 1× = ${count(rate1)} requests/s and 10× = ${count(rate1 * 10)}/s, at most ` +
      `${count(rate1 * 13)}/s in all.`,
    `**Schedule.** Windows are epoch-aligned multiples of the period, and every run goes on ${d.tailMs} ms past the ` +
      `window it is counted in, so the counted window ends under full load. A 10× run uses a fresh key and starts ` +
      `${d.tenStartMs / 1000} s after its window's boundary${d.buckets > 1 ? ", past the window's first bucket" : ""}. ` +
      `A key with no history has nothing to count before its first request, ` +
      `so its window is still fully observed. Every isolate has already served a request, so the only cold start is ` +
      `the key's own, and that is part of what is measured. At 10× the key reaches its limit within a tenth of the ` +
      `period, then denies. With ${d.buckets} bucket${d.buckets === 1 ? "" : "s"} per period, the units it admitted ` +
      `come free again about one period later, in the next window. So no admission falls near either boundary of the ` +
      `counted window, and the count by decision time is exact even when latency is high. (Starting a few hundred ms ` +
      `before the boundary instead puts the burst of a fresh key, or of a key filled beforehand, across a boundary, ` +
      `where each admission's window is uncertain by the request's latency.) Consecutive 10× runs never overlap. A 1× ` +
      `run starts ${d.leadMs / 1000} s before a boundary and spans two windows, counted in the second: in the first ` +
      `its sliding window fills to the limit, so the counted window is the steady state of a client sending exactly ` +
      `the limit. The runs are pipelined so no time is spent waiting for boundaries. Runs that overlap in time use ` +
      `different isolates, so each run's Durable Object calls are read from its own isolates' counters.`,
    schedule,
    `**Counting by decision time.** The driver records when it sends each request, and the origin when it receives ` +
      `it; floodgate decided in between. A request counts *certainly* in a window if it was sent at or after the window's ` +
      `start and reached the origin before its end, and *possibly* if its interval overlaps the window at all. The table ` +
      `gives both; the target is read on the larger. Counting by arrival alone skews the boundary: a request decided ` +
      `just before a boundary and received just after it moves to the next window. "Straddling" counts the admitted ` +
      `requests sent before a boundary of the counted window that arrived after it (start / end). ` +
      `Over-admission = admitted in the counted window ÷ limit − 1.`,
    `**Under-admission at 1×.** ${count(rate1)} requests/s, exactly the limit per period, uniform. Two numbers: admitted ` +
      `÷ offered, and that ÷ strict mode's admitted ÷ offered for the same schedule (the strict run goes at the same time, ` +
      `with the same pace and isolate count). The target is read against strict: a sliding-window counter held at exactly ` +
      `its limit denies a few requests by itself (the estimate's weighting of its oldest bucket and the jitter of the ` +
      `sends put some requests a hair over), ` +
      `and that is not fast mode's error; the target is about fast mode's approximation of the exact limiter. ` +
      `"Exact model" replays the same send times through floodgate's own algorithm with no latency.`,
    `**Durable Object calls.** \`floodgate_durable_object_calls_total\` summed over the run's isolates (methods ` +
      `\`sync\` and \`relay\` for fast, \`decide\` for strict), divided by the requests the run sent by then. Every front's ` +
      `requests say \`request.cf.continent\` "NA", as Cloudflare's do, so a global fast key's first sync in each ` +
      `isolate goes through that continent's relay (\`aggregate: "auto"\`), which forwards it to the key's object in a batch (\`syncAll\`, at most one ` +
      `per relayed sync), counted in the objects' Worker, which the runs share, and not here. A 10× run's ` +
      `counters are read at the end of its window plus tail: a driver that fell behind, and the 8-isolate uniform run ` +
      `that goes on ${round((x8u.perSecond.at(-1)?.[0] ?? 0) - P + d.periodMs / 60_000, 1)} s past its window for the ` +
      `chart, send on into the next window, where the first burst's units come free and are admitted again; that is ` +
      `reported apart. A 1× run's are read after all runs. ` +
      `"Decided locally" is \`floodgate_local_decisions_total\` ÷ \`floodgate_decisions_total\` for the run's rule.`,
    `### At 10× the limit`,
    runTable,
    `Each run offers ${count(rate1 * 10)} requests/s; "offered in window" shows what the driver achieved. ` +
      `"Object errors" are Durable Object calls from the run's isolates that failed or took longer than the rule's ` +
      `timeout (1 s); after each, \`onError: local\` decided from the isolate's own counters and its share of the limit, ` +
      `the one path by which fast mode can admit past the limit. ${overNote(d)}` +
      `"Exact model": what floodgate's algorithm, deciding at each send time with no latency, admits in the window. ` +
      `"Most in any ${P} s": the largest number of requests certainly decided within one period-long span anywhere in ` +
      `the run, boundaries or not (sent after the span's start, received by its end), beside the same for the exact ` +
      `model. The targets count fixed windows, and the sliding window only promises those; a span across a boundary ` +
      `shows how early the next window's units are let through. ${spanNote(d)}`,
    `![Admitted per second at 10×, 8 isolates](charts/fast-path-boundary.svg)`,
    `*Method:* the 8-isolate uniform 10× run, admitted per ${d.periodMs / 60_000} s bin by arrival at the origin, ` +
      `from the run's start (${d.tenStartMs / 1000} s into the counted window) to ` +
      `${round((x8u.perSecond.at(-1)?.[0] ?? 0) - P + d.periodMs / 60_000, 1)} s into the next window, against the ` +
      `exact model on the same send times and the limit rate (limit ÷ period). The boundary at ${P} s is the one to ` +
      `watch: the units admitted at the start come free one period later, and both curves admit them again. There ` +
      `is no strict run at 10× (no window to spare for it); the model is strict's algorithm without latency. One run.`,
    `![Durable Object calls per 1,000 requests](charts/fast-path-calls.svg)`,
    ...(phaseTable ? [phaseTable] : []),
    `*Method:* each 10× run's calls over the requests it sent, both up to the end of its window plus tail ` +
      `(${count(rate1 * 10)}/s from ${d.tenStartMs / 1000} s into the window), ` +
      `beside what one sync per isolate per ${duration(d.syncMs)} would cost. Calls grow with isolates, not with requests: ` +
      `an isolate syncs about once per interval whatever its traffic, plus an on-path sync when its lease runs dry ` +
      `and it holds no denial. One run each. The table below splits each run's calls at a fifth of its window ` +
      `(read from its isolates' counters while it ran): the first part holds the burst, in which the fresh key fills ` +
      `within a tenth of the period while isolates top up their leases as they run low (up to four times an interval) ` +
      `and sync on the request's path when one runs dry; after it, every request is denied and each isolate syncs ` +
      `about once per interval.` +
      (x8u.afterWindow
        ? ` The ${(x8u.afterWindow.sent / (rate1 * 10)).toFixed(1)} s the 8-isolate uniform run ` +
          `went on past its window, while the units of its first burst came free and were admitted again, cost ` +
          `${count(x8u.afterWindow.calls)} calls for ${count(x8u.afterWindow.sent)} requests (${x8u.afterWindow.per1000} ` +
          `per 1,000): admitting costs more calls than denying, since a lease is used up and topped up, while a ` +
          `denied isolate only asks again once per interval.`
        : ""),
    `### At 1× the limit`,
    oneTable,
    `Counted in the second window of each run (the first fills the sliding window). The 8-isolate fast run has ` +
      `isolates of its own (the strict run shares them; its calls are counted under \`decide\`)` +
      (at1.some((c) => c.calls === null) ? "; the other 1× runs share a pool, so their calls are not separated." : ".") +
      ` At 1× each isolate still syncs about once per interval, so calls per request are much higher than at 10×: ` +
      `the cost follows isolates and time, not traffic.`,
    `### Health of the runs`,
    `The 1-minute load average was ${d.load[0]} when the runs began and ${d.load[1]} when they ended (2 cores; ` +
      `other work shares the machine). The driver fell behind its pace by up to ` +
      `${Math.max(...d.configs.map((c) => c.maxLagMs))} ms. ` +
      `${count(requestErrors)} requests failed (neither answered below 400 nor 429); floodgate counted ` +
      `${count(errorTotal)} errors${errorTotal ? ` (${Object.entries(d.errors).map(([k, v]) => `${k}: ${v}`).join(", ")})` : ""} ` +
      `and ${count(failedSyncs)} failed syncs. A failed or slow sync would make the rule's \`onError: local\` decide from ` +
      `the isolate's own counters, which is the one way fast mode can admit past the limit.`,
    `### What this does not measure`,
    `- **One machine, one workerd thread.** All isolates run on workerd's single thread, so they are not truly ` +
      `parallel: requests and syncs interleave rather than race, and real races between isolates' syncs at the object ` +
      `are rarer here than at the edge. The driver and the origin share the machine (2 cores, shared with other work).\n` +
      `- **Loopback latency ≈ 0.** A sync here takes a millisecond or so; a real Durable Object round trip is 10–100 ms ` +
      `from most colos. That matters for a cold key (its first request in each isolate waits for an on-path sync), for ` +
      `isolates whose lease runs dry under a burst, and for how long leased units are in flight; the over-admission ` +
      `bound does not depend on it (units are pinned when granted), under-admission and latency do.\n` +
      `- **One key per run, steady pacing.** Real traffic has many keys and bursts; the per-window bound holds per key, ` +
      `but lease sizing was only exercised on smooth or 60/40-skewed demand.\n` +
      `- **No object eviction, no failures.** Lost and retried syncs are covered by the property tests, not here.\n` +
      `- **One run per configuration.** Counts of admitted requests are exact for the run; how much they vary from run ` +
      `to run on a noisy machine is not measured.`,
    reproduce,
  ].join("\n\n");
}

/**
 * The most requests certainly decided within one span of `spanMs`: over every span (t − spanMs, t]
 * ending at an arrival, those sent after its start that arrived by its end.
 */
function mostInSpan(requests: [sent: number, arrived: number][], spanMs: number): number {
  const byArrival = [...requests].sort((a, b) => a[1] - b[1]);
  const sent: number[] = [];
  let most = 0;
  for (const [s, t] of byArrival) {
    sent.splice(firstAbove(sent, s - 0.5), 0, s);
    most = Math.max(most, sent.length - firstAbove(sent, t - spanMs));
  }
  return most;
}

/** The index of the first value above `x` in an ascending array. */
function firstAbove(sorted: number[], x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Why a missed target was missed, from the numbers of the run. */
function missedNote(d: FastPathData): string[] {
  const notes: string[] = [];
  const missedCalls = d.configs.filter((c) => c.id.startsWith("x8") && !d.quick && (c.callsPer100 ?? 0) > TARGETS.callsPer100);
  for (const c of missedCalls) {
    const floor = modelPer1000(d, c);
    const phases = c.phases
      ? ` Of its ${count(c.calls ?? 0)} calls, ${count(c.phases.burst.calls)} came in the first fifth of the window ` +
        `(${count(c.phases.burst.sent)} requests, the burst of admissions) and ${count(c.phases.rest.calls)} in the ` +
        `rest (${count(c.phases.rest.sent)} requests, all denied).`
      : "";
    notes.push(
      `*Not met: calls, ${c.label}.* One sync per isolate per interval alone is ${floor.toFixed(1)} calls per 1,000 ` +
        `requests at ${count(c.ratePerSecond)} requests/s on ${c.isolates} isolates, against a target of ` +
        `${TARGETS.callsPer100 * 10}; the measured ${c.callsPer1000?.toFixed(1)} adds the top-ups and on-path syncs of ` +
        `the burst.${phases} The floor scales with isolates ÷ (sync interval × request rate), so the target holds only ` +
        `with fewer isolates, more traffic per isolate, or fewer calls from an isolate whose key the object reports ` +
        `denied.`,
    );
  }
  return notes;
}

/** Compares fast mode's busiest period-long span with the exact model's. */
function spanNote(d: FastPathData): string {
  const over = d.configs.filter((c) => c.mode === "fast" && c.load === 10 && c.mostInAnyPeriod > Math.max(d.limit, c.exactMostInAnyPeriod));
  if (over.length === 0) return "No 10× run put more in a span than the limit or the exact model.";
  return (
    `Fast mode put more in one span than the exact model in ${over.length} run${over.length === 1 ? "" : "s"} ` +
    `(${over.map((c) => `${c.label}: ${count(c.mostInAnyPeriod)} against ${count(c.exactMostInAnyPeriod)}, ` +
      `${ratio(c.mostInAnyPeriod / d.limit)} × limit`).join("; ")}): it admitted the next window's first units ` +
    `earlier than the exact sliding window, as the chart shows after the ${d.periodMs / 1000} s boundary.`
  );
}

/** Says which runs went over the limit, and whether the object's failures explain it. */
function overNote(d: FastPathData): string {
  const over = d.configs.filter((c) => c.load === 10 && c.admittedUpper > d.limit);
  if (over.length === 0) return "No run admitted more than the limit in its window. ";
  return (
    over
      .map(
        (c) =>
          `${c.label} admitted up to ${count(c.admittedUpper)} (+${percent(c.overAdmission)}) with ` +
          `${c.objectErrors === null ? "an unknown number of" : count(c.objectErrors)} object errors`,
      )
      .join("; ") +
    ". With no object errors an over-count can only be the boundary ambiguity above; with them, it is the local " +
    "fallback deciding while the object was unreachable or slow. "
  );
}

/** 100 ms, 1 s */
function duration(ms: number): string {
  return ms >= 1000 && ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function ratio(x: number): string {
  return x.toFixed(4);
}

function round(x: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
