// A token bucket with a warmup through the real RateLimiter object: the pure algorithm's decisions, kept across a restart.
import { abortAllDurableObjects, env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { decide } from "../../src/algorithms";
import type { Decision, LimiterState, Policy } from "../../src/algorithms";
import { frozenStart } from "../helpers/clock";

/** 10 a second, 3 saved, warming up over 10 s: cold, a unit refills in about 300 ms rather than 100. */
const warming: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 1_000, burst: 3, buckets: 1, warmupMs: 10_000 };

const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));

function freezeClock(): number {
  const start = frozenStart();
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(start);
  return start;
}

/** The pure algorithm's decisions for one unit at each offset from `start`, from a key never seen. */
function pure(start: number, offsets: number[]): Decision[] {
  let state: LimiterState | undefined;
  return offsets.map((offset) => {
    const outcome = decide(warming, state, 1, start + offset);
    state = outcome.state;
    return outcome.decision;
  });
}

afterEach(() => {
  vi.useRealTimers();
});

describe("RateLimiter with a token-bucket warmup", () => {
  it("decides as the pure algorithm: the burst at once, then a cold refill climbing to the rate", async () => {
    const start = freezeClock();
    const offsets = [0, 0, 0, 0, 297, 298, 500, 600, 1_000, 5_000, 5_001, 5_002, 5_100, 5_250];
    const stub = limiter("warmup/pure");
    const decisions: Decision[] = [];
    for (const offset of offsets) {
      vi.setSystemTime(start + offset);
      const [result] = await stub.decide(warming, [1]);
      decisions.push(result!.decision);
    }
    await stub.reset();
    expect(decisions).toEqual(pure(start, offsets));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false, true, false, true, true, true, true, true, false, false]);
  });

  it("keeps the key's coldness across a restart, and a refund gives its unit back", async () => {
    const start = freezeClock();
    const stub = limiter("warmup/restart");
    const [first] = await stub.decide(warming, [3]);
    await stub.refund(warming, 1, first!.countedAt);
    await abortAllDurableObjects();
    const again = limiter("warmup/restart");
    const standing = await again.peek(warming);
    const [cold] = await again.decide(warming, [2]);
    await again.reset();
    expect(standing).toMatchObject({ remaining: 1, moreAt: start + 298 });
    expect(cold!.decision).toMatchObject({ allowed: false, retryAfter: 298 });
  });
});
