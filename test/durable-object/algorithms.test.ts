// fixed-window, sliding-log and gcra through the real RateLimiter object: decisions, clock, refunds and restarts.
import { abortAllDurableObjects, env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Policy } from "../../src/algorithms";
import { frozenStart } from "../helpers/clock";

const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 };
const log: Policy = { algorithm: "sliding-log", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 };
const gcra: Policy = { algorithm: "gcra", limit: 10, periodMs: 1_000, burst: 2, buckets: 1 };
const T0 = frozenStart();

const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));
const allowed = (results: { decision: { allowed: boolean } }[]) => results.map((r) => r.decision.allowed);

afterEach(() => {
  vi.useRealTimers();
});

describe("RateLimiter with a fixed window", () => {
  it("admits the limit per window and admits again at the window's end, not before", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0 + 30_000);
    const stub = limiter("alg/fixed/edge");
    const results = await stub.decide(fixed, [1, 1, 1, 1]);
    expect(allowed(results)).toEqual([true, true, true, false]);
    expect(results[3]!.decision).toMatchObject({ retryAfter: 30_000, moreAt: T0 + 60_000, resetAt: T0 + 60_000 });
    vi.setSystemTime(T0 + 59_999);
    expect(allowed(await stub.decide(fixed, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 60_000);
    expect(allowed(await stub.decide(fixed, [3, 1]))).toEqual([true, false]);
  });

  it("refunds into the window the units were counted in, and keeps its count across a restart", async () => {
    const stub = limiter("alg/fixed/refund");
    const [first] = await stub.decide(fixed, [3]);
    await stub.refund(fixed, 2, first!.countedAt);
    await abortAllDurableObjects();
    expect((await limiter("alg/fixed/refund").peek(fixed)).remaining).toBe(2);
  });
});

describe("RateLimiter with a sliding log", () => {
  it("admits again exactly when the oldest request leaves the period", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/log/edge");
    await stub.decide(log, [2]);
    vi.setSystemTime(T0 + 10_000);
    const results = await stub.decide(log, [1, 1]);
    expect(allowed(results)).toEqual([true, false]);
    expect(results[1]!.decision.retryAfter).toBe(50_000);
    vi.setSystemTime(T0 + 59_999);
    expect(allowed(await stub.decide(log, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 60_000);
    expect(allowed(await stub.decide(log, [2, 1]))).toEqual([true, false]);
  });

  it("keeps its log across a restart and takes refunds at the time they were logged", async () => {
    const stub = limiter("alg/log/refund");
    const [first] = await stub.decide(log, [3]);
    await abortAllDurableObjects();
    expect((await limiter("alg/log/refund").peek(log)).remaining).toBe(0);
    await limiter("alg/log/refund").refund(log, 1, first!.countedAt);
    expect((await limiter("alg/log/refund").peek(log)).remaining).toBe(1);
  });
});

describe("RateLimiter with GCRA", () => {
  it("admits 1 + burst at once, then one per emission interval to the millisecond", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/gcra/edge");
    const results = await stub.decide(gcra, [1, 1, 1, 1]);
    expect(allowed(results)).toEqual([true, true, true, false]);
    expect(results[3]!.decision).toMatchObject({ retryAfter: 100, reason: "limit" });
    vi.setSystemTime(T0 + 99);
    expect(allowed(await stub.decide(gcra, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 100);
    expect(allowed(await stub.decide(gcra, [1, 1]))).toEqual([true, false]);
  });

  it("moves TAT back for a refund and keeps it across a restart", async () => {
    // The clock stands still: a unit comes back every 100 ms, which a restart on a loaded machine can outlast.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("alg/gcra/refund");
    const [first] = await stub.decide(gcra, [3]);
    await stub.refund(gcra, 1, first!.countedAt);
    await abortAllDurableObjects();
    const standing = await limiter("alg/gcra/refund").peek(gcra);
    expect(standing.remaining).toBe(1);
  });
});
