import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { adjust, countedAt, decide, peek } from "../../src/algorithms";
import type { LimiterState, Policy } from "../../src/algorithms";
import { admittedWithin, expectExactMoreAt, expectExactRetry, expectNextUnitAt, replay, run, SlidingWindowModel, stepsOf } from "./reference";

const policy = (limit: number, periodMs: number, buckets = 1): Policy => ({
  algorithm: "sliding-window",
  limit,
  periodMs,
  burst: limit,
  buckets,
});
const T0 = 1_700_000_040_000; // a multiple of 60 s: the start of a fixed window

/** Runs requests at the given times, returning every decision and the final state. */
describe("sliding window", () => {
  it("admits exactly the limit within one window and denies the next", () => {
    const { decisions } = run(policy(3, 60_000), [T0, T0 + 1, T0 + 2, T0 + 3]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decisions.map((d) => d.remaining)).toEqual([2, 1, 0, 0]);
    expect(decisions[3]?.reason).toBe("limit");
  });

  it("weights the previous window by how much of it still overlaps", () => {
    // 10 hits in the previous window; a quarter into the next one they weigh 7.5, leaving room for 2.
    const p = policy(10, 60_000);
    const { state } = run(p, Array.from({ length: 10 }, (_, i) => T0 + i));
    const later = T0 + 60_000 + 15_000;
    const first = decide(p, state, 2, later);
    expect(first.decision.allowed).toBe(true);
    expect(decide(p, first.state, 1, later).decision.allowed).toBe(false);
  });

  it("does not count a denied request", () => {
    const p = policy(1, 60_000);
    const { state } = run(p, [T0, T0 + 1, T0 + 2, T0 + 3]);
    expect(state).toMatchObject({ covered: 0, current: 1 });
  });

  it("forgets everything two windows later", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0, T0 + 1]);
    expect(decide(p, state, 2, T0 + 120_000).decision).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("admits again exactly at the window edge where the previous count has faded enough", () => {
    const p = policy(4, 60_000);
    const { state } = run(p, [T0, T0, T0, T0]);
    // In the next window the 4 weigh 4 × (1 − e/60 s): a hit fits once that is ≤ 3, at e = 15 s.
    expect(decide(p, state, 1, T0 + 60_000 + 14_999).decision.allowed).toBe(false);
    expect(decide(p, state, 1, T0 + 60_000 + 15_000).decision.allowed).toBe(true);
  });

  it("tells a denied request to retry when it would first be admitted", () => {
    const p = policy(4, 60_000);
    const { state } = run(p, [T0, T0, T0, T0]);
    const denied = decide(p, state, 1, T0 + 30_000).decision;
    expect(denied.retryAfter).toBe(45_000);
  });

  it("reports the reset as the time the last counted hit stops weighing", () => {
    const p = policy(5, 60_000);
    const { decisions } = run(p, [T0 + 10_000]);
    expect(decisions[0]?.resetAt).toBe(T0 + 120_000);
  });

  it("says more comes when the oldest bucket has faded by one more unit, not when the window is empty", () => {
    // 10 hits in the previous window weigh 7.5 a quarter into this one; with 2 more, 9.5 of 10.
    // One more fits once they weigh 7: 18 s in, as they fade by one unit every 6 s.
    const p = policy(10, 60_000);
    const { state } = run(p, Array.from({ length: 10 }, () => T0));
    const { decision } = decide(p, state, 2, T0 + 75_000);
    expect(decision).toMatchObject({ allowed: true, remaining: 0, moreAt: T0 + 78_000, resetAt: T0 + 180_000 });
  });

  it("says more comes when the first bucket with units fades, skipping empty ones", () => {
    // Buckets of 10 s: 2 hits in bucket 0, 1 in bucket 2. Bucket 0 fades over [60 s, 70 s): one of
    // its two units is gone halfway through.
    const p = policy(3, 60_000, 6);
    const { state } = run(p, [T0, T0]);
    const { decision } = decide(p, state, 1, T0 + 20_000);
    expect(decision).toMatchObject({ allowed: true, remaining: 0, moreAt: T0 + 65_000 });
  });

  it("says more comes at the decision's time when the key is at its full quota", () => {
    expect(peek(policy(3, 60_000), undefined, T0 + 5).moreAt).toBe(T0 + 5);
  });

  it("denies a request that costs more than the limit, telling it to wait a period", () => {
    const d = decide(policy(3, 10_000), undefined, 4, T0).decision;
    expect(d).toMatchObject({ allowed: false, reason: "cost-exceeds-capacity", retryAfter: 10_000 });
  });

  it("neither refunds nor corrupts state for a request timed before the state's window", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0 + 60_000, T0 + 60_001]);
    const skewed = decide(p, state, 1, T0 + 30_000);
    expect(skewed.decision.allowed).toBe(false);
    expect(skewed.state).toEqual(state);
  });

  it("stamps units taken after the clock stepped back with the window that counted them, so a refund finds them", () => {
    const p = policy(3, 60_000);
    const { state } = run(p, [T0 + 60_010]);
    // The clock is back in the previous window; the state stays in its later one and counts there.
    const taken = decide(p, state, 2, T0 + 30_000);
    const stamp = countedAt(p, taken.state, T0 + 30_000);
    expect(stamp).toBe(T0 + 60_000);
    expect(peek(p, adjust(p, taken.state, -2, stamp, T0 + 60_020), T0 + 60_020).remaining).toBe(2);
  });

  it("gives back refunded units to the window they were counted in", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0, T0 + 1]);
    const refunded = adjust(p, state, -1, T0, T0 + 5);
    expect(decide(p, refunded, 1, T0 + 6).decision.allowed).toBe(true);
  });

  it("forgets old hits sooner with more buckets", () => {
    // 4 hits at the start of a window. A quarter into the next window, one bucket still weighs
    // them at 3; four 15 s buckets have let them slide out entirely.
    const later = T0 + 60_000 + 15_000;
    const coarse = policy(4, 60_000, 1);
    const fine = policy(4, 60_000, 4);
    expect(decide(coarse, run(coarse, [T0, T0, T0, T0]).state, 2, later).decision.allowed).toBe(false);
    expect(decide(fine, run(fine, [T0, T0, T0, T0]).state, 4, later).decision.allowed).toBe(true);
  });

  it("weights only the bucket sliding out of the window", () => {
    // Buckets of 15 s: 4 hits in bucket 0; 7.5 s into bucket 4, bucket 0 weighs half: 2.
    const p = policy(4, 60_000, 4);
    const { state } = run(p, [T0, T0, T0, T0]);
    expect(decide(p, state, 2, T0 + 67_500).decision.allowed).toBe(true);
    expect(decide(p, state, 3, T0 + 67_500).decision.allowed).toBe(false);
  });

  it("handles buckets that are not a whole number of milliseconds", () => {
    const p = policy(3, 1_000, 3);
    const { state } = run(p, [T0, T0, T0]);
    // Bucket 0 ends at 333.3 ms; the hits slide out of the window from 1 s on, fully by 1333.3 ms.
    expect(peek(p, state, T0 + 999).remaining).toBe(0);
    expect(peek(p, state, T0 + 1_334).remaining).toBe(3);
    expect(run(p, [T0]).decisions[0]?.resetAt).toBe(T0 + 1_334);
  });

  it("peeks without consuming", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0]);
    expect(peek(p, state, T0 + 1)).toMatchObject({ allowed: true, remaining: 1 });
    expect(peek(p, state, T0 + 1)).toMatchObject({ allowed: true, remaining: 1 });
  });
});

describe("sliding window properties", () => {
  const scenario = fc.record({
    limit: fc.integer({ min: 1, max: 20 }),
    buckets: fc.integer({ min: 1, max: 12 }),
    periodMs: fc.integer({ min: 12, max: 100_000 }),
    steps: stepsOf(6),
  });

  it("decides exactly as the reference model that keeps every hit", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, buckets, steps }) => {
        const model = new SlidingWindowModel(limit, periodMs, buckets);
        for (const { at, cost, decision } of replay(policy(limit, periodMs, buckets), steps, T0).requests) {
          expect(decision.allowed).toBe(model.decide(cost, at));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("never admits more than the limit in a fixed window, nor twice it in any period-long interval", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, buckets, steps }) => {
        const { requests } = replay(policy(limit, periodMs, buckets), steps, T0);
        for (const { at } of requests.filter((r) => r.decision.allowed)) {
          const windowStart = at - (at % periodMs);
          expect(admittedWithin(requests, windowStart, windowStart + periodMs)).toBeLessThanOrEqual(limit);
          expect(admittedWithin(requests, at, at + periodMs)).toBeLessThanOrEqual(2 * limit);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("treats states as values: any earlier state, or one read back from JSON, decides again as it did", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, buckets, steps }) => {
        const p = policy(limit, periodMs, buckets);
        let state: LimiterState | undefined;
        let now = T0;
        const history = steps.map(({ gap, cost }) => {
          now += Math.floor((gap * periodMs) / 1_000);
          const before = state;
          const outcome = decide(p, before, cost, now);
          state = outcome.state;
          return { before, at: now, cost, outcome };
        });
        for (const { before, at, cost, outcome } of history.reverse()) {
          const stored = before && (JSON.parse(JSON.stringify(before)) as LimiterState);
          for (const again of [decide(p, before, cost, at), decide(p, stored, cost, at)]) {
            expect(again.decision).toEqual(outcome.decision);
            expect(peek(p, again.state, at)).toEqual(peek(p, outcome.state, at));
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("admits a denied request exactly retryAfter later, and not a millisecond sooner", () => {
    fc.assert(
      fc.property(scenario, fc.integer({ min: 1, max: 6 }), ({ limit, periodMs, buckets, steps }, cost) => {
        expectExactRetry(policy(limit, periodMs, buckets), steps, cost, T0);
      }),
      { numRuns: 500 },
    );
  });

  it("grows remaining by a unit exactly at moreAt, and not a millisecond sooner", () => {
    let checked = 0;
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, buckets, steps }) => {
        checked += expectExactMoreAt(policy(limit, periodMs, buckets), steps, T0, limit);
      }),
      { numRuns: 300 },
    );
    expect(checked).toBeGreaterThan(1_000);
  });

  it("peeks the next unit exactly, also for a key over its limit from units taken without a decision", () => {
    fc.assert(
      fc.property(scenario, fc.nat({ max: 40 }), fc.nat({ max: 2_000 }), ({ limit, periodMs, buckets, steps }, extra, later) => {
        const p = policy(limit, periodMs, buckets);
        const { state, now } = replay(p, steps, T0);
        const taken = adjust(p, state, extra, now, now);
        const at = now + Math.floor((later * periodMs) / 1_000);
        expectNextUnitAt(p, taken, peek(p, taken, at), at, limit);
      }),
      { numRuns: 300 },
    );
  });

  it("is back to the full limit at resetAt", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, buckets, steps }) => {
        const p = policy(limit, periodMs, buckets);
        const { requests, state } = replay(p, steps, T0);
        const resetAt = requests.at(-1)?.decision.resetAt ?? T0;
        expect(peek(p, state, resetAt).remaining).toBe(limit);
      }),
      { numRuns: 300 },
    );
  });
});
