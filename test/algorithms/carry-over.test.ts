// A key's state under a changed rule or a second live Worker version: what was used stays used.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { carryOver, decide, peek, UnknownAlgorithmError, usedUnits } from "../../src/algorithms";
import type { LimiterState, Policy } from "../../src/algorithms";
import { fromCarry, keepsCarried, keptBefore, stateFor, type Stored } from "../../src/algorithms/kept";

const window = (limit: number, periodMs = 60_000, buckets = 1): Policy => ({ algorithm: "sliding-window", limit, periodMs, burst: limit, buckets });
const bucket = (limit: number, periodMs = 60_000, burst = limit): Policy => ({ algorithm: "token-bucket", limit, periodMs, burst, buckets: 1 });
const T0 = 1_700_000_040_000; // the start of a 60 s window

/** Runs requests of one unit at `times` under `policy`, from `state`. */
function admit(policy: Policy, state: LimiterState | undefined, times: number[]): LimiterState | undefined {
  for (const now of times) state = decide(policy, state, 1, now).state;
  return state;
}

describe("usedUnits", () => {
  it("counts a sliding window's estimate, rounded up", () => {
    const p = window(10);
    const state = admit(p, undefined, [T0, T0, T0]);
    expect(usedUnits(p, state!, T0 + 1)).toBe(3);
    // Halfway through the next window the three weigh 1.5: two whole units are still used.
    expect(usedUnits(p, state!, T0 + 90_000)).toBe(2);
    expect(usedUnits(p, state!, T0 + 120_000)).toBe(0);
  });

  it("counts a token bucket's tokens taken and not yet refilled, rounded up", () => {
    const p = bucket(6);
    const state = admit(p, undefined, [T0, T0, T0]);
    expect(usedUnits(p, state!, T0)).toBe(3);
    expect(usedUnits(p, state!, T0 + 10_000)).toBe(2);
    expect(usedUnits(p, state!, T0 + 10_001)).toBe(2);
    expect(usedUnits(p, state!, T0 + 30_000)).toBe(0);
  });
});

describe("carryOver", () => {
  it("carries a fixed window's count into another algorithm for a period past the window's turn, which frees it for the fixed window alone", () => {
    const fixed: Policy = { algorithm: "fixed-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
    const state = admit(fixed, undefined, Array<number>(10).fill(T0 + 59_000));
    expect(usedUnits(bucket(10), carryOver(fixed, state, bucket(10), T0 + 60_500)!, T0 + 60_500)).toBe(10);
    expect(carryOver(fixed, state, bucket(10), T0 + 120_000)).toBeUndefined();
  });

  it("keeps the state itself when the algorithm is the same", () => {
    const state = admit(window(10), undefined, [T0]);
    expect(carryOver(window(10), state, window(3), T0)).toBe(state);
  });

  it("turns a sliding window's used units into tokens taken from the bucket", () => {
    const state = admit(window(3), undefined, [T0, T0, T0]);
    const carried = carryOver(window(3), state, bucket(6), T0 + 1);
    expect(peek(bucket(6), carried, T0 + 1).remaining).toBe(3);
  });

  it("turns a token bucket's taken tokens into units counted in the window", () => {
    const state = admit(bucket(3), undefined, [T0, T0]);
    const carried = carryOver(bucket(3), state, window(3), T0);
    expect(peek(window(3), carried, T0).remaining).toBe(1);
  });

  it("starts afresh only when nothing is used any more", () => {
    const state = admit(window(3), undefined, [T0]);
    expect(carryOver(window(3), state, bucket(3), T0 + 120_000)).toBeUndefined();
  });

  it("refuses an algorithm this version does not know, on either side", () => {
    const state = admit(window(3), undefined, [T0]);
    const future = { ...window(3), algorithm: "leaky-bucket" } as unknown as Policy;
    expect(() => carryOver(window(3), state, future, T0)).toThrow(UnknownAlgorithmError);
    expect(() => carryOver(future, { ...state!, algorithm: "leaky-bucket" } as unknown as LimiterState, window(3), T0)).toThrow(UnknownAlgorithmError);
  });

  it("never treats an unknown algorithm as a token bucket", () => {
    const future = { ...bucket(3), algorithm: "leaky-bucket" } as unknown as Policy;
    expect(() => decide(future, undefined, 1, T0)).toThrow(/unknown algorithm "leaky-bucket"/);
  });

  it("keeps a reshaped window's used units, by the old shape at the time of the change", () => {
    // 3 units 90 s ago in a 60 s window weigh 1.5 now; a 10 s window must still count 2.
    const state = admit(window(3), undefined, [T0, T0, T0]);
    expect(peek(window(3, 10_000), state, T0 + 90_000).remaining).toBe(1);
    // Long gone by the old shape: nothing is carried.
    expect(peek(window(3, 10_000), state, T0 + 600_000).remaining).toBe(3);
  });
});

describe("two versions alternating between algorithms", () => {
  it("admit 3 of 30 requests against a limit of 3 per minute", () => {
    const versions = [window(3), bucket(3)];
    let state: LimiterState | undefined;
    let from = versions[0]!;
    let admitted = 0;
    for (let i = 0; i < 30; i++) {
      const policy = versions[i % 2]!;
      const outcome = decide(policy, carryOver(from, state, policy, T0 + i * 100), 1, T0 + i * 100);
      if (outcome.decision.allowed) {
        admitted++;
        state = outcome.state;
        from = policy;
      }
    }
    expect(admitted).toBe(3);
  });

  it("never admit more than the token bucket alone may: limit + limit × t / period in any first t of a window", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(1, 6, 60),
        fc.array(fc.record({ at: fc.integer({ min: 0, max: 59_999 }), version: fc.boolean(), cost: fc.integer({ min: 1, max: 3 }) }), { maxLength: 80 }),
        (limit, buckets, requests) => {
          const versions = [window(limit, 60_000, buckets), bucket(limit)];
          let state: LimiterState | undefined;
          let from = versions[0]!;
          let admitted = 0;
          for (const r of [...requests].sort((a, b) => a.at - b.at)) {
            const policy = versions[r.version ? 1 : 0]!;
            const now = T0 + r.at;
            const outcome = decide(policy, carryOver(from, state, policy, now), r.cost, now);
            if (!outcome.decision.allowed) continue;
            admitted += r.cost;
            state = outcome.state;
            from = policy;
            expect(admitted).toBeLessThanOrEqual(limit + Math.floor((limit * r.at) / 60_000));
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe("carryOver between every pair of algorithms", () => {
  const policies: Policy[] = [
    window(10),
    bucket(10),
    { algorithm: "fixed-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 },
    { algorithm: "sliding-log", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 },
    { algorithm: "gcra", limit: 10, periodMs: 60_000, burst: 9, buckets: 1 },
  ];

  it("keeps every unit the old algorithm still counts as used, so no change grants a fresh quota", () => {
    fc.assert(
      fc.property(fc.constantFrom(...policies), fc.constantFrom(...policies), fc.integer({ min: 1, max: 10 }), fc.nat({ max: 59_999 }), (from, to, units, into) => {
        fc.pre(from.algorithm !== to.algorithm);
        const state = decide(from, undefined, units, T0 + into).state;
        const now = T0 + into;
        const used = usedUnits(from, state, now);
        expect(used).toBe(units);
        const carried = carryOver(from, state, to, now);
        expect(usedUnits(to, carried!, now)).toBe(used);
        expect(peek(to, carried, now).remaining).toBe(10 - used);
      }),
      { numRuns: 500 },
    );
  });
});

describe("keepsCarried", () => {
  const stored = (carried?: true): Stored => ({ policy: window(3), state: admit(window(3), undefined, [T0, T0, T0])!, ...(carried ? { carried } : {}) });

  it("keeps a state carried over from an algorithm no live version asks under", () => {
    const kept = stored();
    expect(keepsCarried(kept, stateFor(kept, bucket(3), T0 + 1), false)).toBe(true);
  });

  it("does not keep it while a live version still asks under the old algorithm: the key frees as the old state frees", () => {
    const kept = stored();
    expect(keepsCarried(kept, stateFor(kept, bucket(3), T0 + 1), true)).toBe(false);
  });

  it("does not keep a carry of a state that was itself carried: alternating versions would take the units anew at every switch", () => {
    const kept = stored(true);
    expect(keepsCarried(kept, stateFor(kept, bucket(3), T0 + 1), false)).toBe(false);
  });

  it("has nothing to keep when the algorithm is the stored one", () => {
    const kept = stored();
    expect(fromCarry(kept, stateFor(kept, window(5), T0 + 1))).toBe(false);
    expect(keepsCarried(kept, stateFor(kept, window(5), T0 + 1), false)).toBe(false);
  });
});

describe("the state kept from before", () => {
  const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 };
  const asked = () => true;

  it("keeps the replaced algorithm's state while its version still asks, counting what the new one takes", () => {
    const stored: Stored = { policy: fixed, state: admit(fixed, undefined, [T0, T0])! };
    const kept = keptBefore(stored, bucket(3), 1, T0 + 1_000, asked)!;
    expect(usedUnits(fixed, kept.state, T0 + 1_000)).toBe(3);
    expect(keptBefore(stored, bucket(3), 1, T0 + 1_000, () => false)).toBeUndefined();
  });

  it("reads it back for its own algorithm when it counts more used than the carry-over", () => {
    const before = { policy: fixed, state: admit(fixed, undefined, [T0, T0, T0])! };
    const stored: Stored = { policy: bucket(3), state: admit(bucket(3), undefined, [T0])!, before };
    expect(stateFor(stored, fixed, T0 + 30_000)).toBe(before.state);
  });

  describe("beside a concurrency rule, whose slots only their own requests give back", () => {
    const slots: Policy = { algorithm: "concurrency", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 };
    const unasked = () => false;

    it("carries no rate's units into slots", () => {
      const stored: Stored = { policy: fixed, state: admit(fixed, undefined, [T0, T0, T0])! };
      expect(stateFor(stored, slots, T0 + 1_000)).toBeUndefined();
    });

    it("keeps the rate's state, counting the concurrency rule's admissions, though its version has not asked lately", () => {
      const stored: Stored = { policy: fixed, state: admit(fixed, undefined, [T0])! };
      const kept = keptBefore(stored, slots, 1, T0, unasked);
      expect(kept && usedUnits(fixed, kept.state, T0)).toBe(2);
    });

    it("keeps the concurrency rule's slots as they are, counting no rate's units as slots", () => {
      const held = admit(slots, undefined, [T0])!;
      expect(keptBefore({ policy: slots, state: held }, fixed, 2, T0, unasked)).toEqual({ policy: slots, state: held });
    });
  });
});
