// The most units one request can be granted: what every path checks before asking anyone.
import { describe, expect, it } from "vitest";
import { decide, largestCost, type Policy } from "../../src/algorithms";

const T0 = 1_700_000_040_000;
const base = { limit: 5, periodMs: 60_000, buckets: 1 };
const policies: Policy[] = [
  { ...base, algorithm: "sliding-window", burst: 5 },
  { ...base, algorithm: "fixed-window", burst: 5 },
  { ...base, algorithm: "sliding-log", burst: 5 },
  { ...base, algorithm: "token-bucket", burst: 8 },
  { ...base, algorithm: "token-bucket", burst: 8, warmupMs: 30_000 },
  { ...base, algorithm: "gcra", burst: 3 },
  { ...base, algorithm: "concurrency", burst: 5 },
];

describe("largestCost", () => {
  it.each(policies.map((p) => [`${p.algorithm}${p.warmupMs ? " with warmup" : ""}`, p] as const))("is the most a fresh %s key grants one request", (_name, policy) => {
    const most = largestCost(policy);
    expect(decide(policy, undefined, most, T0).decision.allowed).toBe(true);
    expect(decide(policy, undefined, most + 1, T0).decision).toMatchObject({ allowed: false, reason: "cost-exceeds-capacity", retryAfter: 60_000 });
  });
});
