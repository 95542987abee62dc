// The service binding's answers as the contract words them: keys shared with the proxy, costs past capacity, one-unit peeks, check's 400.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { Floodgate } from "../../src/binding/floodgate";
import type { Env } from "../../src/env";
import { originUrl, send } from "../helpers/worker";

async function withBinding<T>(rules: unknown, use: (floodgate: Floodgate) => Promise<T>, vars: Partial<Env> = {}): Promise<T> {
  const ctx = createExecutionContext();
  const bound: Env = { ...(env as unknown as Env), ORIGIN_URL: originUrl(), RATE_LIMIT_RULES: JSON.stringify(rules), ...vars };
  try {
    return await use(new Floodgate(ctx as never, bound));
  } finally {
    await waitOnExecutionContext(ctx);
  }
}

describe("the service binding's keys", () => {
  it("shares one counter with the proxy's traffic from an IPv6 client, keyed as its network under the rule's ipv6Prefix", async () => {
    const rules = [{ name: "bk-v6", key: "ip", limit: 2, period: "1h", ipv6Prefix: 48 }];
    const fromClient = (address: string) => new Request("http://floodgate.test/bk-v6/x", { headers: { "CF-Connecting-IP": address } });
    expect((await send(fromClient("2001:db8:abcd:12ff::1"), { rules })).status).toBe(200);
    expect((await send(fromClient("2001:db8:abcd:3400::9"), { rules })).status).toBe(200);

    await withBinding(rules, async (floodgate) => {
      expect(await floodgate.peek({ key: "2001:db8:abcd::/48" })).toMatchObject({ success: false, remaining: 0 });
      expect(await floodgate.peek({ key: "2001:db8:abcd:12ff::1" })).toMatchObject({ success: true, remaining: 2 });
    });
  });
});

describe("the service binding's limit", () => {
  it("answers with ANALYTICS_SAMPLE set while ANALYTICS is not bound, and warns once in a JSON line naming it", async () => {
    const lines: Record<string, unknown>[] = [];
    const warn = vi.spyOn(console, "warn").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    try {
      await withBinding([{ name: "bk-unbound", limit: 5, period: "1m" }], async (floodgate) => {
        expect((await floodgate.limit({ key: "k" })).success).toBe(true);
        expect((await floodgate.limit({ key: "k" })).success).toBe(true);
      }, { ANALYTICS_SAMPLE: "0.5" });
    } finally {
      warn.mockRestore();
    }
    expect(lines).toEqual([{ event: "warning", kind: "config", message: expect.stringMatching(/^ANALYTICS_SAMPLE: .*no ANALYTICS dataset is bound/) }]);
  });

  it("denies a cost more than the rule can ever grant with reason cost-exceeds-capacity, consuming nothing, for every kind of capacity", async () => {
    const rules = [
      { name: "bk-window", limit: 3, period: "1h" },
      { name: "bk-bucket", algorithm: "token-bucket", limit: 2, period: "1h", burst: 3 },
      { name: "bk-gcra", algorithm: "gcra", limit: 1, period: "1h", burst: 2 },
      { name: "bk-slots", algorithm: "concurrency", limit: 2 },
    ];
    await withBinding(rules, async (floodgate) => {
      for (const [rule, capacity] of [["bk-window", 3], ["bk-bucket", 3], ["bk-gcra", 3], ["bk-slots", 2]] as const) {
        const key = `over-${rule}`;
        expect({ rule, result: await floodgate.limit({ rule, key, cost: capacity + 1 }) }).toMatchObject({ rule, result: { success: false, reason: "cost-exceeds-capacity" } });
        const admitted = await floodgate.limit({ rule, key, cost: capacity });
        expect({ rule, success: admitted.success }).toEqual({ rule, success: true });
        await admitted.release?.();
      }
    });
  });
});

describe("the service binding's peek", () => {
  it("tells success and retryAfter of a one-unit request, whatever the rule's own cost", async () => {
    const rules = [{ name: "bk-costly", limit: 3, period: "1h", cost: 2 }];
    await withBinding(rules, async (floodgate) => {
      expect((await floodgate.limit({ key: "k" })).success).toBe(true);
      // One unit left: a one-unit request passes, the rule's two-unit one does not.
      expect(await floodgate.peek({ key: "k" })).toMatchObject({ success: true, retryAfter: 0, remaining: 1 });
      expect((await floodgate.limit({ key: "k" })).success).toBe(false);

      expect((await floodgate.limit({ key: "k", cost: 1 })).success).toBe(true);
      const peeked = await floodgate.peek({ key: "k" });
      const denied = await floodgate.limit({ key: "k", cost: 1 });
      expect(peeked).toMatchObject({ success: false, remaining: 0 });
      expect(denied.success).toBe(false);
      expect(Math.abs(peeked.retryAfter - denied.retryAfter)).toBeLessThan(5_000);
    });
  });
});

describe("the service binding's check", () => {
  it("answers a cost header that is not a positive integer with the proxy's 400 problem and no rate-limit headers, consuming nothing", async () => {
    const rules = [{ name: "bk-metered", key: "ip", limit: 5, period: "1h", cost: "header:x-cost" }];
    const request = (cost: string) => new Request("http://floodgate.test/x", { headers: { "CF-Connecting-IP": "198.51.100.80", "x-cost": cost } });
    await withBinding(rules, async (floodgate) => {
      const refused = await floodgate.check(request("abc"));
      expect(refused).toMatchObject({ allowed: false, headers: {} });
      expect(refused.response?.status).toBe(400);
      expect(refused.response?.headers.get("Content-Type")).toBe("application/problem+json");
      expect(await refused.response?.json()).toMatchObject({ status: 400, detail: expect.stringContaining("bk-metered") });

      const admitted = await floodgate.check(request("5"));
      expect(admitted).toEqual({ allowed: true, headers: expect.objectContaining({ "X-RateLimit-Remaining": "0" }) });
    });
  });
});
