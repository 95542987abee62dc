/**
 * End to end through workerd: HTTP load on loopback against a bare pass-through Worker, floodgate
 * strict, floodgate fast, a Worker using Cloudflare's rate-limiting binding, and the classic design
 * (a Node proxy asking Redis), all in front of one separate origin process. Reported as ratios to
 * the bare Worker, measured in interleaved rounds so the machine's noise hits every variant alike.
 */
import { cpus, loadavg } from "node:os";
import { startNodeProxy, startRedis, type NodeProxy, type Redis } from "./redis";
import { autocannon, pickGenerator, touchEveryAddress, wrk, type LoadGenerator, type LoadResult } from "./lib/load";
import { startOrigin, type Origin } from "./lib/origin";
import { cpuSeconds, hasCommand } from "./lib/processes";
import type { ChartSpec, RunOptions, Section, Verdict } from "./lib/section";
import { median, table } from "./lib/stats";
import { byLabel, minus, startWorker, type RunningWorker } from "./lib/workers";

/** High enough that nothing is ever denied: the bench measures the cost of deciding, not of denying. */
const LIMIT = 1_000_000_000;
export const PATH = "/api/items/42?view=full";

/** The one rule floodgate's variants run: per client address, never reached. */
export const rule = (mode: "strict" | "fast") => ({ name: "per-ip", match: { path: "/api/*" }, key: "ip", limit: LIMIT, period: "1m", mode });

interface Sizes {
  rounds: number;
  /** saturated runs: seconds each, and connections */
  seconds: number;
  connections: number;
  /** light-load runs (one connection, back to back): seconds each; 0 skips them */
  lightSeconds: number;
  warmupSeconds: number;
  /** distinct client addresses in the per-IP traffic */
  ips: number;
  /** compare wrk and autocannon against the bare Worker first */
  calibrate: boolean;
  /** a bare-Worker run before every this many other runs (and one at the end), the baseline for those between */
  bracket: number;
}

// Five short rounds rather than three long ones, and a bare run every three variants: the machine's
// speed drifts within minutes, so baselines close in time and a median of five steady the ratios.
const FULL: Sizes = { rounds: 5, seconds: 4, connections: 32, lightSeconds: 1, warmupSeconds: 1, ips: 1000, calibrate: true, bracket: 3 };
const QUICK: Sizes = { rounds: 1, seconds: 3, connections: 32, lightSeconds: 1, warmupSeconds: 1, ips: 1000, calibrate: false, bracket: 5 };
const TINY: Sizes = { rounds: 1, seconds: 1, connections: 8, lightSeconds: 0, warmupSeconds: 0, ips: 100, calibrate: false, bracket: 5 };

type TargetId = "bare" | "strict" | "fast" | "cf" | "node" | "redis";
type Traffic = "ips" | "hot";

interface Variant {
  id: string;
  target: TargetId;
  traffic: Traffic;
  label: string;
}

/** Targets that keep per-key state, which a run's own warm-up brings to its steady state. */
const STATEFUL = new Set<TargetId>(["strict", "fast", "cf", "redis"]);

const VARIANTS: Variant[] = [
  { id: "bare", target: "bare", traffic: "ips", label: "bare Worker" },
  { id: "strict-ips", target: "strict", traffic: "ips", label: "floodgate strict" },
  { id: "strict-hot", target: "strict", traffic: "hot", label: "floodgate strict" },
  { id: "fast-ips", target: "fast", traffic: "ips", label: "floodgate fast" },
  { id: "fast-hot", target: "fast", traffic: "hot", label: "floodgate fast" },
  { id: "cf-ips", target: "cf", traffic: "ips", label: "CF rate-limit binding" },
  { id: "cf-hot", target: "cf", traffic: "hot", label: "CF rate-limit binding" },
  { id: "node-bare", target: "node", traffic: "ips", label: "Node proxy, no limiter" },
  { id: "redis-ips", target: "redis", traffic: "ips", label: "Node proxy + Redis" },
  { id: "redis-hot", target: "redis", traffic: "hot", label: "Node proxy + Redis" },
];

interface Target {
  url: string;
  /** server-side processes whose CPU the variant is charged: workerd, or the proxy and Redis */
  pids: number[];
  metrics?: () => Promise<string>;
}

type Phase = "saturated" | "light";

/** One measured run. */
export interface Run extends LoadResult {
  variant: string;
  round: number;
  /** position in the schedule: what ran before and after it */
  slot: number;
  phase: Phase;
  /** server-side CPU per completed request, µs (workerd; or proxy + Redis) */
  serverCpuUsPerRequest: number;
  /** floodgate only: requests over which the counters below were read (the run, and its warm-up if it had one) */
  countedRequests?: number;
  /** floodgate only: counter deltas over the run and its warm-up */
  durableObjectCalls?: Record<string, number>;
  localDecisions?: number;
  decisions?: Record<string, number>;
  /** floodgate_errors_total deltas by kind */
  floodgateErrors?: Record<string, number>;
}

/** Counters summed over a variant's measured runs and their warm-ups, for the cost part. */
export interface Counted {
  requests: number;
  durableObjectCalls: Record<string, number>;
  localDecisions: number;
  decisions: Record<string, number>;
}

export interface Summary {
  variant: string;
  phase: Phase;
  runs: number;
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  /** medians over runs of (this run ÷ the mean of the bare-Worker runs just before and after it), same phase */
  rpsRatio: number;
  p50Ratio: number;
  p90Ratio: number;
  p99Ratio: number;
  serverCpuUsPerRequest: number;
  non2xx: number;
  errors: number;
}

export interface EndToEndData {
  sizes: Sizes;
  generator: string;
  generatorNote: string;
  calibration: { generator: string; rps: number; cpuS: number; cpuUsPerRequest: number }[];
  redis: { available: boolean; note: string; version?: string };
  fastImplemented: boolean;
  /** where the Durable Objects' SQLite lived */
  doStorage: "tmpfs" | "default" | "none";
  machine: { loadBefore: number[]; loadAfter: number[]; cpus: number };
  runs: Run[];
  summary: Summary[];
  counters: Record<string, Counted>;
  failures: string[];
}

/** The bench part: see the module comment. `tiny` (smoke tests) measures the bare Worker and strict only, briefly. */
export async function run(options: RunOptions): Promise<Section> {
  const sizes = options.tiny ? TINY : options.quick ? QUICK : FULL;
  const only = options.tiny ? ["bare", "strict-ips"] : undefined;
  const data = await measure(sizes, options, only);
  return { id: "end-to-end", title: "End to end through workerd", markdown: report(data), charts: charts(data), data, verdicts: verdicts(data), headline: headline(data) };
}

/**
 * A short run of the bare Worker and floodgate strict and fast only, for the cost part when the
 * end-to-end part's counters are not at hand.
 */
export function measureForCost(options: RunOptions): Promise<EndToEndData> {
  const sizes: Sizes = { ...QUICK, lightSeconds: 0, seconds: options.tiny ? 1 : 3, bracket: 4 };
  return measure(sizes, options, ["bare", "strict-ips", "strict-hot", "fast-ips", "fast-hot"]);
}

async function measure(sizes: Sizes, options: RunOptions, only?: string[]): Promise<EndToEndData> {
  const { log } = options;
  const failures: string[] = [];
  const failure = (text: string) => {
    failures.push(text);
    log(`problem: ${text}`);
  };
  const loadBefore = loadavg();
  const picked = options.tiny
    ? { generator: hasCommand("wrk") ? wrk() : autocannon(), note: hasCommand("wrk") ? "wrk found on the PATH" : "smoke test: wrk not installed, so autocannon" }
    : await pickGenerator(log);
  const generator = picked.generator;
  log(`load generator: ${generator.name} (${picked.note})`);

  const stops: (() => Promise<void>)[] = [];
  const targets = new Map<TargetId, Target>();
  let redisInfo: EndToEndData["redis"] = { available: false, note: "not started" };
  let doStorage: EndToEndData["doStorage"] = "none";
  let origin: Origin | undefined;
  try {
    origin = await startOrigin();
    stops.push(origin.stop);
    log(`origin on ${origin.url}`);
    const wanted = only ? VARIANTS.filter((v) => only.includes(v.id)) : VARIANTS;
    const needed = new Set(wanted.map((v) => v.target));

    // Workers one at a time, so each workerd's pid can be told apart.
    const workers: [TargetId, () => Promise<RunningWorker>][] = [
      ["bare", () => startWorker("bare", { originUrl: origin!.url })],
      ["strict", () => startWorker("floodgate", { originUrl: origin!.url, rules: [rule("strict")] })],
      ["fast", () => startWorker("floodgate", { originUrl: origin!.url, rules: [rule("fast")] })],
      ["cf", () => startWorker("cf-ratelimit", { originUrl: origin!.url, limit: LIMIT })],
    ];
    for (const [id, start] of workers) {
      if (!needed.has(id)) continue;
      try {
        const worker = await start();
        stops.push(worker.dispose);
        if (worker.kind === "floodgate") doStorage = worker.storage;
        targets.set(id, { url: worker.url, pids: worker.pid ? [worker.pid] : [], metrics: worker.kind === "floodgate" ? worker.metrics : undefined });
        log(`${id} Worker on ${worker.url} (workerd pid ${worker.pid ?? "unknown"})`);
      } catch (error) {
        failure(`${id} Worker did not start: ${message(error)}`);
      }
    }
    if (needed.has("node")) {
      try {
        const proxy: NodeProxy = await startNodeProxy({ origin: origin.url, mode: "bare", limit: LIMIT, periodS: 60 });
        stops.push(proxy.stop);
        targets.set("node", { url: proxy.url, pids: [proxy.pid] });
      } catch (error) {
        failure(`bare Node proxy did not start: ${message(error)}`);
      }
    }
    if (needed.has("redis")) {
      try {
        const redis: Redis = await startRedis(log);
        stops.push(redis.stop);
        const proxy = await startNodeProxy({ origin: origin.url, mode: "redis", redisPort: redis.port, limit: LIMIT, periodS: 60 });
        stops.push(proxy.stop);
        targets.set("redis", { url: proxy.url, pids: [proxy.pid, redis.pid] });
        redisInfo = { available: true, note: `redis-server ${redis.version}, no persistence`, version: redis.version };
      } catch (error) {
        redisInfo = { available: false, note: message(error) };
        failure(`the Redis variant could not run: ${message(error)}`);
      }
    }

    const variants = wanted.filter((v) => targets.has(v.target));
    const ipsFor = (v: Variant) => (v.traffic === "hot" ? 1 : sizes.ips);
    const calibration = sizes.calibrate && targets.has("bare") ? await calibrate(targets.get("bare")!.url, sizes, log) : [];

    if (sizes.warmupSeconds > 0) {
      // Stateful variants warm up before each of their runs instead.
      for (const v of variants.filter((v) => !STATEFUL.has(v.target))) {
        await generator
          .run({ url: targets.get(v.target)!.url, path: PATH, connections: sizes.connections, seconds: sizes.warmupSeconds, ips: ipsFor(v) })
          .catch((error: unknown) => failure(`${v.id} warm-up: ${message(error)}`));
      }
    }

    const runs: Run[] = [];
    const phases: [Phase, number, number][] = [["saturated", sizes.seconds, sizes.connections]];
    if (sizes.lightSeconds > 0) phases.push(["light", sizes.lightSeconds, 1]);
    const plan = schedule(variants, sizes);
    for (const [slot, { variant: v, round }] of plan.entries()) {
      const target = targets.get(v.target)!;
      for (const [phase, seconds, connections] of phases) {
        try {
          const warmup = phase === "saturated" && STATEFUL.has(v.target) ? sizes.warmupSeconds : 0;
          const measured = await measureOne(generator, target, { url: target.url, path: PATH, connections, seconds, ips: ipsFor(v) }, warmup);
          runs.push({ variant: v.id, round, slot, phase, ...measured });
          log(
            `${slot + 1}/${plan.length} ${phase} ${v.id}: ${Math.round(measured.rps)} req/s, p50 ${measured.p50Ms.toFixed(2)} ms, p99 ${measured.p99Ms.toFixed(2)} ms, ` +
              `${Math.round(measured.serverCpuUsPerRequest)} µs CPU/req${measured.non2xx + measured.errors ? `, ${measured.non2xx} non-2xx, ${measured.errors} errors` : ""}`,
          );
        } catch (error) {
          failure(`${v.id} (${phase}, slot ${slot + 1}): ${message(error)}`);
        }
      }
    }

    const counters = count(runs);
    const fastRuns = runs.filter((r) => r.variant.startsWith("fast-"));
    const fastImplemented = fastRuns.some((r) => (r.localDecisions ?? 0) > 0);
    return {
      sizes,
      generator: generator.name,
      generatorNote: picked.note,
      calibration,
      redis: redisInfo,
      fastImplemented,
      doStorage,
      machine: { loadBefore, loadAfter: loadavg(), cpus: cpus().length },
      runs,
      summary: summarize(runs, variants),
      counters,
      failures,
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

/**
 * One measured run. With `warmupSeconds`, every client address first sends one request and then the
 * same traffic runs that long, unmeasured, so the run sees the steady state (every key known, leases
 * held, objects in memory); floodgate's counters are read across all of it, so the calls a key makes
 * after a quiet spell still count toward its cost.
 */
async function measureOne(
  generator: LoadGenerator,
  target: Target,
  load: Parameters<LoadGenerator["run"]>[0],
  warmupSeconds = 0,
): Promise<Omit<Run, "variant" | "round" | "slot" | "phase">> {
  const metricsBefore = target.metrics ? await target.metrics() : "";
  const touchAll = warmupSeconds > 0 && load.ips > 1;
  if (touchAll) await touchEveryAddress(load);
  const warmup = warmupSeconds > 0 ? await generator.run({ ...load, seconds: warmupSeconds }) : undefined;
  const cpuBefore = target.pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const result = await generator.run(load);
  const cpuAfter = target.pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const out: Omit<Run, "variant" | "round" | "slot" | "phase"> = {
    ...result,
    serverCpuUsPerRequest: target.pids.length && result.requests ? ((cpuAfter - cpuBefore) * 1e6) / result.requests : NaN,
  };
  if (target.metrics) {
    const metricsAfter = await target.metrics();
    out.countedRequests = result.requests + (touchAll ? load.ips : 0) + (warmup?.requests ?? 0);
    out.durableObjectCalls = minus(byLabel(metricsAfter, "floodgate_durable_object_calls_total", "method"), byLabel(metricsBefore, "floodgate_durable_object_calls_total", "method"));
    const local = minus(byLabel(metricsAfter, "floodgate_local_decisions_total", "rule"), byLabel(metricsBefore, "floodgate_local_decisions_total", "rule"));
    out.localDecisions = Object.values(local).reduce((a, b) => a + b, 0);
    out.decisions = minus(byLabel(metricsAfter, "floodgate_decisions_total", "decision"), byLabel(metricsBefore, "floodgate_decisions_total", "decision"));
    out.floodgateErrors = minus(byLabel(metricsAfter, "floodgate_errors_total", "kind"), byLabel(metricsBefore, "floodgate_errors_total", "kind"));
  }
  return out;
}

/** wrk against autocannon on the bare Worker: which one leaves more of the two cores to the servers. */
async function calibrate(url: string, sizes: Sizes, log: (line: string) => void): Promise<EndToEndData["calibration"]> {
  const out: EndToEndData["calibration"] = [];
  const generators = [...(hasCommand("wrk") ? [wrk()] : []), autocannon()];
  for (const generator of generators) {
    try {
      const result = await generator.run({ url, path: PATH, connections: sizes.connections, seconds: 3, ips: sizes.ips });
      out.push({ generator: generator.name, rps: result.rps, cpuS: result.generatorCpuS, cpuUsPerRequest: (result.generatorCpuS * 1e6) / result.requests });
      log(`calibration ${generator.name}: ${Math.round(result.rps)} req/s, ${((result.generatorCpuS * 1e6) / result.requests).toFixed(1)} µs generator CPU/req`);
    } catch (error) {
      log(`calibration ${generator.name} failed: ${message(error)}`);
    }
  }
  return out;
}

function count(runs: Run[]): Record<string, Counted> {
  const out: Record<string, Counted> = {};
  for (const r of runs) {
    if (!r.durableObjectCalls) continue;
    const c = (out[r.variant] ??= { requests: 0, durableObjectCalls: {}, localDecisions: 0, decisions: {} });
    c.requests += r.countedRequests ?? r.requests;
    c.localDecisions += r.localDecisions ?? 0;
    for (const [k, v] of Object.entries(r.durableObjectCalls)) c.durableObjectCalls[k] = (c.durableObjectCalls[k] ?? 0) + v;
    for (const [k, v] of Object.entries(r.decisions ?? {})) c.decisions[k] = (c.decisions[k] ?? 0) + v;
  }
  return out;
}

/**
 * The order of the runs: every round runs each variant once, starting one group further along each
 * time, with a bare-Worker run before each group of `bracket` variants and one at the very end, so
 * every run sits between two baselines measured moments apart.
 */
function schedule(variants: Variant[], sizes: Sizes): { variant: Variant; round: number }[] {
  const bare = variants.find((v) => v.id === "bare");
  const others = variants.filter((v) => v !== bare);
  const out: { variant: Variant; round: number }[] = [];
  for (let round = 0; round < sizes.rounds; round++) {
    const shift = others.length ? (round * sizes.bracket) % others.length : 0;
    const order = others.map((_, i) => others[(i + shift) % others.length]!);
    order.forEach((variant, i) => {
      if (bare && i % sizes.bracket === 0) out.push({ variant: bare, round });
      out.push({ variant, round });
    });
    if (!others.length && bare) out.push({ variant: bare, round });
  }
  if (bare && others.length) out.push({ variant: bare, round: sizes.rounds - 1 });
  return out;
}

function summarize(runs: Run[], variants: Variant[]): Summary[] {
  const out: Summary[] = [];
  for (const phase of ["saturated", "light"] as const) {
    const bare = runs.filter((r) => r.variant === "bare" && r.phase === phase);
    /** the baseline for a run: the mean of the bare runs just before and just after it */
    const baseline = (r: Run, pick: (r: Run) => number): number => {
      const before = bare.filter((b) => b.slot < r.slot).at(-1);
      const after = bare.find((b) => b.slot > r.slot);
      const near = [before, after].filter((b): b is Run => b !== undefined).map(pick);
      return near.length ? near.reduce((a, b) => a + b, 0) / near.length : NaN;
    };
    for (const v of variants) {
      const mine = runs.filter((r) => r.variant === v.id && r.phase === phase);
      if (!mine.length) continue;
      const ratio = (pick: (r: Run) => number) => (v.id === "bare" ? 1 : median(mine.map((r) => pick(r) / baseline(r, pick))));
      out.push({
        variant: v.id,
        phase,
        runs: mine.length,
        rps: median(mine.map((r) => r.rps)),
        p50Ms: median(mine.map((r) => r.p50Ms)),
        p90Ms: median(mine.map((r) => r.p90Ms)),
        p99Ms: median(mine.map((r) => r.p99Ms)),
        rpsRatio: ratio((r) => r.rps),
        p50Ratio: ratio((r) => r.p50Ms),
        p90Ratio: ratio((r) => r.p90Ms),
        p99Ratio: ratio((r) => r.p99Ms),
        serverCpuUsPerRequest: median(mine.map((r) => r.serverCpuUsPerRequest)),
        non2xx: mine.reduce((a, r) => a + r.non2xx, 0),
        errors: mine.reduce((a, r) => a + r.errors, 0),
      });
    }
  }
  return out;
}

const TRAFFIC: Record<Traffic, string> = { ips: "1,000 IPs", hot: "1 hot key" };

function variantOf(id: string): Variant {
  return VARIANTS.find((v) => v.id === id)!;
}

function report(d: EndToEndData): string {
  const s = d.sizes;
  const get = (variant: string, phase: Phase) => summaryOf(d, variant, phase);
  const lines: string[] = [];
  const storage =
    d.doStorage === "tmpfs"
      ? "their SQLite files on tmpfs: Miniflare's default, a temporary directory on disk, makes every write wait for the disk (about ten times the CPU per strict decision with 1,000 keys on this machine), which production objects do not do"
      : "their SQLite files in Miniflare's default temporary directory (there is no tmpfs here, so every write pays for the disk, which production objects do not)";
  lines.push(
    "**Method.**",
    "",
    `- Origin: one small Node HTTP server in its own process, answering a small JSON body; every variant forwards to it.`,
    `- Workers: each in its own workerd through Miniflare (a direct loopback socket, the deploy's compatibility date), one isolate each; floodgate's Durable Objects run in the same workerd, ${storage}.`,
    `- Load: **${d.generator}**, closed loop: ${s.connections} keep-alive connections for ${s.seconds} s ("saturated")${s.lightSeconds ? `, then one connection for ${s.lightSeconds} s ("light": latency without queueing)` : " (no light-load runs at this size)"}. ` +
      `Traffic: \`GET ${PATH}\` with \`CF-Connecting-IP\` cycling through ${s.ips.toLocaleString("en-US")} addresses, or one address (the hot key).`,
    `- Rule: \`${JSON.stringify(rule("strict"))}\`, and the same with \`"mode": "fast"\`: a limit nothing reaches, so every request is admitted and forwarded. This measures the cost of deciding, not of denying.`,
    `- Repeats: ${s.rounds} round${s.rounds > 1 ? "s" : ""}, each variant once per round in a rotating order (the stateless ones after a ${s.warmupSeconds} s warm-up at the start, the others warmed before every run: see below), with a bare-Worker run before every ${s.bracket} variants and one at the end. ` +
      `Each run is divided by the mean of the bare-Worker runs just before and after it; the tables show the median of those ratios, and of the raw figures, over the rounds.`,
    `- Steady state: ${s.warmupSeconds > 0 ? `each saturated run of a variant that keeps per-key state (floodgate, the binding, Redis) follows a warm-up, unmeasured: one request from every client address (${s.connections} at a time), then ${s.warmupSeconds} s of the same traffic` : "no warm-up at this size"}. ` +
      `The other variants run for longer than a fast lease, and than an idle object lives, between two runs of one variant, so without it each run would begin with every key coming back from a quiet spell. ` +
      `floodgate's Durable Object calls per request are counted over the warm-up and the run together, so they include each key's first call after that spell.`,
    `- Server CPU: CPU time of the variant's own processes (workerd; or the Node proxy plus Redis) per request, from /proc; the origin and the load generator are not included. It suffers less from the machine's other work than throughput does.`,
    `- Machine: ${d.machine.cpus} CPUs shared by the load generator, the origin and the server measured, and by other work (load average ${d.machine.loadBefore.map((x) => x.toFixed(2)).join(", ")} before, ${d.machine.loadAfter.map((x) => x.toFixed(2)).join(", ")} after).`,
  );
  lines.push("", `### Saturated: throughput and latency, as ratios to the bare Worker`, "");
  const rows = VARIANTS.filter((v) => v.target !== "node" && v.target !== "redis")
    .map((v) => [v, get(v.id, "saturated")] as const)
    .filter((x): x is readonly [Variant, Summary] => x[1] !== undefined)
    .map(([v, m]) => [
      v.label,
      TRAFFIC[v.traffic],
      fmt(m.rps, 0),
      ratio(m.rpsRatio),
      fmt(m.p50Ms, 2),
      ratio(m.p50Ratio),
      fmt(m.p99Ms, 2),
      ratio(m.p99Ratio),
      fmt(m.serverCpuUsPerRequest, 0),
      doCallsPerRequest(d, v.id),
    ]);
  lines.push(
    table(["variant", "traffic", "req/s", "× bare", "p50 ms", "× bare", "p99 ms", "× bare", "server CPU µs/req", "DO calls/req"], rows, ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r"]),
  );
  if (s.lightSeconds > 0) {
    lines.push("", `### Light load (one connection): latency`, "");
    const light = VARIANTS.map((v) => [v, get(v.id, "light")] as const)
      .filter((x): x is readonly [Variant, Summary] => x[1] !== undefined)
      .map(([v, m]) => [v.label, TRAFFIC[v.traffic], fmt(m.p50Ms, 2), ratio(m.p50Ratio), fmt(m.p90Ms, 2), ratio(m.p90Ratio), fmt(m.p99Ms, 2), ratio(m.p99Ratio), fmt(m.rps, 0)]);
    lines.push(
      table(["variant", "traffic", "p50 ms", "× bare", "p90 ms", "× bare", "p99 ms", "× bare", "req/s"], light, ["l", "l", "r", "r", "r", "r", "r", "r", "r"]),
      "",
      "One request at a time, so these are service times without queueing; the p99 of such short runs mostly shows the machine's other work (a scheduler stall of tens of ms lands on whichever variant is running), which is why p90 is shown too.",
    );
  }
  lines.push(
    "",
    "![Throughput relative to the bare Worker](charts/e2e-throughput.svg)",
    "",
    "![Latency relative to the bare Worker (saturated, 1,000 IPs)](charts/e2e-latency.svg)",
    "",
    "![Server CPU per request](charts/e2e-cpu.svg)",
  );

  lines.push("", "### Against the targets", "");
  for (const v of verdicts(d)) {
    lines.push(`- ${v.target}: ${v.measured}: **${v.met === undefined ? "not read" : v.met ? "met" : "not met"}**.${v.met === false ? ` Why: ${v.why}.` : ""}`);
  }
  lines.push(
    d.fastImplemented
      ? "- The fast rules were decided locally (floodgate_local_decisions_total > 0)."
      : "- **The fast path was not in this build: floodgate counted no local decisions, so the `\"mode\": \"fast\"` rule ran as strict and these numbers are strict's.**",
  );

  lines.push("", "### The classic centralized design: a Node proxy asking Redis", "");
  if (!d.redis.available) lines.push(`Redis could not be had: ${d.redis.note}. The Redis rows are missing.`, "");
  const classic = ["node-bare", "redis-ips", "redis-hot"]
    .map((id) => [variantOf(id), get(id, "saturated"), get(id, "light")] as const)
    .filter(([, m]) => m !== undefined)
    .map(([v, m, light]) => {
      const node = get("node-bare", "saturated");
      return [
        v.label,
        TRAFFIC[v.traffic],
        fmt(m!.rps, 0),
        ratio(m!.rpsRatio),
        node ? ratio(m!.rps / node.rps) : "—",
        ratio(m!.p50Ratio),
        ratio(m!.p99Ratio),
        light ? fmt(light.p50Ms, 2) : "—",
        fmt(m!.serverCpuUsPerRequest, 0),
      ];
    });
  if (classic.length) {
    lines.push(
      `One Node process (no cluster) forwarding over keep-alive connections; with Redis, each request first runs \`rate-limiter-flexible\`'s \`RateLimiterRedis.consume(ip)\` ` +
        `(one atomic Lua script: INCRBY plus expiry, a fixed window) through \`ioredis\` against a local \`redis-server\` (${d.redis.note}). Same origin, same load, same rounds as above; ratios to the same bare Worker.`,
      "",
      table(["variant", "traffic", "req/s", "× bare Worker", "× bare Node proxy", "p50 × bare Worker", "p99 × bare Worker", "light p50 ms", "server CPU µs/req"], classic, ["l", "l", "r", "r", "r", "r", "r", "r", "r"]),
    );
  }

  lines.push("", "### Reading these numbers", "");
  lines.push(
    "- Everything shares two cores: the load generator, the origin and the server under test. A ratio below 1 is the limiter's extra CPU and waiting, as it shows on this machine; it is not a prediction for Cloudflare's edge, where the Durable Object usually sits in another process or another data centre (adding a network round trip per strict decision that loopback does not show) and isolates do not compete with the client for the CPU.",
    "- Cloudflare's rate-limiting binding is Miniflare's local emulation: an in-memory counter inside workerd, per 10 s or 60 s window. In production it is a per-location counter service with eventual consistency; only the Worker-side cost of calling it is comparable here.",
    `- Strict decisions for one key are coalesced per isolate (requests that arrive while that key's call is in flight share the next call), which is why the hot key needs far fewer Durable Object calls per request than 1,000 distinct keys.`,
    `- Per-IP traffic cycles through ${s.ips.toLocaleString("en-US")} keys, so at the rates above each key sees only about ${perKey(get("fast-ips", "saturated"), s.ips)} requests a second. ` +
      `Fast mode spends a lease locally, and a key this far from its limit gets a lease ten sync intervals (10 s here) long; but an isolate that admitted since its last call still calls at its booked time, one interval on, so that a lowered limit reaches it within an interval (the README's *A lowered limit*): a key that sees a few requests a second costs about a call a second. ` +
      `Each key's first request after a quiet spell waits for its first sync; with so few requests per key, ${doCallsPerRequest(d, "fast-ips")} Durable Object calls per request remain, counting the warm-up's; ` +
      "the hot-key rows show fast mode's cost once calls are rare: the rest is the per-request work every floodgate request does (matching, building the key, the rate-limit headers, re-wrapping the origin's response to add them).",
    "- Every variant's `fetch` to the origin passes through Miniflare's own outbound Worker (`strip-cf-connecting-ip`, which removes the client address header), in the same workerd. It costs about as much CPU as the bare Worker's own JavaScript and does not exist in production, so it raises the floor all ratios are taken against. `node bench/dev/profile.mjs <case>` profiles one case inside workerd (bench/README.md).",
  );
  if (d.calibration.length) {
    lines.push("", "### Which load generator", "");
    lines.push(
      `Both generators against the bare Worker for 3 s (${s.connections} connections, ${s.ips.toLocaleString("en-US")} IPs): the one that needs less CPU per request leaves more of the two cores to the servers measured. The bench uses ${d.generator} (${d.generatorNote}).`,
      "",
      table(["generator", "req/s", "generator CPU s", "generator CPU µs/req"], d.calibration.map((c) => [c.generator, fmt(c.rps, 0), fmt(c.cpuS, 2), fmt(c.cpuUsPerRequest, 1)]), ["l", "r", "r", "r"]),
    );
  }
  const bad = d.summary.filter((m) => m.non2xx + m.errors > 0);
  if (bad.length || d.failures.length) {
    lines.push("", "### Problems during the run", "");
    for (const m of bad) {
      const runs = d.runs.filter((r) => r.variant === m.variant && r.phase === m.phase);
      const denied = runs.reduce((a, r) => a + (r.decisions?.denied ?? 0), 0);
      const errors: Record<string, number> = {};
      for (const r of runs) for (const [k, v] of Object.entries(r.floodgateErrors ?? {})) errors[k] = (errors[k] ?? 0) + v;
      const why = runs.some((r) => r.decisions)
        ? `; floodgate's counters over those runs: ${denied} denied (429)${Object.keys(errors).length ? `, errors ${Object.entries(errors).map(([k, v]) => `${k} ${v}`).join(", ")}` : ", no errors counted"}`
        : "";
      lines.push(`- ${m.variant} (${m.phase}): ${m.non2xx} non-2xx answers, ${m.errors} socket errors/timeouts${why}.`);
    }
    for (const f of d.failures) lines.push(`- ${f}`);
  }
  return lines.join("\n");
}

function perKey(m: Summary | undefined, ips: number): string {
  if (!m) return "a few";
  const r = m.rps / ips;
  return r >= 10 ? r.toFixed(0) : r.toFixed(1);
}

/** A variant's summary for one phase. */
function summaryOf(d: EndToEndData, variant: string, phase: Phase = "saturated"): Summary | undefined {
  return d.summary.find((x) => x.variant === variant && x.phase === phase);
}

/** The issue's targets: each mode's throughput as a share of the bare Worker's, judged with 1,000 IPs and with one hot key. */
const TARGETS = { strict: 0.6, fast: 0.95 } as const;

/** Each mode against its target, and why a miss is a miss, from the run's CPU and call counts. */
function verdicts(d: EndToEndData): Verdict[] {
  const sat = (variant: string) => summaryOf(d, variant);
  const bareCpu = sat("bare")?.serverCpuUsPerRequest ?? NaN;
  const extra = (m: Summary | undefined) => fmt((m?.serverCpuUsPerRequest ?? NaN) - bareCpu, 0);
  return (["strict", "fast"] as const).map((mode) => {
    const ips = sat(`${mode}-ips`);
    const hot = sat(`${mode}-hot`);
    const cf = [sat("cf-ips"), sat("cf-hot")];
    const beside = mode === "fast" && cf[0] && cf[1] ? ` (Cloudflare's emulated binding, same run: ${ratio(cf[0].rpsRatio)}× and ${ratio(cf[1].rpsRatio)}×)` : "";
    const measured = [ips && `${ratio(ips.rpsRatio)}× with 1,000 IPs`, hot && `${ratio(hot.rpsRatio)}× with one hot key`].filter(Boolean).join(", ") + beside;
    const why =
      mode === "strict"
        ? `with 1,000 IPs every decision is a Durable Object call and a SQLite write (${doCallsPerRequest(d, "strict-ips")} calls per request), ` +
          `${extra(ips)} µs of server CPU per request over the bare Worker's ${fmt(bareCpu, 0)}; concurrent requests for one key share a call ` +
          `(hot key: ${doCallsPerRequest(d, "strict-hot")} calls per request, ${extra(hot)} µs over)`
        : `with one hot key, ${extra(hot)} µs of server CPU per request over the bare Worker's ${fmt(bareCpu, 0)}: the work every floodgate request does ` +
          `(matching, the key, the rate-limit headers, re-wrapping the origin's response to add them); with 1,000 IPs, ${extra(ips)} µs over, ` +
          `with the lease bookkeeping of 1,000 keys and ${doCallsPerRequest(d, "fast-ips")} calls per request (each key's first sync after a quiet spell, counted with the warm-up)`;
    return {
      target: `floodgate ${mode} at least ${TARGETS[mode]}× the bare Worker's throughput`,
      measured: measured || "not measured",
      met: ips && hot ? ips.rpsRatio >= TARGETS[mode] && hot.rpsRatio >= TARGETS[mode] : undefined,
      why,
    };
  });
}

/** Where floodgate stands end to end, in one sentence. */
function headline(d: EndToEndData): string {
  const r = (variant: string) => ratio(summaryOf(d, variant)?.rpsRatio);
  return (
    `Through local workerd, fast mode keeps ${r("fast-hot")}× and ${r("fast-ips")}× of a bare Worker's throughput (one hot key, 1,000 IPs), ` +
    `strict ${r("strict-hot")}× and ${r("strict-ips")}×, Cloudflare's emulated binding ${r("cf-hot")}× and ${r("cf-ips")}×.`
  );
}

function doCallsPerRequest(d: EndToEndData, variant: string): string {
  const c = d.counters[variant];
  if (!c || !c.requests) return "—";
  const calls = Object.values(c.durableObjectCalls).reduce((a, b) => a + b, 0);
  return (calls / c.requests).toFixed(3);
}

function charts(d: EndToEndData): ChartSpec[] {
  const sat = (id: string) => summaryOf(d, id);
  const categories = ["floodgate strict", "floodgate fast", "CF rate-limit binding", "Node proxy + Redis"];
  const ids: Record<Traffic, string[]> = { ips: ["strict-ips", "fast-ips", "cf-ips", "redis-ips"], hot: ["strict-hot", "fast-hot", "cf-hot", "redis-hot"] };
  const points = (traffic: Traffic, pick: (m: Summary) => number): [number, number][] =>
    ids[traffic].flatMap((id, i): [number, number][] => {
      const m = sat(id);
      return m ? [[i, round3(pick(m))]] : [];
    });
  const node = sat("node-bare");
  return [
    {
      file: "e2e-throughput",
      title: "Throughput relative to the bare Worker (saturated; 1.0 = bare)",
      kind: "bar",
      xLabel: "variant",
      yLabel: "throughput ÷ bare Worker",
      categories: [...categories, "Node proxy, no limiter"],
      series: [
        { name: "1,000 IPs", points: [...points("ips", (m) => m.rpsRatio), ...(node ? [[4, round3(node.rpsRatio)] as [number, number]] : [])] },
        { name: "1 hot key", points: points("hot", (m) => m.rpsRatio) },
      ],
    },
    {
      file: "e2e-cpu",
      title: "Server CPU per request (saturated; workerd, or proxy + Redis)",
      kind: "bar",
      xLabel: "variant",
      yLabel: "CPU µs per request",
      categories: ["bare Worker", ...categories, "Node proxy, no limiter"],
      series: (["ips", "hot"] as const).map((traffic) => ({
        name: TRAFFIC[traffic],
        points: (traffic === "ips" ? ["bare", ...ids.ips, "node-bare"] : ["", ...ids.hot, ""]).flatMap((id, i): [number, number][] => {
          const m = id ? sat(id) : undefined;
          return m && Number.isFinite(m.serverCpuUsPerRequest) ? [[i, Math.round(m.serverCpuUsPerRequest)]] : [];
        }),
      })),
    },
    {
      file: "e2e-latency",
      title: "Latency relative to the bare Worker (saturated, 1,000 IPs; 1.0 = bare)",
      kind: "bar",
      xLabel: "variant",
      yLabel: "latency ÷ bare Worker",
      categories,
      series: [
        { name: "p50", points: points("ips", (m) => m.p50Ratio) },
        { name: "p99", points: points("ips", (m) => m.p99Ratio) },
      ],
    },
  ];
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

function fmt(x: number | undefined, digits: number): string {
  if (x === undefined || !Number.isFinite(x)) return "—";
  return x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function ratio(x: number | undefined): string {
  return x === undefined || !Number.isFinite(x) ? "—" : x.toFixed(2);
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
