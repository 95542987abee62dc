import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { adjust, countedAt, decide, peek, slotOf } from "../../src/algorithms";
import type { Policy } from "../../src/algorithms";
import { admittedWithin, expectExactMoreAt, expectExactRetry, expectNextUnitAt, FixedWindowModel, replay, run, stepsOf } from "./reference";

const policy = (limit: number, periodMs: number): Policy => ({ algorithm: "fixed-window", limit, periodMs, burst: limit, buckets: 1 });
const T0 = 1_700_000_040_000; // the start of a 60 s window

describe("fixed window", () => {
  it("admits the limit per window and resets at the window's end", () => {
    const p = policy(3, 60_000);
    const { decisions, state } = run(p, [T0, T0 + 1, T0 + 2, T0 + 3]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decisions[3]).toMatchObject({ remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 60_000, retryAfter: 59_997, reason: "limit" });
    expect(decide(p, state, 1, T0 + 59_999).decision.allowed).toBe(false);
    expect(decide(p, state, 3, T0 + 60_000).decision).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("admits twice the limit across a boundary, as fixed windows do", () => {
    const { decisions } = run(policy(2, 60_000), [T0 + 59_999, T0 + 59_999, T0 + 60_000, T0 + 60_000]);
    expect(decisions.every((d) => d.allowed)).toBe(true);
  });

  it("denies a cost above the limit, telling it to wait a period", () => {
    expect(decide(policy(5, 60_000), undefined, 6, T0).decision).toMatchObject({ allowed: false, reason: "cost-exceeds-capacity", retryAfter: 60_000 });
  });

  it("says more comes at the decision's time at the full quota", () => {
    expect(peek(policy(5, 60_000), undefined, T0 + 5)).toMatchObject({ remaining: 5, moreAt: T0 + 5, resetAt: T0 + 5 });
  });

  it("keeps counting in a later window when the clock steps back, and refunds there", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0 + 60_000, T0 + 60_000]);
    const skewed = decide(p, state, 1, T0 + 59_000);
    expect(skewed.decision).toMatchObject({ allowed: false, retryAfter: 61_000 });
    expect(countedAt(p, state!, T0 + 59_000)).toBe(T0 + 60_000);
    expect(peek(p, adjust(p, state, -1, T0 + 60_000, T0 + 59_000), T0 + 59_000).remaining).toBe(1);
  });

  it("files units reported late in the window they were spent in, and drops those of a window over", () => {
    const p = policy(5, 60_000);
    expect(slotOf(p, T0 + 12_345)).toBe(T0);
    const state = adjust(p, undefined, 3, slotOf(p, T0 + 100), T0 + 200);
    expect(peek(p, state, T0 + 300).remaining).toBe(2);
    expect(adjust(p, state, 2, slotOf(p, T0 - 1), T0 + 300)).toEqual(state);
  });

  it("keeps a changed period's count until the old window ends", () => {
    const { state } = run(policy(5, 60_000), [T0, T0, T0]);
    expect(peek(policy(5, 10_000), state, T0 + 30_000).remaining).toBe(2);
    expect(peek(policy(5, 10_000), state, T0 + 60_000).remaining).toBe(5);
  });
});

describe("fixed window by calendar months", () => {
  const monthly = (limit: number, months = 1): Policy => ({ ...policy(limit, months * 31 * 86_400_000), months });
  const utc = (year: number, month: number, day = 1, ms = 0) => Date.UTC(year, month - 1, day) + ms;

  it("counts from the 1st at 00:00 UTC to the next 1st, whatever the month's length", () => {
    const p = monthly(2);
    const { decisions, state } = run(p, [utc(2027, 2, 1), utc(2027, 2, 14), utc(2027, 2, 28, 86_399_999)]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
    expect(decisions[2]).toMatchObject({ resetAt: utc(2027, 3, 1), moreAt: utc(2027, 3, 1), retryAfter: 1, reason: "limit" });
    expect(decide(p, state, 2, utc(2027, 3, 1)).decision).toMatchObject({ allowed: true, remaining: 0, resetAt: utc(2027, 4, 1) });
  });

  it("ends February on the 29th in a leap year", () => {
    const { state } = run(monthly(1), [utc(2028, 2, 29)]);
    expect(decide(monthly(1), state, 1, utc(2028, 2, 29, 86_399_999)).decision.retryAfter).toBe(1);
  });

  it("starts a window of several months on the 1st of a month that is a multiple of them since 1970, and a year on January 1st", () => {
    expect(decide(monthly(5, 3), undefined, 1, utc(2027, 5, 20)).decision.resetAt).toBe(utc(2027, 7, 1));
    expect(decide(monthly(5, 12), undefined, 1, utc(2027, 12, 31)).decision.resetAt).toBe(utc(2028, 1, 1));
    expect(slotOf(monthly(5, 12), utc(2027, 8, 9))).toBe(utc(2027, 1, 1));
  });

  it("files units reported late in the month they were spent in, and drops those of a month over", () => {
    const p = monthly(5);
    expect(slotOf(p, utc(2027, 2, 14, 5))).toBe(utc(2027, 2, 1));
    const state = adjust(p, undefined, 3, slotOf(p, utc(2027, 2, 14)), utc(2027, 2, 15));
    expect(peek(p, state, utc(2027, 2, 20)).remaining).toBe(2);
    expect(adjust(p, state, 2, slotOf(p, utc(2027, 1, 31)), utc(2027, 2, 20))).toEqual(state);
  });

  it("keeps an epoch-aligned window's count when the rule turns to calendar months, until that window ends", () => {
    const thirtyDays = policy(5, 30 * 86_400_000);
    const start = Math.floor(utc(2027, 2, 10) / thirtyDays.periodMs) * thirtyDays.periodMs;
    const { state } = run(thirtyDays, [start, start, start]);
    expect(peek(monthly(5), state, start + 1_000).remaining).toBe(2);
    expect(peek(monthly(5), state, start + thirtyDays.periodMs).remaining).toBe(5);
  });

  it("writes a calendar state's index as the epoch window of its last millisecond, which a version knowing only epoch windows frees at most a period after the month", () => {
    const p = monthly(5);
    const { state } = run(p, [utc(2027, 3, 20)]);
    const index = (state as { index: number }).index;
    // That version holds a count while its window, floor(t / periodMs), has not passed the state's index.
    expect(index).toBeGreaterThanOrEqual(Math.floor((utc(2027, 4, 1) - 1) / p.periodMs));
    expect(index).toBeLessThan(Math.floor((utc(2027, 4, 1) + p.periodMs) / p.periodMs));
    expect(peek(p, state, utc(2027, 3, 31)).remaining).toBe(4);
  });

  it("adds a charge and its give-back exactly at the largest limit a fixed window takes, 2^52", () => {
    const p = monthly(2 ** 52);
    const t = utc(2027, 3, 20);
    const taken = adjust(p, decide(p, undefined, 2 ** 52 - 1, t).state, 3, t, t);
    expect(decide(p, adjust(p, taken, -3, t, t), 2, t).decision.allowed).toBe(false);
  });

  it("holds a count at 2^53 − 1 rather than lose its exactness", () => {
    const p = policy(10, 60_000);
    const huge = adjust(p, adjust(p, undefined, 2 ** 52, T0, T0), 2 ** 52, T0, T0);
    expect((huge as { count: number }).count).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("decides exactly as a count kept per calendar month by the book", () => {
    const month = (t: number) => new Date(t).toISOString().slice(0, 7);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 }), fc.array(fc.record({ gap: fc.integer({ min: 0, max: 9 * 86_400_000 }), cost: fc.integer({ min: 1, max: 4 }) }), { maxLength: 40 }), (limit, steps) => {
        const p = monthly(limit);
        const counts = new Map<string, number>();
        let state;
        let at = utc(2027, 1, 20);
        for (const { gap, cost } of steps) {
          at += gap;
          const used = counts.get(month(at)) ?? 0;
          const outcome = decide(p, state, cost, at);
          expect(outcome.decision.allowed).toBe(used + cost <= limit);
          if (outcome.decision.allowed) counts.set(month(at), used + cost);
          state = outcome.state;
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe("fixed window properties", () => {
  const scenario = fc.record({
    limit: fc.integer({ min: 1, max: 50 }),
    periodMs: fc.integer({ min: 1, max: 100_000 }),
    steps: stepsOf(8),
  });
  const start = fc.integer({ min: T0, max: T0 + 100_000 });

  it("decides exactly as a per-window count kept by the book", () => {
    fc.assert(
      fc.property(scenario, start, ({ limit, periodMs, steps }, t0) => {
        const model = new FixedWindowModel(limit, periodMs);
        for (const { at, cost, decision } of replay(policy(limit, periodMs), steps, t0).requests) {
          expect(decision.allowed).toBe(model.decide(cost, at));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("never admits more than the limit in a window, nor twice the limit in any period", () => {
    fc.assert(
      fc.property(scenario, start, ({ limit, periodMs, steps }, t0) => {
        const { requests } = replay(policy(limit, periodMs), steps, t0);
        for (const r of requests) {
          const window = Math.floor(r.at / periodMs) * periodMs;
          expect(admittedWithin(requests, window, window + periodMs)).toBeLessThanOrEqual(limit);
          expect(admittedWithin(requests, r.at - periodMs + 1, r.at + 1)).toBeLessThanOrEqual(2 * limit);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("admits a denied request exactly retryAfter later, and not a millisecond sooner", () => {
    fc.assert(
      fc.property(scenario, start, fc.integer({ min: 1, max: 8 }), ({ limit, periodMs, steps }, t0, cost) => {
        expectExactRetry(policy(limit, periodMs), steps, cost, t0);
      }),
      { numRuns: 500 },
    );
  });

  it("grows remaining by a unit exactly at moreAt, and not a millisecond sooner", () => {
    let checked = 0;
    fc.assert(
      fc.property(scenario, start, ({ limit, periodMs, steps }, t0) => {
        checked += expectExactMoreAt(policy(limit, periodMs), steps, t0, limit);
      }),
      { numRuns: 300 },
    );
    expect(checked).toBeGreaterThan(1_000);
  });

  it("peeks exactly, also over units taken without a decision, and a refund at countedAt undoes a decision", () => {
    fc.assert(
      fc.property(scenario, start, fc.nat({ max: 40 }), fc.nat({ max: 2_000 }), ({ limit, periodMs, steps }, t0, extra, later) => {
        const p = policy(limit, periodMs);
        const { state, now } = replay(p, steps, t0);
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
