import { describe, expect, it } from "vitest";
import type { Policy } from "../../src/algorithms";
import { bookSync, isSaturated, MAX_CALLS_PER_SECOND, SATURATED_UNITS_PER_CALL } from "../../src/fast/schedule";

const T0 = 1_700_000_040_000;
/** 30,000 a minute: the key sustains 0.5 units a ms. */
const global: Policy = { algorithm: "sliding-window", limit: 30_000, periodMs: 60_000, burst: 30_000, buckets: 60 };

/** Books `calls` syncs at T0 from isolates sharing the key, returning the times booked. */
function book(calls: number, peers: number, demandRate: number, saturated: boolean): number[] {
  let cursor = Number.NEGATIVE_INFINITY;
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const booking = bookSync(global, cursor, peers, demandRate, saturated, 1_000, T0);
    cursor = booking.cursor;
    times.push(booking.nextSyncAt);
  }
  return times;
}

describe("the object's call schedule", () => {
  it("keeps the one-interval cadence for the first isolates of a key", () => {
    const times = book(MAX_CALLS_PER_SECOND, 8, 0.5, false);
    expect(times.every((t) => t >= T0 + 1_000 && t <= T0 + 2_000)).toBe(true);
  });

  it("books no more than the budget a second however many isolates call", () => {
    const times = book(4_096, 4_096, 0.5, false);
    const span = times.at(-1)! - times[0]!;
    expect((4_095 * 1_000) / span).toBeCloseTo(MAX_CALLS_PER_SECOND, 6);
  });

  it("spaces a saturated key's calls so that each collects several units of what the key frees", () => {
    const times = book(100, 512, 5, true);
    expect(times[1]! - times[0]!).toBeCloseTo((1_000 * SATURATED_UNITS_PER_CALL) / 500, 6);
  });

  it("still books each isolate of a saturated key a few times a period", () => {
    const few: Policy = { ...global, limit: 300, periodMs: 30_000 };
    const first = bookSync(few, Number.NEGATIVE_INFINITY, 8, 0.1, true, 1_000, T0);
    const second = bookSync(few, first.cursor, 8, 0.1, true, 1_000, T0);
    // 8 isolates, 4 calls a period each: 32 calls in 30 s, one every 937.5 ms.
    expect(second.nextSyncAt - first.nextSyncAt).toBeCloseTo(937.5, 6);
  });

  it("finds a key saturated only when demand is well past what it sustains and what is free would not last", () => {
    expect(isSaturated(global, 5, 1_000, 1_000)).toBe(true);
    expect(isSaturated(global, 5, 30_000, 1_000)).toBe(false);
    expect(isSaturated(global, 0.5, 0, 1_000)).toBe(false);
  });
});
