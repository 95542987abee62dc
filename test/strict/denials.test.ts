// A strict key's cached denial: it only ever denies early, for the same or a costlier request, until the object's retryAfter.
import { describe, expect, it } from "vitest";
import type { Decision } from "../../src/algorithms";
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

describe("DenialCache", () => {
  it("denies the same request again until the object's retryAfter, its wait counted down", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(4_000), T0);
    expect(cache.lookup("r/k", 1, T0 + 1_000)).toMatchObject({ allowed: false, retryAfter: 3_000, reason: "cache", remaining: 0 });
    expect(cache.lookup("r/k", 1, T0 + 3_999)?.retryAfter).toBe(1);
  });

  it("says blocked, not cache, while a remembered block holds, for any cost", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 3, denied(30_000, "blocked"), T0);
    expect(cache.lookup("r/k", 1, T0 + 1_000)).toMatchObject({ allowed: false, retryAfter: 29_000, reason: "blocked" });
  });

  it("says nothing once retryAfter has passed", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(4_000), T0);
    expect(cache.lookup("r/k", 1, T0 + 4_000)).toBeUndefined();
  });

  it("denies a costlier request, and leaves a cheaper one to the object", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 5, denied(4_000), T0);
    expect(cache.lookup("r/k", 6, T0)?.allowed).toBe(false);
    expect(cache.lookup("r/k", 4, T0)).toBeUndefined();
  });

  it("says the units the object had left at its denial, not none: a costlier request was refused with some left", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 2, { ...denied(10_000), remaining: 1 }, T0);
    expect(cache.lookup("r/k", 3, T0 + 100)).toMatchObject({ allowed: false, remaining: 1, reason: "cache" });
  });

  it("does not remember a cost over the capacity, an error, or an admission", () => {
    const cache = new DenialCache();
    cache.remember("r/a", 50, denied(60_000, "cost-exceeds-capacity"), T0);
    cache.remember("r/b", 1, denied(1_000, "error"), T0);
    cache.remember("r/c", 1, { ...denied(0), allowed: true, reason: undefined }, T0);
    expect([cache.lookup("r/a", 50, T0), cache.lookup("r/b", 1, T0), cache.lookup("r/c", 1, T0)]).toEqual([undefined, undefined, undefined]);
  });

  it("forgets a key that was reset", () => {
    const cache = new DenialCache();
    cache.remember("r/k", 1, denied(4_000), T0);
    cache.forget("r/k");
    expect(cache.lookup("r/k", 1, T0)).toBeUndefined();
  });
});
