// Rate-limit headers: which rule is reported and how its decision is written.
import fc from "fast-check";
import { parseList, type Item } from "structured-headers";
import { describe, expect, it } from "vitest";
import type { Decision } from "../../src/algorithms/types";
import { longestWait, mostRestrictive, rateLimitHeaders } from "../../src/http/rate-limit-headers";
import { rule } from "../helpers/rules";

const NOW = 1_700_000_000_000;

const decision = (overrides: Partial<Decision> = {}): Decision => ({
  allowed: true, limit: 10, remaining: 5, resetAt: NOW + 30_000, retryAfter: 0, ...overrides,
});

const denied = (overrides: Partial<Decision> = {}) => decision({ allowed: false, remaining: 0, retryAfter: 4_200, ...overrides });

/** Parses a header as a Structured Field List and returns its single item, checking its shape. */
function singleStringItem(value: string): Item {
  const list = parseList(value);
  expect(list).toHaveLength(1);
  const item = list[0]!;
  expect(Array.isArray(item[0])).toBe(false); // an Item, not an Inner List
  expect(typeof item[0]).toBe("string");
  for (const param of item[1].values()) expect(Number.isInteger(param)).toBe(true);
  return item as Item;
}

describe("rateLimitHeaders", () => {
  const apiRule = rule({ name: "api-per-key", limit: 1000, periodMs: 60_000 });

  it("writes RateLimit-Policy as the PRODUCT.md example", () => {
    const headers = rateLimitHeaders(apiRule, denied({ resetAt: NOW + 12_000 }), NOW);
    expect(headers["RateLimit-Policy"]).toBe('"api-per-key";q=1000;w=60');
  });

  it("writes RateLimit as the PRODUCT.md example", () => {
    const headers = rateLimitHeaders(apiRule, denied({ resetAt: NOW + 12_000 }), NOW);
    expect(headers["RateLimit"]).toBe('"api-per-key";r=0;t=12');
  });

  it("writes RateLimit-Policy as a Structured Field List of one string item with integer q and w", () => {
    const [name, params] = singleStringItem(rateLimitHeaders(apiRule, decision(), NOW)["RateLimit-Policy"]!);
    expect(name).toBe("api-per-key");
    expect(Object.fromEntries(params)).toEqual({ q: 1000, w: 60 });
  });

  it("writes RateLimit as a Structured Field List of one string item with integer r and t", () => {
    const [name, params] = singleStringItem(rateLimitHeaders(apiRule, decision(), NOW)["RateLimit"]!);
    expect(name).toBe("api-per-key");
    expect(Object.fromEntries(params)).toEqual({ r: 5, t: 30 });
  });

  it("rounds the window up to whole seconds, at least 1", () => {
    expect(rateLimitHeaders(rule({ periodMs: 1_500 }), decision(), NOW)["RateLimit-Policy"]).toMatch(/;w=2$/);
    expect(rateLimitHeaders(rule({ periodMs: 500 }), decision(), NOW)["RateLimit-Policy"]).toMatch(/;w=1$/);
  });

  it("rounds the time to reset up to whole seconds", () => {
    expect(rateLimitHeaders(apiRule, decision({ resetAt: NOW + 12_001 }), NOW)["RateLimit"]).toMatch(/;t=13$/);
  });

  it("never gives a negative time to reset", () => {
    expect(rateLimitHeaders(apiRule, decision({ resetAt: NOW - 5_000 }), NOW)["RateLimit"]).toMatch(/;t=0$/);
  });

  it("writes the X-RateLimit-* headers with the reset as delta seconds", () => {
    const headers = rateLimitHeaders(apiRule, decision({ remaining: 7, resetAt: NOW + 9_500 }), NOW);
    expect(headers).toMatchObject({ "X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "7", "X-RateLimit-Reset": "10" });
  });

  it("adds no Retry-After when allowed", () => {
    expect(rateLimitHeaders(apiRule, decision(), NOW)).not.toHaveProperty("Retry-After");
  });

  it("rounds Retry-After up to whole seconds when denied", () => {
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 4_200 }), NOW)["Retry-After"]).toBe("5");
  });

  it("gives Retry-After at least 1 when denied", () => {
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 0 }), NOW)["Retry-After"]).toBe("1");
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 200 }), NOW)["Retry-After"]).toBe("1");
  });

  it("keeps headers valid for any limit, period and decision", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
        fc.integer({ min: 1, max: 10 * 365 * 86_400_000 }),
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.integer({ min: -86_400_000, max: 10 * 365 * 86_400_000 }),
        (limit, periodMs, remaining, resetIn) => {
          const headers = rateLimitHeaders(rule({ limit, periodMs }), decision({ remaining, resetAt: NOW + resetIn }), NOW);
          singleStringItem(headers["RateLimit-Policy"]!);
          singleStringItem(headers["RateLimit"]!);
        },
      ),
    );
  });
});

describe("mostRestrictive", () => {
  it("picks the entry with the fewest units remaining", () => {
    const a = { rule: rule({ name: "a" }), decision: decision({ remaining: 3 }) };
    const b = { rule: rule({ name: "b" }), decision: decision({ remaining: 1 }) };
    const c = { rule: rule({ name: "c" }), decision: decision({ remaining: 2 }) };
    expect(mostRestrictive([a, b, c])).toBe(b);
  });

  it("breaks ties by the latest reset", () => {
    const a = { rule: rule({ name: "a" }), decision: decision({ remaining: 1, resetAt: NOW + 1_000 }) };
    const b = { rule: rule({ name: "b" }), decision: decision({ remaining: 1, resetAt: NOW + 9_000 }) };
    expect(mostRestrictive([a, b])).toBe(b);
    expect(mostRestrictive([b, a])).toBe(b);
  });

  it("is undefined when no rule applied", () => {
    expect(mostRestrictive([])).toBeUndefined();
  });
});

describe("longestWait", () => {
  it("picks the denial with the largest retryAfter", () => {
    const a = { rule: rule({ name: "a" }), decision: denied({ retryAfter: 1_000, resetAt: NOW + 60_000 }) };
    const b = { rule: rule({ name: "b" }), decision: denied({ retryAfter: 8_000, resetAt: NOW + 8_000 }) };
    expect(longestWait([a, b])).toBe(b);
  });

  it("breaks ties by the latest reset", () => {
    const a = { rule: rule({ name: "a" }), decision: denied({ retryAfter: 1_000, resetAt: NOW + 1_000 }) };
    const b = { rule: rule({ name: "b" }), decision: denied({ retryAfter: 1_000, resetAt: NOW + 5_000 }) };
    expect(longestWait([a, b])).toBe(b);
    expect(longestWait([b, a])).toBe(b);
  });

  it("is undefined for no denials", () => {
    expect(longestWait([])).toBeUndefined();
  });
});
