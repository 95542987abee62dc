// A rule's overrides through the Worker with the real object: a named key's own quota, strict and fast, in its headers, past newKeysPerSecond and in the admin API.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Floodgate } from "../../src/binding/floodgate";
import type { Env } from "../../src/env";
import { metrics } from "../../src/metrics/metrics";
import { durableObjectName } from "../../src/routing/key";
import { frozenStart } from "../helpers/clock";
import { originLog, originUrl, send, statuses } from "../helpers/worker";

const withKey = (tag: string, key: string) => new Request(`http://floodgate.test/${tag}/x`, { headers: { "CF-Connecting-IP": "192.0.2.190", "x-api-key": key } });

afterEach(() => {
  vi.useRealTimers();
});

describe("overrides", () => {
  it("admits a named key its own limit and every other key the rule's, strict", async () => {
    const rules = [{ name: "ovr-strict", key: "header:x-api-key", limit: 2, period: "1m", overrides: [{ keys: ["k-partner"], limit: 5 }] }];

    const partner = await statuses(7, () => withKey("ovr-strict", "k-partner"), { rules });
    const anyone = await statuses(4, () => withKey("ovr-strict", "k-anyone"), { rules });

    expect(partner).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(anyone).toEqual([200, 200, 429, 429]);
    expect(await originLog("ovr-strict")).toHaveLength(7);
  });

  it("admits a named key its own limit in fast mode, from leases sized for it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(frozenStart() + 300_000);
    const rules = [{ name: "ovr-fast", key: "header:x-api-key", limit: 3, period: "1m", mode: "fast", overrides: [{ keys: ["k-partner"], limit: 12 }] }];

    const partner = await statuses(15, () => withKey("ovr-fast", "k-partner"), { rules });
    const anyone = await statuses(5, () => withKey("ovr-fast", "k-anyone"), { rules });

    expect(partner.filter((s) => s === 200)).toHaveLength(12);
    expect(anyone.filter((s) => s === 200)).toHaveLength(3);
  });

  it("tells the key's own quota in its headers: RateLimit-Policy and X-RateLimit-Limit", async () => {
    const rules = [{ name: "ovr-headers", key: "header:x-api-key", limit: 10, period: "1m", overrides: [{ keys: ["k-partner"], limit: 1000, period: "1h" }] }];

    const partner = await send(withKey("ovr-headers", "k-partner"), { rules });
    const anyone = await send(withKey("ovr-headers", "k-anyone"), { rules });

    expect(partner.headers.get("RateLimit-Policy")).toBe('"ovr-headers";q=1000;w=3600');
    expect(partner.headers.get("X-RateLimit-Limit")).toBe("1000");
    expect(partner.headers.get("X-RateLimit-Remaining")).toBe("999");
    expect(anyone.headers.get("RateLimit-Policy")).toBe('"ovr-headers";q=10;w=60');
  });

  it("matches a client's address as the rule keys it: an IPv6 override names its network", async () => {
    const rules = [{ name: "ovr-ip", limit: 1, period: "1m", overrides: [{ keys: ["2001:db8:abcd:1200::"], limit: 3 }] }];
    const from = (address: string) => () => new Request("http://floodgate.test/ovr-ip/x", { headers: { "CF-Connecting-IP": address } });

    expect(await statuses(4, from("2001:db8:abcd:12ff::7"), { rules })).toEqual([200, 200, 200, 429]);
    expect(await statuses(2, from("2001:db8:abcd:1300::7"), { rules })).toEqual([200, 429]);
  });

  it("never counts a named key under #overflow, and spends no allowance of new keys on it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(frozenStart() + 400_000);
    const rules = [{ name: "ovr-new", key: "header:x-api-key", limit: 2, period: "1m", newKeysPerSecond: 1, overrides: [{ keys: ["k-partner"], limit: 4 }] }];
    const overflows = () => metrics.value("floodgate_key_overflows_total", { rule: "ovr-new" });
    const before = overflows();

    // The one new key this second, then the partner's key: its own, though the allowance is spent.
    expect((await send(withKey("ovr-new", "k-first"), { rules })).status).toBe(200);
    const partner = await statuses(5, () => withKey("ovr-new", "k-partner"), { rules });

    expect(partner).toEqual([200, 200, 200, 200, 429]);
    expect(overflows()).toBe(before);
    expect((await send(withKey("ovr-new", "k-second"), { rules })).status).toBe(200);
    expect(overflows()).toBe(before + 1);
  });

  it("keeps a named key in shadow mode under DRY_RUN: it never denies", async () => {
    const rules = [{ name: "ovr-dry", key: "header:x-api-key", limit: 1, period: "1m", overrides: [{ keys: ["k-partner"], limit: 2 }] }];
    const before = metrics.value("floodgate_decisions_total", { rule: "ovr-dry", decision: "dry_run_denied" });

    expect(await statuses(4, () => withKey("ovr-dry", "k-partner"), { rules, DRY_RUN: "true" })).toEqual([200, 200, 200, 200]);
    expect(metrics.value("floodgate_decisions_total", { rule: "ovr-dry", decision: "dry_run_denied" }) - before).toBe(2);
  });

  it("shows a named key's own quota in the admin API, beside its standing", async () => {
    const rules = [{ name: "ovr-admin", key: "header:x-api-key", limit: 2, period: "1m", overrides: [{ keys: ["k-partner"], limit: 7 }] }];
    const token = "ovr-admin-token";
    await send(withKey("ovr-admin", "k-partner"), { rules, ADMIN_TOKEN: token });
    const read = (key: string) =>
      send(new Request(`http://floodgate.test/__floodgate/state?rule=ovr-admin&key=${key}`, { headers: { Authorization: `Bearer ${token}` } }), { rules, ADMIN_TOKEN: token }).then((r) => r.json<{ override?: unknown; state: { limit: number; remaining: number } }>());

    const partner = await read("k-partner");
    const anyone = await read("k-anyone");

    expect(partner.override).toEqual({ limit: 7, period: "1m", burst: 7 });
    expect(partner.state).toMatchObject({ limit: 7, remaining: 6 });
    expect(anyone.override).toBeUndefined();
    expect(anyone.state.limit).toBe(2);
  });

  it("lets a key its override leaves unlimited through, the rule sitting out: nothing counted, no header of its own, no cost read", async () => {
    const rules = [
      { name: "ovr-free", key: "header:x-api-key", limit: 1, period: "1m", cost: "header:x-cost", overrides: [{ keys: ["k-internal"], unlimited: true }] },
      { name: "ovr-free-ip", key: "ip", limit: 100, period: "1m" },
    ];
    const internal = () => new Request("http://floodgate.test/ovr-free/x", { headers: { "CF-Connecting-IP": "192.0.2.191", "x-api-key": "k-internal", "x-cost": "not-a-number" } });
    const satOut = () => metrics.value("floodgate_decisions_total", { rule: "ovr-free", decision: "unlimited" });
    const before = satOut();

    const responses = [];
    for (let i = 0; i < 5; i++) responses.push(await send(internal(), { rules }));

    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(satOut() - before).toBe(5);
    expect(responses[4]!.headers.get("RateLimit-Policy")).toBe('"ovr-free-ip";q=100;w=60');
    expect(await originLog("ovr-free")).toHaveLength(5);
    const object = (env as unknown as Env).LIMITER.get((env as unknown as Env).LIMITER.idFromName("ovr-free/k-internal"));
    expect((await object.peek({ algorithm: "sliding-window", limit: 1, periodMs: 60_000, burst: 1, buckets: 60 })).remaining).toBe(1);
    expect((await send(withKey("ovr-free", "k-anyone"), { rules })).status).toBe(200);
    expect((await send(withKey("ovr-free", "k-anyone"), { rules })).status).toBe(429);
  });

  it("counts no unlimited request when another rule refuses it with a 400, whichever rule comes first", async () => {
    const free = { name: "ovr-free-400", key: "header:x-api-key", limit: 5, period: "1m", overrides: [{ keys: ["k-internal"], unlimited: true }] };
    const costly = { name: "ovr-cost-400", key: "ip", limit: 5, period: "1m", cost: "header:x-cost" };
    const malformed = () => new Request("http://floodgate.test/ovr-free-400/x", { headers: { "CF-Connecting-IP": "192.0.2.192", "x-api-key": "k-internal", "x-cost": "nope" } });
    const satOut = () => metrics.value("floodgate_decisions_total", { rule: "ovr-free-400", decision: "unlimited" });
    const before = satOut();

    const statuses = [(await send(malformed(), { rules: [free, costly] })).status, (await send(malformed(), { rules: [costly, free] })).status];

    expect(statuses).toEqual([400, 400]);
    expect(satOut()).toBe(before);
  });

  it("shows a key its override leaves unlimited at the rule's whole quota in the admin API, though its object still counts what came before", async () => {
    const plain = [{ name: "ovr-free-admin", key: "header:x-api-key", limit: 1, period: "1h" }];
    const freed = [{ ...plain[0]!, overrides: [{ keys: ["k-internal"], unlimited: true }] }];
    const token = "ovr-free-admin-token";
    await statuses(2, () => withKey("ovr-free-admin", "k-internal"), { rules: plain });

    const read = await send(new Request("http://floodgate.test/__floodgate/state?rule=ovr-free-admin&key=k-internal", { headers: { Authorization: `Bearer ${token}` } }), { rules: freed, ADMIN_TOKEN: token });

    expect(await read.json()).toMatchObject({ override: { unlimited: true }, state: { allowed: true, remaining: 1 } });
    expect((await send(withKey("ovr-free-admin", "k-internal"), { rules: freed })).status).toBe(200);
  });

  it("finds a long named key's override when the admin API is given its object's #sha256 name", async () => {
    const long = "p".repeat(1100);
    const rules = [{ name: "ovr-long", key: "header:x-api-key", limit: 2, period: "1m", overrides: [{ keys: [long], limit: 7 }] }];
    const token = "ovr-long-token";
    await send(new Request("http://floodgate.test/ovr-long/x", { headers: { "x-api-key": long } }), { rules, ADMIN_TOKEN: token });
    const hashed = (await durableObjectName("ovr-long", long)).slice("ovr-long/".length);

    const read = await send(new Request(`http://floodgate.test/__floodgate/state?rule=ovr-long&key=${encodeURIComponent(hashed)}`, { headers: { Authorization: `Bearer ${token}` } }), { rules, ADMIN_TOKEN: token });

    expect(await read.json()).toMatchObject({ key: hashed, override: { limit: 7, period: "1m", burst: 7 }, state: { limit: 7, remaining: 6 } });
  });

  it("carries a key's count over to its override when one is added, as any changed rule does", async () => {
    const plain = [{ name: "ovr-added", key: "header:x-api-key", limit: 2, period: "1m" }];
    const overridden = [{ ...plain[0]!, overrides: [{ keys: ["k-partner"], limit: 4 }] }];

    const before = await statuses(2, () => withKey("ovr-added", "k-partner"), { rules: plain });
    const after = await statuses(3, () => withKey("ovr-added", "k-partner"), { rules: overridden });

    expect(before).toEqual([200, 200]);
    expect(after).toEqual([200, 200, 429]);
    const object = (env as unknown as Env).LIMITER.get((env as unknown as Env).LIMITER.idFromName("ovr-added/k-partner"));
    expect((await object.peek({ algorithm: "sliding-window", limit: 4, periodMs: 60_000, burst: 4, buckets: 60 })).remaining).toBe(0);
  });
});

describe("overrides from the service binding", () => {
  function binding(rules: unknown): { floodgate: Floodgate; done: () => Promise<void> } {
    const ctx = createExecutionContext();
    const bound: Env = { ...(env as unknown as Env), ORIGIN_URL: originUrl(), RATE_LIMIT_RULES: JSON.stringify(rules) };
    return { floodgate: new Floodgate(ctx as never, bound), done: () => waitOnExecutionContext(ctx) };
  }

  it("waits out a named key's denial whose cost its own, larger quota admits", async () => {
    const rules = [{ name: "ovr-wait-up", key: "header:x-api-key", algorithm: "token-bucket", limit: 2, period: "1s", overrides: [{ keys: ["k-partner"], limit: 10 }] }];
    const { floodgate, done } = binding(rules);
    expect(await floodgate.limit({ key: "k-partner", cost: 10 })).toMatchObject({ success: true, limit: 10 });

    const waited = await floodgate.blockUntilReady({ key: "k-partner", cost: 5, timeout: "3s" });
    await done();

    expect(waited).toMatchObject({ success: true, limit: 10 });
  });

  it("admits a key its override leaves unlimited, saying so, and peeks it at the rule's whole quota", async () => {
    const rules = [{ name: "ovr-free-rpc", key: "header:x-api-key", limit: 1, period: "1m", overrides: [{ keys: ["k-internal"], unlimited: true }] }];
    const { floodgate, done } = binding(rules);
    const before = metrics.value("floodgate_decisions_total", { rule: "ovr-free-rpc", decision: "unlimited" });

    const limited = [await floodgate.limit({ key: "k-internal" }), await floodgate.limit({ key: "k-internal" })];
    const peeked = await floodgate.peek({ key: "k-internal" });
    await done();

    expect(limited).toEqual([expect.objectContaining({ success: true, limit: 1, remaining: 1, retryAfter: 0, reason: "unlimited" }), expect.objectContaining({ success: true, reason: "unlimited" })]);
    expect(limited[0]!.charge).toBeUndefined();
    expect(metrics.value("floodgate_decisions_total", { rule: "ovr-free-rpc", decision: "unlimited" }) - before).toBe(2);
    expect(peeked).toMatchObject({ success: true, remaining: 1, reason: "unlimited" });
  });

  it("answers at once a cost a named key's own, smaller quota can never grant", async () => {
    const rules = [{ name: "ovr-wait-down", key: "header:x-api-key", algorithm: "token-bucket", limit: 10, period: "1s", overrides: [{ keys: ["k-small"], limit: 2 }] }];
    const { floodgate, done } = binding(rules);
    const started = Date.now();

    const answered = await floodgate.blockUntilReady({ key: "k-small", cost: 5, timeout: "3s" });
    await done();

    expect(answered).toMatchObject({ success: false, reason: "cost-exceeds-capacity" });
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
