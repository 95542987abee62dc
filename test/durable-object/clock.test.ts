// The RateLimiter object when its clock steps back or a refund carries an odd time: nothing is refilled, refunded twice or lost.
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Policy } from "../../src/algorithms";
import { frozenStart } from "../helpers/clock";

const window: Policy = { algorithm: "sliding-window", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 };
const bucket: Policy = { algorithm: "token-bucket", limit: 6, periodMs: 60_000, burst: 6, buckets: 1 };
const T0 = frozenStart();

const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));
const allowed = (results: { decision: { allowed: boolean } }[]) => results.map((r) => r.decision.allowed);
const at = (time: number) => vi.setSystemTime(time);

afterEach(() => {
  vi.useRealTimers();
});

describe("RateLimiter when the clock steps back", () => {
  it("gives a refund back to the window that counted the units, though the clock stepped back before they were taken", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("clock/refund-after-step-back");
    at(T0 + 60_010);
    await stub.decide(window, [1]);
    // The clock steps back into the previous window: the object still counts in its later one.
    at(T0 + 30_000);
    const [taken] = await stub.decide(window, [2]);
    expect(taken!.decision.allowed).toBe(true);
    await stub.refund(window, 2, taken!.countedAt);
    at(T0 + 60_020);
    expect((await stub.peek(window)).remaining).toBe(2);
  });

  it("refills a token bucket from the latest time it saw, not from the stepped-back clock", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("clock/bucket-step-back");
    at(T0);
    await stub.decide(bucket, [5]);
    // An hour back, the last token is taken, and the bucket is saved with it.
    at(T0 - 3_600_000);
    expect(allowed(await stub.decide(bucket, [1, 1]))).toEqual([true, false]);
    // 6 per minute: one token 10 s after the latest refill the object saw, not an hour's worth.
    at(T0 + 9_999);
    expect(allowed(await stub.decide(bucket, [1]))).toEqual([false]);
    at(T0 + 10_000);
    expect(allowed(await stub.decide(bucket, [1, 1]))).toEqual([true, false]);
  });

  it("keeps counting a sliding window's hits when the clock steps back a window", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("clock/window-step-back");
    at(T0 + 60_000);
    await stub.decide(window, [3]);
    at(T0 + 1_000);
    expect(allowed(await stub.decide(window, [1]))).toEqual([false]);
    at(T0 + 60_001);
    expect((await stub.peek(window)).remaining).toBe(0);
  });
});

describe("RateLimiter refunds with odd times", () => {
  it("takes back no more than was counted when the refund is stamped in the future", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("clock/refund-future");
    at(T0 + 1_000);
    await stub.decide(window, [2]);
    await stub.refund(window, 5, T0 + 86_400_000);
    expect((await stub.peek(window)).remaining).toBe(3);
    expect(allowed(await stub.decide(window, [1, 1, 1, 1]))).toEqual([true, true, true, false]);
  });

  it("gives nothing back for a refund stamped before every window the object keeps", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("clock/refund-ancient");
    at(T0 + 1_000);
    await stub.decide(window, [3]);
    await stub.refund(window, 3, T0 - 10 * 60_000);
    expect((await stub.peek(window)).remaining).toBe(0);
  });

  it("fills a token bucket no higher than its burst, whatever a refund claims", async () => {
    const stub = limiter("clock/refund-over-burst");
    const [taken] = await stub.decide(bucket, [1]);
    await stub.refund(bucket, 100, taken!.countedAt);
    expect((await stub.peek(bucket)).remaining).toBe(6);
  });

  it("leaves a key reset in the meantime at its full quota, no more", async () => {
    const stub = limiter("clock/refund-after-reset");
    const [taken] = await stub.decide(window, [3]);
    await stub.reset();
    await stub.refund(window, 3, taken!.countedAt);
    expect(allowed(await stub.decide(window, [1, 1, 1, 1]))).toEqual([true, true, true, false]);
  });
});
