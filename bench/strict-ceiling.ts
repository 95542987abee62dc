/**
 * Strict mode's ceiling in workerd: one strict global key at rising open-loop load from several
 * front isolates, in front of the real RateLimiter (SQLite) 0, 20 or 50 ms of round trip away, decided
 * through floodgate's proxy, through the library with coalescing, and through the library one call
 * per request; a front that decides nothing is the baseline of the same run.
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { build } from "esbuild";
import { startCluster, type Cluster } from "../test/harness/cluster";
import { WORKER_BUILD } from "../test/harness/worker-build";
import { openLoop, type Sample } from "./lib/open-loop";
import { ROOT, WORK } from "./lib/paths";
import type { ChartSpec, RunOptions, Section } from "./lib/section";
import { median, percent, quantile, table, times } from "./lib/stats";
import { byLabel } from "./lib/workers";

/** The fixture's rules answer by onError after this long (its `timeout`), as the proxy rules below do. */
const TIMEOUT_MS = 1_000;
/** A load step holds while fewer of its requests than this are answered by onError or not at all, and its p99 is within the timeout. */
const MAX_FAILED = 0.01;
/** The coalescer's largest batch (src/strict/coalescer.ts): with one call in flight per key and isolate, the ceiling batching alone allows is isolates × this per round trip. */
const MAX_BATCH = 128;

interface Sizes {
  isolates: number;
  repeats: number;
  stepSeconds: number;
  loads: number[];
  roundTrips: number[];
  /** the round trips the proxy is measured at (the library's variants run at every one) */
  proxyAt: number[];
  variants: Variant[];
}

type Variant = "baseline" | "proxy" | "batched" | "one-by-one";

const LABEL: Record<Variant, string> = {
  baseline: "baseline: no decision",
  proxy: "proxy (coalesced)",
  batched: "library, coalesced",
  "one-by-one": "library, one call each",
};

// Lower loads hold on every variant (a quick run's ladders from 150/s held up to 700/s at least); the top is past the baseline's ceiling.
const LOADS = [300, 600, 1_000, 1_500, 2_000, 2_600, 3_400, 4_400];
const FULL: Sizes = { isolates: 4, repeats: 3, stepSeconds: 0.8, loads: LOADS, roundTrips: [0, 20, 50], proxyAt: [0, 50], variants: ["baseline", "proxy", "batched", "one-by-one"] };
const QUICK: Sizes = { ...FULL, repeats: 1, stepSeconds: 0.5 };
const TINY: Sizes = { isolates: 2, repeats: 1, stepSeconds: 0.3, loads: [50, 100], roundTrips: [0], proxyAt: [], variants: ["baseline", "batched"] };

/** One load step of one ladder. */
export interface Step {
  variant: Variant;
  roundTripMs: number;
  repeat: number;
  /** requests per second sent */
  offered: number;
  sent: number;
  /** decisions the object made (admissions), per second of the step */
  served: number;
  /** answered by the rule's onError (a timeout, or the key's breaker open) */
  onErrorShare: number;
  /** no answer within the rule's timeout + 4 s, or a status that is neither an admission nor onError */
  lostShare: number;
  p50Ms: number;
  p99Ms: number;
  /** decide calls to the object per decision it made; null for the baseline */
  callsPerDecision: number | null;
  holds: boolean;
}

export interface Ceiling {
  variant: Variant;
  roundTripMs: number;
  /** medians over repeats: the highest offered load whose step held (and all below it); `capped` when the ladder's top held */
  ceiling: number;
  capped: boolean;
  /** median over repeats of ceiling ÷ that repeat's baseline ceiling */
  vsBaseline: number;
  /** median over repeats of the decide calls per decision at the ceiling's step */
  callsPerDecision: number | null;
  p99AtCeilingMs: number;
}

export interface StrictCeilingData {
  sizes: Sizes;
  steps: Step[];
  ceilings: Ceiling[];
  /** per round trip: median over repeats of (coalesced ceiling ÷ one-call-each ceiling), both through the library */
  coalescingGain: { roundTripMs: number; gain: number }[];
}

export async function run(options: RunOptions): Promise<Section> {
  const sizes = options.tiny ? TINY : options.quick ? QUICK : FULL;
  const data = await measure(sizes, options.log);
  return { id: "strict-ceiling", title: "Strict ceiling in workerd", markdown: report(data), charts: charts(data), data, headline: headline(data) };
}

async function measure(sizes: Sizes, log: (line: string) => void): Promise<StrictCeilingData> {
  const rules = proxyRules(sizes);
  const front = await bundle();
  const steps: Step[] = [];
  for (let repeat = 0; repeat < sizes.repeats; repeat++) {
    for (const [at, roundTripMs] of sizes.roundTrips.entries()) {
      // The round trip is fixed when a cluster starts, and one starts in about half a second: a cluster per round trip.
      const cluster = await startCluster({ isolates: sizes.isolates, rules, originUrl: "demo", bundle: front, objectDelayMs: roundTripMs });
      try {
        if (at === 0 && sizes.variants.includes("baseline")) steps.push(...(await ladder(cluster, sizes, "baseline", 0, repeat, log)));
        // Rotated each repeat, so that the machine's drift does not always favour the same variant.
        const variants = sizes.variants.filter((v) => v !== "baseline" && (v !== "proxy" || sizes.proxyAt.includes(roundTripMs)));
        const order = variants.map((_, i) => variants[(i + repeat) % variants.length]!);
        for (const variant of order) steps.push(...(await ladder(cluster, sizes, variant, roundTripMs, repeat, log)));
      } finally {
        await cluster.dispose();
      }
    }
  }
  const ceilings = summarize(steps, sizes);
  const coalescingGain = sizes.roundTrips.map((roundTripMs) => {
    const ratios = Array.from({ length: sizes.repeats }, (_, repeat) => ceilingOf(steps, "batched", roundTripMs, repeat).load / ceilingOf(steps, "one-by-one", roundTripMs, repeat).load);
    return { roundTripMs, gain: median(ratios.filter((r) => !Number.isNaN(r))) };
  });
  return { sizes, steps, ceilings, coalescingGain };
}

/** The fronts' Worker (test/fixtures/strict-ceiling.ts): floodgate, with the library's variants and the baseline beside the proxy. */
async function bundle(): Promise<{ path: string; hash: string }> {
  const dir = join(WORK, "strict-ceiling");
  await mkdir(dir, { recursive: true });
  const path = join(dir, "worker.mjs");
  await build({ ...WORKER_BUILD, entryPoints: [join(ROOT, "test/fixtures/strict-ceiling.ts")], outfile: path });
  return { path, hash: "strict-ceiling" };
}

/** One fresh rule per proxy ladder, so that no ladder starts with a breaker or an object another left. */
function proxyRules(sizes: Sizes) {
  return ladderNames(sizes).map((name) => ({ name, match: { path: `/proxy/${name}` }, key: "global", limit: 1_000_000_000, period: "1m", onError: "deny", timeout: `${TIMEOUT_MS}ms` }));
}

function ladderNames(sizes: Sizes): string[] {
  return Array.from({ length: sizes.repeats }, (_, repeat) => sizes.proxyAt.map((rtt) => ruleName("proxy", rtt, repeat))).flat();
}

function ruleName(variant: Variant, roundTripMs: number, repeat: number): string {
  return `${variant}-${roundTripMs}ms-${repeat}`;
}

/** What a variant's requests ask, and which status says onError answered them (the proxy's onError deny is a 429; the fixture's, a 503). */
function target(variant: Variant, roundTripMs: number, repeat: number): { path: string; onErrorStatus: number } {
  const name = ruleName(variant, roundTripMs, repeat);
  switch (variant) {
    case "baseline":
      return { path: "/__bench/nothing", onErrorStatus: -1 };
    case "proxy":
      return { path: `/proxy/${name}`, onErrorStatus: 429 };
    case "batched":
      return { path: `/__bench/batched?rule=${name}`, onErrorStatus: 503 };
    case "one-by-one":
      return { path: `/__bench/one-by-one?rule=${name}`, onErrorStatus: 503 };
  }
}

/** Rising loads until one step does not hold; that step is kept, as what lies past the ceiling. */
async function ladder(cluster: Cluster, sizes: Sizes, variant: Variant, roundTripMs: number, repeat: number, log: (line: string) => void): Promise<Step[]> {
  const { path, onErrorStatus } = target(variant, roundTripMs, repeat);
  const targets = cluster.fronts.map((f) => f.url);
  // The key's object, every front's parsed rule and its first call are made before anything is timed.
  await openLoop({ targets, path, rate: 40 * sizes.isolates, seconds: 0.25, giveUpMs: TIMEOUT_MS + 4_000 });
  const steps: Step[] = [];
  for (const offered of sizes.loads) {
    const before = await decideCalls(cluster);
    const samples = await openLoop({ targets, path, rate: offered, seconds: sizes.stepSeconds, giveUpMs: TIMEOUT_MS + 4_000 });
    const calls = (await decideCalls(cluster)) - before;
    const step = stepOf(samples, { variant, roundTripMs, repeat, offered, onErrorStatus, calls, seconds: sizes.stepSeconds });
    steps.push(step);
    log(`${LABEL[variant]}, ${roundTripMs} ms, repeat ${repeat + 1}: ${offered}/s → ${Math.round(step.served)}/s served, onError ${percent(step.onErrorShare)}, lost ${percent(step.lostShare)}, p99 ${step.p99Ms.toFixed(0)} ms`);
    if (step.holds) continue;
    if (step.onErrorShare > 0) log(`why onError answered: ${whyOnError(cluster).join("; ")}`);
    break;
  }
  return steps;
}

/** The distinct reasons floodgate logged for its latest onError answers (its log keeps a few lines a second). */
function whyOnError(cluster: Cluster): string[] {
  const reasons = cluster.logs().flatMap((line) => /message: '([^']*)'|"message":"([^"]*)"/.exec(line)?.slice(1).filter(Boolean) ?? []);
  return [...new Set(reasons.slice(-50).map((r) => r!.replace(/\d+/g, "N")))];
}

async function decideCalls(cluster: Cluster): Promise<number> {
  const texts = await Promise.all(cluster.fronts.map((_, i) => cluster.metrics(i)));
  return texts.reduce((sum, text) => sum + (byLabel(text, "floodgate_durable_object_calls_total", "method").decide ?? 0), 0);
}

function stepOf(samples: Sample[], at: Omit<Step, "sent" | "served" | "onErrorShare" | "lostShare" | "p50Ms" | "p99Ms" | "callsPerDecision" | "holds"> & { onErrorStatus: number; calls: number; seconds: number }): Step {
  const { onErrorStatus, calls, seconds, ...where } = at;
  const admitted = samples.filter((s) => s.status === 200).length;
  const onError = samples.filter((s) => s.status === onErrorStatus).length;
  const lost = samples.length - admitted - onError;
  const latencies = samples.map((s) => s.latencyMs);
  const p99Ms = quantile(latencies, 0.99);
  const onErrorShare = onError / samples.length;
  const lostShare = lost / samples.length;
  return {
    ...where,
    sent: samples.length,
    served: admitted / seconds,
    onErrorShare,
    lostShare,
    p50Ms: quantile(latencies, 0.5),
    p99Ms,
    callsPerDecision: where.variant === "baseline" ? null : calls / Math.max(1, admitted),
    // A queue building up before floodgate's code runs (in workerd, on a saturated core) is past any timeout's reach: the p99 catches it.
    holds: onErrorShare + lostShare < MAX_FAILED && p99Ms < TIMEOUT_MS,
  };
}

/** A ladder's ceiling: the last load that held, and its step; load 0 when none did. */
function ceilingOf(steps: Step[], variant: Variant, roundTripMs: number, repeat: number): { load: number; step?: Step; capped: boolean } {
  const mine = steps.filter((s) => s.variant === variant && s.roundTripMs === roundTripMs && s.repeat === repeat);
  const held = mine.filter((s) => s.holds);
  const step = held.at(-1);
  return { load: step?.offered ?? 0, step, capped: mine.length > 0 && mine.every((s) => s.holds) };
}

function summarize(steps: Step[], sizes: Sizes): Ceiling[] {
  const out: Ceiling[] = [];
  const repeats = Array.from({ length: sizes.repeats }, (_, i) => i);
  for (const variant of sizes.variants) {
    for (const roundTripMs of variant === "baseline" ? [0] : variant === "proxy" ? sizes.proxyAt : sizes.roundTrips) {
      const each = repeats.map((repeat) => ({ ...ceilingOf(steps, variant, roundTripMs, repeat), baseline: ceilingOf(steps, "baseline", 0, repeat).load }));
      out.push({
        variant,
        roundTripMs,
        ceiling: median(each.map((c) => c.load)),
        capped: each.some((c) => c.capped),
        vsBaseline: median(each.map((c) => c.load / c.baseline)),
        callsPerDecision: variant === "baseline" ? null : median(each.flatMap((c) => (c.step?.callsPerDecision ?? null) ?? [])),
        p99AtCeilingMs: median(each.flatMap((c) => c.step?.p99Ms ?? [])),
      });
    }
  }
  return out;
}

const ms = (x: number) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x.toFixed(1)) : "—");

function ceilingText(c: Ceiling, lowest: number): string {
  if (c.ceiling === 0) return `< ${lowest.toLocaleString("en-US")}/s`;
  return `${c.capped ? "≥ " : ""}${c.ceiling.toLocaleString("en-US")}/s`;
}

function report(data: StrictCeilingData): string {
  const { sizes } = data;
  const rows = data.ceilings.map((c) => [
    LABEL[c.variant],
    c.variant === "baseline" ? "—" : `${c.roundTripMs} ms`,
    ceilingText(c, sizes.loads[0]!),
    times(c.vsBaseline),
    c.callsPerDecision === null ? "—" : c.callsPerDecision.toFixed(3),
    ms(c.p99AtCeilingMs),
    c.variant === "baseline" || c.variant === "one-by-one" ? "—" : c.roundTripMs === 0 ? "none" : `${((sizes.isolates * MAX_BATCH * 1000) / c.roundTripMs).toLocaleString("en-US")}/s`,
  ]);
  const perLoad = data.steps
    .filter((s) => s.variant !== "baseline")
    .map((s) => [`${s.roundTripMs} ms`, LABEL[s.variant], String(s.repeat + 1), s.offered.toLocaleString("en-US"), Math.round(s.served).toLocaleString("en-US"), `${ms(s.p50Ms)} / ${ms(s.p99Ms)}`, percent(s.onErrorShare), percent(s.lostShare), s.callsPerDecision === null ? "—" : s.callsPerDecision.toFixed(3)]);
  const gains = data.coalescingGain.map((g) => `${g.roundTripMs} ms: ${times(g.gain)}`).join("; ");
  return [
    `One strict key (\`key: "global"\`, a limit nothing reaches, \`onError: "deny"\`, \`timeout: "${TIMEOUT_MS}ms"\`) at rising open-loop load: requests sent at a fixed rate whatever the answers, round-robin over ${sizes.isolates} front isolates (one workerd, test/harness/cluster.ts), each timed from when it was due. The object is the real RateLimiter with SQLite, ${sizes.roundTrips.join(", ")} ms of round trip away: every call waits half of it on the way in and half on the way out (test/fixtures/distant-limiter.ts; a cluster per round trip). Each load runs ${sizes.stepSeconds} s; a ladder climbs ${sizes.loads.join(", ")} requests/s and stops after the first step that does not hold: ${percent(MAX_FAILED)} or more answered by onError or not at all, or a p99 past the timeout (a queue in workerd before floodgate's code runs, on a saturated core, is out of any timeout's reach). The **ceiling** is the highest load that held; medians over ${sizes.repeats} repeat${sizes.repeats === 1 ? "" : "s"}, each with fresh rules (no breaker or object carried over), variants rotated each repeat.`,
    "",
    `Variants: **${LABEL.proxy}**, floodgate's Worker as deployed (rule matching, headers, the built-in demo origin), at ${sizes.proxyAt.join(" and ")} ms; **${LABEL.batched}** and **${LABEL["one-by-one"]}**, the same decision (\`limiter(…).limit(key)\`, which decides as the proxy does) with the request's \`ctx\`, so concurrent requests share a batched call, and without it, so each request makes its own call: coalescing cannot be turned off otherwise. The **baseline** is the same fronts answering 200 with no decision: the most this machine (2 shared cores: generator, fronts and object alike) serves at all.`,
    "",
    table(["variant", "round trip", "ceiling", "÷ baseline", "object calls per decision at it", "p99 at it, ms", "batching's own bound"], rows, ["l", "r", "r", "r", "r", "r", "r"]),
    "",
    `What coalescing buys (ceiling with ÷ without, through the library, median over repeats): ${gains}. "Batching's own bound" is isolates × ${MAX_BATCH} (the largest batch) per round trip: one call in flight per key and isolate, so below it the machine, not the design, sets the ceiling.`,
    "",
    "![Strict ceilings](charts/strict-ceiling.svg)",
    "",
    "### Every step",
    "",
    "Served: admissions per second of the step. Latency from when each request was due. onError: answered by the rule's onError (its timeout passed, or its key's breaker was open); lost: no answer, or another status.",
    "",
    table(["round trip", "variant", "repeat", "offered/s", "served/s", "p50 / p99 ms", "onError", "lost", "calls per decision"], perLoad, ["r", "l", "r", "r", "r", "r", "r", "r", "r"]),
  ].join("\n");
}

function charts(data: StrictCeilingData): ChartSpec[] {
  const variants = data.sizes.variants.filter((v) => v !== "baseline");
  const baseline = data.ceilings.find((c) => c.variant === "baseline");
  return [
    {
      file: "strict-ceiling",
      title: "One strict key's ceiling in workerd (< 1 % onError)",
      kind: "bar",
      xLabel: "round trip to the object",
      yLabel: "requests/s",
      categories: data.sizes.roundTrips.map((r) => `${r} ms`),
      series: [
        ...variants.map((variant) => ({ name: LABEL[variant], points: data.sizes.roundTrips.map((r, i): [number, number] => [i, data.ceilings.find((c) => c.variant === variant && c.roundTripMs === r)?.ceiling ?? NaN]) })),
        ...(baseline ? [{ name: LABEL.baseline, points: data.sizes.roundTrips.map((_, i): [number, number] => [i, baseline.ceiling]) }] : []),
      ],
    },
  ];
}

function headline(data: StrictCeilingData): string {
  const proxy = data.ceilings.filter((c) => c.variant === "proxy");
  const gains = data.coalescingGain.map((g) => `${times(g.gain)} at ${g.roundTripMs} ms`).join(", ");
  return `In workerd one strict key sustains ${proxy.map((c) => `${ceilingText(c, data.sizes.loads[0]!)} at ${c.roundTripMs} ms`).join(", ")} through the proxy; coalescing buys ${gains}.`;
}
