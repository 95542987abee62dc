// floodgate's two-window sliding window (buckets: 1) against Upstash's slidingWindow (its Lua script), on the same traffic.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decide, type LimiterState, type Policy } from "../../src/algorithms";

/**
 * One identifier of Upstash's slidingWindow, one unit a call: a counter per epoch-aligned window;
 * the previous window's count weighted by how much of it still overlaps, rounded down, plus the
 * current one; a call is denied when that reaches the limit, else counted.
 */
class UpstashSlidingWindow {
  private readonly counts = new Map<number, number>();
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** Whether the call is admitted, and the previous window's weighted count before rounding. */
  limitCall(now: number): { allowed: boolean; previous: number; current: number } {
    const window = Math.floor(now / this.windowMs);
    const current = this.counts.get(window) ?? 0;
    const previous = (1 - (now % this.windowMs) / this.windowMs) * (this.counts.get(window - 1) ?? 0);
    if (Math.floor(previous) + current >= this.limit) return { allowed: false, previous, current };
    this.counts.set(window, current + 1);
    return { allowed: true, previous, current };
  }
}

describe("two-window sliding window against Upstash's slidingWindow", () => {
  it("decides as Upstash does until Upstash admits a call whose unrounded count would pass the limit", () => {
    const gaps = fc.array(fc.nat({ max: 400 }), { maxLength: 200, size: "max" });
    let diverged = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 100, max: 10_000 }), gaps, (limit, windowMs, traffic) => {
        const upstash = new UpstashSlidingWindow(limit, windowMs);
        const policy: Policy = { algorithm: "sliding-window", limit, periodMs: windowMs, burst: limit, buckets: 1 };
        let state: LimiterState | undefined;
        let now = 1_700_000_000_000;
        for (const gap of traffic) {
          now += Math.floor((gap * windowMs) / 1_000);
          const ours = decide(policy, state, 1, now);
          state = ours.state;
          const theirs = upstash.limitCall(now);
          if (ours.decision.allowed === theirs.allowed) continue;
          expect(theirs.allowed).toBe(true);
          expect(theirs.previous + theirs.current + 1).toBeGreaterThan(limit);
          diverged++;
          return;
        }
      }),
      { numRuns: 300 },
    );
    expect(diverged).toBeGreaterThan(0);
  });
});
