/** Part A: what one decision costs in Node, for floodgate's pure cores and two in-memory limiters users compare them with. */
import { cpus } from "node:os";
// The memory limiter's own file: see lib/rate-limiter-flexible.d.ts.
import RateLimiterMemory from "rate-limiter-flexible/lib/RateLimiterMemory.js";
import { adjust, countedAt, decide, type LimiterState, type Policy } from "../src/algorithms/index";
import { MAX_SLOTS } from "../src/algorithms/concurrency";
import { DEFAULT_BUCKETS, MAX_BUCKETS } from "../src/algorithms/sliding-window";
import { MAX_LOG_LIMIT } from "../src/algorithms/sliding-log";
import type { RunOptions, Section } from "./lib/section";
import { zipfSequence } from "./lib/random";
import { median, percent, rate, table, times } from "./lib/stats";
import { turn } from "./lib/turn";

const PERIOD_MS = 60_000;
/** Epoch-aligned start of every pass's simulated clock. */
const T0 = 28_333_334 * PERIOD_MS;
const ZIPF_S = 1;
const SEED = 20_240_601;
/** The issue's target: each floodgate decision at least this many times faster than rate-limiter-flexible's memory limiter. */
const TARGET = 3;

/** One workload: a limit, and the same precomputed keys and clock for every contender. */
interface Workload {
  name: string;
  limit: number;
  about: string;
}

const WORKLOADS: Workload[] = [
  { name: "within limits", limit: 1_000_000, about: "limit 1,000,000 per 60 s: every decision allows" },
  { name: "abusive mix", limit: 100, about: "limit 100 per 60 s: the hottest keys are far over it; see the allowed column" },
];

/** The keys, the order they arrive in and the clock, shared by all contenders. */
interface Trace {
  keys: string[];
  order: Int32Array;
  /** simulated epoch ms of each decision: one period spread evenly over the pass */
  nows: Float64Array;
}

/** A contender runs one pass over the trace with a fresh limiter and returns how many it allowed. */
interface Contender {
  name: string;
  floodgate: boolean;
  pass: (trace: Trace, limit: number) => number | Promise<number>;
  /** lets go of what the last pass left behind, untimed, so it does not weigh on the passes after it */
  release?: (trace: Trace) => Promise<void>;
}

/**
 * A floodgate core. `maxLimit`: the largest limit the algorithm may be configured with (the sliding
 * log's 1,000); a workload's limit above it is lowered to it, and the contender's name says so.
 */
function floodgate(name: string, algorithm: Policy["algorithm"], buckets: number, maxLimit = Number.POSITIVE_INFINITY, warmupMs?: number): Contender {
  return {
    name,
    floodgate: true,
    pass(trace, workloadLimit) {
      const limit = Math.min(workloadLimit, maxLimit);
      // GCRA admits 1 + burst at once: a tolerance of limit − 1 gives it the same capacity as the others.
      const burst = algorithm === "gcra" ? limit - 1 : limit;
      const policy: Policy = { algorithm, limit, periodMs: PERIOD_MS, burst, buckets, ...(warmupMs ? { warmupMs } : {}) };
      const states = new Map<string, LimiterState>();
      const { keys, order, nows } = trace;
      let allowed = 0;
      for (let i = 0; i < order.length; i++) {
        const key = keys[order[i]!]!;
        const { decision, state } = decide(policy, states.get(key), 1, nows[i]!);
        states.set(key, state);
        if (decision.allowed) allowed++;
      }
      return allowed;
    },
  };
}

/**
 * rate-limiter-flexible's RateLimiterMemory, called as its users call it: `await consume(key)`, a
 * rejection meaning "denied". Each key it stores holds a timer for the window's length (60 s), which
 * keeps a dropped limiter and its records alive: left alone, every pass would grow the heap that all
 * later passes, of every contender, collect in. `release` deletes the last pass's keys instead.
 */
let lastMemoryLimiter: RateLimiterMemory | undefined;
const rateLimiterFlexible: Contender = {
  name: "rate-limiter-flexible RateLimiterMemory (await consume)",
  floodgate: false,
  async release(trace) {
    const limiter = lastMemoryLimiter;
    lastMemoryLimiter = undefined;
    if (limiter) await Promise.all(trace.keys.map((key) => limiter.delete(key)));
  },
  async pass(trace, limit) {
    const limiter = (lastMemoryLimiter = new RateLimiterMemory({ points: limit, duration: PERIOD_MS / 1000 }));
    const { keys, order } = trace;
    let allowed = 0;
    for (let i = 0; i < order.length; i++) {
      try {
        await limiter.consume(keys[order[i]!]!);
        allowed++;
      } catch (rejection) {
        if (rejection instanceof Error) throw rejection;
      }
    }
    return allowed;
  },
};

/**
 * floodgate's concurrency core, a request's whole life: take a slot, then give it back at the time
 * it was taken, as the Worker does once the response has been sent. Every request is released
 * before the next arrives, so every decision allows; its limit is at most {@link MAX_SLOTS}.
 */
const floodgateConcurrency: Contender = {
  name: `floodgate concurrency (take and release; limit at most ${MAX_SLOTS.toLocaleString("en-US")})`,
  floodgate: true,
  pass(trace, workloadLimit) {
    const limit = Math.min(workloadLimit, MAX_SLOTS);
    const policy: Policy = { algorithm: "concurrency", limit, periodMs: PERIOD_MS, burst: limit, buckets: 1 };
    const states = new Map<string, LimiterState>();
    const { keys, order, nows } = trace;
    let allowed = 0;
    for (let i = 0; i < order.length; i++) {
      const key = keys[order[i]!]!;
      const now = nows[i]!;
      const { decision, state } = decide(policy, states.get(key), 1, now);
      if (!decision.allowed) continue;
      allowed++;
      states.set(key, adjust(policy, state, -1, countedAt(policy, state, now), now));
    }
    return allowed;
  },
};

/**
 * rate-limiter-flexible has no concurrency limiter; the closest is its memory limiter used as a
 * semaphore, as its users do: `consume` a point to admit, `reward` it back to release.
 */
let lastSemaphore: RateLimiterMemory | undefined;
const rateLimiterFlexibleSemaphore: Contender = {
  name: "rate-limiter-flexible RateLimiterMemory as a semaphore (await consume, await reward)",
  floodgate: false,
  async release(trace) {
    const limiter = lastSemaphore;
    lastSemaphore = undefined;
    if (limiter) await Promise.all(trace.keys.map((key) => limiter.delete(key)));
  },
  async pass(trace, limit) {
    const limiter = (lastSemaphore = new RateLimiterMemory({ points: Math.min(limit, MAX_SLOTS), duration: PERIOD_MS / 1000 }));
    const { keys, order } = trace;
    let allowed = 0;
    for (let i = 0; i < order.length; i++) {
      const key = keys[order[i]!]!;
      try {
        await limiter.consume(key);
      } catch (rejection) {
        if (rejection instanceof Error) throw rejection;
        continue;
      }
      allowed++;
      await limiter.reward(key, 1);
    }
    return allowed;
  },
};

/** A fixed-window counter written the simple way, as Miniflare emulates Cloudflare's rate-limiting binding. */
const fixedWindow: Contender = {
  name: "fixed-window counter (Map of key → {windowStart, count})",
  floodgate: false,
  pass(trace, limit) {
    const windows = new Map<string, { windowStart: number; count: number }>();
    const { keys, order, nows } = trace;
    let allowed = 0;
    for (let i = 0; i < order.length; i++) {
      const key = keys[order[i]!]!;
      const now = nows[i]!;
      const windowStart = now - (now % PERIOD_MS);
      let window = windows.get(key);
      if (!window || window.windowStart !== windowStart) {
        window = { windowStart, count: 0 };
        windows.set(key, window);
      }
      if (window.count < limit) {
        window.count++;
        allowed++;
      }
    }
    return allowed;
  },
};

function contenders(): Contender[] {
  const bucketCounts = [...new Set([1, DEFAULT_BUCKETS, MAX_BUCKETS])].sort((a, b) => a - b);
  const label = (b: number) =>
    b === 1 ? "two-window counter" : b === DEFAULT_BUCKETS ? "default" : b === MAX_BUCKETS ? "most allowed" : "";
  return [
    ...bucketCounts.map((b) => floodgate(`floodgate sliding-window, buckets ${b} (${label(b)})`, "sliding-window", b)),
    floodgate("floodgate token-bucket", "token-bucket", 1),
    // Every key starts cold, and the pass is one period: half of it warming up.
    floodgate("floodgate token-bucket, warmup 30 s", "token-bucket", 1, Number.POSITIVE_INFINITY, 30_000),
    floodgate("floodgate fixed-window", "fixed-window", 1),
    floodgate(`floodgate sliding-log (limit at most ${MAX_LOG_LIMIT.toLocaleString("en-US")}, its largest)`, "sliding-log", 1, MAX_LOG_LIMIT),
    floodgate("floodgate gcra (burst limit − 1)", "gcra", 1),
    floodgateConcurrency,
    rateLimiterFlexible,
    rateLimiterFlexibleSemaphore,
    fixedWindow,
  ];
}

/** A contender whose warm-up pass takes longer than this gets only {@link SLOW_REPEATS} repeats, so the run stays short. */
const SLOW_PASS_MS = 2_000;
const SLOW_REPEATS = 3;

interface Sizes {
  keys: number;
  decisionsPerPass: number;
  repeats: number;
  minRepeatMs: number;
}

function sizes(options: RunOptions): Sizes {
  if (options.tiny) return { keys: 1_000, decisionsPerPass: 20_000, repeats: 1, minRepeatMs: 20 };
  if (options.quick) return { keys: 10_000, decisionsPerPass: 100_000, repeats: 3, minRepeatMs: 300 };
  return { keys: 10_000, decisionsPerPass: 250_000, repeats: 5, minRepeatMs: 700 };
}

/** One timed repeat: passes (each with a fresh limiter) until at least `minMs` have been spent in them. */
async function repeat(contender: Contender, trace: Trace, limit: number, minMs: number) {
  let decisions = 0;
  let allowed = 0;
  let elapsed = 0;
  do {
    const started = performance.now();
    allowed += await contender.pass(trace, limit);
    elapsed += performance.now() - started;
    decisions += trace.order.length;
    await contender.release?.(trace);
    // Its passes await only settled promises: without a turn, a Ctrl-C would wait for the whole part.
    await turn();
  } while (elapsed < minMs);
  return { perSecond: (decisions * 1000) / elapsed, allowedShare: allowed / decisions };
}

interface Result {
  workload: string;
  limit: number;
  contender: string;
  floodgate: boolean;
  /** decisions per second, one per repeat */
  samples: number[];
  /** how many repeats it got (fewer when one pass is slow: see SLOW_PASS_MS) */
  repeats: number;
  median: number;
  allowedShare: number;
}

/** The share of decisions whose key was last seen in an earlier bucket: the window has to move first. */
function newBucketShare(trace: Trace, buckets: number): number {
  const lastBucket = new Map<number, number>();
  let moved = 0;
  for (let i = 0; i < trace.order.length; i++) {
    const key = trace.order[i]!;
    const bucket = Math.floor((trace.nows[i]! * buckets) / PERIOD_MS);
    const last = lastBucket.get(key);
    if (last !== undefined && last !== bucket) moved++;
    lastBucket.set(key, bucket);
  }
  return moved / trace.order.length;
}

export async function run(options: RunOptions): Promise<Section> {
  const size = sizes(options);
  const list = contenders();
  const order = zipfSequence(size.keys, ZIPF_S, size.decisionsPerPass, SEED);
  const keys = Array.from({ length: size.keys }, (_, k) => `203.0.113.${k % 256}/${k}`);
  const nows = new Float64Array(size.decisionsPerPass);
  for (let i = 0; i < nows.length; i++) nows[i] = T0 + Math.floor((i * PERIOD_MS) / nows.length);
  const trace: Trace = { keys, order, nows };

  const results: Result[] = [];
  for (const workload of WORKLOADS) {
    const byName = new Map<string, Result>();
    for (const c of list) {
      const warmStarted = performance.now();
      await c.pass(trace, workload.limit); // warm-up: not counted, only timed to spot slow contenders
      const slow = performance.now() - warmStarted > SLOW_PASS_MS;
      await c.release?.(trace);
      await turn();
      byName.set(c.name, {
        workload: workload.name,
        limit: workload.limit,
        contender: c.name,
        floodgate: c.floodgate,
        samples: [],
        repeats: slow ? Math.min(SLOW_REPEATS, size.repeats) : size.repeats,
        median: NaN,
        allowedShare: NaN,
      });
    }
    for (let r = 0; r < size.repeats; r++) {
      // Rotate the order each repeat so no contender always runs right after the same neighbour.
      for (let j = 0; j < list.length; j++) {
        const c = list[(j + r) % list.length]!;
        const result = byName.get(c.name)!;
        if (result.samples.length >= result.repeats) continue;
        const { perSecond, allowedShare } = await repeat(c, trace, workload.limit, size.minRepeatMs);
        result.samples.push(perSecond);
        result.allowedShare = allowedShare;
      }
      options.log(`decision cost: ${workload.name}, repeat ${r + 1}/${size.repeats} done`);
    }
    for (const result of byName.values()) {
      result.median = median(result.samples);
      results.push(result);
    }
  }

  const rlfOf = (r: Result) => results.find((x) => x.workload === r.workload && x.contender === rateLimiterFlexible.name)!;
  const ratioTo = (r: Result) => r.median / rlfOf(r).median;
  const floodgateResults = results.filter((r) => r.floodgate);
  const missed = floodgateResults.filter((r) => ratioTo(r) < TARGET);

  const cpu = cpus()[0]?.model.trim() ?? "unknown CPU";
  const method = [
    `**Method.** ${size.keys.toLocaleString("en-US")} keys, chosen by a Zipf law (s = ${ZIPF_S}) precomputed from a fixed seed; ` +
      `${size.decisionsPerPass.toLocaleString("en-US")} decisions per pass, every contender fed the same keys in the same order, ` +
      `each pass with a fresh limiter. floodgate and the fixed window are given a simulated clock spreading each pass over one ` +
      `period (60 s). rate-limiter-flexible reads the real clock; its windows open at a key's first request and last 60 s, ` +
      `longer than a pass, so within a pass each key has one window, as in the others' one simulated period: the ` +
      `"allowed" column shows they face the same mix. Each contender keeps its ` +
      `state the way a user would: floodgate's \`decide(policy, map.get(key), 1, now)\` then \`map.set(key, state)\`; ` +
      `\`await limiter.consume(key)\` in a try/catch for RateLimiterMemory (its \`consume\` returns a promise and rejects when ` +
      `the key is over its limit, so every decision pays a promise and a microtask turn, as it does in an application); the ` +
      `fixed window mutates a Map of key → {windowStart, count} in place. ` +
      `One repeat runs whole passes until at least ${size.minRepeatMs} ms have been spent in them; the figure is the median of ${size.repeats} ` +
      `repeats after an untimed warm-up pass (${Math.min(SLOW_REPEATS, size.repeats)} for a contender whose pass takes over ` +
      `${SLOW_PASS_MS / 1000} s, marked below), contenders interleaved in a rotating order within one process. ` +
      `Between passes, untimed, rate-limiter-flexible's keys are deleted with its \`delete\`: each holds a 60 s timer that would ` +
      `otherwise keep every finished pass's limiter alive and grow the heap every later pass, of every contender, works in.`,
    `**Machine.** Node ${process.version}, ${cpu}, ${cpus().length} cores, shared with other work: expect a few percent of noise between runs.`,
    `**Reproduce.** \`npm run bench\` (${sizes({ quick: false, log() {} }).repeats} repeats of at least ` +
      `${sizes({ quick: false, log() {} }).minRepeatMs} ms) or \`npm run bench -- --quick\` ` +
      `(${sizes({ quick: true, log() {} }).repeats} repeats of at least ${sizes({ quick: true, log() {} }).minRepeatMs} ms).` +
      (options.tiny ? " This run was smoke-test size: its numbers mean nothing." : ""),
  ].join("\n\n");

  const tables = WORKLOADS.map((w) => {
    const rows = results
      .filter((r) => r.workload === w.name)
      .map((r) => [
        r.repeats < size.repeats ? `${r.contender} (${r.repeats} repeats: slow)` : r.contender,
        rate(r.median),
        percent(r.allowedShare),
        times(ratioTo(r)),
      ]);
    const header = ["contender", "decisions/s (median)", "allowed", "÷ rate-limiter-flexible"];
    return `**${w.name}** (${w.about}):\n\n${table(header, rows, ["l", "r", "r", "r"])}`;
  }).join("\n\n");

  const worst = floodgateResults.reduce((a, b) => (ratioTo(a) <= ratioTo(b) ? a : b));
  const best = floodgateResults.reduce((a, b) => (ratioTo(a) >= ratioTo(b) ? a : b));
  // Repeat r of every contender ran in the same round, moments apart: their ratios show the spread the machine adds.
  const paired = worst.samples.map((x, i) => x / (rlfOf(worst).samples[i] ?? NaN)).filter(Number.isFinite);
  const why =
    `${worst.contender} (${worst.workload}) is at ${times(ratioTo(worst))}, and from ${times(Math.min(...paired))} to ${times(Math.max(...paired))} ` +
    `repeat by repeat against rate-limiter-flexible's run in the same round. On this trace ${percent(newBucketShare(trace, DEFAULT_BUCKETS))} of decisions find their key's window in a new bucket with ` +
    `${DEFAULT_BUCKETS} buckets (${percent(newBucketShare(trace, 1))} with 1), and each such move appends to the key's history; every ` +
    `decision also makes a new state, because states are values that the Durable Object and the lease code may read again. A CPU ` +
    `profile of such a pass (\`node --cpu-prof\`) shows the time in those moves, in garbage collection, and in the Map lookups every contender pays.`;
  const verdict =
    missed.length === 0
      ? `**Target (≥ ${TARGET}× rate-limiter-flexible): met** by every floodgate core in both workloads; the closest is ` +
        `${worst.contender} (${worst.workload}) at ${times(ratioTo(worst))}.`
      : `**Target (≥ ${TARGET}× rate-limiter-flexible): missed** by ${missed.length} of ${floodgateResults.length} floodgate ` +
        `measurements; the slowest relative to it is ${worst.contender} (${worst.workload}) at ${times(ratioTo(worst))}. ` +
        `Missed: ${missed.map((r) => `${r.contender} (${r.workload}, ${times(ratioTo(r))})`).join("; ")}. Why: ${why}`;

  return {
    id: "decision-cost",
    title: "Decision cost of the pure cores in Node",
    markdown: [method, tables, verdict].join("\n\n"),
    charts: [],
    verdicts: [
      {
        target: `each pure decision at least ${TARGET}× as fast as rate-limiter-flexible's memory limiter`,
        measured: `${times(ratioTo(worst))}–${times(ratioTo(best))}; slowest: ${worst.contender.replace("floodgate ", "")} (${worst.workload})`,
        met: missed.length === 0,
        why,
      },
    ],
    headline: `Each decision runs ${times(ratioTo(worst))}–${times(ratioTo(best))} as fast as rate-limiter-flexible's in-memory limiter.`,
    data: { sizes: size, zipfS: ZIPF_S, periodMs: PERIOD_MS, target: TARGET, node: process.version, cpu, results },
  };
}
