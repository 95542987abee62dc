import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { adjust, countedAt, decide, peek, slotOf } from "../../src/algorithms";
import type { LimiterState, Policy } from "../../src/algorithms";
import { admittedWithin, expectExactMoreAt, expectExactRetry, expectNextUnitAt, replay, run, SlidingLogModel, stepsOf } from "./reference";

const policy = (limit: number, periodMs: number): Policy => ({ algorithm: "sliding-log", limit, periodMs, burst: limit, buckets: 1 });
const T0 = 1_700_000_040_000;

describe("sliding log", () => {
  it("admits again exactly when the oldest request leaves the period", () => {
    const p = policy(2, 60_000);
    const { decisions, state } = run(p, [T0, T0 + 10_000, T0 + 20_000]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
    expect(decisions[2]).toMatchObject({ remaining: 0, moreAt: T0 + 60_000, resetAt: T0 + 70_000, retryAfter: 40_000 });
    expect(decide(p, state, 1, T0 + 59_999).decision.allowed).toBe(false);
    expect(decide(p, state, 1, T0 + 60_000).decision.allowed).toBe(true);
    expect(decide(p, state, 2, T0 + 60_000).decision.allowed).toBe(false);
    expect(decide(p, state, 2, T0 + 70_000).decision.allowed).toBe(true);
  });

  it("never admits twice the limit across a window boundary", () => {
    const { decisions } = run(policy(2, 60_000), [T0 + 59_999, T0 + 59_999, T0 + 60_000, T0 + 119_998, T0 + 119_999]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, false, false, true]);
  });

  it("finds no room in pairs it dropped when the clock steps back: it decides at the time it dropped them", () => {
    const p = policy(2, 1_000);
    let state = decide(p, undefined, 1, T0).state;
    state = decide(p, state, 1, T0 + 500).state;
    // Denied at T0 + 1,000, which drops T0's pair; at T0 + 999 that pair would still count.
    state = decide(p, state, 2, T0 + 1_000).state;
    const stepped = decide(p, state, 1, T0 + 999);
    expect(stepped.decision.allowed).toBe(true);
    // Logged at T0 + 1,000: the period ending then holds T0 + 500's unit and this one, no more.
    expect(countedAt(p, stepped.state, T0 + 999)).toBe(T0 + 1_000);
    expect(decide(p, stepped.state, 1, T0 + 999).decision.allowed).toBe(false);
  });

  it("decides after the time it dropped pairs at even once a refund takes the newest pair back", () => {
    const p = policy(1, 1_000);
    let state = decide(p, undefined, 1, T0).state;
    const second = decide(p, state, 1, T0 + 1_000);
    state = adjust(p, second.state, -1, countedAt(p, second.state, T0 + 1_000), T0 + 1_000);
    const stepped = decide(p, state, 1, T0 + 999);
    // Admitted only as of T0 + 1,000, when T0's unit has left: never two in one period.
    expect(stepped.decision.allowed).toBe(true);
    expect(countedAt(p, stepped.state, T0 + 999)).toBe(T0 + 1_000);
  });

  it("keeps one pair per admitted request, pruned as they leave", () => {
    const p = policy(10, 1_000);
    const { state } = run(p, [T0, T0, T0 + 1, T0 + 500]);
    const pairs = (s: LimiterState) => (s.algorithm === "sliding-log" ? s.log.slice(s.from, s.end) : []);
    expect(pairs(state!)).toEqual([T0, 1, T0, 1, T0 + 1, 1, T0 + 500, 1]);
    expect(pairs(decide(p, state, 1, T0 + 1_001).state)).toEqual([T0 + 500, 1, T0 + 1_001, 1]);
  });

  it("never changes a state another decision already made from it", () => {
    const p = policy(10, 1_000);
    const { state } = run(p, [T0, T0 + 1]);
    const before = peek(p, state, T0 + 2);
    decide(p, state, 3, T0 + 2);
    adjust(p, state, 4, T0 + 2, T0 + 2);
    expect(peek(p, state, T0 + 2)).toEqual(before);
    expect(decide(p, state, 8, T0 + 2).decision.allowed).toBe(true);
  });

  it("denies a cost above the limit, telling it to wait a period", () => {
    expect(decide(policy(5, 60_000), undefined, 6, T0).decision).toMatchObject({ allowed: false, reason: "cost-exceeds-capacity", retryAfter: 60_000 });
  });

  it("places units reported late at the millisecond they were spent, and refunds the newest at or before", () => {
    const p = policy(3, 60_000);
    expect(slotOf(p, T0 + 123)).toBe(T0 + 123);
    let state = adjust(p, undefined, 1, T0 + 500, T0 + 1_000);
    state = adjust(p, state, 2, T0 + 100, T0 + 1_000);
    expect(state).toMatchObject({ log: [T0 + 100, 2, T0 + 500, 1], from: 0, end: 4, used: 3 });
    expect(decide(p, state, 1, T0 + 60_099).decision.allowed).toBe(false);
    expect(decide(p, state, 2, T0 + 60_100).decision.allowed).toBe(true);
    expect(adjust(p, state, -2, T0 + 600, T0 + 1_000)).toMatchObject({ log: [T0 + 100, 1], used: 1 });
  });
});

describe("sliding log properties", () => {
  const scenario = fc.record({
    limit: fc.integer({ min: 1, max: 50 }),
    periodMs: fc.integer({ min: 1, max: 100_000 }),
    steps: stepsOf(8),
  });

  it("decides exactly as a log kept by the book", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, steps }) => {
        const model = new SlidingLogModel(limit, periodMs);
        for (const { at, cost, decision } of replay(policy(limit, periodMs), steps, T0).requests) {
          expect(decision.allowed).toBe(model.decide(cost, at));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("never admits more than the limit in any period", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, steps }) => {
        const { requests } = replay(policy(limit, periodMs), steps, T0);
        for (const r of requests) expect(admittedWithin(requests, r.at - periodMs + 1, r.at + 1)).toBeLessThanOrEqual(limit);
      }),
      { numRuns: 200 },
    );
  });

  it("admits a denied request exactly retryAfter later, and not a millisecond sooner", () => {
    fc.assert(
      fc.property(scenario, fc.integer({ min: 1, max: 8 }), ({ limit, periodMs, steps }, cost) => {
        expectExactRetry(policy(limit, periodMs), steps, cost, T0);
      }),
      { numRuns: 500 },
    );
  });

  it("grows remaining by a unit exactly at moreAt, and not a millisecond sooner", () => {
    let checked = 0;
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, steps }) => {
        checked += expectExactMoreAt(policy(limit, periodMs), steps, T0, limit);
      }),
      { numRuns: 300 },
    );
    expect(checked).toBeGreaterThan(1_000);
  });

  it("rebuilds from units reported at their times exactly the log its decisions made", () => {
    fc.assert(
      fc.property(scenario, ({ limit, periodMs, steps }) => {
        const p = policy(limit, periodMs);
        const { requests, state, now } = replay(p, steps, T0);
        let reported: LimiterState | undefined;
        for (const r of requests) if (r.decision.allowed) reported = adjust(p, reported, r.cost, slotOf(p, r.at), now);
        expect(peek(p, reported, now)).toEqual(peek(p, state, now));
      }),
      { numRuns: 300 },
    );
  });

  it("peeks exactly over units taken without a decision, and a refund at countedAt undoes a decision", () => {
    fc.assert(
      fc.property(scenario, fc.nat({ max: 40 }), fc.nat({ max: 2_000 }), ({ limit, periodMs, steps }, extra, later) => {
        const p = policy(limit, periodMs);
        const { state, now } = replay(p, steps, T0);
        const taken = adjust(p, state, extra, now, now);
        const at = now + Math.floor((later * periodMs) / 1_000);
        expectNextUnitAt(p, taken, peek(p, taken, at), at, limit);
        const outcome = decide(p, state, 1, now);
        if (!outcome.decision.allowed) return;
        const refunded = adjust(p, outcome.state, -1, countedAt(p, outcome.state, now), now);
        expect(peek(p, refunded, now)).toEqual(peek(p, state, now));
      }),
      { numRuns: 300 },
    );
  });
});
