// Token bucket with a warmup: behaviours with an explicit clock, and decision for decision against Guava's SmoothWarmingUp stepped by hand.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { adjust, decide, peek, usedUnits } from "../../src/algorithms";
import type { LimiterState, Policy } from "../../src/algorithms";
import { admittedSpans, expectExactMoreAt, expectExactRetry, expectNextUnitAt, Fraction, replay, run } from "./reference";

const policy = (limit: number, periodMs: number, burst: number, warmupMs: number): Policy => ({
  algorithm: "token-bucket",
  limit,
  periodMs,
  burst,
  buckets: 1,
  warmupMs,
});
const T0 = 1_700_000_000_000;
/** 10 a second, one saved, warming up over 10 s: warm, a unit refills in 100 ms. */
const tenASecond = policy(10, 1_000, 1, 10_000);

/** Units admitted in each second of `seconds` with a request of one unit every millisecond, from `state` at `start`. */
function perSecond(p: Policy, state: LimiterState | undefined, start: number, seconds: number) {
  const counts: number[] = Array(seconds).fill(0);
  for (let t = 0; t < seconds * 1_000; t++) {
    const outcome = decide(p, state, 1, start + t);
    state = outcome.state;
    if (outcome.decision.allowed) counts[Math.floor(t / 1_000)]! += 1;
  }
  return { counts, state };
}

/**
 * Guava's SmoothWarmingUp (SmoothRateLimiter.java), written from its description with its own
 * names and exact fractions, as a bucket of `burst` units stepped 1/periodMs of a unit at a time:
 * stableInterval = period / limit; coldInterval = 3 × stableInterval; thresholdPermits =
 * 0.5 × warmup / stableInterval; maxPermits = thresholdPermits + 2 × warmup / (stableInterval +
 * coldInterval). Stored permits grow while the bucket is full, at maxPermits / warmup (one per
 * coolDownInterval = warmup / maxPermits), and fall by one for each unit refilled; refilling the
 * permit between x − 1 and x takes the integral of the interval over it, which is stableInterval
 * up to thresholdPermits and climbs linearly to coldInterval at maxPermits. Time is counted in
 * 1/limit ms and the integral from 0 rounded down to that grain, as floodgate counts it.
 */
class SmoothWarmingUpModel {
  private readonly stableInterval: Fraction;
  private readonly thresholdPermits: Fraction;
  private readonly maxPermits: Fraction;
  private readonly slope: Fraction;
  /** 1/periodMs units in the bucket, Guava's stored permits in 1/periodMs units, grains spent on the unit being refilled */
  private level: number;
  private stored: number;
  private progress = 0;
  private last: number | undefined;

  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
    private readonly burst: number,
    warmupMs: number,
  ) {
    const warmup = Fraction.of(warmupMs);
    this.stableInterval = new Fraction(BigInt(periodMs), BigInt(limit));
    const coldInterval = this.stableInterval.mul(Fraction.of(3));
    this.thresholdPermits = warmup.mul(new Fraction(BigInt(limit), BigInt(2 * periodMs)));
    const above = warmup.mul(Fraction.of(2)).mul(inverse(this.stableInterval.add(coldInterval)));
    this.maxPermits = this.thresholdPermits.add(above);
    this.slope = coldInterval.sub(this.stableInterval).mul(inverse(above));
    this.level = burst * periodMs;
    // Guava starts cold: a key never seen has every permit stored.
    this.stored = whole(this.maxPermits.mul(Fraction.of(periodMs)));
  }

  decide(cost: number, now: number): boolean {
    if (this.last !== undefined && now > this.last) this.spend((now - this.last) * this.limit);
    this.last = this.last === undefined ? now : Math.max(now, this.last);
    const allowed = cost <= this.burst && this.level >= cost * this.periodMs;
    if (allowed) this.level -= cost * this.periodMs;
    return allowed;
  }

  /** Spends `grains` of 1/limit ms: refilling while the bucket is not full, storing permits while it is. */
  private spend(grains: number): void {
    const full = this.burst * this.periodMs;
    const most = whole(this.maxPermits.mul(Fraction.of(this.periodMs)));
    while (grains > 0) {
      if (this.level >= full) {
        this.stored = Math.min(most, this.stored + grains);
        return;
      }
      const step = this.stored > 0 ? this.waitGrains(this.stored) - this.waitGrains(this.stored - 1) : 1;
      const need = step - this.progress;
      if (grains < need) {
        this.progress += grains;
        return;
      }
      grains -= need;
      this.progress = 0;
      this.level += 1;
      this.stored = Math.max(0, this.stored - 1);
    }
  }

  /** The integral of the interval from 0 to `units` / periodMs permits, in whole 1/limit ms, rounded down. */
  private waitGrains(units: number): number {
    const permits = new Fraction(BigInt(units), BigInt(this.periodMs));
    let ms = permits.mul(this.stableInterval);
    if (permits.cmp(this.thresholdPermits) > 0) {
      const above = permits.sub(this.thresholdPermits);
      ms = ms.add(above.mul(above).mul(this.slope).mul(new Fraction(1n, 2n)));
    }
    return whole(ms.mul(Fraction.of(this.limit)));
  }
}

function inverse(f: Fraction): Fraction {
  return new Fraction(f.den, f.num);
}

function whole(f: Fraction): number {
  return Number(f.num / f.den);
}

describe("token bucket with a warmup", () => {
  it("passes the saved burst at once, even cold", () => {
    const { decisions } = run(policy(10, 1_000, 5, 10_000), Array(6).fill(T0));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
  });

  it("after an idle spell the rate starts at a third: the first unit refills in 298 ms, not 100", () => {
    const { state } = run(tenASecond, [T0]);
    expect(decide(tenASecond, state, 1, T0).decision).toMatchObject({ allowed: false, retryAfter: 298 });
    expect(decide(tenASecond, state, 1, T0 + 297).decision.allowed).toBe(false);
    expect(decide(tenASecond, state, 1, T0 + 298).decision.allowed).toBe(true);
  });

  it("climbs to the full rate over warmup under steady demand", () => {
    const { counts } = perSecond(tenASecond, undefined, T0, 14);
    const sum = (from: number, to: number) => counts.slice(from, to).reduce((a, b) => a + b, 0);
    // The saved unit and three refilled in the first second; faster in the second half of the warmup; the full rate after it.
    expect(counts.slice(0, 2)).toEqual([4, 3]);
    expect(sum(0, 5)).toBeLessThan(sum(5, 10));
    expect(sum(5, 10)).toBeLessThan(50);
    expect(counts.slice(10)).toEqual([10, 10, 10, 10]);
  });

  it("stays warm through an idle spell shorter than half the warmup", () => {
    const { state } = perSecond(tenASecond, undefined, T0, 20);
    const back = T0 + 20_000 + 4_900;
    const first = decide(tenASecond, state, 1, back);
    expect(decide(tenASecond, first.state, 1, back).decision.retryAfter).toBe(100);
  });

  it("is fully cold again after an idle spell of the warmup", () => {
    const { state } = perSecond(tenASecond, undefined, T0, 20);
    // Full at most 100 ms after the last request, then cold after the warmup.
    const back = T0 + 20_000 + 100 + 10_000;
    const first = decide(tenASecond, state, 1, back);
    expect(decide(tenASecond, first.state, 1, back).decision.retryAfter).toBe(298);
  });

  it("refund gives units back, coldness included", () => {
    const p = policy(10, 1_000, 5, 10_000);
    const { state } = run(p, [T0, T0 + 50]);
    const taken = decide(p, state, 2, T0 + 60).state;
    expect(adjust(p, taken, -2, T0 + 60, T0 + 60)).toEqual(decide(p, state, 0, T0 + 60).state);
  });

  it("takes refunds back up to the burst only", () => {
    const p = policy(10, 1_000, 3, 10_000);
    const { state } = run(p, [T0]);
    expect(peek(p, adjust(p, state, -5, T0, T0), T0).remaining).toBe(3);
  });

  it("keeps debt from units taken without a decision, refilled cold", () => {
    const indebted = adjust(tenASecond, undefined, 2, T0, T0);
    expect(usedUnits(tenASecond, indebted, T0)).toBe(2);
    // Two cold units (298 + 294 ms) before one is whole again.
    expect(decide(tenASecond, indebted, 1, T0).decision.retryAfter).toBe(592);
  });

  it("peeks without consuming, and says when more comes", () => {
    const { state } = run(tenASecond, [T0]);
    expect(peek(tenASecond, state, T0 + 10)).toMatchObject({ remaining: 0, moreAt: T0 + 298, retryAfter: 288 });
    expect(peek(tenASecond, state, T0 + 298)).toMatchObject({ remaining: 1, allowed: true });
  });

  it("is back at rest, full and fully cold, at resetAt: as a key never seen", () => {
    const { decisions, state } = run(tenASecond, [T0]);
    const resetAt = decisions[0]!.resetAt;
    expect(resetAt).toBe(T0 + 298 + 100);
    expect(decide(tenASecond, state, 1, resetAt).state).toEqual(decide(tenASecond, undefined, 1, resetAt).state);
    expect(decide(tenASecond, state, 1, resetAt - 1).state).not.toEqual(decide(tenASecond, undefined, 1, resetAt - 1).state);
  });

  it("starts a live key warm when its rule gains a warmup, and keeps its level when it loses it", () => {
    const plain: Policy = { ...tenASecond, warmupMs: undefined };
    const { state } = run(plain, [T0]);
    expect(decide(tenASecond, state, 1, T0).decision.retryAfter).toBe(100);
    // 99 ms of cold refill, about 3 intervals a unit, made 330/1000 of a unit; the plain rule refills the rest at its rate.
    const converted = decide(plain, run(tenASecond, [T0]).state, 0, T0 + 99).state;
    expect(converted).toEqual({ algorithm: "token-bucket", periodMs: 1_000, burst: 1, level: 330, updatedAt: T0 + 99 });
    expect(peek(plain, converted, T0 + 165).remaining).toBe(0);
    expect(peek(plain, converted, T0 + 166).remaining).toBe(1);
  });

  it("counts a cold refill to the millisecond when its coldness squared is past 2^53", () => {
    // 100,000 a second over an hour's warmup: a cold burst of 100,000 refills in 3d − 2d²/w of
    // 1/limit ms (d = 10^8 and w = 3.6 × 10^11 in 1/periodMs units), 299,944,445: 2,999.44 ms.
    const p = policy(100_000, 1_000, 100_000, 3_600_000);
    const { state } = run(p, [T0], 100_000);
    expect(decide(p, state, 100_000, T0).decision.retryAfter).toBe(3_000);
    // The last 0.44 ms (44,445 of them) still refill at nearly 3 intervals a unit: 15 units.
    expect(peek(p, state, T0 + 2_999).remaining).toBe(99_985);
  });

  it("keeps the units taken when the burst is lowered or raised under a live key", () => {
    const day = (burst: number) => policy(burst, 86_400_000, burst, 3_600_000);
    const { state } = run(day(5), [T0, T0, T0]);
    expect(decide(day(2), state, 1, T0 + 1).decision).toMatchObject({ allowed: false, remaining: 0 });
    expect(peek(day(10), state, T0 + 1).remaining).toBe(7);
  });

  it("keeps a live key's level and coldness when its warmup or limit changes", () => {
    const { state } = run(tenASecond, [T0]);
    const longer = policy(10, 1_000, 1, 20_000);
    // As cold as before, a fraction of the new maximum: the first unit still takes about 3 intervals.
    expect(decide(longer, state, 1, T0).decision.retryAfter).toBe(299);
  });
});

describe("token bucket with a warmup, properties", () => {
  const scenario = fc.record({
    limit: fc.integer({ min: 1, max: 10 }),
    periodMs: fc.integer({ min: 1, max: 200 }),
    burst: fc.integer({ min: 1, max: 6 }),
    warmupMs: fc.integer({ min: 1, max: 3_000 }),
    // Mostly close together, to reach the limit, now and then an idle spell long enough to cool.
    steps: fc.array(
      fc.record({
        gapMs: fc.oneof({ arbitrary: fc.nat({ max: 40 }), weight: 6 }, { arbitrary: fc.nat({ max: 4_000 }), weight: 1 }),
        cost: fc.integer({ min: 1, max: 4 }),
      }),
      { maxLength: 200, size: "max" },
    ),
  });

  it("decides exactly as Guava's SmoothWarmingUp stepped by hand", () => {
    let denied = 0;
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, burst, warmupMs, steps }) => {
        const p = policy(limit, periodMs, burst, warmupMs);
        const model = new SmoothWarmingUpModel(limit, periodMs, burst, warmupMs);
        let state: LimiterState | undefined;
        let now = T0;
        for (const { gapMs, cost } of steps) {
          now += gapMs;
          const outcome = decide(p, state, cost, now);
          state = outcome.state;
          expect(outcome.decision.allowed).toBe(model.decide(cost, now));
          denied += outcome.decision.allowed ? 0 : 1;
        }
      }),
      { numRuns: 300 },
    );
    expect(denied).toBeGreaterThan(1_000);
  });

  const replayed = fc.record({
    limit: fc.integer({ min: 1, max: 50 }),
    periodMs: fc.integer({ min: 1, max: 100_000 }),
    burst: fc.integer({ min: 1, max: 50 }),
    warmupMs: fc.integer({ min: 1, max: 1_000_000 }),
    steps: fc.array(fc.record({ gap: fc.nat({ max: 300 }), cost: fc.integer({ min: 1, max: 8 }) }), { maxLength: 200, size: "max" }),
  });

  it("admits a denied request exactly retryAfter later, and not a millisecond sooner", () => {
    fc.assert(
      fc.property(replayed, fc.integer({ min: 1, max: 8 }), ({ limit, periodMs, burst, warmupMs, steps }, cost) => {
        expectExactRetry(policy(limit, periodMs, burst, warmupMs), steps, cost, T0);
      }),
      { numRuns: 500 },
    );
  });

  it("grows remaining by a unit exactly at moreAt, and not a millisecond sooner", () => {
    let checked = 0;
    fc.assert(
      fc.property(replayed, ({ limit, periodMs, burst, warmupMs, steps }) => {
        checked += expectExactMoreAt(policy(limit, periodMs, burst, warmupMs), steps, T0, burst);
      }),
      { numRuns: 300 },
    );
    expect(checked).toBeGreaterThan(1_000);
  });

  it("peeks the next unit exactly, also for a bucket in debt from units taken without a decision", () => {
    fc.assert(
      fc.property(replayed, fc.nat({ max: 40 }), fc.nat({ max: 2_000 }), ({ limit, periodMs, burst, warmupMs, steps }, extra, later) => {
        const p = policy(limit, periodMs, burst, warmupMs);
        const { state, now } = replay(p, steps, T0);
        const taken = adjust(p, state, extra, now, now);
        const at = now + Math.floor((later * periodMs) / 1_000);
        expectNextUnitAt(p, taken, peek(p, taken, at), at, burst);
      }),
      { numRuns: 300 },
    );
  });

  it("is full at resetAt", () => {
    fc.assert(
      fc.property(replayed, ({ limit, periodMs, burst, warmupMs, steps }) => {
        const p = policy(limit, periodMs, burst, warmupMs);
        const { state, now } = replay(p, steps, T0);
        expect(peek(p, state, peek(p, state, now).resetAt).remaining).toBe(burst);
      }),
      { numRuns: 300 },
    );
  });

  it("never admits more than the plain bucket would: burst plus the refill over any interval", () => {
    fc.assert(
      fc.property(replayed, ({ limit, periodMs, burst, warmupMs, steps }) => {
        const { requests } = replay(policy(limit, periodMs, burst, warmupMs), steps, T0);
        expect(admittedSpans(requests).filter(({ from, to, taken }) => taken > burst + ((to - from) * limit) / periodMs)).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});
