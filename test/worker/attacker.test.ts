// The attacker's bill: a request some rule already denies costs no object call under the others, and new keys are capped.
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/env";
import { metrics } from "../../src/metrics/metrics";
import { originLog, send } from "../helpers/worker";
import { frozenStart } from "../helpers/clock";

const calls = () =>
  ["decide", "refund", "sync"].reduce((sum, method) => sum + metrics.value("floodgate_durable_object_calls_total", { method }), 0);

/** `count` requests from one address, each with an API key never seen before. */
async function rotate(tag: string, ip: string, count: number, rules: unknown[]): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const request = new Request(`http://floodgate.test/${tag}/${i}`, { headers: { "CF-Connecting-IP": ip, "x-api-key": `${tag}-key-${i}` } });
    statuses.push((await send(request, { rules })).status);
  }
  return statuses;
}

afterEach(() => {
  vi.useRealTimers();
});

describe("a client over its per-IP limit, rotating API keys", () => {
  it("costs no object call under the per-key rule once its IP's denial is known (strict)", async () => {
    const rules = [
      { name: "atk-ip", key: "ip", limit: 2, period: "1m" },
      { name: "atk-key", key: "header:x-api-key", limit: 100, period: "1m" },
    ];
    expect(await rotate("attack-strict", "192.0.2.150", 2, rules)).toEqual([200, 200]);
    const before = calls();

    const statuses = await rotate("attack-strict", "192.0.2.150", 30, rules);

    expect(statuses.every((s) => s === 429)).toBe(true);
    // The first denial: the per-IP decide, the per-key decide and its refund. Then none.
    expect(calls() - before).toBeLessThanOrEqual(3);
    expect(await originLog("attack-strict")).toHaveLength(2);
  });

  it("costs no object call under a strict per-key rule once a fast per-IP rule's object has denied", async () => {
    const rules = [
      { name: "atk-fast-ip", key: "ip", limit: 2, period: "1m", mode: "fast" },
      { name: "atk-fast-key", key: "header:x-api-key", limit: 100, period: "1m" },
    ];
    await rotate("attack-fast", "192.0.2.151", 6, rules);
    const before = calls();

    const statuses = await rotate("attack-fast", "192.0.2.151", 30, rules);

    expect(statuses.every((s) => s === 429)).toBe(true);
    expect(calls() - before).toBe(0);
  });

  it("still asks every rule's object for a request no rule knows to deny", async () => {
    const rules = [
      { name: "atk-ok-ip", key: "ip", limit: 50, period: "1m" },
      { name: "atk-ok-key", key: "header:x-api-key", limit: 50, period: "1m" },
    ];
    const before = calls();
    expect(await rotate("attack-allowed", "192.0.2.152", 3, rules)).toEqual([200, 200, 200]);
    expect(calls() - before).toBe(6);
  });
});

describe("newKeysPerSecond", () => {
  it("counts keys new past the cap under the rule's one #overflow key", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(frozenStart());
    const rules = [{ name: "atk-cap", key: "header:x-api-key", limit: 5, period: "1m", newKeysPerSecond: 3 }];

    const statuses = await rotate("attack-cap", "192.0.2.153", 12, rules);

    // 3 keys of their own, then 9 new ones sharing #overflow, which admits its limit of 5.
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 429, 429, 429, 429]);
    const overflow = await env.LIMITER.get(env.LIMITER.idFromName("atk-cap/#overflow")).peek({
      algorithm: "sliding-window",
      limit: 5,
      periodMs: 60_000,
      burst: 5,
      buckets: 60,
    });
    expect(overflow.remaining).toBe(0);
    expect(metrics.value("floodgate_key_overflows_total", { rule: "atk-cap" })).toBe(9);
  });

  it("spends no rule's allowance of new keys on a request another rule already denies from its cache", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart() + 200_000;
    const rules = [
      { name: "atk-nk-ip", key: "ip", limit: 2, period: "1m" },
      { name: "atk-nk-key", key: "header:x-api-key", limit: 1, period: "1m", newKeysPerSecond: 2 },
    ];
    const overflows = () => metrics.value("floodgate_key_overflows_total", { rule: "atk-nk-key" });
    const before = overflows();
    // Two new keys, each its own; then the address is over its limit and every new key is refused by it.
    const statuses = [];
    for (let i = 0; i < 12; i++) {
      vi.setSystemTime(t0 + i * 100);
      statuses.push(...(await rotate(`attack-nk-${i}`, "192.0.2.154", 1, rules)));
    }
    expect(statuses).toEqual([200, 200, ...Array(10).fill(429)]);
    // Only the request that learned the address is over its limit (from its object) named its key.
    expect(overflows()).toBeLessThanOrEqual(before + 1);

    // A new client a moment later still gets a key of its own, not #overflow.
    const fresh = new Request("http://floodgate.test/attack-nk-fresh/x", { headers: { "CF-Connecting-IP": "192.0.2.155", "x-api-key": "new-client" } });
    expect((await send(fresh, { rules })).status).toBe(200);
    expect(overflows()).toBeLessThanOrEqual(before + 1);
  });

  it("keeps a key it already tracks under its own name past the cap", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(frozenStart() + 100_000);
    const rules = [{ name: "atk-known", key: "header:x-api-key", limit: 2, period: "1m", newKeysPerSecond: 1 }];
    const request = (key: string) => new Request("http://floodgate.test/attack-known/x", { headers: { "x-api-key": key } });

    const statuses = [];
    for (const key of ["mine", "other-1", "mine", "mine"]) statuses.push((await send(request(key), { rules })).status);

    expect(statuses).toEqual([200, 200, 200, 429]);
  });
});

describe("unknown algorithms from another version", () => {
  it("are decided by the rule's onError when the object refuses them", async () => {
    const { enforce } = await import("../../src/gate/enforce");
    const { rule } = await import("../helpers/rules");
    const future = rule({ name: "atk-future", onError: "deny", algorithm: "leaky-bucket" as never });
    const request = new Request("http://floodgate.test/x", { headers: { "CF-Connecting-IP": "192.0.2.154" } });

    const verdict = await enforce(request, new URL(request.url), [future], { namespace: (env as unknown as Env).LIMITER, waitUntil: () => undefined });

    expect(verdict.allowed).toBe(false);
    expect(verdict.entries[0]?.decision.reason).toBe("error");
  });
});
