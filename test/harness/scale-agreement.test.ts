// The simulator against workerd: 32 isolates 50 ms from the real RateLimiter, one global fast key at 10× its limit, give the same bound and call rate as the simulation of the same parameters.
import { beforeAll, describe, expect, it } from "vitest";
import { runScenario, T0 } from "../../bench/simulation/engine";
import { AGREEMENT, selectScenarios } from "../../bench/simulation/scenarios";
import type { Cluster } from "./cluster";
import { useClusterFixture } from "./fixture";
import { drive } from "./load";

const harness = useClusterFixture();
const A = AGREEMENT;
/** As bench/simulation/engine.ts's ruleOf builds it: every default but the timeout (sync 1 s, 60 buckets, onError local) is the product's. */
const rule = { name: "agreement", key: "global", algorithm: "sliding-window", limit: A.limit, period: `${A.periodMs}ms`, mode: "fast", timeout: `${A.timeoutMs}ms` };

/** What both runs are compared on. */
interface Figures {
  /** most admitted in one epoch-aligned window ÷ limit */
  bound: number;
  /** object calls a second, from the end of the warm-up to the end of the traffic */
  steadyCallsPerSecond: number;
  /**
   * object calls per 100 requests, the whole run; the real run's over the time its traffic was
   * meant to take: at this load calls follow time (the schedule's floor), so a driver that fell
   * behind on a loaded machine, sending the same requests over a longer run, raised the figure
   * (a run 15.7 s behind made 9.9 where the simulation made 7.6) without the product changing
   */
  callsPer100: number;
}

interface Simulated extends Figures {
  /** requests onError answered */
  errors: number;
}

/** The simulation's figures; T0 is epoch-aligned, so its windows are the algorithm's own. */
function simulated(): Simulated {
  const [scenario] = selectScenarios({ quick: false, isolates: undefined, only: [A.name], seconds: undefined });
  const result = runScenario(scenario!, 1);
  const series = result.detail.callsPerSecond;
  const steady = series.slice(A.warmupMs / 1000, A.durationMs / 1000).reduce((a, b) => a + b, 0);
  expect(T0 % A.periodMs).toBe(0);
  return {
    bound: result.maxPerWindowOverLimit!,
    steadyCallsPerSecond: steady / ((A.durationMs - A.warmupMs) / 1000),
    callsPer100: result.objectCallsPer100Requests,
    errors: result.errors,
  };
}

/** A counter summed over every front's metrics, all its labels. */
async function summed(cluster: Cluster, counter: string): Promise<number> {
  const texts = await Promise.all(cluster.fronts.map((_, i) => cluster.metrics(i)));
  let total = 0;
  for (const text of texts) {
    for (const line of text.split("\n")) if (line.startsWith(`${counter}{`) || line.startsWith(`${counter} `)) total += Number(line.split(" ").at(-1));
  }
  return total;
}

const objectCalls = (cluster: Cluster) => summed(cluster, "floodgate_durable_object_calls_total");

/** Admitted requests per epoch-aligned window, by when each reached the origin. */
async function perWindow(tag: string): Promise<number[]> {
  const log = (await (await fetch(`${harness.originUrl()}/__origin/log?tag=${tag}`)).json()) as { at: number }[];
  const counts = new Map<number, number>();
  for (const { at } of log) counts.set(Math.floor(at / A.periodMs), (counts.get(Math.floor(at / A.periodMs)) ?? 0) + 1);
  return [...counts.values()];
}

/**
 * How far the real run may stray from the simulation (AGREEMENT's boundTolerance and callRateFactor). Over nine runs on 2 shared cores (load
 * average 5 to 6 from other tests) the real bound was 1.000 each time the run was clean (the
 * simulation's is 1.000, and 0.995 to 1.000 over seeds 1 to 3); 0.05 is 10 requests of 200, room
 * for requests the origin counts in the next window. The call rates came within 2.3 % of the
 * simulation's (calls a second 0.977 to 1.015 of it, per 100 requests 0.998 to 1.019), and seeds
 * 1 to 3 of the simulation spread 2 %; a factor of 1.15 is six times that, and still fails on any
 * change to how calls are booked: at this load they follow the schedule's floor of 4 calls per
 * isolate per period (12.8 a second), and one per isolate per sync would be 32.
 */
const { boundTolerance: BOUND_TOLERANCE, callRateFactor: CALL_RATE_FACTOR } = A;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Both runs' figures, and what the real one says about its own conditions. */
interface Measured {
  sim: Simulated;
  real: Figures;
  /** front errors and failed syncs counted by every front's metrics */
  failures: { errors: number; syncsFailed: number };
  /** the slowest answer a client had, in ms */
  maxLatencyMs: number;
  /** everything, for a failure's message */
  seen: string;
}

/** Runs the scenario in the simulator and on the cluster, the cluster's traffic starting on a window's edge as the simulation's does. */
async function measure(): Promise<Measured> {
  const sim = simulated();
  const began = Date.now();
  const cluster = await harness.start({ isolates: A.isolates, rules: [rule], objectDelayMs: A.rttMs });
  const startedMs = Date.now() - began;
  await sleep(A.periodMs - (Date.now() % A.periodMs));
  const t0 = Date.now();
  const tag = "scale-agreement";
  const driving = drive(cluster, { durationMs: A.durationMs, ratePerSecond: (A.load * A.limit * 1000) / A.periodMs, latencies: true, path: (n) => `/${tag}/${n}` });
  await sleep(t0 + A.warmupMs - Date.now());
  const atWarmup = await objectCalls(cluster);
  const result = await driving;
  const calls = await objectCalls(cluster);
  const steadyMs = Date.now() - t0 - A.warmupMs;
  const windows = await perWindow(tag);
  const real: Figures = {
    bound: Math.max(...windows) / A.limit,
    steadyCallsPerSecond: (calls - atWarmup) / (steadyMs / 1000),
    callsPer100: ((100 * calls) / result.sent) * (A.durationMs / Math.max(A.durationMs, result.elapsedMs)),
  };
  // A request lost between the test's client and a front (a CI run at load average 9: one "fetch failed" of 6,000) was
  // decided by nobody, so it moves no figure; more than one in 200 would say the cluster, not the machine, failed.
  expect(result.errors, result.errorSamples.join("\n")).toBeLessThanOrEqual(Math.floor(result.sent / 200));
  const failures = { errors: await summed(cluster, "floodgate_errors_total"), syncsFailed: await summed(cluster, 'floodgate_syncs_total{result="failed"}') };
  const maxLatencyMs = result.latencies!.max;
  const seen = JSON.stringify({ sim, real, windows, failures, startedMs, wallMs: Date.now() - began, maxLatencyMs, maxLagMs: result.maxLagMs });
  return { sim, real, failures, maxLatencyMs, seen };
}

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

describe(`${A.isolates} isolates ${A.rttMs} ms from the object, one global fast key at ${A.load}× its limit: workerd agrees with the simulation`, () => {
  let run: Measured;
  beforeAll(async () => {
    run = await measure();
  }, 120_000);

  it("times out and fails no sync, as the simulation does not: onError decided nothing, so the figures are the leases'", () => {
    expect(run.failures, run.seen).toEqual({ errors: run.sim.errors, syncsFailed: 0 });
  });

  it(`admits at most the limit in a window, and within ${BOUND_TOLERANCE} of the limit of what the simulation admits`, () => {
    expect(run.sim.bound, run.seen).toBeLessThanOrEqual(1);
    // The origin sees a request a little after floodgate decided it, so one decided just before a
    // window closed can land just after: allow what the admitted rate brings in that long.
    const inFlight = Math.ceil((A.limit / A.periodMs) * run.maxLatencyMs + 1);
    expect(run.real.bound, run.seen).toBeLessThanOrEqual(1 + inFlight / A.limit);
    expect(Math.abs(run.real.bound - run.sim.bound), run.seen).toBeLessThanOrEqual(BOUND_TOLERANCE);
  });

  it(`calls the object as many times a second as the simulation, within a factor of ${CALL_RATE_FACTOR}`, () => {
    expect(run.real.steadyCallsPerSecond / run.sim.steadyCallsPerSecond, run.seen).toBeGreaterThanOrEqual(1 / CALL_RATE_FACTOR);
    expect(run.real.steadyCallsPerSecond / run.sim.steadyCallsPerSecond, run.seen).toBeLessThanOrEqual(CALL_RATE_FACTOR);
  });

  it(`calls the object as many times per 100 requests as the simulation, within a factor of ${CALL_RATE_FACTOR}`, () => {
    expect(run.real.callsPer100 / run.sim.callsPer100, run.seen).toBeGreaterThanOrEqual(1 / CALL_RATE_FACTOR);
    expect(run.real.callsPer100 / run.sim.callsPer100, run.seen).toBeLessThanOrEqual(CALL_RATE_FACTOR);
  });
});
