// A paced load driver for a cluster: so many requests per second, spread over the isolates as asked, bounded in count and time.
import type { Cluster } from "./cluster";

/**
 * How requests are spread over the isolates, deterministically (no randomness, so runs repeat):
 * - `"uniform"`: round-robin;
 * - `"skewed"`: isolate 0 takes `skew` of the traffic (default 0.6), the others share the rest evenly;
 * - `{ weights }`: isolate i takes weights[i] / sum(weights), one weight per isolate.
 * Shares are met exactly over any stretch of requests, by smooth weighted round-robin.
 */
export type Distribution = "uniform" | "skewed" | { weights: number[] };

/** What {@link drive} sends. Give `requests`, `durationMs` or both: it stops at whichever comes first. */
export interface DriveOptions {
  /** how many requests to send */
  requests?: number;
  /** how long to send for, in ms */
  durationMs?: number;
  /** the pace: request k is due k / ratePerSecond seconds after the start (1 to 5000) */
  ratePerSecond: number;
  distribution?: Distribution;
  /** isolate 0's share under `"skewed"`, in (0, 1]; default 0.6 */
  skew?: number;
  /** the path (and query) to request, or one per request from its sequence number and isolate; default "/" */
  path?: string | ((sequence: number, isolate: number) => string);
  method?: string;
  headers?: Record<string, string>;
  /** most requests in flight at once; a request that finds them all busy waits and goes late; default 64 */
  concurrency?: number;
  /** one request's limit, after which it is aborted and counted as an error; default 10 000 ms */
  requestTimeoutMs?: number;
  /** when sending stops whatever is left; default the schedule's length × 2 + 10 s */
  deadlineMs?: number;
  /** keep every request's latency and summarize them in the result; default false */
  latencies?: boolean;
}

/** Counts for the whole run or one isolate. */
export interface Tally {
  sent: number;
  /** answered below 400: floodgate let it through (the origin's answer came back) */
  allowed: number;
  /** answered 429 */
  denied: number;
  /** failed to answer (network error, timeout) or answered 400 to 599 but not 429 */
  errors: number;
  /** how many of each status came back; a failure to answer counts under 0 */
  statuses: Record<number, number>;
}

export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface DriveResult extends Tally {
  /** one tally per isolate, by index */
  perIsolate: Tally[];
  /** requests the count allowed but the deadline cut off */
  unsent: number;
  /** from the first request to the last answer, in ms */
  elapsedMs: number;
  /** how far behind schedule the last request went out, in ms: the driver could not keep the pace */
  maxLagMs: number;
  /** request latencies in ms, when asked for */
  latencies?: LatencySummary;
  /** the first few failures' messages, for diagnosis */
  errorSamples: string[];
}

/**
 * Sends paced traffic to a cluster and counts what came back. Every response body is read to the
 * end. It always ends by itself: after `requests` (or `durationMs` × the rate) requests, or at the
 * deadline, and every request has its own timeout.
 *
 * @example
 * const result = await drive(cluster, { requests: 500, ratePerSecond: 1000, distribution: "skewed", path: "/t/x" });
 * expect(result.allowed).toBe(50);
 */
export async function drive(cluster: Pick<Cluster, "fetch" | "fronts">, options: DriveOptions): Promise<DriveResult> {
  const plan = resolve(options, cluster.fronts.length);
  const pick = picker(plan.weights);
  const total = emptyTally();
  const perIsolate = plan.weights.map(emptyTally);
  const latencies: number[] = [];
  const errorSamples: string[] = [];
  const inFlight = new Set<Promise<void>>();
  const start = performance.now();
  const stopAt = start + plan.deadlineMs;
  let sent = 0;
  let maxLagMs = 0;

  const one = async (sequence: number, isolate: number): Promise<void> => {
    const began = performance.now();
    let status = 0;
    try {
      const response = await cluster.fetch(isolate, plan.path(sequence, isolate), {
        method: plan.method,
        headers: plan.headers,
        signal: AbortSignal.timeout(plan.requestTimeoutMs),
      });
      await response.arrayBuffer();
      status = response.status;
    } catch (error) {
      if (errorSamples.length < 5) errorSamples.push(`request ${sequence} to isolate ${isolate}: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (plan.latencies) latencies.push(performance.now() - began);
    for (const tally of [total, perIsolate[isolate]!]) count(tally, status);
  };

  while (sent < plan.requests) {
    const due = start + (sent * 1000) / plan.ratePerSecond;
    let now = performance.now();
    if (due > now && due >= stopAt) break;
    // A timer may fire a fraction of a millisecond early: wait until the request is really due.
    while (due > now) {
      await sleep(due - now);
      now = performance.now();
    }
    if (now >= stopAt) break;
    if (inFlight.size >= plan.concurrency) {
      await Promise.race(inFlight);
      continue;
    }
    maxLagMs = Math.max(maxLagMs, now - due);
    const request = one(sent, pick()).finally(() => inFlight.delete(request));
    inFlight.add(request);
    sent++;
  }
  await Promise.all(inFlight);
  return {
    ...total,
    perIsolate,
    unsent: plan.requests - sent,
    elapsedMs: performance.now() - start,
    maxLagMs,
    errorSamples,
    ...(plan.latencies ? { latencies: summarize(latencies) } : {}),
  };
}

interface Plan {
  requests: number;
  ratePerSecond: number;
  weights: number[];
  path: (sequence: number, isolate: number) => string;
  method: string;
  headers: Record<string, string>;
  concurrency: number;
  requestTimeoutMs: number;
  deadlineMs: number;
  latencies: boolean;
}

/** Fills in defaults and checks every option, naming the one at fault. */
function resolve(options: DriveOptions, isolates: number): Plan {
  const { requests, durationMs, ratePerSecond } = options;
  const fail = (why: string) => new RangeError(`drive: ${why}`);
  if (!(ratePerSecond >= 1 && ratePerSecond <= 5000)) throw fail(`ratePerSecond must be from 1 to 5000, got ${ratePerSecond}`);
  if (requests === undefined && durationMs === undefined) throw fail("give requests, durationMs or both, so the run ends");
  if (requests !== undefined && !(Number.isInteger(requests) && requests >= 0)) throw fail(`requests must be a whole number, got ${requests}`);
  if (durationMs !== undefined && !(durationMs >= 0)) throw fail(`durationMs must be at least 0, got ${durationMs}`);
  const byDuration = durationMs === undefined ? Infinity : Math.ceil((durationMs * ratePerSecond) / 1000);
  const count = Math.min(requests ?? Infinity, byDuration);
  const concurrency = options.concurrency ?? 64;
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw fail(`concurrency must be a whole number from 1, got ${concurrency}`);
  const scheduleMs = (count * 1000) / ratePerSecond;
  const path = options.path ?? "/";
  return {
    requests: count,
    ratePerSecond,
    weights: weightsOf(options.distribution ?? "uniform", options.skew ?? 0.6, isolates),
    path: typeof path === "function" ? path : () => path,
    method: options.method ?? "GET",
    headers: options.headers ?? {},
    concurrency,
    requestTimeoutMs: options.requestTimeoutMs ?? 10_000,
    deadlineMs: options.deadlineMs ?? scheduleMs * 2 + 10_000,
    latencies: options.latencies ?? false,
  };
}

function weightsOf(distribution: Distribution, skew: number, isolates: number): number[] {
  if (distribution === "uniform") return new Array<number>(isolates).fill(1);
  if (distribution === "skewed") {
    if (!(skew > 0 && skew <= 1)) throw new RangeError(`drive: skew must be in (0, 1], got ${skew}`);
    if (isolates === 1) return [1];
    return [skew, ...new Array<number>(isolates - 1).fill((1 - skew) / (isolates - 1))];
  }
  const { weights } = distribution;
  if (weights.length !== isolates) throw new RangeError(`drive: weights needs one entry per isolate (${isolates}), got ${weights.length}`);
  if (weights.some((w) => !(w >= 0)) || !weights.some((w) => w > 0)) throw new RangeError("drive: weights must be at least 0, and one above 0");
  return weights;
}

/**
 * Smooth weighted round-robin (as nginx balances upstreams): each turn every isolate gains its
 * weight in credit and the richest is picked and pays the total, so shares hold over any stretch.
 */
function picker(weights: number[]): () => number {
  const sum = weights.reduce((a, b) => a + b, 0);
  const credit = weights.map(() => 0);
  return () => {
    let best = 0;
    weights.forEach((w, i) => {
      credit[i]! += w;
      if (credit[i]! > credit[best]!) best = i;
    });
    credit[best]! -= sum;
    return best;
  };
}

function emptyTally(): Tally {
  return { sent: 0, allowed: 0, denied: 0, errors: 0, statuses: {} };
}

function count(tally: Tally, status: number): void {
  tally.sent++;
  tally.statuses[status] = (tally.statuses[status] ?? 0) + 1;
  if (status === 429) tally.denied++;
  else if (status > 0 && status < 400) tally.allowed++;
  else tally.errors++;
}

function summarize(samples: number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const round = (ms: number) => Math.round(ms * 100) / 100;
  return {
    count: sorted.length,
    mean: round(sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1)),
    p50: round(at(0.5)),
    p90: round(at(0.9)),
    p99: round(at(0.99)),
    max: round(sorted.at(-1) ?? 0),
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
