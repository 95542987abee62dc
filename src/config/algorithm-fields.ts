/** The fields whose meaning depends on the algorithm: burst, delay, buckets, warmup, and a cost the rule can ever admit. */
import { largestCost } from "../algorithms";
import { DEFAULT_BUCKETS, MAX_BUCKETS } from "../algorithms/sliding-window";
import type { AlgorithmName } from "../algorithms/types";
import { show, type RuleRef } from "./errors";
import { fail, isCount, parseCount, parseDurationField, TOKEN } from "./fields";
import type { Cost, Mode } from "./types";

/** The most units a key can ever hold: the burst for token-bucket, 1 + burst for gcra, the limit for the others; `term` writes them in terms of the field. */
export type Capacity = { field: "limit" | "burst"; units: number; what: string; term: string };

export function parseBurst(value: unknown, algorithm: AlgorithmName, limit: number, at: RuleRef): number {
  if (algorithm === "gcra") {
    if (value === undefined) return 0;
    if (!Number.isSafeInteger(value) || (value as number) < 0) {
      fail(at, "burst", `expected the tolerance in units for "gcra": an integer, 0 or more (default 0), got ${show(value)}`);
    }
    return value as number;
  }
  if (value === undefined) return limit;
  const burst = parseCount(value, at, "burst");
  if (algorithm !== "token-bucket" && burst !== limit) {
    fail(at, "burst", `burst applies to token-bucket and gcra only (a ${algorithm}'s burst is its limit, ${limit}); remove it, or set "algorithm": "token-bucket"`);
  }
  return burst;
}

/**
 * gcra's `delay` (nginx's two-stage `delay=`): 0 to `burst`, default `burst`. Of a burst, the first
 * 1 + delay requests pass at once and the rest of the tolerance is held until it conforms.
 */
export function parseDelay(value: unknown, algorithm: AlgorithmName, burst: number, at: RuleRef): number | undefined {
  if (algorithm !== "gcra") {
    if (value !== undefined) fail(at, "delay", `delay applies to gcra only; remove it, or set "algorithm": "gcra"`);
    return undefined;
  }
  if (value === undefined) return burst;
  if (!Number.isSafeInteger(value) || (value as number) < 0 || (value as number) > burst) {
    fail(at, "delay", `expected an integer from 0 to the burst (${burst}), got ${show(value)}`);
  }
  return value as number;
}

/**
 * The default is the bucket count the accuracy benchmark chose (bench/RESULTS.md), with each bucket
 * at least 1 ms long, in both modes: fast isolates report their spends in the buckets they were
 * made in, so fast mode gains from fine buckets as strict does.
 */
export function parseBuckets(value: unknown, algorithm: AlgorithmName, periodMs: number, at: RuleRef): number {
  if (value === undefined) return algorithm === "sliding-window" ? Math.min(DEFAULT_BUCKETS, periodMs) : 1;
  const buckets = parseCount(value, at, "buckets");
  if (algorithm !== "sliding-window" && buckets !== 1) {
    fail(at, "buckets", `buckets applies to sliding-window only; remove it, or set "algorithm": "sliding-window"`);
  }
  if (buckets > MAX_BUCKETS) fail(at, "buckets", `expected at most ${MAX_BUCKETS} buckets, got ${buckets}`);
  if (buckets > periodMs) {
    fail(at, "buckets", `each bucket must last at least 1ms: ${buckets} buckets need a period of ${buckets}ms or more`);
  }
  return buckets;
}

export function parseWarmup(value: unknown, algorithm: AlgorithmName, at: RuleRef): number | undefined {
  if (value === undefined) return undefined;
  if (algorithm !== "token-bucket") fail(at, "warmup", `warmup applies to token-bucket only; remove it, or set "algorithm": "token-bucket"`);
  return parseDurationField(value, at, "warmup");
}

/** A warmup is strict-only, and its coldness is counted in exact integers as the bucket's tokens are. */
export function requireWarmupFits(warmupMs: number, limit: number, burst: number, periodMs: number, mode: Mode, at: RuleRef): void {
  if (mode === "fast") {
    const why = `the refill depends on when each unit is taken and how long the bucket has sat full, and the object learns what a lease spent only at the next sync, so a busy key's bucket would look idle and cool between syncs`;
    fail(at, "warmup", `a warmup is strict-only: ${why}; remove it, or use "mode": "strict"`);
  }
  if (2 * limit * warmupMs + 3 * burst * periodMs > Number.MAX_SAFE_INTEGER) {
    fail(at, "warmup", `2 × limit × warmup + 3 × burst × period must not exceed ${Number.MAX_SAFE_INTEGER} so counting stays exact; use a shorter warmup`);
  }
}

/** The algorithms count in exact integers of units × ms; past 2^53 they would silently round. */
export function requireExactArithmetic(limit: number, capacity: Capacity, periodMs: number, at: RuleRef): void {
  const [field, term] = capacity.units > limit ? [capacity.field, capacity.term] : ["limit", "limit"];
  const units = Math.max(limit, capacity.units);
  if (units * periodMs > Number.MAX_SAFE_INTEGER) {
    const product = `${term} × period (${units} × ${periodMs}ms)`;
    const fix = `use a shorter period or a smaller ${field}`;
    fail(at, field, `${product} must not exceed ${Number.MAX_SAFE_INTEGER} unit·ms so counting stays exact; ${fix}`);
  }
}

export function capacityOf(algorithm: AlgorithmName, limit: number, burst: number): Capacity {
  const units = largestCost({ algorithm, limit, burst });
  switch (algorithm) {
    case "token-bucket":
      return { field: "burst", units, what: `the rule's burst of ${burst}`, term: "burst" };
    case "gcra":
      return { field: "burst", units, what: `the ${units} units a gcra rule admits at once (1 + its burst of ${burst})`, term: "(1 + burst)" };
    default:
      return { field: "limit", units, what: `the rule's limit of ${limit}`, term: "limit" };
  }
}

/**
 * `responseCost`: "header:<name>", the response header that says what a request really cost; none
 * when absent. A concurrency rule counts requests in flight, not units, and refuses it.
 */
export function parseResponseCost(value: unknown, algorithm: AlgorithmName, at: RuleRef): { header: string } | undefined {
  if (value === undefined) return undefined;
  if (algorithm === "concurrency") fail(at, "responseCost", `a concurrency rule counts requests in flight, not units, so there is no cost to correct; remove it`);
  const header = typeof value === "string" && /^header:(.+)$/.exec(value)?.[1];
  if (!header || !TOKEN.test(header)) fail(at, "responseCost", `expected "header:<name>", the origin's response header that says what the request cost, like "header:x-tokens-used", got ${show(value)}`);
  return { header: header.toLowerCase() };
}

export function parseCost(value: unknown, capacity: Capacity, at: RuleRef): Cost {
  if (value === undefined) return { units: 1 };
  const header = typeof value === "string" && /^header:(.+)$/.exec(value)?.[1];
  if (header && TOKEN.test(header)) return { header: header.toLowerCase() };
  if (!isCount(value)) {
    fail(at, "cost", `expected a positive integer, or "header:<name>" like "header:x-cost", got ${show(value)}`);
  }
  const { field, units, what } = capacity;
  if (value > units) {
    const why = `so no request could ever be admitted; lower the cost or raise the ${field}`;
    fail(at, "cost", `a cost of ${value} exceeds ${what}, ${why}`);
  }
  return { units: value };
}
