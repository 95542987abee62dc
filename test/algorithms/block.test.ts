// A rule's block across rule changes and live Worker versions: each reads its end by its own rule.
import { describe, expect, it } from "vitest";
import { blockEnd, blockFrom, decideBatch } from "../../src/algorithms/block";
import type { Policy } from "../../src/algorithms";

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

  it("starts no block for a cost the rule can never admit", () => {
    const { blockedUntil, results } = decideBatch(blocking(600_000), undefined, 0, [3], T0);
    expect(results[0]!.decision.reason).toBe("cost-exceeds-capacity");
    expect(blockedUntil).toBe(0);
  });
});
