// A rule's block across rule changes and live Worker versions: each reads its end by its own rule.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { blockEnd, blockFrom, decideBatch } from "../../src/algorithms/block";
import type { LimiterState, Policy } from "../../src/algorithms";
import { stepsOf } from "./reference";

const T0 = 1_700_000_040_000;
const blocking = (blockMs?: number): Policy => ({ algorithm: "sliding-window", limit: 2, periodMs: 60_000, burst: 2, buckets: 1, ...(blockMs === undefined ? {} : { blockMs }) });

describe("blockEnd", () => {
  it("ends a block by the terms it started under", () => {
    expect(blockEnd(blocking(600_000), { until: T0 + 600_000, since: T0 })).toBe(T0 + 600_000);
  });

  it("ends a block sooner once the rule's block was shortened", () => {
    expect(blockEnd(blocking(60_000), { until: T0 + 600_000, since: T0 })).toBe(T0 + 60_000);
  });

  it("frees the key at once under a rule whose block was removed", () => {
    expect(blockEnd(blocking(), { until: T0 + 600_000, since: T0 })).toBe(0);
  });

  it("does not lengthen a block when the rule's block was lengthened: what the client was told stands", () => {
    expect(blockEnd(blocking(3_600_000), { until: T0 + 600_000, since: T0 })).toBe(T0 + 600_000);
  });

  it("reads a block stored without its start (an earlier version's) by its end alone", () => {
    expect(blockEnd(blocking(60_000), { until: T0 + 600_000, since: 0 })).toBe(T0 + 600_000);
  });
});

describe("blockFrom", () => {
  it("keeps the end of a longer block another version's rule started", () => {
    expect(blockFrom({ until: T0 + 600_000, since: T0 }, T0 + 61_000, T0 + 1_000)).toEqual({ until: T0 + 600_000, since: T0 + 1_000 });
  });

  it("starts a block where there was none", () => {
    expect(blockFrom({ until: 0, since: 0 }, T0 + 60_000, T0)).toEqual({ until: T0 + 60_000, since: T0 });
  });
});

describe("decideBatch", () => {
  it("starts the block at the first denial at the limit and denies the rest of the batch by it", () => {
    const { blockedUntil, results } = decideBatch(blocking(600_000), undefined, 0, [1, 1, 1, 1], T0);
    expect(results.map((r) => r.decision.allowed)).toEqual([true, true, false, false]);
    expect(results.slice(2).map((r) => r.decision.reason)).toEqual(["blocked", "blocked"]);
    expect(blockedUntil).toBe(T0 + 600_000);
  });

  it("tells a costlier request when a request of its cost passes, not only when the block ends: obeying it is not blocked again", () => {
    // 8 of 10 taken: a request of 5 waits for the window's end, a minute off, however short the block.
    const p: Policy = { algorithm: "fixed-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 1, blockMs: 10_000 };
    const first = decideBatch(p, undefined, 0, [8, 5], T0);
    expect(first.results[1]!.decision).toMatchObject({ allowed: false, reason: "blocked", retryAfter: 60_000 });
    const retried = decideBatch(p, first.state, first.blockedUntil, [5], T0 + 60_000);
    expect(retried.results[0]!.decision.allowed).toBe(true);
    expect(retried.blockedUntil).toBe(first.blockedUntil);
  });

  it("admits a denied request exactly retryAfter later, and not a millisecond sooner, under a block, whatever its cost", () => {
    const policies: Policy[] = [
      { algorithm: "fixed-window", limit: 6, periodMs: 1_000, burst: 6, buckets: 1 },
      { algorithm: "sliding-log", limit: 6, periodMs: 1_000, burst: 6, buckets: 1 },
      { algorithm: "sliding-window", limit: 6, periodMs: 1_000, burst: 6, buckets: 4 },
      { algorithm: "token-bucket", limit: 3, periodMs: 1_000, burst: 6, buckets: 1 },
      { algorithm: "gcra", limit: 3, periodMs: 1_000, burst: 5, buckets: 1 },
    ];
    fc.assert(
      fc.property(fc.constantFrom(...policies), fc.integer({ min: 1, max: 3_000 }), stepsOf(6), fc.integer({ min: 1, max: 6 }), (base, blockMs, steps, cost) => {
        const p = { ...base, blockMs };
        let state: LimiterState | undefined;
        let until = 0;
        let now = T0;
        for (const step of steps) {
          now += step.gap;
          ({ state, blockedUntil: until } = decideBatch(p, state, until, [step.cost], now));
        }
        const denied = decideBatch(p, state, until, [cost], now);
        const { decision } = denied.results[0]!;
        if (decision.allowed) return;
        const at = (t: number) => decideBatch(p, denied.state, denied.blockedUntil, [cost], t).results[0]!.decision.allowed;
        expect(at(now + decision.retryAfter)).toBe(true);
        expect(at(now + decision.retryAfter - 1)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it("starts no block for a cost the rule can never admit", () => {
    const { blockedUntil, results } = decideBatch(blocking(600_000), undefined, 0, [3], T0);
    expect(results[0]!.decision.reason).toBe("cost-exceeds-capacity");
    expect(blockedUntil).toBe(0);
  });
});
