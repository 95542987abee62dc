// The strict request lines, pure: which batch goes out when, with an explicit clock.
import { describe, expect, it } from "vitest";
import type { Policy } from "../../src/algorithms";
import { Lanes, laneOf } from "../../src/strict/lanes";

const T0 = 1_700_000_000_000;
const bucket: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };

describe("Lanes", () => {
  it("hands the first waiter of an idle line its own batch at once", () => {
    const lanes = new Lanes<string>();
    expect(lanes.join("k", "a", T0, 100)).toEqual(["a"]);
  });

  it("keeps those who arrive while a batch is in flight for the next, handed out when it ends", () => {
    const lanes = new Lanes<string>();
    const first = lanes.join("k", "a", T0, 100)!;
    expect(lanes.join("k", "b", T0 + 1, 100)).toBeUndefined();
    expect(lanes.join("k", "c", T0 + 2, 100)).toBeUndefined();
    expect(lanes.ended("k", first, false, T0 + 3)).toEqual({ failed: [], next: ["b", "c"] });
  });

  it("hands out at most maxBatch waiters, the oldest first", () => {
    const lanes = new Lanes<number>(2);
    const first = lanes.join("k", 0, T0, 100)!;
    for (const w of [1, 2, 3]) lanes.join("k", w, T0, 100);
    expect(lanes.ended("k", first, false, T0).next).toEqual([1, 2]);
  });

  it("says the line is full at maxWaiting, not counting the batch in flight", () => {
    const lanes = new Lanes<number>(2, 3);
    lanes.join("k", 0, T0, 100);
    for (const w of [1, 2]) lanes.join("k", w, T0, 100);
    expect(lanes.full("k")).toBe(false);
    lanes.join("k", 3, T0, 100);
    expect(lanes.full("k")).toBe(true);
  });

  it("replaces a batch that made no progress for stallMs, and the stalled one hands nothing on when it ends", () => {
    const lanes = new Lanes<string>();
    const stalled = lanes.join("k", "a", T0, 100)!;
    expect(lanes.join("k", "b", T0 + 100, 100)).toBeUndefined();
    expect(lanes.join("k", "c", T0 + 101, 100)).toEqual(["b", "c"]);
    lanes.join("k", "d", T0 + 102, 100);
    expect(lanes.ended("k", stalled, false, T0 + 103)).toEqual({ failed: [], next: undefined });
  });

  it("fails the waiting line with a batch the object refused as overloaded, and retires the line", () => {
    const lanes = new Lanes<string>();
    const first = lanes.join("k", "a", T0, 100)!;
    lanes.join("k", "b", T0, 100);
    expect(lanes.ended("k", first, true, T0 + 1)).toEqual({ failed: ["b"], next: undefined });
    expect(lanes.join("k", "c", T0 + 2, 100)).toEqual(["c"]);
  });

  it("takes a waiter whose time ran out out of the line", () => {
    const lanes = new Lanes<string>();
    const first = lanes.join("k", "a", T0, 100)!;
    lanes.join("k", "b", T0, 100);
    lanes.leave("k", "b");
    expect(lanes.waiting("k")).toBe(0);
    expect(lanes.ended("k", first, false, T0 + 1).next).toBeUndefined();
  });
});

describe("laneOf", () => {
  it("gives requests under policies that differ in any field their own lines, warmup included", () => {
    expect(laneOf("r/k", bucket)).toBe(laneOf("r/k", { ...bucket }));
    expect(laneOf("r/k", { ...bucket, warmupMs: 30_000 })).not.toBe(laneOf("r/k", bucket));
    expect(laneOf("r/k", { ...bucket, limit: 11 })).not.toBe(laneOf("r/k", bucket));
    expect(laneOf("r/j", bucket)).not.toBe(laneOf("r/k", bucket));
  });
});
