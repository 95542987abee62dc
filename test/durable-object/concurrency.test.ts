// concurrency through the real RateLimiter object: slots released through refund, kept across a restart, expired after slotTtl.
import { abortAllDurableObjects, env, runDurableObjectAlarm } from "cloudflare:test";
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

  it("holds slots taken under a shorter slotTtl for a longer one asked since, its cleanup alarm included", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/concurrency/ttl-raised");
    const longer: Policy = { ...slots, periodMs: 180_000 };
    expect(allowed(await stub.decide(slots, [2]))).toEqual([true]);
    vi.setSystemTime(T0 + 1_000);
    expect(allowed(await stub.decide(longer, [1]))).toEqual([false]);
    // Past the shorter TTL and any spread of its alarm.
    vi.setSystemTime(T0 + 75_000);
    await runDurableObjectAlarm(stub);
    expect(allowed(await stub.decide(longer, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 180_000);
    expect(allowed(await stub.decide(longer, [2]))).toEqual([true]);
  });

  it("holds slots for a longer slotTtl asked only while the key was blocked", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/concurrency/ttl-raised-blocked");
    const shorter: Policy = { ...slots, blockMs: 5_000 };
    const longer: Policy = { ...shorter, periodMs: 180_000 };
    expect(allowed(await stub.decide(shorter, [2]))).toEqual([true]);
    vi.setSystemTime(T0 + 1_000);
    expect(allowed(await stub.decide(shorter, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 2_000);
    expect(allowed(await stub.decide(longer, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 75_000);
    await runDurableObjectAlarm(stub);
    expect(allowed(await stub.decide(longer, [1]))).toEqual([false]);
  });

  it("keeps renewed slots past slotTtl, and frees them slotTtl after their last renewal", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/concurrency/renew");
    const [taken] = await stub.decide(slots, [2]);
    vi.setSystemTime(T0 + 40_000);
    expect(await stub.renew(slots, 2, [taken!.countedAt!], T0 + 40_000)).toBe(T0 + 40_000);
    vi.setSystemTime(T0 + 99_999);
    expect(allowed(await stub.decide(slots, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 100_000);
    expect(allowed(await stub.decide(slots, [2]))).toEqual([true]);
  });

  it("renews nothing once the slots are given back, and a release at the renewal's time frees them", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/concurrency/renew-release");
    const [taken] = await stub.decide(slots, [1]);
    vi.setSystemTime(T0 + 30_000);
    const renewedAt = await stub.renew(slots, 1, [taken!.countedAt!], T0 + 30_000);
    await stub.refund(slots, 1, renewedAt);
    expect(await stub.renew(slots, 1, [renewedAt], T0 + 30_001)).toBe(0);
    expect(allowed(await stub.decide(slots, [2]))).toEqual([true]);
  });

  it("keeps every request's slot when a renewal's answer was lost and it is asked again, never moving another request's", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/concurrency/renew-lost");
    const [b] = await stub.decide(slots, [1]);
    vi.setSystemTime(T0 + 10);
    const [a] = await stub.decide(slots, [1]);
    vi.setSystemTime(T0 + 20_000);
    await stub.renew(slots, 1, [a!.countedAt!], T0 + 20_000);
    vi.setSystemTime(T0 + 40_000);
    expect(await stub.renew(slots, 1, [T0 + 20_000, a!.countedAt!], T0 + 40_000)).toBe(T0 + 40_000);
    expect(await stub.renew(slots, 1, [b!.countedAt!], T0 + 40_000)).toBe(T0 + 40_000);
    vi.setSystemTime(T0 + 90_000);
    expect(allowed(await stub.decide(slots, [1]))).toEqual([false]);
  });
});
