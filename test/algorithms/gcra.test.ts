import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { adjust, decide, mostOwed, peek } from "../../src/algorithms";
import type { LimiterState, Policy } from "../../src/algorithms";
import { admittedSpans, expectExactMoreAt, expectExactRetry, expectNextUnitAt, GcraModel, replay, run, stepsOf } from "./reference";

const policy = (limit: number, periodMs: number, burst = 0, delay?: number): Policy => ({
  algorithm: "gcra",
  limit,
  periodMs,
  burst,
  buckets: 1,
  ...(delay !== undefined ? { delay } : {}),
});
const T0 = 1_700_000_000_000;

describe("gcra", () => {
  it("spaces requests one emission interval apart with no tolerance", () => {
    // 10 a second: one every 100 ms.
    const { decisions } = run(policy(10, 1_000), [T0, T0 + 99, T0 + 100, T0 + 150, T0 + 200]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, false, true, false, true]);
    expect(decisions[1]).toMatchObject({ retryAfter: 1, moreAt: T0 + 100, resetAt: T0 + 100, remaining: 0 });
  });

  it("admits 1 + burst at once, then one per interval", () => {
    const p = policy(10, 1_000, 3);
    const { decisions, state } = run(p, [T0, T0, T0, T0, T0]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, false]);
    expect(decisions[4]).toMatchObject({ retryAfter: 100, remaining: 0, resetAt: T0 + 400 });
    expect(decide(p, state, 1, T0 + 99).decision.allowed).toBe(false);
    expect(decide(p, state, 1, T0 + 100).decision.allowed).toBe(true);
  });

  it("keeps the interval exact when it is not a whole number of milliseconds", () => {
    // 3 a second: one every 333.3 ms.
    const p = policy(3, 1_000);
    const { state } = run(p, [T0]);
    expect(decide(p, state, 1, T0 + 333).decision.allowed).toBe(false);
    expect(decide(p, state, 1, T0 + 334).decision.allowed).toBe(true);
  });

  it("tells the exact wait when the burst nears the largest the rule allows, (burst + 1) × period ≤ 2^53", () => {
    const huge: Policy = { algorithm: "gcra", limit: 1, periodMs: 7, burst: 643_371_375_338_642, buckets: 1 };
    const cost = huge.burst + 1;
    const { state } = decide(huge, undefined, cost, T0);
    const denied = decide(huge, state, cost, T0 + 3).decision;
    expect(decide(huge, state, cost, T0 + 3 + denied.retryAfter).decision.allowed).toBe(true);
    expect(decide(huge, state, cost, T0 + 3 + denied.retryAfter - 1).decision.allowed).toBe(false);
  });

  it("holds the requests of a burst past `delay` until they would conform", () => {
    const p = policy(10, 1_000, 4, 1);
    const { decisions } = run(p, [T0, T0, T0, T0, T0, T0]);
    expect(decisions.map((d) => [d.allowed, d.holdMs ?? 0])).toEqual([
      [true, 0],
      [true, 0],
      [true, 100],
      [true, 200],
      [true, 300],
      [false, 0],
    ]);
  });

  it("holds every request of a burst past the first with delay 0, and none with delay equal to burst (nginx's nodelay)", () => {
    const holds = (delay: number) => run(policy(10, 1_000, 3, delay), [T0, T0, T0, T0]).decisions.map((d) => d.holdMs ?? 0);
    expect(holds(0)).toEqual([0, 100, 200, 300]);
    expect(holds(3)).toEqual([0, 0, 0, 0]);
  });

  it("denies a cost above 1 + burst, telling it to wait a period", () => {
    expect(decide(policy(10, 1_000, 2), undefined, 4, T0).decision).toMatchObject({ allowed: false, reason: "cost-exceeds-capacity", retryAfter: 1_000 });
  });

  it("takes units reported late in the order they went as if each had been taken on time", () => {
    // One a second at one a second for ten minutes, reported at the end: the key is as free as on time.
    const p = policy(60, 60_000, 5);
    const times = Array.from({ length: 600 }, (_, i) => T0 + (i + 1) * 1_000);
    const now = T0 + 601_000;
    const late = times.reduce<LimiterState | undefined>((state, t) => adjust(p, state, 1, t, now), undefined);
    expect(peek(p, late, now)).toEqual(peek(p, run(p, times).state, now));
    expect(peek(p, late, now).remaining).toBe(6);
  });

  it("never takes a late unit sooner than the state's last change, which may count what came after it", () => {
    // One a second: the one at T0 + 5 s and the late one from T0 are both taken then.
    const p = policy(10, 10_000);
    const { state } = run(p, [T0 + 5_000]);
    expect(peek(p, adjust(p, state, 1, T0, T0 + 5_000), T0 + 5_000).retryAfter).toBe(2_000);
  });

  it("leaves TAT at most one period past the tolerance from units admitted by onError", () => {
    const p = policy(10, 60_000, 2);
    const flooded = adjust(p, undefined, 500, T0, T0 + 1_000, mostOwed(p));
    expect(peek(p, flooded, T0 + 1_000).retryAfter).toBe(59_000);
    expect(decide(p, flooded, 1, T0 + 60_000).decision.allowed).toBe(true);
  });

  it("moves TAT back for a refund, never behind now", () => {
    const p = policy(10, 1_000, 1);
    const { state } = run(p, [T0, T0]);
    expect(peek(p, adjust(p, state, -1, T0, T0), T0).remaining).toBe(1);
    expect(peek(p, adjust(p, state, -5, T0, T0), T0).remaining).toBe(2);
  });
});

describe("gcra properties", () => {
  const scenario = fc
    .record({
      limit: fc.integer({ min: 1, max: 50 }),
      periodMs: fc.integer({ min: 1, max: 100_000 }),
      burst: fc.integer({ min: 0, max: 20 }),
      delayShare: fc.integer({ min: 0, max: 100 }),
      steps: stepsOf(8),
    })
    .map((s) => ({ ...s, delay: Math.floor((s.burst * s.delayShare) / 100) }));

  it("decides and holds exactly as GCRA with a rational TAT", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, burst, delay, steps }) => {
        const model = new GcraModel(limit, periodMs, burst, delay);
        for (const { at, cost, decision } of replay(policy(limit, periodMs, burst, delay), steps, T0).requests) {
          const expected = model.decide(cost, at);
          expect(decision.allowed).toBe(expected.allowed);
          expect(decision.holdMs ?? 0).toBe(expected.holdMs);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("admits no more than 1 + burst plus the rate over any interval", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, burst, steps }) => {
        const { requests } = replay(policy(limit, periodMs, burst), steps, T0);
        expect(admittedSpans(requests).filter(({ from, to, taken }) => taken > burst + 1 + ((to - from) * limit) / periodMs)).toEqual([]);
      }),
      { numRuns: 100 },
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
        checked += expectExactMoreAt(policy(limit, periodMs, burst), steps, T0, burst + 1);
      }),
      { numRuns: 300 },
    );
    expect(checked).toBeGreaterThan(1_000);
  });

  it("peeks the next unit exactly, also past the tolerance from units taken without a decision", () => {
    fc.assert(
      fc.property(scenario, fc.nat({ max: 40 }), fc.nat({ max: 2_000 }), ({ limit, periodMs, burst, steps }, extra, later) => {
        const p = policy(limit, periodMs, burst);
        const { state, now } = replay(p, steps, T0);
        const taken = adjust(p, state, extra, now, now);
        const at = now + Math.floor((later * periodMs) / 1_000);
        expectNextUnitAt(p, taken, peek(p, taken, at), at, burst + 1);
      }),
      { numRuns: 300 },
    );
  });
});
