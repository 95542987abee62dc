// Rule policies through the Worker with the real object: dry run, block (a penalty box), and the IP lists.
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/env";
import { keyHash } from "../../src/metrics/analytics";
import { metrics } from "../../src/metrics/metrics";
import { originLog, send, statuses } from "../helpers/worker";
import { frozenStart } from "../helpers/clock";

const get = (path: string, ip: string | null, headers: Record<string, string> = {}) =>
  new Request(`http://floodgate.test${path}`, { headers: { ...(ip === null ? {} : { "CF-Connecting-IP": ip }), ...headers } });

const peek = (name: string, limit: number, periodMs = 60_000) =>
  (env as unknown as Env).LIMITER.get((env as unknown as Env).LIMITER.idFromName(name)).peek({ algorithm: "sliding-window", limit, periodMs, burst: limit, buckets: 60 });

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("dryRun", () => {
  it("never denies: every request reaches the origin, and would-be denials are counted apart", async () => {
    const rules = [{ name: "dry-only", limit: 2, period: "1m", dryRun: true }];
    const before = metrics.value("floodgate_decisions_total", { rule: "dry-only", decision: "dry_run_denied" });

    expect(await statuses(5, () => get("/dry-only/x", "192.0.2.160"), { rules })).toEqual([200, 200, 200, 200, 200]);

    expect(await originLog("dry-only")).toHaveLength(5);
    expect(metrics.value("floodgate_decisions_total", { rule: "dry-only", decision: "dry_run_denied" }) - before).toBe(3);
  });

  it("evolves the rule's state exactly as if enforced: a would-be denial consumes nothing", async () => {
    const rules = [{ name: "dry-state", limit: 2, period: "1m", dryRun: true }];
    await statuses(4, () => get("/dry-state/x", "192.0.2.161"), { rules });
    expect((await peek("dry-state/192.0.2.161", 2)).remaining).toBe(0);
  });

  it("lets a request with a malformed cost header through, counting it as the rule's would-be refusal", async () => {
    const rules = [{ name: "dry-cost", limit: 5, period: "1m", cost: "header:x-cost", dryRun: true }];
    const before = metrics.value("floodgate_decisions_total", { rule: "dry-cost", decision: "dry_run_denied" });
    expect((await send(get("/dry-cost/x", "192.0.2.164", { "x-cost": "abc" }), { rules })).status).toBe(200);
    expect(await originLog("dry-cost")).toHaveLength(1);
    expect(metrics.value("floodgate_decisions_total", { rule: "dry-cost", decision: "dry_run_denied" }) - before).toBe(1);
  });

  it("logs a malformed cost's would-be refusal as any would-be denial's line, with the key's hash and no status it never sent", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const rules = [{ name: "dry-cost-log", limit: 5, period: "1m", cost: "header:x-cost", dryRun: true }];
    await send(get("/dry-cost-log/x", "192.0.2.165", { "x-cost": "abc" }), { rules });

    expect(lines).toEqual([{ event: "dry_run_denied", rule: "dry-cost-log", decision: "dry_run_denied", reason: "invalid-request", retryAfterMs: 0, keyHash: expect.stringMatching(/^[0-9a-f]{64}$/) }]);
    expect(JSON.stringify(lines)).not.toContain("192.0.2.165");
  });

  it("adds no header of its own", async () => {
    const response = await send(get("/dry-headers/x", "192.0.2.162"), { rules: [{ name: "dry-headers", limit: 2, period: "1m", dryRun: true }] });
    expect(response.headers.get("RateLimit-Policy")).toBeNull();
    expect(response.headers.get("X-RateLimit-Limit")).toBeNull();
  });

  it("never refunds another rule's units: the request goes on, and the enforced rule counts it", async () => {
    const rules = [
      { name: "dry-enforced", limit: 10, period: "1m" },
      { name: "dry-shadow", limit: 1, period: "1m", dryRun: true },
    ];
    const responses = [];
    for (let i = 0; i < 3; i++) responses.push(await send(get("/dry-pair/x", "192.0.2.163"), { rules }));

    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect((await peek("dry-enforced/192.0.2.163", 10)).remaining).toBe(7);
    expect(responses[2]!.headers.get("RateLimit-Policy")).toBe('"dry-enforced";q=10;w=60');
  });

  it("logs each would-be denial as one JSON line without the key", async () => {
    const lines: unknown[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line)));
    await statuses(2, () => get("/dry-log/x", "192.0.2.164"), { rules: [{ name: "dry-log", limit: 1, period: "1m", dryRun: true }] });

    expect(lines).toEqual([expect.objectContaining({ event: "dry_run_denied", rule: "dry-log", reason: "limit" })]);
    expect(JSON.stringify(lines)).not.toContain("192.0.2.164");
  });

  it("puts every rule in shadow mode under DRY_RUN = true: each counts its would-be denials, none denies or adds a header", async () => {
    const rules = [
      { name: "dry-all-a", limit: 1, period: "1m" },
      { name: "dry-all-b", limit: 2, period: "1m", key: "header:x-api-key" },
    ];
    const before = metrics.value("floodgate_decisions_total", { rule: "dry-all-a", decision: "dry_run_denied" });
    const responses = [];
    for (let i = 0; i < 3; i++) responses.push(await send(get("/dry-all/x", "192.0.2.163", { "x-api-key": "k" }), { rules, DRY_RUN: "true" }));

    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(responses.every((r) => !r.headers.has("RateLimit"))).toBe(true);
    expect(metrics.value("floodgate_decisions_total", { rule: "dry-all-a", decision: "dry_run_denied" }) - before).toBe(2);
    expect((await send(get("/dry-all/x", "192.0.2.164"), { rules: [{ name: "dry-all-c", limit: 1, period: "1m" }], DRY_RUN: false })).headers.has("RateLimit")).toBe(true);
  });

  it("answers 500 naming DRY_RUN when it is neither true nor false", async () => {
    const response = await send(get("/dry-bad/x", "192.0.2.165"), { rules: [{ name: "dry-bad", limit: 1, period: "1m" }], DRY_RUN: "yes" });
    expect(response.status).toBe(500);
    expect(((await response.json()) as { detail: string }).detail).toBe('DRY_RUN: expected "true" or "false" (the default), got "yes"');
  });
});

describe("denyResponse", () => {
  it("answers a denial with the rule's own status and body, with the rate-limit headers, never reaching the origin", async () => {
    const body = '{"error": "rate_limited"}';
    const rules = [{ name: "deny-own", limit: 1, period: "1m", denyResponse: { status: 503, body, contentType: "application/json" } }];
    const hit = () => send(get("/deny-own/x", "192.0.2.180"), { rules });

    expect((await hit()).status).toBe(200);
    const denied = await hit();

    expect(denied.status).toBe(503);
    expect(denied.headers.get("Content-Type")).toBe("application/json");
    expect(await denied.text()).toBe(body);
    expect(Number(denied.headers.get("Retry-After"))).toBeGreaterThanOrEqual(59);
    expect(denied.headers.get("RateLimit")).toBe(`"deny-own";r=0;t=${denied.headers.get("Retry-After")}`);
    expect(denied.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(await originLog("deny-own")).toHaveLength(1);
  });

  it("keeps the problem+json with a status alone, its status member the one sent", async () => {
    const rules = [{ name: "deny-status", limit: 1, period: "1m", denyResponse: { status: 503 } }];
    await send(get("/deny-status/x", "192.0.2.181"), { rules });
    const denied = await send(get("/deny-status/x", "192.0.2.181"), { rules });

    expect(denied.status).toBe(503);
    expect(denied.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await denied.json()).toMatchObject({ type: "https://iana.org/assignments/http-problem-types#quota-exceeded", status: 503, "violated-policies": ["deny-status"] });
  });

  it("answers with the response of the denying rule whose headers are sent, the one with the longest wait", async () => {
    const rules = [
      { name: "deny-short", limit: 1, period: "10s", denyResponse: { body: "short" } },
      { name: "deny-long", limit: 1, period: "1h", denyResponse: { status: 503, body: "long" } },
    ];
    await send(get("/deny-pair/x", "192.0.2.182"), { rules });
    const denied = await send(get("/deny-pair/x", "192.0.2.182"), { rules });

    expect([denied.status, await denied.text()]).toEqual([503, "long"]);
    expect(denied.headers.get("RateLimit")).toMatch(/^"deny-long";r=0;t=\d+$/);
  });

  it("logs the denial with the status the rule answers with", async () => {
    const lines: Record<string, unknown>[] = [];
    const rules = [{ name: "deny-logged", limit: 1, period: "1m", denyResponse: { status: 503 } }];
    await send(get("/deny-logged/x", "192.0.2.183"), { rules });
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    await send(get("/deny-logged/x", "192.0.2.183"), { rules });

    expect(lines).toEqual([expect.objectContaining({ event: "denied", rule: "deny-logged", status: 503 })]);
  });
});

describe("block", () => {
  it("denies a key for the whole block once the rule has denied it, saying when the block ends", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart();
    vi.setSystemTime(t0);
    const rules = [{ name: "block-strict", limit: 2, period: "1m", block: "10m" }];
    const hit = () => send(get("/block-strict/x", "192.0.2.170"), { rules });

    const first = [(await hit()).status, (await hit()).status];
    const denied = await hit();
    vi.setSystemTime(t0 + 5 * 60_000);
    const later = await hit();
    vi.setSystemTime(t0 + 10 * 60_000 - 1);
    const lastMoment = (await hit()).status;
    vi.setSystemTime(t0 + 10 * 60_000);
    const after = (await hit()).status;

    expect(first).toEqual([200, 200]);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("Retry-After")).toBe("600");
    expect(denied.headers.get("RateLimit")).toBe('"block-strict";r=0;t=600');
    // The window alone would have admitted again after a minute; the block holds, and is not extended.
    expect(later.status).toBe(429);
    expect(later.headers.get("Retry-After")).toBe("300");
    expect(lastMoment).toBe(429);
    expect(after).toBe(200);
  });

  it("says, for a block shorter than the window, when the key has room again rather than when the block ends", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart();
    vi.setSystemTime(t0);
    const rules = [{ name: "block-short", limit: 2, period: "1m", block: "20s" }];
    const hit = () => send(get("/block-short/x", "192.0.2.173"), { rules });
    await hit();
    await hit();
    const denied = await hit();
    const wait = Number(denied.headers.get("Retry-After"));
    expect(wait).toBeGreaterThanOrEqual(60);
    expect(denied.headers.get("RateLimit")).toBe(`"block-short";r=0;t=${wait}`);
    vi.setSystemTime(t0 + wait * 1_000);
    expect((await hit()).status).toBe(200);
  });

  it("lets a cheap request in once the block has ended, though a costlier one started it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart();
    vi.setSystemTime(t0);
    const rules = [{ name: "block-cost", algorithm: "token-bucket", limit: 10, period: "1m", block: "5s", cost: "header:x-cost" }];
    const hit = (cost: number) => send(get("/block-cost/x", "192.0.2.174", { "x-cost": String(cost) }), { rules });
    expect((await hit(8)).status).toBe(200);
    expect((await hit(5)).status).toBe(429);
    vi.setSystemTime(t0 + 12_000);
    expect((await hit(1)).status).toBe(200);
  });

  it("tells each cost under a block when a request of that cost passes, from the object and from the isolate's cache, so obeying Retry-After is not blocked again", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart();
    vi.setSystemTime(t0);
    const rules = [{ name: "block-costlier", algorithm: "fixed-window", limit: 10, period: "1m", block: "10s", cost: "header:x-cost" }];
    const hit = (cost: number) => send(get("/block-costlier/x", "192.0.2.175", { "x-cost": String(cost) }), { rules });
    expect((await hit(9)).status).toBe(200);
    // 9 of 10 taken: 2 units wait for the window's end, a minute off; 1 unit only for the block's end.
    const waits = [];
    for (const cost of [2, 1, 2]) waits.push((await hit(cost)).headers.get("Retry-After"));
    expect(waits).toEqual(["60", "10", "60"]);
    vi.setSystemTime(t0 + 10_000);
    expect((await hit(1)).status).toBe(200);
    vi.setSystemTime(t0 + 60_000);
    expect((await hit(2)).status).toBe(200);
  });

  it("keeps the block in the key's object, so every isolate sees it", async () => {
    const rules = [{ name: "block-object", limit: 1, period: "1m", block: "1h" }];
    await statuses(2, () => get("/block-object/x", "192.0.2.171"), { rules });
    const standing = await (env as unknown as Env).LIMITER.get((env as unknown as Env).LIMITER.idFromName("block-object/192.0.2.171")).peek({
      algorithm: "sliding-window", limit: 1, periodMs: 60_000, burst: 1, buckets: 60, blockMs: 3_600_000,
    });
    expect(standing).toMatchObject({ allowed: false, reason: "blocked" });
    expect(standing.retryAfter).toBeGreaterThan(3_500_000);
  });

  it("blocks a fast key in the isolate once its object has denied it, each denial logged as blocked", async () => {
    const decisions: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void decisions.push(JSON.parse(line) as Record<string, unknown>));
    const rules = [{ name: "block-fast", limit: 3, period: "1m", mode: "fast", block: "5m" }];
    const got = [];
    for (let i = 0; i < 6; i++) got.push(await send(get("/block-fast/x", "192.0.2.172"), { rules }));

    expect(got.map((r) => r.status)).toEqual([200, 200, 200, 429, 429, 429]);
    expect(Number(got[5]!.headers.get("Retry-After"))).toBeGreaterThan(290);
    expect(decisions.filter((d) => d.rule === "block-fast").map((d) => d.reason)).toEqual(["blocked", "blocked", "blocked"]);
  });

  it("tells each cost under a fast key's block when a request of that cost passes, so obeying Retry-After is not blocked again", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart();
    vi.setSystemTime(t0);
    const rules = [{ name: "block-costlier-fast", mode: "fast", algorithm: "fixed-window", limit: 10, period: "1m", block: "10s", cost: "header:x-cost" }];
    const hit = (cost: number) => send(get("/block-costlier-fast/x", "192.0.2.176", { "x-cost": String(cost) }), { rules });
    expect((await hit(9)).status).toBe(200);
    // 9 of 10 taken: 2 units wait for the window's end, a minute off; 1 unit only for the block's end.
    const waits = [];
    for (const cost of [2, 1, 2, 3]) waits.push((await hit(cost)).headers.get("Retry-After"));
    expect(waits).toEqual(["60", "10", "60", "60"]);
    vi.setSystemTime(t0 + 10_000);
    expect((await hit(1)).status).toBe(200);
    vi.setSystemTime(t0 + 60_000);
    expect((await hit(2)).status).toBe(200);
  });
});

describe("IP lists", () => {
  const rules = [{ name: "ips-limit", limit: 1, period: "1m" }];

  it("answers DENY_IPS with 403 problem+json before anything else, never reaching the origin", async () => {
    const response = await send(get("/ips-deny/x", "203.0.113.9"), { rules, DENY_IPS: "198.51.100.0/24, 203.0.113.0/24" });
    expect(response.status).toBe(403);
    expect(response.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await response.json()).toMatchObject({ type: "about:blank", title: "Forbidden", status: 403 });
    expect(await originLog("ips-deny")).toEqual([]);
  });

  it("refuses a DENY_IPS address even while the rules are invalid, the admin API included", async () => {
    const broken = { rules: [{ name: "x", limit: 1, period: "ten" }], DENY_IPS: "203.0.113.0/24", ADMIN_TOKEN: "t" };
    expect((await send(get("/ips-broken/x", "203.0.113.9"), broken)).status).toBe(403);
    expect((await send(get("/__floodgate/rules", "203.0.113.9", { authorization: "Bearer t" }), broken)).status).toBe(403);
    expect((await send(get("/ips-broken/x", "198.51.100.9"), broken)).status).toBe(500);
  });

  it("counts and logs each DENY_IPS refusal as a denial, the address only as its hash", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const before = metrics.value("floodgate_ip_refusals_total", {});
    await send(get("/ips-logged/x", "203.0.113.11"), { rules, DENY_IPS: "203.0.113.11" });

    expect(metrics.value("floodgate_ip_refusals_total", {})).toBe(before + 1);
    expect(lines).toEqual([{ event: "refused", decision: "denied", reason: "deny_ips", status: 403, keyHash: expect.stringMatching(/^[0-9a-f]{64}$/) }]);
    expect(JSON.stringify(lines)).not.toContain("203.0.113.11");
  });

  it("hashes a refused address as the ip key part keys it: every spelling of one client, one keyHash", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const listed = { rules, DENY_IPS: "2001:db8::/32, 203.0.113.12", ANALYTICS_HASH_KEY: "s" };
    for (const ip of ["2001:DB8::1", "2001:db8:0:0:0:0:0:1", "::ffff:203.0.113.12"]) await send(get("/ips-hashed/x", ip), listed);

    expect(lines.map((l) => l.keyHash)).toEqual([await keyHash("s", "2001:db8::/56"), await keyHash("s", "2001:db8::/56"), await keyHash("s", "203.0.113.12")]);
  });

  it("refuses a denied address the admin API too", async () => {
    const response = await send(get("/__floodgate/rules", "203.0.113.10", { Authorization: "Bearer t" }), { rules, DENY_IPS: "203.0.113.10", ADMIN_TOKEN: "t" });
    expect(response.status).toBe(403);
  });

  it("never limits an address in ALLOW_IPS, v4 or v6, and sends it no rate-limit header", async () => {
    const allow = { rules, ALLOW_IPS: "192.0.2.0/28, 2001:db8:aa::/48" };
    expect(await statuses(3, () => get("/ips-allow/a", "192.0.2.5"), allow)).toEqual([200, 200, 200]);
    expect(await statuses(3, () => get("/ips-allow/b", "2001:db8:aa:1::9"), allow)).toEqual([200, 200, 200]);
    expect((await send(get("/ips-allow/c", "192.0.2.5"), allow)).headers.get("RateLimit-Policy")).toBeNull();
  });

  it("denies an address in both lists, and treats an IPv4-mapped address as its IPv4", async () => {
    const both = { rules, ALLOW_IPS: "192.0.2.0/24", DENY_IPS: "192.0.2.66" };
    expect((await send(get("/ips-both/x", "192.0.2.66"), both)).status).toBe(403);
    expect((await send(get("/ips-both/y", "::ffff:192.0.2.66"), both)).status).toBe(403);
  });

  it("matches no list without CF-Connecting-IP, and no spoofed header changes that", async () => {
    const bindings = { rules, ALLOW_IPS: "192.0.2.0/24" };
    const spoofed = () => get("/ips-none/x", null, { "X-Forwarded-For": "192.0.2.1", "X-Real-IP": "192.0.2.1", "True-Client-IP": "192.0.2.1" });
    expect(await statuses(2, spoofed, bindings)).toEqual([200, 429]);
  });

  it("applies a rule with match.ips only to the listed addresses", async () => {
    const scoped = [{ name: "ips-scoped", match: { ips: ["198.51.100.0/24"] }, limit: 1, period: "1m" }];
    expect(await statuses(2, () => get("/ips-scoped/a", "198.51.100.20"), { rules: scoped })).toEqual([200, 429]);
    expect(await statuses(2, () => get("/ips-scoped/b", "192.0.2.20"), { rules: scoped })).toEqual([200, 200]);
  });

  it("answers a malformed list with the 500 configuration problem naming the var", async () => {
    const response = await send(get("/ips-bad/x", "192.0.2.1"), { rules, DENY_IPS: "10.0.0.1/8" });
    expect(response.status).toBe(500);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/^DENY_IPS: "10\.0\.0\.1\/8" has bits set after its \/8 prefix/);
  });
});

describe("count", () => {
  const login = (status: number) => new Request(`http://floodgate.test/count-failed/login?status=${status}`, { method: "POST", headers: { "CF-Connecting-IP": "192.0.2.170" } });

  it("with count: failed, counts only the requests the origin answered with a failure: successes give their unit back", async () => {
    const rules = [{ name: "count-failed", match: { path: "/count-failed/*" }, limit: 2, period: "1h", count: "failed" }];
    const seen = [];
    for (const status of [200, 302, 200, 401, 200, 401, 401, 200]) seen.push((await send(login(status), { rules })).status);

    expect(seen).toEqual([200, 302, 200, 401, 200, 401, 429, 429]);
    expect(await originLog("count-failed")).toHaveLength(6);
  });

  it("with count: successful, gives back what a request took when the origin failed or could not be reached", async () => {
    const rules = [{ name: "count-ok", limit: 2, period: "1h", count: "successful" }];
    const request = (status: number) => get(`/count-ok/x?status=${status}`, "192.0.2.171");
    const down = await send(get("/count-ok/x", "192.0.2.171"), { rules, ORIGIN_URL: "http://127.0.0.1:1" });
    const seen = [];
    for (const status of [500, 503, 200, 404, 200, 200]) seen.push((await send(request(status), { rules })).status);

    expect(down.status).toBe(502);
    expect(seen).toEqual([500, 503, 200, 404, 200, 429]);
  });

  it("keeps a dry-run rule's state as if enforced: a success it does not count is given back there too", async () => {
    const rules = [{ name: "count-dry", limit: 1, period: "1h", count: "failed", dryRun: true }];
    await send(get("/count-dry/x?status=200", "192.0.2.172"), { rules });
    expect((await peek("count-dry/192.0.2.172", 1, 3_600_000)).remaining).toBe(1);
    await send(get("/count-dry/x?status=403", "192.0.2.172"), { rules });
    expect((await peek("count-dry/192.0.2.172", 1, 3_600_000)).remaining).toBe(0);
  });
});

describe("responseCost", () => {
  const rules = [{ name: "tokens", match: { path: "/tokens/*" }, limit: 100, period: "1h", responseCost: "header:x-tokens-used" }];
  const call = (ip: string, query: string) => get(`/tokens/complete?${query}`, ip);
  const errors = () => metrics.value("floodgate_errors_total", { kind: "response_cost" });

  it("charges what the origin's response header says the request cost, so the key owes past its limit and denies", async () => {
    const seen = [];
    for (const used of [60, 60]) seen.push((await send(call("192.0.2.180", `h=x-tokens-used:${used}`), { rules })).status);
    const over = await send(call("192.0.2.180", "h=x-tokens-used:1"), { rules });

    expect(seen).toEqual([200, 200]);
    expect(over.status).toBe(429);
    expect(await originLog("tokens")).toHaveLength(2);
    expect((await peek("tokens/192.0.2.180", 100, 3_600_000)).remaining).toBe(0);
  });

  it("gives back what the request took beyond what the header says, under a windowed rule", async () => {
    const costly = [{ ...rules[0], name: "tokens-back", match: { path: "/tokens-back/*" }, cost: 10 }];
    await send(get("/tokens-back/x?h=x-tokens-used:3", "192.0.2.181"), { rules: costly });
    expect((await peek("tokens-back/192.0.2.181", 100, 3_600_000)).remaining).toBe(97);
  });

  it("keeps a request whose response says nothing usable at its cost, counted and logged as a response_cost error", async () => {
    const before = errors();
    await send(call("192.0.2.182", "status=200"), { rules });
    await send(call("192.0.2.182", "h=x-tokens-used:lots"), { rules });
    expect(errors()).toBe(before + 2);
    expect((await peek("tokens/192.0.2.182", 100, 3_600_000)).remaining).toBe(98);
  });

  it("logs an unusable header by what kind of value it was, never the value", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    for (const value of ["sk_live_9f8e7d", "-3", "%20"]) await send(call("192.0.2.187", `h=x-tokens-used:${value}`), { rules });

    expect(lines.map((l) => l.message)).toEqual([
      "header x-tokens-used: expected a whole number, 0 or more, got 14 characters that are not one; the request stays counted at its cost, 1",
      "header x-tokens-used: expected a whole number, 0 or more, got a negative number; the request stays counted at its cost, 1",
      "header x-tokens-used: expected a whole number, 0 or more, got an empty value; the request stays counted at its cost, 1",
    ]);
    expect(JSON.stringify(lines)).not.toContain("sk_live");
  });

  it("keeps a request the origin could not answer at its cost, with no error of its own", async () => {
    const before = errors();
    const down = await send(call("192.0.2.183", "h=x-tokens-used:50"), { rules, ORIGIN_URL: "http://127.0.0.1:1" });
    expect(down.status).toBe(502);
    expect(errors()).toBe(before);
    expect((await peek("tokens/192.0.2.183", 100, 3_600_000)).remaining).toBe(99);
  });

  it("counts a header past what a window's arithmetic holds as the most it holds: the bigger the response, never the cheaper", async () => {
    const bytes = [{ name: "bytes", match: { path: "/bytes/*" }, limit: 100_000_000, period: "1d", responseCost: "header:x-bytes" }];
    const first = await send(get("/bytes/x?h=x-bytes:99999999999999999999999", "192.0.2.185"), { rules: bytes });
    const second = await send(get("/bytes/x?h=x-bytes:1", "192.0.2.185"), { rules: bytes });
    expect([first.status, second.status]).toEqual([200, 429]);
  });

  it("charges the header even when the origin's Connection header names it, as meant for floodgate's hop alone", async () => {
    const hidden = [{ ...rules[0], name: "tokens-hop", match: { path: "/tokens-hop/*" } }];
    const res = await send(get("/tokens-hop/x?h=connection:x-tokens-used&h=x-tokens-used:60", "192.0.2.186"), { rules: hidden });
    expect(res.headers.has("x-tokens-used")).toBe(false);
    expect((await peek("tokens-hop/192.0.2.186", 100, 3_600_000)).remaining).toBe(40);
  });

  it("counts nothing more when the rule does not count the response (count), whatever the header says", async () => {
    const judged = [{ ...rules[0], name: "tokens-failed", match: { path: "/tokens-failed/*" }, count: "failed" }];
    await send(get("/tokens-failed/x?h=x-tokens-used:80", "192.0.2.184"), { rules: judged });
    await send(get("/tokens-failed/x?status=500&h=x-tokens-used:30", "192.0.2.184"), { rules: judged });
    expect((await peek("tokens-failed/192.0.2.184", 100, 3_600_000)).remaining).toBe(70);
  });
});
