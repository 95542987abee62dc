// How long a costlier request waits, from the denial of a cheaper one: never less than the algorithm itself says for that cost.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { costlierUntil, decide, largestCost, type LimiterState, type Policy } from "../../src/algorithms";

const T0 = 1_700_000_000_000;

const bucket = fc
  .record({ limit: fc.integer({ min: 1, max: 20 }), periodMs: fc.integer({ min: 10, max: 60_000 }), extra: fc.integer({ min: 0, max: 20 }) })
  .map(({ limit, periodMs, extra }): Policy => ({ algorithm: "token-bucket", limit, periodMs, burst: limit + extra, buckets: 1 }));
const warming = fc.record({ policy: bucket, warmupMs: fc.integer({ min: 1, max: 120_000 }) }).map(({ policy, warmupMs }): Policy => ({ ...policy, warmupMs }));
const gcra = fc
  .record({ limit: fc.integer({ min: 1, max: 20 }), periodMs: fc.integer({ min: 10, max: 60_000 }), burst: fc.integer({ min: 1, max: 20 }), share: fc.integer({ min: 0, max: 100 }), delayed: fc.boolean() })
  .map(({ limit, periodMs, burst, share, delayed }): Policy => ({ algorithm: "gcra", limit, periodMs, burst, buckets: 1, ...(delayed ? { delay: Math.floor((burst * share) / 100) } : {}) }));
const fixed = fc
  .record({ limit: fc.integer({ min: 2, max: 20 }), periodMs: fc.integer({ min: 10, max: 60_000 }) })
  .map(({ limit, periodMs }): Policy => ({ algorithm: "fixed-window", limit, periodMs, burst: limit, buckets: 1 }));
const traffic = fc.array(fc.record({ gap: fc.nat({ max: 300 }), cost: fc.integer({ min: 1, max: 8 }) }), { maxLength: 120 });

describe.each([
  ["a token bucket", bucket],
  ["a warming token bucket", warming],
  ["a GCRA, with or without delay", gcra],
  ["a fixed window", fixed],
])("costlierUntil for %s", (_name, policies) => {
  it("tells a costlier request a wait after which it is admitted, never shorter than the algorithm's own for that cost", () => {
    fc.assert(
      fc.property(policies, traffic, fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 10 }), (policy, steps, denied, more) => {
        let state: LimiterState | undefined;
        let now = T0;
        for (const { gap, cost } of steps) {
          now += Math.floor((gap * policy.periodMs) / 1000);
          state = decide(policy, state, cost, now).state;
        }
        const cheaper = decide(policy, state, denied, now).decision;
        const cost = Math.min(largestCost(policy), denied + more);
        if (cheaper.allowed || cheaper.reason !== "limit" || cost <= denied) return;
        const until = costlierUntil(policy, denied, cost, now + cheaper.retryAfter)!;
        expect(until - now).toBeGreaterThanOrEqual(decide(policy, state, cost, now).decision.retryAfter);
        expect(decide(policy, state, cost, until).decision.allowed).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});
