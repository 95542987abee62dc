/** One scenario's entry in bench/simulation.json: the issue's fields first, then what explains them. */
import type { World } from "./engine";
import { quantile } from "../lib/stats";
import type { WaitCause } from "./isolate";

export interface ScenarioResult {
  name: string;
  family: string;
  mode: "fast" | "strict";
  algorithm: string;
  isolates: number;
  /** offered load as a multiple of the limit (per-client keys: of the hottest key) */
  load: number;
  /** sliding window: most admitted in one fixed window of the period ÷ limit (worst key); null for a token bucket */
  maxPerWindowOverLimit: number | null;
  /** token bucket: the worst excess over burst + rate·t in any interval, as a fraction of the limit (worst key); null for a sliding window */
  tokenExcess: number | null;
  /** 1 − admitted ÷ what an exact limiter admits on the same traffic */
  underAdmission: number;
  /** calls arriving at one key's object in its busiest second after the warm-up (the busiest key's); the cold start's is in detail */
  objectCallsPerSecondPeak: number;
  objectCallsPer100Requests: number;
  /** share of requests after the warm-up that waited on an object call */
  waitedForObject: number;
  /** requests onError answered (timeouts, overloaded objects, breakers open) */
  errors: number;
  status: "ok";
  detail: {
    traffic: string;
    limit: number;
    periodMs: number;
    simulatedSeconds: number;
    offeredPerSecond: number;
    requests: number;
    admitted: number;
    exactAdmitted: number;
    /** sliding window: most admitted in any span of one period, not only fixed windows (one hot key only) */
    maxPerAnyPeriodOverLimit: number | null;
    calls: number;
    /** calls arriving at one key's object in its busiest second, the warm-up (every isolate's first call) included */
    objectCallsPerSecondPeakWithWarmup: number;
    /** requests admitted by onError's answer, not by a lease or the object */
    admittedOnError: number;
    errorsByKind: { timeout: number; overloaded: number; unavailable: number; queueFull: number; reset: number };
    lostWithIsolates: number;
    isolatesBorn: number;
    /** fast syncs by why they were made: an isolate's first for the key, a request its lease could not pay for, a background sync, a release */
    callsByKind: { first: number; waiting: number; background: number; release: number };
    /** the hottest object's: busy share of its thread, most calls queued, most peers, largest peer row and key row sampled (bytes of JSON) */
    objectBusy: number;
    objectMaxQueued: number;
    objectMaxPeers: number;
    objectMaxPeerRowBytes: number;
    objectMaxKeyRowBytes: number;
    /** the hottest object's busiest second after the warm-up: its fast syncs by why they were made */
    objectPeakByKind: { first: number; waiting: number; background: number; release: number };
    /** the relays between the isolates and the key's object, where any was used (else null) */
    relay: RelayFigures | null;
    /** how long the requests counted in waitedForObject waited, ms (median, 99th percentile); null when none did */
    waitMs: { p50: number; p99: number } | null;
    /** requests after the warm-up, and in fast mode those that waited by why (see WaitCause; null in strict mode, where every request that calls waits) */
    steadyRequests: number;
    waitsByCause: Record<WaitCause, number> | null;
    /** strict: decisions per object call (the coalescer's batch size); fast: requests per call */
    requestsPerCall: number;
    /** requests decided without error after the warm-up, per second */
    servedPerSecond: number;
    /** calls per second, each second of the run (all keys) */
    callsPerSecond: number[];
    admittedPerSecond: number[];
    offeredPerSecondSeries: number[];
    events: number;
  };
}

/** What the relays did: their calls are the isolates' syncs, their batches the key's object's calls. */
export interface RelayFigures {
  /** locations with a relay */
  relays: number;
  /** relays that restarted during the run (each location's next call met a fresh one) */
  restarts: number;
  /** the isolates' calls to their relays */
  calls: number;
  /** the busiest relay's calls in its busiest second after the warm-up, and counting the warm-up */
  callsPerSecondPeak: number;
  callsPerSecondPeakWithWarmup: number;
  batches: number;
  syncsPerBatch: number;
  /** syncs refused at once by a full queue, batches that outlived their timeout, calls refused as overloaded */
  refused: number;
  timedOut: number;
  overloaded: number;
  /** the busiest relay's busy share of its thread */
  busy: number;
}

function relayFigures(world: World): RelayFigures | null {
  if (world.relays.size === 0 && world.restartedRelays.length === 0) return null;
  const all = [...world.relays.values(), ...world.restartedRelays.map((r) => r.relay)].map((r) => r.stats);
  const sum = (f: (x: (typeof all)[number]) => number) => all.reduce((a, x) => a + f(x), 0);
  const batches = sum((x) => x.batches);
  return {
    relays: new Set([...world.relays.keys(), ...world.restartedRelays.map((r) => r.name)]).size,
    restarts: world.restartedRelays.length,
    calls: sum((x) => x.arrived),
    callsPerSecondPeak: Math.max(...all.map((x) => x.steadyPeakPerSecond)),
    callsPerSecondPeakWithWarmup: Math.max(...all.map((x) => x.peakPerSecond)),
    batches,
    syncsPerBatch: batches > 0 ? round(sum((x) => x.forwarded) / batches, 3) : 0,
    refused: sum((x) => x.refused),
    timedOut: sum((x) => x.timedOut),
    overloaded: sum((x) => x.overloaded),
    busy: round(Math.max(...all.map((x) => x.busyMs)) / (world.scenario.durationMs + 5_000), 4),
  };
}

/** The figures the report reads, from a finished run. */
export function summarise(world: World): ScenarioResult {
  const { scenario: s, totals, objects, accounts } = world;
  let admitted = 0;
  let exact = 0;
  let maxWindow = 0;
  let maxExcess = 0;
  let anyPeriod = Number.NaN;
  for (const account of accounts.values()) {
    admitted += account.admitted;
    exact += account.exactAdmitted;
    maxWindow = Math.max(maxWindow, account.maxInWindow);
    maxExcess = Math.max(maxExcess, account.maxExcess);
    if (account.times) anyPeriod = account.maxInAnyPeriod();
  }
  let hottest = [...objects.values()][0];
  let calls = 0;
  let peak = 0;
  let steadyPeak = 0;
  let steadyPeakObject = hottest;
  for (const object of objects.values()) {
    calls += object.stats.arrived;
    peak = Math.max(peak, object.stats.peakPerSecond);
    if (object.stats.steadyPeakPerSecond > steadyPeak) steadyPeakObject = object;
    steadyPeak = Math.max(steadyPeak, object.stats.steadyPeakPerSecond);
    if (!hottest || object.stats.arrived > hottest.stats.arrived) hottest = object;
  }
  const simulatedSeconds = s.durationMs / 1000;
  const window = s.algorithm === "sliding-window";
  const steadySeconds = (s.durationMs - s.warmupMs) / 1000;
  const stats = hottest?.stats;
  return {
    name: s.name,
    family: s.family,
    mode: s.mode,
    algorithm: s.algorithm,
    isolates: s.isolates,
    load: round(s.load, 6),
    maxPerWindowOverLimit: window ? round(maxWindow / s.limit, 6) : null,
    tokenExcess: window ? null : round(maxExcess / s.limit, 6),
    underAdmission: exact > 0 ? round(1 - admitted / exact, 6) : 0,
    objectCallsPerSecondPeak: steadyPeak,
    objectCallsPer100Requests: totals.requests > 0 ? round((100 * calls) / totals.requests, 4) : 0,
    waitedForObject: totals.steadyRequests > 0 ? round(totals.steadyWaited / totals.steadyRequests, 6) : 0,
    errors: totals.errorCount,
    status: "ok",
    detail: {
      traffic: `${s.shape.kind}, ${s.spread}${s.keys > 1 ? `, ${s.keys.toLocaleString("en-US")} keys (Zipf s = ${s.zipf}, ${s.homes} isolates each)` : ""}`,
      limit: s.limit,
      periodMs: s.periodMs,
      simulatedSeconds,
      offeredPerSecond: round(totals.requests / simulatedSeconds, 1),
      requests: totals.requests,
      admitted,
      exactAdmitted: exact,
      maxPerAnyPeriodOverLimit: window && Number.isFinite(anyPeriod) ? round(anyPeriod / s.limit, 6) : null,
      calls,
      objectCallsPerSecondPeakWithWarmup: peak,
      admittedOnError: totals.admittedOnError,
      errorsByKind: { ...totals.errors },
      callsByKind: { ...totals.callKinds },
      lostWithIsolates: totals.lost,
      isolatesBorn: world.born,
      objectBusy: stats ? round(stats.busyMs / (s.durationMs + 5_000), 4) : 0,
      objectMaxQueued: stats?.maxQueued ?? 0,
      objectMaxPeers: stats?.maxPeers ?? 0,
      objectMaxPeerRowBytes: stats?.maxPeerRowBytes ?? 0,
      objectMaxKeyRowBytes: stats?.maxKeyRowBytes ?? 0,
      objectPeakByKind: { ...(steadyPeakObject?.stats.steadyPeakKinds ?? { first: 0, waiting: 0, background: 0, release: 0 }) },
      relay: relayFigures(world),
      waitMs: totals.steadyWaits.length > 0 ? { p50: round(quantile(totals.steadyWaits, 0.5), 1), p99: round(quantile(totals.steadyWaits, 0.99), 1) } : null,
      steadyRequests: totals.steadyRequests,
      waitsByCause: s.mode === "fast" ? { ...totals.steadyWaitCauses } : null,
      requestsPerCall: calls > 0 ? round(totals.requests / calls, 3) : 0,
      servedPerSecond: round((totals.steadyRequests - totals.steadyErrors) / steadySeconds, 1),
      callsPerSecond: totals.callsPerSecond,
      admittedPerSecond: totals.admittedPerSecond,
      offeredPerSecondSeries: totals.offeredPerSecond,
      events: world.clock.events,
    },
  };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
