import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { adjust, decide, mostOwed, peek } from "../../src/algorithms";
import type { LimiterState, Policy } from "../../src/algorithms";
import { admittedSpans, expectExactMoreAt, expectExactRetry, expectNextUnitAt, replay, run, stepsOf, TokenBucketModel } from "./reference";

const policy = (limit: number, periodMs: number, burst = limit): Policy => ({
  algorithm: "token-bucket",
  limit,
  periodMs,
  burst,
  buckets: 1,
});
const T0 = 1_700_000_000_000;

describe("token bucket", () => {
  it("starts full and admits a burst of exactly `burst`", () => {
    const { decisions } = run(policy(1, 60_000, 3), [T0, T0, T0, T0]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
  });

  it("refills fractionally: one token per period/limit", () => {
    const p = policy(6, 60_000);
    const { state } = run(p, Array(6).fill(T0));
    expect(decide(p, state, 1, T0 + 9_999).decision.allowed).toBe(false);
    expect(decide(p, state, 1, T0 + 10_000).decision.allowed).toBe(true);
  });

  it("refills exactly with a rate that is not a whole number of milliseconds", () => {
    // 3 tokens per second: one every 333.33 ms, so the first whole token is back at 334 ms.
    const p = policy(3, 1_000);
    const { state } = run(p, [T0, T0, T0]);
    expect(decide(p, state, 1, T0 + 333).decision.allowed).toBe(false);
    expect(decide(p, state, 1, T0 + 334).decision.allowed).toBe(true);
    expect(decide(p, state, 3, T0 + 1_000).decision.allowed).toBe(true);
  });

  it("denies a request costing more than is left without draining the bucket", () => {
    const p = policy(10, 60_000);
    const { state } = run(p, [T0], 8);
    const big = decide(p, state, 5, T0);
    expect(big.decision.allowed).toBe(false);
    expect(big.decision.retryAfter).toBe(18_000);
    expect(decide(p, big.state, 2, T0).decision.allowed).toBe(true);
  });

  it("never holds more than burst", () => {
    const p = policy(10, 1_000, 4);
    expect(peek(p, run(p, [T0]).state, T0 + 3_600_000).remaining).toBe(4);
  });

  it("denies a request that costs more than the burst, telling it to wait a period", () => {
    expect(decide(policy(5, 60_000), undefined, 6, T0).decision).toMatchObject({
      allowed: false,
      reason: "cost-exceeds-capacity",
      retryAfter: 60_000,
    });
  });

  it("neither refills nor corrupts state for a request timed before the last refill", () => {
    const p = policy(1, 60_000);
    const { state } = run(p, [T0 + 60_000]);
    const skewed = decide(p, state, 1, T0);
    expect(skewed.decision.allowed).toBe(false);
    expect(skewed.state).toEqual(state);
  });

  it("takes refunds back up to the burst only", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0]);
    expect(peek(p, adjust(p, state, -5, T0, T0), T0).remaining).toBe(2);
  });

  it("takes units reported late at the time they were taken: a burst from full, told a second on, has refilled since", () => {
    // 10 every 4 s: ten taken at T0 from a full bucket leave 2.5 a second later, whenever the object hears of them.
    const p = policy(10, 4_000);
    const { state: onTime } = run(p, Array(10).fill(T0));
    expect(peek(p, adjust(p, undefined, 10, T0, T0 + 1_000), T0 + 1_000).remaining).toBe(2);
    expect(peek(p, adjust(p, undefined, 10, T0, T0 + 1_000), T0 + 1_000)).toEqual(peek(p, onTime, T0 + 1_000));
  });

  it("credits a late report no refill from before the bucket was last not full", () => {
    // Two taken at T0 + 1,000 leave it short until T0 + 13,000; the report's units, from T0, count from then.
    const p = policy(10, 60_000);
    const { state } = run(p, [T0 + 1_000, T0 + 1_000]);
    const reported = adjust(p, state, 3, T0, T0 + 20_000);
    expect(peek(p, reported, T0 + 20_000).remaining).toBe(Math.floor(10 - 3 + 7_000 / 6_000));
  });

  it("takes units reported late in the order they went as if each had been taken on time", () => {
    // 60 a minute: one a second for ten minutes, reported at the end, leave the bucket as full as on time.
    const p = policy(60, 60_000);
    const times = Array.from({ length: 600 }, (_, i) => T0 + (i + 1) * 1_000);
    const now = T0 + 601_000;
    const late = times.reduce<LimiterState | undefined>((state, t) => adjust(p, state, 1, t, now), undefined);
    expect(peek(p, late, now)).toEqual(peek(p, run(p, times).state, now));
    expect(peek(p, late, now).remaining).toBe(60);
  });

  it("leaves at most one period's debt from units admitted by onError: a flood let through costs a unit a period from then", () => {
    const p = policy(10, 60_000);
    const flooded = adjust(p, undefined, 500, T0, T0 + 1_000, mostOwed(p));
    expect(peek(p, flooded, T0 + 1_000).retryAfter).toBe(59_000);
    expect(decide(p, flooded, 1, T0 + 60_000).decision.allowed).toBe(true);
  });

  it("keeps the debt it already had when units admitted by onError come past one period's", () => {
    const p = policy(10, 60_000);
    const indebted = adjust(p, undefined, 500, T0, T0);
    expect(adjust(p, indebted, 5, T0 - 1_000, T0, mostOwed(p))).toEqual(indebted);
  });

  it("counts a lease's units reported late in full, whatever debt they leave", () => {
    const p = policy(10, 60_000);
    expect(peek(p, adjust(p, undefined, 500, T0, T0 + 1_000), T0 + 1_000).retryAfter).toBe(2_945_000);
  });

  it("counts units given back at now, whatever their time", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0, T0]);
    expect(adjust(p, state, -1, T0 - 50_000, T0 + 10)).toEqual(adjust(p, state, -1, T0 + 10, T0 + 10));
  });

  it("keeps debt from units taken without a decision, paid off by refill", () => {
    const p = policy(2, 60_000);
    const indebted = adjust(p, undefined, 4, T0, T0);
    expect(decide(p, indebted, 1, T0 + 59_999).decision.allowed).toBe(false);
    expect(decide(p, indebted, 1, T0 + 90_000).decision.allowed).toBe(true);
  });

  it("says more comes with the next whole token, not when the bucket is full", () => {
    // 6 tokens a minute, 3 taken: one is back 10 s after, all three after 30 s.
    const { decisions } = run(policy(6, 60_000), [T0, T0, T0]);
    expect(decisions[2]).toMatchObject({ remaining: 3, moreAt: T0 + 10_000, resetAt: T0 + 30_000 });
  });

  it("counts the next token from the fraction already refilled", () => {
    // 3 tokens a second, one every 333.3 ms: 100 ms after taking two from a full bucket, the next is due at 334 ms.
    const p = policy(3, 1_000);
    const { state } = run(p, [T0, T0]);
    expect(decide(p, state, 0, T0 + 100).decision).toMatchObject({ remaining: 1, moreAt: T0 + 334 });
  });

  it("says more comes at the decision's time when the bucket is full", () => {
    expect(peek(policy(6, 60_000), undefined, T0 + 5).moreAt).toBe(T0 + 5);
  });

  it("reports the reset as the time the bucket is full again", () => {
    const { decisions } = run(policy(2, 60_000), [T0]);
    expect(decisions[0]?.resetAt).toBe(T0 + 30_000);
  });

  it("keeps the tokens taken when the burst is lowered under a live key: 3 of 5 taken leave none of 2", () => {
    const { state } = run(policy(5, 86_400_000), [T0, T0, T0]);
    expect(decide(policy(2, 86_400_000), state, 1, T0 + 1).decision).toMatchObject({ allowed: false, remaining: 0 });
  });

  it("adds a raised burst's extra room under a live key: 3 of 5 taken leave 7 of 10", () => {
    const { state } = run(policy(5, 86_400_000), [T0, T0, T0]);
    expect(peek(policy(10, 86_400_000), state, T0 + 1).remaining).toBe(7);
  });

  it("keeps the tokens taken, in the new period's units, when the period changes too", () => {
    const { state } = run(policy(4, 60_000), [T0, T0, T0]);
    // 3 taken of 4 a minute, read as 8 a second with a burst of 8: 5 left, the next token 125 ms on.
    const faster = policy(8, 1_000);
    expect(peek(faster, state, T0).remaining).toBe(5);
    expect(peek(faster, state, T0 + 125).remaining).toBe(6);
  });
});

describe("token bucket properties", () => {
  const scenario = fc.record({
    limit: fc.integer({ min: 1, max: 50 }),
    periodMs: fc.integer({ min: 1, max: 100_000 }),
    burst: fc.integer({ min: 1, max: 50 }),
    steps: stepsOf(8),
  });

  it("decides exactly as a continuous-time model with rational tokens", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, burst, steps }) => {
        const model = new TokenBucketModel(limit, periodMs, burst);
        for (const { at, cost, decision } of replay(policy(limit, periodMs, burst), steps, T0).requests) {
          expect(decision.allowed).toBe(model.decide(cost, at));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("admits a denied request exactly retryAfter later, and not a millisecond sooner", () => {
    fc.assert(
      fc.property(scenario, fc.integer({ min: 1, max: 8 }), ({ limit, periodMs, burst, steps }, cost) => {
        expectExactRetry(policy(limit, periodMs, burst), steps, cost, T0);
      }),
      { numRuns: 500 },
    );
  });

  it("grows remaining by a unit exactly at moreAt, and not a millisecond sooner", () => {
    let checked = 0;
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, burst, steps }) => {
        checked += expectExactMoreAt(policy(limit, periodMs, burst), steps, T0, burst);
      }),
      { numRuns: 300 },
    );
    expect(checked).toBeGreaterThan(1_000);
  });

  it("never holds more after a late report than had its units been taken on time", () => {
    // Units taken at the k-th event's time but told after the last, against the same units taken in their place.
    fc.assert(
      fc.property(scenario, fc.array(fc.record({ gap: fc.nat({ max: 30_000 }), units: fc.integer({ min: 1, max: 5 }) }), { minLength: 1, maxLength: 8 }), fc.nat(), fc.integer({ min: 1, max: 10 }), ({ limit, periodMs, burst }, events, pick, units) => {
        const p = policy(limit, periodMs, burst);
        let at = T0;
        const times = events.map((e) => (at += e.gap));
        const k = pick % times.length;
        let onTime: LimiterState | undefined;
        let told: LimiterState | undefined;
        events.forEach((e, i) => {
          if (i === k) onTime = adjust(p, onTime, units, times[i]!, times[i]!);
          onTime = adjust(p, onTime, e.units, times[i]!, times[i]!);
          told = adjust(p, told, e.units, times[i]!, times[i]!);
        });
        const end = at + 1;
        told = adjust(p, told, units, times[k]!, end);
        for (const t of [end, end + Math.floor(periodMs / limit), end + periodMs]) {
          expect(peek(p, told, t).remaining).toBeLessThanOrEqual(peek(p, onTime, t).remaining);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("peeks the next token exactly, also for a bucket in debt from units taken without a decision", () => {
    fc.assert(
      fc.property(scenario, fc.nat({ max: 40 }), fc.nat({ max: 2_000 }), ({ limit, periodMs, burst, steps }, extra, later) => {
        const p = policy(limit, periodMs, burst);
        const { state, now } = replay(p, steps, T0);
        const taken = adjust(p, state, extra, now, now);
        const at = now + Math.floor((later * periodMs) / 1_000);
        expectNextUnitAt(p, taken, peek(p, taken, at), at, burst);
      }),
      { numRuns: 300 },
    );
  });

  it("never admits more than burst plus the refill over any interval", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, burst, steps }) => {
        const { requests } = replay(policy(limit, periodMs, burst), steps, T0);
        expect(admittedSpans(requests).filter(({ from, to, taken }) => taken > burst + ((to - from) * limit) / periodMs)).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});
