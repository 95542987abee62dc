// A strict key's cached denial: it only ever denies early, for the same or a costlier request, until the object's retryAfter.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Decision, LimiterState, Policy } from "../../src/algorithms";
import { decideBatch } from "../../src/algorithms/block";
import { DenialCache } from "../../src/strict/denials";

const T0 = 1_700_000_000_000;
const denied = (retryAfter: number, reason: Decision["reason"] = "limit"): Decision => ({
  allowed: false,
  limit: 10,
  remaining: 0,
  resetAt: T0 + 60_000,
  moreAt: T0 + retryAfter,
  retryAfter,
  reason,
});

const log: Policy = { algorithm: "sliding-log", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
const fixed: Policy = { ...log, algorithm: "fixed-window" };

describe("DenialCache", () => {
  it("denies the same request again until the object's retryAfter, its wait counted down", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(4_000), T0, log);
    expect(cache.lookup("r/k", 1, T0 + 1_000, log)).toMatchObject({ allowed: false, retryAfter: 3_000, reason: "cache", remaining: 0 });
    expect(cache.lookup("r/k", 1, T0 + 3_999, log)?.retryAfter).toBe(1);
  });

  it("says blocked, not cache, while a remembered block holds", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 3, denied(30_000, "blocked"), T0, log);
    expect(cache.lookup("r/k", 3, T0 + 1_000, log)).toMatchObject({ allowed: false, retryAfter: 29_000, reason: "blocked" });
  });

  it("leaves another cost under a block to the object, then remembers its wait beside the first: the block may end before a costlier one fits, and a cheaper one may pass when it ends", () => {
    const cache = new DenialCache();
    // One block, one unit's time (moreAt) for every cost: its end, 10 s off.
    const blocked = (retryAfter: number) => ({ ...denied(retryAfter, "blocked"), moreAt: T0 + 10_000 });
    cache.remember("r/k", 3, blocked(30_000), T0, fixed);
    expect(cache.lookup("r/k", 5, T0, fixed)).toBeUndefined();
    expect(cache.lookup("r/k", 1, T0, fixed)).toBeUndefined();
    cache.remember("r/k", 1, blocked(10_000), T0, fixed);
    expect([1, 2, 3].map((cost) => cache.lookup("r/k", cost, T0, fixed)?.retryAfter)).toEqual([10_000, undefined, 30_000]);
  });

  it("forgets a block's denials of other costs once the object tells of a block started since: they said when the earlier one ended", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, { ...denied(10_000, "blocked"), moreAt: T0 + 10_000 }, T0, fixed);
    // The earlier block ended; a costlier request, asked of the object, was denied at the limit and blocked anew until T0 + 12 s.
    cache.remember("r/k", 2, { ...denied(12_000, "blocked"), moreAt: T0 + 12_000 }, T0 + 8_000, fixed);
    expect(cache.lookup("r/k", 1, T0 + 9_000, fixed)).toBeUndefined();
    expect(cache.lookup("r/k", 2, T0 + 9_000, fixed)?.retryAfter).toBe(11_000);
  });

  it("says nothing once retryAfter has passed", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(4_000), T0, log);
    expect(cache.lookup("r/k", 1, T0 + 4_000, log)).toBeUndefined();
  });

  it("denies a costlier request, and leaves a cheaper one to the object", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 5, denied(4_000), T0, fixed);
    expect(cache.lookup("r/k", 6, T0, fixed)?.allowed).toBe(false);
    expect(cache.lookup("r/k", 4, T0, fixed)).toBeUndefined();
  });

  it("says the units the object had left at its denial, not none: a costlier request was refused with some left", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 2, { ...denied(10_000), remaining: 1 }, T0, fixed);
    expect(cache.lookup("r/k", 3, T0 + 100, fixed)).toMatchObject({ allowed: false, remaining: 1, reason: "cache" });
  });

  it("does not remember a cost over the capacity, an error, or an admission", () => {
    const cache = new DenialCache();
    cache.remember("r/a", 50, denied(60_000, "cost-exceeds-capacity"), T0, log);
    cache.remember("r/b", 1, denied(1_000, "error"), T0, log);
    cache.remember("r/c", 1, { ...denied(0), allowed: true, reason: undefined }, T0, log);
    expect([cache.lookup("r/a", 50, T0, log), cache.lookup("r/b", 1, T0, log), cache.lookup("r/c", 1, T0, log)]).toEqual([undefined, undefined, undefined]);
  });

  it("says nothing to a request under another policy of the key (code naming one rule with a raised limit): its object is asked", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(40_000), T0, log);
    expect(cache.lookup("r/k", 1, T0 + 1_000, { ...log, limit: 20, burst: 20 })).toBeUndefined();
    expect(cache.lookup("r/k", 1, T0 + 1_000, log)?.allowed).toBe(false);
  });

  it("holds under a stricter policy of the key (a plan downgraded), which denies at least what it denied", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(40_000), T0, log);
    expect(cache.lookup("r/k", 1, T0 + 1_000, { ...log, limit: 5, burst: 5 })?.allowed).toBe(false);
    expect(cache.lookup("r/k", 1, T0 + 1_000, { ...log, periodMs: 30_000 })).toBeUndefined();
  });

  it("does not remember a denial asked for before units given back landed: the object may have decided it before they did", () => {
    const cache = new DenialCache();
    const asked = cache.mark();
    cache.givingBack("r/k")();
    cache.remember("r/k", 1, denied(4_000), T0, log, asked);
    expect(cache.lookup("r/k", 1, T0 + 1_000, log)).toBeUndefined();
    cache.remember("r/k", 1, denied(4_000), T0, log, cache.mark());
    expect(cache.lookup("r/k", 1, T0 + 1_000, log)?.reason).toBe("cache");
  });

  it("does not remember a denial while units given back are on their way, even past their timeout", () => {
    const cache = new DenialCache();
    const landed = cache.givingBack("r/k");
    cache.remember("r/k", 1, denied(4_000), T0, log, cache.mark());
    expect(cache.lookup("r/k", 1, T0 + 1_000, log)).toBeUndefined();
    landed();
    cache.remember("r/k", 1, denied(4_000), T0, log, cache.mark());
    expect(cache.lookup("r/k", 1, T0 + 1_000, log)?.reason).toBe("cache");
  });

  it("forgets a key that was reset", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(4_000), T0, log);
    cache.forget("r/k");
    expect(cache.lookup("r/k", 1, T0, log)).toBeUndefined();
  });

  describe("tells a costlier request than the one denied to wait no less than it must, so that a retry then passes", () => {
    const costlier = (policy: Policy, denial: Decision) => {
      const cache = new DenialCache();
      cache.remember("r/k", 1, denial, T0, policy);
      return cache.lookup("r/k", 8, T0, policy)?.retryAfter;
    };

    it("a log's or a window's: none, the object is asked, as only it knows when each unit leaves (its full quota may be a period away)", () => {
      expect(costlier(log, denied(4_000))).toBeUndefined();
      expect(costlier({ ...log, algorithm: "sliding-window", buckets: 60 }, denied(4_000))).toBeUndefined();
    });

    it("a token bucket's or a GCRA's: one emission interval more for each unit more", () => {
      const bucket: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 10_000, burst: 10, buckets: 1 };
      expect(costlier(bucket, denied(1_000))).toBe(8_000);
      expect(costlier({ ...bucket, algorithm: "gcra", burst: 9 }, denied(1_000))).toBe(8_000);
    });

    it("a warming token bucket's: three intervals for each unit more, as it refills at a third of its rate at the slowest", () => {
      expect(costlier({ algorithm: "token-bucket", limit: 10, periodMs: 10_000, burst: 10, buckets: 1, warmupMs: 60_000 }, denied(1_000))).toBe(22_000);
    });

    it("a fixed window's: the same, as any cost fits the next window", () => {
      expect(costlier({ ...log, algorithm: "fixed-window" }, denied(4_000))).toBe(4_000);
    });

    it("a concurrency key's: the same hint, as slots come back whenever responses end", () => {
      expect(costlier({ ...log, algorithm: "concurrency" }, denied(1_000))).toBe(1_000);
    });
  });

  it("remembers the object's answer to a window's costlier request beside the cheaper one's, each told its own wait", () => {
    const window: Policy = { algorithm: "sliding-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 60 };
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(600), T0, window);
    expect(cache.lookup("r/k", 2, T0, window)).toBeUndefined();
    cache.remember("r/k", 2, denied(800), T0, window);
    expect([cache.lookup("r/k", 1, T0, window)?.retryAfter, cache.lookup("r/k", 2, T0, window)?.retryAfter, cache.lookup("r/k", 3, T0, window)]).toEqual([600, 800, undefined]);
  });

  it("drops a cheaper cost's denial that a costlier one's contradicts: a costlier request never waits less", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(4_000), T0, log);
    cache.remember("r/k", 2, denied(1_000), T0, log);
    expect(cache.lookup("r/k", 1, T0, log)).toBeUndefined();
  });

  it("before one object, as the strict path uses it, never denies what the object admits, and tells a wait after which the request passes, and not a ms sooner", () => {
    // A costlier request's wait from a cheaper one's is one interval more per unit, each rounded up: a ms late at most.
    const window: Policy = { algorithm: "fixed-window", limit: 6, periodMs: 1_000, burst: 6, buckets: 1 };
    const policies: Policy[] = [
      window,
      { ...window, algorithm: "sliding-log" },
      { ...window, algorithm: "sliding-window", buckets: 4 },
      { algorithm: "token-bucket", limit: 3, periodMs: 1_000, burst: 6, buckets: 1 },
      { algorithm: "gcra", limit: 3, periodMs: 1_000, burst: 5, buckets: 1 },
    ];
    const step = fc.record({ gap: fc.nat({ max: 400 }), cost: fc.integer({ min: 1, max: 6 }) });
    fc.assert(
      fc.property(fc.constantFrom(...policies), fc.option(fc.integer({ min: 1, max: 2_000 }), { nil: undefined }), fc.array(step, { maxLength: 80 }), (base, blockMs, steps) => {
        const p = blockMs === undefined ? base : { ...base, blockMs };
        const cache = new DenialCache();
        let state: LimiterState | undefined;
        let until = 0;
        let now = T0;
        for (const { gap, cost } of steps) {
          now += gap;
          const asked = decideBatch(p, state, until, [cost], now);
          const cached = cache.lookup("r/k", cost, now, p);
          if (cached) expect(asked.results[0]!.decision.allowed).toBe(false);
          else {
            ({ state, blockedUntil: until } = asked);
            // As decideStrict: an admission forgets the key, a denial is remembered.
            if (asked.results[0]!.decision.allowed) cache.forget("r/k");
            else cache.remember("r/k", cost, asked.results[0]!.decision, now, p);
          }
          const told = cached ?? asked.results[0]!.decision;
          if (told.allowed || told.reason === "cost-exceeds-capacity") continue;
          const passes = (t: number) => decideBatch(p, state, until, [cost], t).results[0]!.decision.allowed;
          expect(passes(now + told.retryAfter)).toBe(true);
          expect(passes(now + told.retryAfter - (cached ? 2 : 1))).toBe(false);
        }
      }),
      { numRuns: 1_000 },
    );
  });
});
