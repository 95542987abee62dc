// The simulator against workerd: 32 isolates 50 ms from the real RateLimiter, one global fast key at 10× its limit, give the same bound and call rate as the simulation of the same parameters.
import { expect, it } from "vitest";
import { runScenario, T0 } from "../../bench/simulation/engine";
import { AGREEMENT, selectScenarios } from "../../bench/simulation/scenarios";
import type { Cluster } from "./cluster";
import { useClusterFixture } from "./fixture";
import { drive } from "./load";

const harness = useClusterFixture();
const A = AGREEMENT;
/** As bench/simulation/engine.ts's ruleOf builds it: every default (sync 1 s, 60 buckets, timeout, onError) is the product's. */
const rule = { name: "agreement", key: "global", algorithm: "sliding-window", limit: A.limit, period: `${A.periodMs}ms`, mode: "fast" };

/** What both runs are compared on. */
interface Figures {
  /** most admitted in one epoch-aligned window ÷ limit */
  bound: number;
  /** object calls a second, from the end of the warm-up to the end of the traffic */
  steadyCallsPerSecond: number;
  /** object calls per 100 requests, the whole run */
  callsPer100: number;
}

/** The simulation's figures; T0 is epoch-aligned, so its windows are the algorithm's own. */
function simulated(): Figures {
  const [scenario] = selectScenarios({ quick: false, isolates: undefined, only: [A.name], seconds: undefined });
  const result = runScenario(scenario!, 1);
  const series = result.detail.callsPerSecond;
  const steady = series.slice(A.warmupMs / 1000, A.durationMs / 1000).reduce((a, b) => a + b, 0);
  expect(T0 % A.periodMs).toBe(0);
  return {
    bound: result.maxPerWindowOverLimit!,
    steadyCallsPerSecond: steady / ((A.durationMs - A.warmupMs) / 1000),
    callsPer100: result.objectCallsPer100Requests,
  };
}

/** Object calls every front has made so far, from their metrics. */
async function objectCalls(cluster: Cluster): Promise<number> {
  const texts = await Promise.all(cluster.fronts.map((_, i) => cluster.metrics(i)));
  let total = 0;
  for (const text of texts) {
    for (const line of text.split("\n")) if (line.startsWith("floodgate_durable_object_calls_total{")) total += Number(line.split(" ")[1]);
  }
  return total;
}

/** Admitted requests per epoch-aligned window, by when each reached the origin. */
async function perWindow(tag: string): Promise<number[]> {
  const log = (await (await fetch(`${harness.originUrl()}/__origin/log?tag=${tag}`)).json()) as { at: number }[];
  const counts = new Map<number, number>();
  for (const { at } of log) counts.set(Math.floor(at / A.periodMs), (counts.get(Math.floor(at / A.periodMs)) ?? 0) + 1);
  return [...counts.values()];
}

const BOUND_TOLERANCE = 0.05;
const CALL_RATE_FACTOR = 1.25;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it("puts the real object a round trip away: every strict decision waits it, and the limit still holds", async () => {
  const cluster = await harness.start({ isolates: 1, rules: [{ name: "distant", key: "global", limit: 2, period: "1m" }], objectDelayMs: 200 });
  const answers: { status: number; ms: number }[] = [];
  for (let i = 0; i < 3; i++) {
    const began = performance.now();
    const response = await cluster.fetch(0, `/distant/${i}`);
    await response.arrayBuffer();
    answers.push({ status: response.status, ms: performance.now() - began });
  }
  expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
  for (const { ms } of answers) expect(ms).toBeGreaterThanOrEqual(200);
});

it(
  `agrees with the simulation at ${A.isolates} isolates and ${A.rttMs} ms to the object: the bound and the object's call rate`,
  async () => {
    const sim = simulated();
    const began = Date.now();
    const cluster = await harness.start({ isolates: A.isolates, rules: [rule], objectDelayMs: A.rttMs });
    const startedMs = Date.now() - began;
    // Start on a window's edge, as the simulation does, so the run covers whole windows.
    await sleep(A.periodMs - (Date.now() % A.periodMs));
    const t0 = Date.now();
    const tag = "scale-agreement";
    const driving = drive(cluster, { durationMs: A.durationMs, ratePerSecond: (A.load * A.limit * 1000) / A.periodMs, path: (n) => `/${tag}/${n}` });
    await sleep(t0 + A.warmupMs - Date.now());
    const atWarmup = await objectCalls(cluster);
    const result = await driving;
    const calls = await objectCalls(cluster);
    const steadyMs = Date.now() - t0 - A.warmupMs;
    const real: Figures = {
      bound: Math.max(...(await perWindow(tag))) / A.limit,
      steadyCallsPerSecond: (calls - atWarmup) / (steadyMs / 1000),
      callsPer100: (100 * calls) / result.sent,
    };
    console.log(JSON.stringify({ sim, real, startedMs, wallMs: Date.now() - began, sent: result.sent, allowed: result.allowed, errors: result.errors, maxLagMs: result.maxLagMs }));
    expect(result.errors, result.errorSamples.join("\n")).toBe(0);
    expect(real.bound).toBeLessThanOrEqual(1);
    expect(sim.bound).toBeLessThanOrEqual(1);
    expect(Math.abs(real.bound - sim.bound)).toBeLessThanOrEqual(BOUND_TOLERANCE);
    expect(real.steadyCallsPerSecond / sim.steadyCallsPerSecond).toBeGreaterThanOrEqual(1 / CALL_RATE_FACTOR);
    expect(real.steadyCallsPerSecond / sim.steadyCallsPerSecond).toBeLessThanOrEqual(CALL_RATE_FACTOR);
    expect(real.callsPer100 / sim.callsPer100).toBeGreaterThanOrEqual(1 / CALL_RATE_FACTOR);
    expect(real.callsPer100 / sim.callsPer100).toBeLessThanOrEqual(CALL_RATE_FACTOR);
  },
  120_000,
);
