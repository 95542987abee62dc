// Exact reference models, written the obvious way with rational arithmetic, to check the algorithms against.
import fc from "fast-check";
import { expect } from "vitest";
import { decide, type Decision, type LimiterState, type Policy } from "../../src/algorithms";

/** A non-negative rational number over BigInt, just enough arithmetic for the models. */
export class Fraction {
  constructor(
    readonly num: bigint,
    readonly den: bigint = 1n,
  ) {}
  static of(n: number): Fraction {
    return new Fraction(BigInt(n));
  }
  add(o: Fraction): Fraction {
    return new Fraction(this.num * o.den + o.num * this.den, this.den * o.den);
  }
  sub(o: Fraction): Fraction {
    return new Fraction(this.num * o.den - o.num * this.den, this.den * o.den);
  }
  mul(o: Fraction): Fraction {
    return new Fraction(this.num * o.num, this.den * o.den);
  }
  cmp(o: Fraction): number {
    const d = this.num * o.den - o.num * this.den;
    return d < 0n ? -1 : d > 0n ? 1 : 0;
  }
  min(o: Fraction): Fraction {
    return this.cmp(o) <= 0 ? this : o;
  }
}

/**
 * A sliding-window counter that keeps every admitted hit and recomputes its buckets from them:
 * the buckets of the last period in full, the one before weighted by its remaining overlap.
 */
export class SlidingWindowModel {
  private readonly hits: { at: number; cost: number }[] = [];
  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
    private readonly buckets = 1,
  ) {}

  decide(cost: number, now: number): boolean {
    const bucketOf = (t: number) => Math.floor((t * this.buckets) / this.periodMs);
    const current = bucketOf(now);
    const sum = (from: number, to: number) =>
      this.hits.filter((h) => bucketOf(h.at) >= from && bucketOf(h.at) <= to).reduce((s, h) => s + h.cost, 0);
    const inside = sum(current - this.buckets + 1, current);
    const oldest = sum(current - this.buckets, current - this.buckets);
    // How far `now` is into its bucket, as a fraction of the bucket's length.
    const into = new Fraction(BigInt(now * this.buckets - current * this.periodMs), BigInt(this.periodMs));
    const weight = Fraction.of(1).sub(into);
    const estimate = Fraction.of(oldest).mul(weight).add(Fraction.of(inside + cost));
    const allowed = estimate.cmp(Fraction.of(this.limit)) <= 0;
    if (allowed) this.hits.push({ at: now, cost });
    return allowed;
  }
}

/** A token bucket in continuous time: tokens are an exact rational that refills at limit/period. */
export class TokenBucketModel {
  private tokens: Fraction;
  private last: number | undefined;
  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
    private readonly burst: number,
  ) {
    this.tokens = Fraction.of(burst);
  }

  decide(cost: number, now: number): boolean {
    if (this.last !== undefined) {
      const refill = new Fraction(BigInt((now - this.last) * this.limit), BigInt(this.periodMs));
      this.tokens = this.tokens.add(refill).min(Fraction.of(this.burst));
    }
    this.last = now;
    const allowed = this.tokens.cmp(Fraction.of(cost)) >= 0;
    if (allowed) this.tokens = this.tokens.sub(Fraction.of(cost));
    return allowed;
  }
}

/** One request of a generated scenario: its gap after the previous one, in thousandths of a period. */
export interface Step {
  gap: number;
  cost: number;
}

/**
 * Runs a scenario through the real algorithm from `start`, returning every request's time, cost
 * and decision, the final state and the final time.
 */
/** Decides a request of `cost` at each of `times` in turn from an empty key: every decision, and the state after the last. */
export function run(policy: Policy, times: number[], cost = 1): { decisions: Decision[]; state: LimiterState | undefined } {
  let state: LimiterState | undefined;
  const decisions = times.map((now) => {
    const outcome = decide(policy, state, cost, now);
    state = outcome.state;
    return outcome.decision;
  });
  return { decisions, state };
}

export function replay(policy: Policy, steps: Step[], start: number) {
  let state: LimiterState | undefined;
  let now = start;
  const requests = steps.map(({ gap, cost }) => {
    now += Math.floor((gap * policy.periodMs) / 1_000);
    const outcome = decide(policy, state, cost, now);
    state = outcome.state;
    return { at: now, cost, decision: outcome.decision };
  });
  return { requests, state, now };
}

/** Up to 200 requests of 1 to `maxCost` units, gaps in thousandths of a period: dense enough to reach the limit. */
export function stepsOf(maxCost: number) {
  const step = fc.record({ gap: fc.nat({ max: 300 }), cost: fc.integer({ min: 1, max: maxCost }) });
  return fc.array(step, { maxLength: 200, size: "max" });
}

/** After the scenario, a request of `cost` that is denied is admitted exactly retryAfter later, not a ms sooner. */
export function expectExactRetry(policy: Policy, steps: Step[], cost: number, start: number): void {
  const { state, now } = replay(policy, steps, start);
  const denied = decide(policy, state, cost, now).decision;
  if (denied.allowed || denied.reason === "cost-exceeds-capacity") return;
  expect(decide(policy, state, cost, now + denied.retryAfter).decision.allowed).toBe(true);
  expect(decide(policy, state, cost, now + denied.retryAfter - 1).decision.allowed).toBe(false);
}

/**
 * After every decision of the scenario, with nothing else arriving: at the full quota (`full`
 * units remaining) `moreAt` is the decision's time; otherwise a request of `remaining + 1` units
 * is admitted at `moreAt` and denied a millisecond before. Returns how many decisions were short
 * of the full quota, so a property can show it tried some.
 */
export function expectExactMoreAt(policy: Policy, steps: Step[], start: number, full: number): number {
  let state: LimiterState | undefined;
  let now = start;
  let checked = 0;
  for (const { gap, cost } of steps) {
    now += Math.floor((gap * policy.periodMs) / 1_000);
    const outcome = decide(policy, state, cost, now);
    state = outcome.state;
    checked += expectNextUnitAt(policy, state, outcome.decision, now, full) ? 1 : 0;
  }
  return checked;
}

/** The check of {@link expectExactMoreAt} for one decision made at `at`, given the state after it; false at the full quota. */
export function expectNextUnitAt(policy: Policy, state: LimiterState, decision: Decision, at: number, full: number): boolean {
  if (decision.remaining >= full) {
    expect(decision.moreAt).toBe(at);
    return false;
  }
  const more = decision.remaining + 1;
  expect(decide(policy, state, more, decision.moreAt).decision.allowed).toBe(true);
  expect(decide(policy, state, more, decision.moreAt - 1).decision.allowed).toBe(false);
  return true;
}

/** Units admitted with `at` in [from, to). */
export function admittedWithin(requests: ReturnType<typeof replay>["requests"], from: number, to: number): number {
  return requests.filter((r) => r.decision.allowed && r.at >= from && r.at < to).reduce((sum, r) => sum + r.cost, 0);
}

/**
 * Every interval from one admission's time to a later (or the same) one's, with the units admitted
 * in it, both ends included: what a bound over any interval is checked on. Summed from running
 * totals, as the pairs are many: summed afresh for each, a property test took seconds.
 */
export function admittedSpans(requests: ReturnType<typeof replay>["requests"]): { from: number; to: number; taken: number }[] {
  const units = new Map<number, number>();
  for (const r of requests) if (r.decision.allowed) units.set(r.at, (units.get(r.at) ?? 0) + r.cost);
  const times = [...units.keys()].sort((a, b) => a - b);
  const before = [0];
  for (const t of times) before.push(before[before.length - 1]! + units.get(t)!);
  const spans = [];
  for (let i = 0; i < times.length; i++) {
    for (let j = i; j < times.length; j++) spans.push({ from: times[i]!, to: times[j]!, taken: before[j + 1]! - before[i]! });
  }
  return spans;
}

/** A fixed window by the book: a count per epoch-aligned window, kept for every window. */
export class FixedWindowModel {
  private readonly counts = new Map<number, number>();
  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
  ) {}

  decide(cost: number, now: number): boolean {
    const window = Math.floor(now / this.periodMs);
    const count = this.counts.get(window) ?? 0;
    const allowed = count + cost <= this.limit;
    if (allowed) this.counts.set(window, count + cost);
    return allowed;
  }
}

/** A sliding log by the book: every admitted hit, summed over the period ending now, (now − period, now]. */
export class SlidingLogModel {
  private readonly hits: { at: number; cost: number }[] = [];
  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
  ) {}

  decide(cost: number, now: number): boolean {
    const used = this.hits.filter((h) => h.at > now - this.periodMs).reduce((sum, h) => sum + h.cost, 0);
    const allowed = used + cost <= this.limit;
    if (allowed) this.hits.push({ at: now, cost });
    return allowed;
  }
}

/**
 * GCRA as the ATM Forum and redis-cell state it, with a rational theoretical arrival time:
 * T = period / limit; a request of cost c conforms if max(TAT, now) + c·T − now ≤ τ + T with
 * τ = burst·T; it then sets TAT to max(TAT, now) + c·T. With nginx's `delay`, a conforming request
 * is held until TAT − now would be at most (delay + 1)·T.
 */
export class GcraModel {
  private tat: Fraction | undefined;
  private readonly interval: Fraction;
  constructor(
    limit: number,
    periodMs: number,
    private readonly burst: number,
    private readonly delay = burst,
  ) {
    this.interval = new Fraction(BigInt(periodMs), BigInt(limit));
  }

  /** Whether the request conforms, and how long (ceil, in ms) it is held when it does. */
  decide(cost: number, now: number): { allowed: boolean; holdMs: number } {
    const at = Fraction.of(now);
    const from = this.tat === undefined || this.tat.cmp(at) < 0 ? at : this.tat;
    const next = from.add(this.interval.mul(Fraction.of(cost)));
    const ahead = next.sub(at);
    const allowed = ahead.cmp(this.interval.mul(Fraction.of(this.burst + 1))) <= 0;
    if (!allowed) return { allowed, holdMs: 0 };
    this.tat = next;
    const over = ahead.sub(this.interval.mul(Fraction.of(this.delay + 1)));
    const holdMs = over.num <= 0n ? 0 : Number((over.num + over.den - 1n) / over.den);
    return { allowed, holdMs };
  }
}
