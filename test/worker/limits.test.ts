import { parseList } from "structured-headers";
import { describe, expect, it } from "vitest";
import { metrics } from "../../src/metrics/metrics";
import { PATIENT_TIMEOUT } from "../helpers/rules";
import { originLog, send } from "../helpers/worker";

const get = (path: string, headers: Record<string, string> = {}) =>
  new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": "192.0.2.1", ...headers } });
const statuses = (responses: Response[]) => responses.map((r) => r.status);

describe("strict limits through the Worker", () => {
  it("admits exactly the limit out of 200 concurrent requests, and only those reach the origin", async () => {
    const rules = [{ name: "burst200", limit: 10, period: "1m", timeout: PATIENT_TIMEOUT }];
    const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => send(get(`/concurrent-200/${i}`), { rules })));
    expect(statuses(responses).filter((s) => s === 200)).toHaveLength(10);
    expect(statuses(responses).filter((s) => s === 429)).toHaveLength(190);
    expect(await originLog("concurrent-200")).toHaveLength(10);
  });

  it("coalesces concurrent decisions for one key into fewer Durable Object calls", async () => {
    const rules = [{ name: "coalesce", limit: 50, period: "1m", timeout: PATIENT_TIMEOUT }];
    const calls = () => metrics.value("floodgate_durable_object_calls_total", { method: "decide" });
    const before = calls();
    const responses = await Promise.all(Array.from({ length: 100 }, () => send(get("/coalesce/x"), { rules })));
    expect(statuses(responses).filter((s) => s === 200)).toHaveLength(50);
    expect(calls() - before).toBeLessThan(100);
  });

  it("keeps separate counts for separate keys", async () => {
    const rules = [{ name: "per-ip", limit: 1, period: "1m" }];
    expect((await send(get("/keys/a", { "CF-Connecting-IP": "192.0.2.10" }), { rules })).status).toBe(200);
    expect((await send(get("/keys/b", { "CF-Connecting-IP": "192.0.2.11" }), { rules })).status).toBe(200);
    expect((await send(get("/keys/c", { "CF-Connecting-IP": "192.0.2.10" }), { rules })).status).toBe(429);
  });

  it("denies with a 429 problem+json naming the violated policy, never reaching the origin", async () => {
    const rules = [{ name: "deny-shape", limit: 1, period: "10s" }];
    await send(get("/deny-once/a"), { rules });
    const res = await send(get("/deny-once/b"), { rules });
    expect(res.status).toBe(429);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({ status: 429, title: expect.any(String), type: expect.any(String), detail: expect.any(String), "violated-policies": ["deny-shape"] });
    expect((await originLog("deny-once")).map((r) => r.url)).toEqual(["/deny-once/a"]);
  });

  it("sends rate-limit headers that parse as IETF structured fields", async () => {
    const rules = [{ name: "sf-check", limit: 2, period: "1m" }];
    await send(get("/sf/a"), { rules });
    await send(get("/sf/b"), { rules });
    const res = await send(get("/sf/c"), { rules });
    const [policy] = parseList(res.headers.get("RateLimit-Policy")!);
    const [limit] = parseList(res.headers.get("RateLimit")!);
    expect(policy?.[0]).toBe("sf-check");
    expect(Object.fromEntries(policy![1])).toEqual({ q: 2, w: 60 });
    expect(limit?.[0]).toBe("sf-check");
    expect(limit![1].get("r")).toBe(0);
    expect(limit![1].get("t")).toBeGreaterThan(0);
    expect(Number(res.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    expect(res.headers.get("X-RateLimit-Limit")).toBe("2");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(Number(res.headers.get("X-RateLimit-Reset"))).toBeGreaterThan(0);
  });

  it("reports the most restrictive of several applicable rules on an allowed response", async () => {
    const rules = [
      { name: "loose", limit: 100, period: "1m" },
      { name: "tight", match: { path: "/restrict/*" }, limit: 3, period: "1m" },
    ];
    const res = await send(get("/restrict/a"), { rules });
    expect(res.headers.get("RateLimit")).toMatch(/^"tight";r=2;/);
  });

  it("gives back what other rules took when one rule denies", async () => {
    const rules = [
      { name: "refund-wide", limit: 5, period: "1m" },
      { name: "refund-narrow", match: { path: "/refund/narrow" }, limit: 1, period: "1m" },
    ];
    await send(get("/refund/narrow"), { rules });
    for (let i = 0; i < 10; i++) expect((await send(get("/refund/narrow"), { rules })).status).toBe(429);
    // Only the one admitted request counts against the wide rule: 4 remain.
    const statusesAfter = [];
    for (let i = 0; i < 5; i++) statusesAfter.push((await send(get("/refund/other"), { rules })).status);
    expect(statusesAfter).toEqual([200, 200, 200, 200, 429]);
  });

  it("gives back a fast rule's units when a strict rule denies, though the lease that paid them has ended", async () => {
    const rules = [
      { name: "refund-strict", match: { path: "/refund-fast/*" }, limit: 2, period: "1h" },
      { name: "refund-fast", match: { path: "/refund-fast/*" }, key: "header:x-k", limit: 4, period: "1h", mode: "fast" },
    ];
    const from = (ip: string) => get("/refund-fast/x", { "CF-Connecting-IP": ip, "x-k": "shared" });
    const first = [];
    for (let i = 0; i < 4; i++) first.push((await send(from("192.0.2.70"), { rules })).status);
    expect(first).toEqual([200, 200, 429, 429]);
    // The fast key spent 2, not 4: two more clients get in under it, and a third does not.
    const others = [];
    for (const ip of ["192.0.2.71", "192.0.2.72", "192.0.2.73"]) others.push((await send(from(ip), { rules })).status);
    expect(others).toEqual([200, 200, 429]);
  });

  it("applies a rule only to the methods and paths it matches", async () => {
    const rules = [{ name: "login", match: { path: "/login", methods: ["POST"] }, limit: 1, period: "1m" }];
    const post = () => new Request("http://floodgate.test/login", { method: "POST", headers: { "CF-Connecting-IP": "192.0.2.50" } });
    expect((await send(post(), { rules })).status).toBe(200);
    expect((await send(post(), { rules })).status).toBe(429);
    expect((await send(get("/login", { "CF-Connecting-IP": "192.0.2.50" }), { rules })).status).toBe(200);
  });

  it("limits the spellings of a rule's path that lenient origins route as it, never reaching the origin past the limit", async () => {
    const rules = [{ name: "spelled", match: { path: "/spelled/*", methods: ["POST"] }, limit: 2, period: "1m" }];
    const post = (path: string) => new Request(`http://floodgate.test${path}`, { method: "POST", headers: { "CF-Connecting-IP": "192.0.2.51" } });
    const spellings = ["/spelled/a", "/spelled/b", "/SPELLED/c", "//spelled/d", "/spelled;jsessionid=1/e", "/x%2F..%2Fspelled/f", "/Spelled/g/"];
    const answered = [];
    for (const path of spellings) answered.push((await send(post(path), { rules })).status);
    expect(answered).toEqual([200, 200, 429, 429, 429, 429, 429]);
    expect(await originLog("spelled")).toHaveLength(2);
  });

  it("applies a rule whose host names the scheme's default port, which a request's URL leaves out", async () => {
    const rules = [{ name: "host-port", match: { path: "/host-port/*", host: "floodgate.test:80" }, key: "global", limit: 1, period: "1m" }];
    expect(statuses([await send(get("/host-port/a"), { rules }), await send(get("/host-port/b"), { rules })])).toEqual([200, 429]);
    expect(await originLog("host-port")).toHaveLength(1);
  });

  it("limits token-bucket rules to the burst", async () => {
    const rules = [{ name: "tb", algorithm: "token-bucket", limit: 1, period: "1h", burst: 3 }];
    const results = [];
    for (let i = 0; i < 5; i++) results.push((await send(get("/tb/x"), { rules })).status);
    expect(results).toEqual([200, 200, 200, 429, 429]);
  });
});

describe("request input", () => {
  const rules = [{ name: "costly", cost: "header:x-cost", limit: 10, period: "1m" }];

  it("consumes the units a cost header asks for", async () => {
    const cost = (n: string) => get("/cost/ok", { "x-cost": n, "CF-Connecting-IP": "192.0.2.60" });
    expect((await send(cost("7"), { rules })).status).toBe(200);
    expect((await send(cost("4"), { rules })).status).toBe(429);
    expect((await send(cost("3"), { rules })).status).toBe(200);
  });

  it("tells a costlier request, denied from the denial of a cheaper one, a wait after which it passes", async () => {
    const bucket = [{ name: "costly-bucket", algorithm: "token-bucket", cost: "header:x-cost", limit: 10, period: "10s" }];
    const cost = (n: string) => send(get("/cost/bucket", { "x-cost": n, "CF-Connecting-IP": "192.0.2.62" }), { rules: bucket });
    expect((await cost("10")).status).toBe(200);
    expect((await cost("1")).headers.get("Retry-After")).toBe("1");
    const costlier = await cost("8");
    expect(costlier.status).toBe(429);
    expect(costlier.headers.get("Retry-After")).toBe("8");
  });

  it("tells a costlier request the wait that stands once a cheaper one was admitted, not the one its remembered denial said before", async () => {
    const bucket = [{ name: "costly-after", algorithm: "token-bucket", cost: "header:x-cost", limit: 6, period: "1m" }];
    const cost = (n: string) => send(get("/cost/after", { "x-cost": n, "CF-Connecting-IP": "192.0.2.63" }), { rules: bucket });
    expect((await cost("5")).status).toBe(200);
    // One token left: 3 wait for 2 more, 20 s; once the 1 is spent, for 3 more, 30 s (less what the test took).
    expect(Number((await cost("3")).headers.get("Retry-After"))).toBeLessThanOrEqual(20);
    expect((await cost("1")).status).toBe(200);
    const costlier = await cost("3");
    expect(costlier.status).toBe(429);
    expect(Number(costlier.headers.get("Retry-After"))).toBeGreaterThan(25);
  });

  it.each(["abc", "0", "-3", "1.5", "1e3", "99999999999999999999"])(
    "answers 400 problem+json to a cost header of %j without reaching the origin",
    async (value) => {
      const res = await send(get("/cost-bad/x", { "x-cost": value }), { rules });
      expect(res.status).toBe(400);
      expect(res.headers.get("Content-Type")).toBe("application/problem+json");
      expect(await res.json()).toMatchObject({ status: 400, detail: expect.stringContaining("costly") });
      expect(await originLog("cost-bad")).toEqual([]);
    },
  );

  it("denies a cost larger than the rule can ever admit, saying that waiting will not help it, deciding nothing under any rule", async () => {
    const both = [...rules, { name: "costly-ip", key: "ip", limit: 100, period: "1m" }];
    const calls = () => ["decide", "refund", "peek"].map((method) => metrics.value("floodgate_durable_object_calls_total", { method }));
    const before = calls();
    const huge = () => send(get("/cost/huge", { "x-cost": "11", "CF-Connecting-IP": "192.0.2.61" }), { rules: both });
    const res = await huge();
    for (let i = 0; i < 5; i++) expect((await huge()).status).toBe(429);
    // No decision, no refund; one read of the key's figures, which the next second's such requests share.
    expect(calls()).toEqual([before[0], before[1], before[2]! + 1]);
    expect(res.status).toBe(429);
    expect(((await res.json()) as { detail: string }).detail).toBe("Rate limit exceeded for costly; retry in 60 s. The request costs more than costly can ever grant one request.");
  });

  it("puts requests that lack a key part in one shared, limited bucket", async () => {
    const keyed = [{ name: "by-api-key", key: "header:x-api-key", limit: 2, period: "1m" }];
    const anon = () => new Request("http://floodgate.test/anon/x");
    expect(statuses([await send(anon(), { rules: keyed }), await send(anon(), { rules: keyed }), await send(anon(), { rules: keyed })])).toEqual([200, 200, 429]);
    expect((await send(get("/anon/y", { "x-api-key": "real" }), { rules: keyed })).status).toBe(200);
  });

  it("ignores X-Forwarded-For and friends when keying by ip", async () => {
    const perIp = [{ name: "spoof", limit: 1, period: "1m" }];
    const spoofed = (n: number) =>
      get("/spoof/x", { "CF-Connecting-IP": "192.0.2.99", "X-Forwarded-For": `10.0.0.${n}`, "X-Real-IP": `10.0.1.${n}`, "True-Client-IP": `10.0.2.${n}` });
    expect((await send(spoofed(1), { rules: perIp })).status).toBe(200);
    expect((await send(spoofed(2), { rules: perIp })).status).toBe(429);
  });

  it("limits a key longer than 1 KB like any other, under its hash", async () => {
    const keyed = [{ name: "long-key", key: "header:x-api-key", limit: 1, period: "1m" }];
    const long = "k".repeat(4000);
    expect((await send(get("/long/a", { "x-api-key": long }), { rules: keyed })).status).toBe(200);
    expect((await send(get("/long/b", { "x-api-key": long }), { rules: keyed })).status).toBe(429);
    expect((await send(get("/long/c", { "x-api-key": `${long}x` }), { rules: keyed })).status).toBe(200);
  });
});
