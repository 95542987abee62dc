// What code moved from Upstash Ratelimit gets from limiter(), row by row of the README's table, with the real RateLimiter object.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/env";
import { limiter } from "../../src/lib";

const namespace = (env as unknown as Env).LIMITER;

describe("moving from Upstash Ratelimit", () => {
  it("tells a token bucket's limit as the refill per period, not the bucket's size as Upstash does, and its reset when full again", async () => {
    // Ratelimit.tokenBucket(5, "1 m", 20): Upstash's `limit` is 20.
    const api = limiter(namespace, { name: "up-tb", algorithm: "token-bucket", limit: 5, period: "1m", burst: 20 });
    const started = Date.now();
    const first = await api.limit("k");
    expect(first).toMatchObject({ success: true, limit: 5, remaining: 19 });
    for (let i = 0; i < 19; i++) await api.limit("k");
    const denied = await api.limit("k");
    expect(denied).toMatchObject({ success: false, limit: 5, remaining: 0 });
    // Drained of 20 at 5 a minute: full again 4 minutes on; the next token within 12 s.
    expect(denied.reset - started).toBeGreaterThanOrEqual(240_000);
    expect(denied.reset - Date.now()).toBeLessThanOrEqual(240_000);
    expect(denied.retryAfter).toBeLessThanOrEqual(12_000);
    expect(denied.retryAfter).toBeGreaterThan(12_000 - (Date.now() - started) - 1);
  });

  it("keeps what a key used when a limiter of the same name comes with a raised limit, as Upstash's setDynamicLimit does", async () => {
    const plan = (limit: number) => limiter(namespace, { name: "up-dynamic", limit, period: "1h" });
    await plan(5).limit("k", { cost: 5 });
    expect(await plan(10).limit("k")).toMatchObject({ success: true, limit: 10, remaining: 4 });
  });

  it("denies a cost of 3 with 2 units left and consumes nothing, where Upstash denies it and counts its units", async () => {
    for (const algorithm of ["sliding-window", "fixed-window", "token-bucket"] as const) {
      const api = limiter(namespace, { name: `up-rate-${algorithm}`, algorithm, limit: 10, period: "1h" });
      await api.limit("k", { cost: 8 });
      expect(await api.limit("k", { cost: 3 })).toMatchObject({ success: false, remaining: 2 });
      expect(await api.limit("k", { cost: 2 })).toMatchObject({ success: true, remaining: 0 });
    }
  });
});
