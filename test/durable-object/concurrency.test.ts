// concurrency through the real RateLimiter object: slots released through refund, kept across a restart, expired after slotTtl.
import { abortAllDurableObjects, env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Policy } from "../../src/algorithms";
import { frozenStart } from "../helpers/clock";

const slots: Policy = { algorithm: "concurrency", limit: 2, periodMs: 60_000, burst: 2, buckets: 1 };
const T0 = frozenStart();

const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));
const allowed = (results: { decision: { allowed: boolean } }[]) => results.map((r) => r.decision.allowed);

afterEach(() => {
  vi.useRealTimers();
});

describe("RateLimiter with a concurrency rule", () => {
  it("frees a slot given back at the time it was taken, and keeps the others across a restart", async () => {
    const stub = limiter("alg/concurrency/release");
    const [first, second, third] = await stub.decide(slots, [1, 1, 1]);
    expect(allowed([first!, second!, third!])).toEqual([true, true, false]);
    await stub.refund(slots, 1, first!.countedAt);
    await abortAllDurableObjects();
    expect(allowed(await limiter("alg/concurrency/release").decide(slots, [1, 1]))).toEqual([true, false]);
  });

  it("frees slots an isolate never gave back after slotTtl, and not a millisecond sooner", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/concurrency/ttl");
    expect(allowed(await stub.decide(slots, [2]))).toEqual([true]);
    vi.setSystemTime(T0 + 59_999);
    expect(allowed(await stub.decide(slots, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 60_000);
    expect(allowed(await stub.decide(slots, [2]))).toEqual([true]);
  });
});
