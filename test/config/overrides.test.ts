// A rule's overrides: keys with a quota of their own, checked as the rule written with them would be, and found per key.
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/errors";
import { ruleForKey } from "../../src/config/overrides";
import { describeRule, parseConfig, parseStandaloneRule } from "../../src/config/rules";
import type { Rule } from "../../src/config/types";

function only(raw: Record<string, unknown>): Rule {
  return parseConfig([raw]).rules[0]!;
}

function errorFor(raw: Record<string, unknown>): ConfigError {
  try {
    parseConfig([raw]);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("parseConfig accepted the rule");
}

const api = { name: "api", key: "header:x-api-key", limit: 100, period: "1m" };

describe("overrides", () => {
  it("gives each named key the override's quota and every other key the rule's", () => {
    const rule = only({ ...api, overrides: [{ keys: ["k-partner", "k-other"], limit: 10_000 }] });

    expect(ruleForKey(rule, "k-partner")).toMatchObject({ name: "api", limit: 10_000, burst: 10_000, periodMs: 60_000, buckets: 60 });
    expect(ruleForKey(rule, "k-other").limit).toBe(10_000);
    expect(ruleForKey(rule, "k-anyone")).toBe(rule);
  });

  it("returns the same rule object for a key's every request", () => {
    const rule = only({ ...api, overrides: [{ keys: ["a", "b"], limit: 5 }] });
    expect(ruleForKey(rule, "a")).toBe(ruleForKey(rule, "a"));
    expect(ruleForKey(rule, "b")).toBe(ruleForKey(rule, "a"));
  });

  it("keeps everything but the quota: mode, cost, onError, block and the rest stay the rule's", () => {
    const rule = only({ ...api, mode: "fast", cost: 2, onError: "deny", block: "5m", sync: "250ms", overrides: [{ keys: ["k"], limit: 1000, period: "1h" }] });
    const keyed = ruleForKey(rule, "k");
    expect(keyed).toMatchObject({ mode: "fast", cost: { units: 2 }, onError: "deny", blockMs: 300_000, syncMs: 250, limit: 1000, periodMs: 3_600_000 });
  });

  it("fills the defaults that follow the quota as the rule written with the override would: a token bucket's burst follows its limit", () => {
    const bucket = { ...api, algorithm: "token-bucket" };
    expect(ruleForKey(only({ ...bucket, overrides: [{ keys: ["k"], limit: 500 }] }), "k").burst).toBe(500);
    expect(ruleForKey(only({ ...bucket, burst: 20, overrides: [{ keys: ["k"], limit: 500 }] }), "k").burst).toBe(20);
  });

  it("overrides a gcra rule's burst and delay, and a fixed window's calendar period", () => {
    const gcra = only({ ...api, algorithm: "gcra", burst: 4, delay: 2, overrides: [{ keys: ["k"], burst: 10, delay: 6 }] });
    expect(ruleForKey(gcra, "k")).toMatchObject({ burst: 10, delay: 6, limit: 100 });
    const plan = only({ ...api, algorithm: "fixed-window", period: "1mo", overrides: [{ keys: ["k"], period: "1d" }] });
    expect(plan.months).toBe(1);
    expect(ruleForKey(plan, "k").months).toBeUndefined();
    expect(ruleForKey(plan, "k").periodMs).toBe(86_400_000);
  });

  it("matches a key as the rule builds it: an address as its client's, an IPv6 one by its network", () => {
    const rule = only({ name: "per-ip", limit: 10, period: "1m", overrides: [{ keys: ["::ffff:203.0.113.7", "2001:db8:abcd:12ff::1"], limit: 1000 }] });
    expect(ruleForKey(rule, "203.0.113.7").limit).toBe(1000);
    expect(ruleForKey(rule, "2001:db8:abcd:1200::/56").limit).toBe(1000);
  });

  it("takes a key of several parts joined by |, and the shared keys #none and #overflow", () => {
    const rule = only({ ...api, key: ["ip", "header:x-api-key"], newKeysPerSecond: 10, overrides: [{ keys: ["203.0.113.7|k", "#none|#none"], limit: 5 }, { keys: ["#overflow"], limit: 1000 }] });
    expect([...rule.overrides!.keys()]).toEqual(["203.0.113.7|k", "#none|#none", "#overflow"]);
  });

  it("marks a key an override leaves unlimited, keeping the rule's fields", () => {
    const rule = only({ ...api, overrides: [{ keys: ["k-internal"], unlimited: true }] });
    expect(ruleForKey(rule, "k-internal")).toMatchObject({ name: "api", unlimited: true, limit: 100 });
    expect(ruleForKey(rule, "k-anyone").unlimited).toBeUndefined();
    expect(describeRule(rule).overrides).toEqual([{ keys: ["k-internal"], unlimited: true }]);
  });

  it("describes each override with its keys and the quota they have", () => {
    const rule = only({ ...api, overrides: [{ keys: ["a", "b"], limit: 5 }, { keys: ["c"], period: "1h" }] });
    expect(describeRule(rule).overrides).toEqual([
      { keys: ["a", "b"], limit: 5, period: "1m", burst: 5 },
      { keys: ["c"], limit: 100, period: "1h", burst: 100 },
    ]);
    expect(describeRule(only(api)).overrides).toBeUndefined();
  });

  it.each([
    [[], "rules[0] (\"api\").overrides", "expected a non-empty array of overrides"],
    [{ "k-partner": { limit: 5 } }, "rules[0] (\"api\").overrides", "expected a non-empty array of overrides"],
    [["k"], "rules[0] (\"api\").overrides[0]", "expected an object like"],
    [[{ keys: ["k"] }], "rules[0] (\"api\").overrides[0]", `sets nothing: give the keys' own limit, period, burst, delay (one or more), or "unlimited": true`],
    [[{ keys: ["k"], limit: 5, mode: "fast" }], "rules[0] (\"api\").overrides[0]", "a field that is not one of keys, limit, period, burst, delay, unlimited"],
    [[{ keys: ["k"], unlimited: false }], "rules[0] (\"api\").overrides[0].unlimited", "expected true (the keys are counted by no quota)"],
    [[{ keys: ["k"], unlimited: true, limit: 5 }], "rules[0] (\"api\").overrides[0].limit", `an unlimited key has no quota; remove limit, or "unlimited"`],
    [[{ limit: 5 }], "rules[0] (\"api\").overrides[0].keys", "expected a non-empty array of keys"],
    [[{ keys: "k", limit: 5 }], "rules[0] (\"api\").overrides[0].keys", "expected a non-empty array of keys"],
    [[{ keys: ["k", ""], limit: 5 }], "rules[0] (\"api\").overrides[0].keys[1]", "expected a key written as the admin API takes it"],
    [[{ keys: [" k"], limit: 5 }], "rules[0] (\"api\").overrides[0].keys[0]", "no request has this key: header:x-api-key: header values arrive without the spaces"],
    [[{ keys: ["a|b"], limit: 5 }], "rules[0] (\"api\").overrides[0].keys[0]", "the rule's key has 1 part"],
    [[{ keys: ["#overflow"], limit: 5 }], "rules[0] (\"api\").overrides[0].keys[0]", "newKeysPerSecond, which this rule does not set"],
    [[{ keys: [`#sha256:${"0".repeat(64)}`], limit: 5 }], "rules[0] (\"api\").overrides[0].keys[0]", "write the key itself"],
    [[{ keys: ["k"], limit: 5 }, { keys: ["j", "k"], limit: 6 }], "rules[0] (\"api\").overrides[1].keys[1]", "is the key overrides[0].keys[0] names (as the rule builds keys)"],
    [[{ keys: ["k"], limit: 0 }], "rules[0] (\"api\").overrides[0].limit", "expected a positive integer"],
    [[{ keys: ["k"], period: "ten" }], "rules[0] (\"api\").overrides[0].period", "expected a duration"],
    [[{ keys: ["k"], period: "1mo" }], "rules[0] (\"api\").overrides[0].period", "is a calendar period, which only \"fixed-window\" counts by"],
    [[{ keys: ["k"], burst: 5 }], "rules[0] (\"api\").overrides[0].burst", "burst applies to token-bucket and gcra only"],
  ])("rejects the overrides %j, naming %s", (overrides, location, problem) => {
    const error = errorFor({ ...api, overrides });
    expect(error.message.slice(0, location.length + 2)).toBe(`${location}: `);
    expect(error.message).toContain(problem);
  });

  it("names a key given twice by its places, never by its value: an API key in an error would reach the logs and the 500", () => {
    const error = errorFor({ ...api, overrides: [{ keys: ["sk_live_PARTNER"], limit: 50 }, { keys: ["sk_live_PARTNER"], unlimited: true }] });
    expect(error.message).toBe(`rules[0] ("api").overrides[1].keys[0]: is the key overrides[0].keys[0] names (as the rule builds keys); a key has one quota: name it once`);
    expect(errorFor({ ...api, overrides: [{ keys: "sk_live_PARTNER", limit: 50 }] }).message).toMatch(/got a string$/);
  });

  it.each([
    ["a key where the list of overrides belongs", "sk_live_PARTNER", "rules[0] (\"api\").overrides: expected a non-empty array of overrides"],
    ["a key where an override belongs", ["sk_live_PARTNER"], "rules[0] (\"api\").overrides[0]: expected an object like"],
    ["a key as an override's field", [{ sk_live_PARTNER: { limit: 50 } }], "rules[0] (\"api\").overrides[0]: a field that is not one of keys, limit, period, burst, delay, unlimited"],
    ["a key as a field beside an override's keys", [{ keys: ["k"], limit: 5, sk_live_PARTNER: 50 }], "rules[0] (\"api\").overrides[0]: a field that is not one of keys, limit, period, burst, delay, unlimited"],
  ])("never names %s: an API key in an error would reach the logs and the 500", (_, overrides, message) => {
    const error = errorFor({ ...api, overrides });
    expect(error.message).toContain(message);
    expect(error.message).not.toContain("sk_live_PARTNER");
  });

  it.each([
    ["limt", "limit"],
    ["Period", "period"],
    ["key", "keys"],
    ["unlimted", "unlimited"],
  ])("names a misspelt field, %s, with the field it is a slip of: a name that close to one is no key", (typo, field) => {
    const error = errorFor({ ...api, overrides: [{ keys: ["k"], [typo]: typo === "key" ? ["k"] : 5 }] });
    expect(error.message).toContain(`rules[0] ("api").overrides[0].${typo}: not a field of an override; did you mean ${field}?`);
  });

  it("lets an overridden limit take along a burst the rule spells out as its limit", () => {
    expect(ruleForKey(only({ ...api, burst: 100, overrides: [{ keys: ["k"], limit: 10 }] }), "k")).toMatchObject({ limit: 10, burst: 10 });
    expect(ruleForKey(only({ ...api, algorithm: "token-bucket", burst: 100, overrides: [{ keys: ["k"], limit: 3 }] }), "k")).toMatchObject({ limit: 3, burst: 3 });
    expect(ruleForKey(only({ ...api, algorithm: "gcra", burst: 100, overrides: [{ keys: ["k"], limit: 3 }] }), "k")).toMatchObject({ limit: 3, burst: 100 });
  });

  it("takes a field given as undefined from code as a field left out", () => {
    const rule = parseConfig([{ ...api, overrides: [{ keys: ["k"], limit: 5, unlimited: undefined, period: undefined }] }]).rules[0]!;
    expect(ruleForKey(rule, "k")).toMatchObject({ limit: 5, periodMs: 60_000 });
  });

  it.each([
    [{ key: "method", match: { methods: ["POST"] } }, "GET", `its method "GET" is not one match.methods fits ("POST")`],
    [{ key: "path", match: { path: "/api/*" } }, "/login", `its path "/login" is not one match.path fits ("/api/*")`],
    [{ key: "host", match: { host: "a.example" } }, "b.example", `its host "b.example" is not one match.host fits ("a.example")`],
    [{ key: "ip", match: { ips: ["10.0.0.0/8"] } }, "192.0.2.1", `its address "192.0.2.1" is in none of match.ips`],
    [{ key: "ip", match: { ips: ["10.0.0.0/8"] } }, "2001:db8::1", `its address "2001:db8::/56" is in none of match.ips`],
    [{ key: "ip", match: { ips: ["10.0.0.0/8"] } }, "#none", `a request without an address (#none) is in none of match.ips`],
  ])("refuses a key outside the rule's match (%j), whose override would never apply", (fields, key, problem) => {
    const error = errorFor({ ...api, ...fields, overrides: [{ keys: [key], limit: 5 }] });
    expect(error.field).toBe("rules[0].overrides[0].keys[0]");
    expect(error.message).toContain(`no request the rule applies to has this key: ${problem}`);
  });

  it("takes a key inside the rule's match: HEAD where it names GET, a path its glob fits, an IPv6 network holding a listed address", () => {
    expect(() => only({ ...api, key: "method", match: { methods: ["GET"] }, overrides: [{ keys: ["HEAD"], limit: 5 }] })).not.toThrow();
    expect(() => only({ ...api, key: "path", match: { path: "/api/*" }, overrides: [{ keys: ["/api/caf%25C3%25A9"], limit: 5 }] })).not.toThrow();
    expect(() => only({ ...api, key: "ip", match: { ips: ["2001:db8:abcd:12ff::1"] }, overrides: [{ keys: ["2001:db8:abcd:1200::1"], limit: 5 }] })).not.toThrow();
    expect(() => only({ ...api, key: "host", match: { host: "a.example:8443" }, overrides: [{ keys: ["A.example"], limit: 5 }] })).not.toThrow();
  });

  it("takes a path key the rule applies to as lenient origins route it: /LOGIN under a rule on /login", () => {
    expect(() => only({ ...api, key: "path", match: { path: "/login" }, overrides: [{ keys: ["/LOGIN", "/login/"], limit: 5 }] })).not.toThrow();
  });

  it("tells how to name the binding's free-form keys when a key does not fit the rule's key parts", () => {
    const error = errorFor({ name: "login", limit: 5, period: "1m", overrides: [{ keys: ["alice"], limit: 50 }] });
    expect(error.field).toBe("rules[0].overrides[0].keys[0]");
    expect(error.message).toContain(`ip: expected an address`);
    expect(error.message).toContain(`for free-form keys, give the rule one header part, "key": "header:x-key"`);
    expect(ruleForKey(only({ name: "login", key: "header:x-key", limit: 5, period: "1m", overrides: [{ keys: ["alice"], limit: 50 }] }), "alice").limit).toBe(50);
  });

  it("refuses an unlimited #overflow, which would let a client rotating keys go unlimited", () => {
    const error = errorFor({ ...api, newKeysPerSecond: 10, overrides: [{ keys: ["k", "#overflow"], unlimited: true }] });
    expect(error.field).toBe("rules[0].overrides[0].keys[1]");
    expect(error.message).toContain("#overflow cannot be unlimited");
  });

  it("names the override when the quota it gives breaks a bound of a field it does not set", () => {
    const error = errorFor({ ...api, cost: 50, overrides: [{ keys: ["k"], limit: 10 }] });
    expect(error.field).toBe("rules[0].overrides[0]");
    expect(error.message).toContain("the rule with this override's limit: cost: a cost of 50 exceeds the rule's limit of 10");
  });

  it("checks an override against the algorithm's bounds: a sliding log's 1,000 and a delay within the burst", () => {
    expect(errorFor({ ...api, algorithm: "sliding-log", overrides: [{ keys: ["k"], limit: 5000 }] }).field).toBe("rules[0].overrides[0].limit");
    expect(errorFor({ ...api, algorithm: "gcra", burst: 4, delay: 4, overrides: [{ keys: ["k"], burst: 2 }] }).message).toContain("rules[0] (\"api\").overrides[0]: the rule with this override's burst: delay:");
  });

  it("refuses overrides on a rule used from code, whose code picks each key's rule", () => {
    expect(() => parseStandaloneRule({ name: "api", limit: 100, period: "1m", overrides: [{ keys: ["k"], limit: 5 }] })).toThrow(/^rule \("api"\)\.overrides: your code picks each key's rule/);
  });
});
