// A token bucket with a warmup through the real RateLimiter object: the pure algorithm's decisions, kept across restarts.
import { abortAllDurableObjects, env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { decide } from "../../src/algorithms";
import type { Decision, LimiterState, Policy } from "../../src/algorithms";

/** 10 a second, 3 saved, warming up over 10 s: cold, a unit refills in about 300 ms rather than 100. */
const warming: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 1_000, burst: 3, buckets: 1, warmupMs: 10_000 };
const T0 = 1_700_000_000_000;

const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));

/** The pure algorithm's decisions for one unit at each offset from T0, from a key never seen. */
function pure(offsets: number[]): Decision[] {
  let state: LimiterState | undefined;
  return offsets.map((offset) => {
    const outcome = decide(warming, state, 1, T0 + offset);
    state = outcome.state;
    return outcome.decision;
  });
}

afterEach(() => {
  vi.useRealTimers();
});

describe("RateLimiter with a token-bucket warmup", () => {
  it("decides as the pure algorithm: the burst at once, then a cold refill climbing to the rate", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const offsets = [0, 0, 0, 0, 297, 298, 500, 600, 1_000, 5_000, 5_001, 5_002, 5_100, 5_250];
    const stub = limiter("warmup/pure");
    const decisions: Decision[] = [];
    for (const offset of offsets) {
      vi.setSystemTime(T0 + offset);
      const [result] = await stub.decide(warming, [1]);
      decisions.push(result!.decision);
    }
    expect(decisions).toEqual(pure(offsets));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false, true, false, true, true, true, true, true, false, false]);
    // Its alarm, set on the faked clock, would be long past on the real one: forget the key, alarm included.
    await stub.reset();
  });

  it("keeps the key's coldness across a restart, and a refund gives its unit back", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("warmup/restart");
    const [first] = await stub.decide(warming, [3]);
    await stub.refund(warming, 1, first!.countedAt);
    await abortAllDurableObjects();
    const again = limiter("warmup/restart");
    expect(await again.peek(warming)).toMatchObject({ remaining: 1, moreAt: T0 + 298 });
    const [cold] = await again.decide(warming, [2]);
    expect(cold!.decision).toMatchObject({ allowed: false, retryAfter: 298 });
    await again.reset();
  });
});
