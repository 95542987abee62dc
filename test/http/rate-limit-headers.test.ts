// Rate-limit headers: which rule is reported and how its decision is written, in every form.
import fc from "fast-check";
import { parseRateLimit } from "ratelimit-header-parser";
import { parseDictionary, parseList, type Item } from "structured-headers";
import { describe, expect, it } from "vitest";
import type { Decision } from "../../src/algorithms/types";
import { DEFAULT_HEADERS, HEADER_FORMS, longestWait, mostRestrictive, rateLimitHeaders, type HeaderOptions } from "../../src/http/rate-limit-headers";
import { rule } from "../helpers/rules";

const NOW = 1_700_000_000_000;

/** Allowed, 5 of 10 left, one more unit in 6 s, the full quota in 30 s. */
const decision = (overrides: Partial<Decision> = {}): Decision => ({
  allowed: true, limit: 10, remaining: 5, resetAt: NOW + 30_000, moreAt: NOW + 6_000, retryAfter: 0, ...overrides,
});

const denied = (overrides: Partial<Decision> = {}) => decision({ allowed: false, remaining: 0, retryAfter: 4_200, moreAt: NOW + 4_200, ...overrides });

/** Allowed with nothing used under a rule of 1,000 a period: no more quota can come. */
const full = (overrides: Partial<Decision> = {}) => decision({ limit: 1000, remaining: 1000, resetAt: NOW, moreAt: NOW, ...overrides });

const draft7: HeaderOptions = { form: "draft-7", legacy: false };
const draft6: HeaderOptions = { form: "draft-6", legacy: false };

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

/** What ratelimit-header-parser, a published client, reads from the headers; `reset` as seconds from now. */
function clientReads(headers: Record<string, string>) {
  const parsed = parseRateLimit(new Headers(headers));
  if (!parsed) return undefined;
  return { limit: parsed.limit, remaining: parsed.remaining, reset: parsed.reset && Math.round((parsed.reset.getTime() - Date.now()) / 1000) };
}

describe("rateLimitHeaders, draft-10 (the default)", () => {
  const apiRule = rule({ name: "api-per-key", limit: 1000, periodMs: 60_000 });

  it("writes RateLimit-Policy as the PRODUCT.md example", () => {
    const headers = rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, DEFAULT_HEADERS);
    expect(headers["RateLimit-Policy"]).toBe('"api-per-key";q=1000;w=60');
  });

  it("writes RateLimit as the PRODUCT.md example", () => {
    const headers = rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, DEFAULT_HEADERS);
    expect(headers["RateLimit"]).toBe('"api-per-key";r=0;t=12');
  });

  it("writes RateLimit-Policy as a Structured Field List of one string item with integer q and w", () => {
    const [name, params] = singleStringItem(rateLimitHeaders(apiRule, decision(), NOW, DEFAULT_HEADERS)["RateLimit-Policy"]!);
    expect(name).toBe("api-per-key");
    expect(Object.fromEntries(params)).toEqual({ q: 1000, w: 60 });
  });

  it("writes RateLimit as a Structured Field List of one string item with integer r and t", () => {
    const [name, params] = singleStringItem(rateLimitHeaders(apiRule, decision(), NOW, DEFAULT_HEADERS)["RateLimit"]!);
    expect(name).toBe("api-per-key");
    expect(Object.fromEntries(params)).toEqual({ r: 5, t: 6 });
  });

  it("rounds the window up to whole seconds, at least 1", () => {
    expect(rateLimitHeaders(rule({ periodMs: 1_500 }), decision(), NOW, DEFAULT_HEADERS)["RateLimit-Policy"]).toMatch(/;w=2$/);
    expect(rateLimitHeaders(rule({ periodMs: 500 }), decision(), NOW, DEFAULT_HEADERS)["RateLimit-Policy"]).toMatch(/;w=1$/);
  });

  it("counts t on an allowed response to the next unit, not to the full quota", () => {
    const headers = rateLimitHeaders(apiRule, decision({ moreAt: NOW + 6_000, resetAt: NOW + 30_000 }), NOW, DEFAULT_HEADERS);
    expect(headers["RateLimit"]).toBe('"api-per-key";r=5;t=6');
  });

  it("rounds t up to whole seconds", () => {
    expect(rateLimitHeaders(apiRule, decision({ moreAt: NOW + 12_001 }), NOW, DEFAULT_HEADERS)["RateLimit"]).toMatch(/;t=13$/);
  });

  it("leaves t out when the key is at its full quota", () => {
    expect(rateLimitHeaders(apiRule, full(), NOW, DEFAULT_HEADERS)["RateLimit"]).toBe('"api-per-key";r=1000');
  });

  it("writes t 1 short of the full quota when the next unit came between the decision and now, never a negative t", () => {
    const [, params] = singleStringItem(rateLimitHeaders(apiRule, decision({ moreAt: NOW - 5_000 }), NOW, DEFAULT_HEADERS)["RateLimit"]!);
    expect(params.get("t")).toBe(1);
  });

  it("leaves t out at the full quota of a token bucket's burst and of gcra's burst + 1", () => {
    const bucket = rule({ name: "tb", algorithm: "token-bucket", limit: 10, burst: 20, periodMs: 60_000 });
    const cells = rule({ name: "gc", algorithm: "gcra", limit: 10, burst: 4, periodMs: 60_000 });
    expect(rateLimitHeaders(bucket, full({ limit: 10, remaining: 20 }), NOW, DEFAULT_HEADERS)["RateLimit"]).toBe('"tb";r=20');
    expect(rateLimitHeaders(bucket, full({ limit: 10, remaining: 19, moreAt: NOW + 6_000 }), NOW, DEFAULT_HEADERS)["RateLimit"]).toBe('"tb";r=19;t=6');
    expect(rateLimitHeaders(cells, full({ limit: 10, remaining: 5 }), NOW, DEFAULT_HEADERS)["RateLimit"]).toBe('"gc";r=5');
  });

  it("makes t on a denial equal to Retry-After, whatever moreAt and resetAt say", () => {
    const headers = rateLimitHeaders(apiRule, denied({ retryAfter: 4_200, moreAt: NOW + 1_000, resetAt: NOW + 60_000 }), NOW, DEFAULT_HEADERS);
    expect(headers["RateLimit"]).toBe('"api-per-key";r=0;t=5');
    expect(headers["Retry-After"]).toBe("5");
  });

  it("keeps headers valid for any limit, period and decision", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
        fc.integer({ min: 1, max: 10 * 365 * 86_400_000 }),
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.integer({ min: -86_400_000, max: 10 * 365 * 86_400_000 }),
        fc.boolean(),
        (limit, periodMs, remaining, moreIn, allowed) => {
          const d = decision({ allowed, remaining, moreAt: NOW + moreIn, retryAfter: allowed ? 0 : Math.max(0, moreIn) });
          const headers = rateLimitHeaders(rule({ limit, periodMs }), d, NOW, DEFAULT_HEADERS);
          singleStringItem(headers["RateLimit-Policy"]!);
          singleStringItem(headers["RateLimit"]!);
          for (const form of HEADER_FORMS.filter((f) => f !== "draft-10")) {
            const other = rateLimitHeaders(rule({ limit, periodMs }), d, NOW, { form, legacy: true });
            if (other["RateLimit"]) parseDictionary(other["RateLimit"]);
            if (other["RateLimit-Policy"]) parseList(other["RateLimit-Policy"]);
          }
        },
      ),
    );
  });
});

describe("rateLimitHeaders, draft-7", () => {
  const apiRule = rule({ name: "api-per-key", limit: 1000, periodMs: 60_000 });

  it("writes RateLimit and RateLimit-Policy as the PRODUCT.md example", () => {
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, draft7)).toEqual({
      "RateLimit": "limit=1000, remaining=0, reset=12",
      "RateLimit-Policy": "1000;w=60",
      "Retry-After": "12",
    });
  });

  it("writes reset 0 when the key is at its full quota", () => {
    expect(rateLimitHeaders(apiRule, full(), NOW, draft7)["RateLimit"]).toBe("limit=1000, remaining=1000, reset=0");
  });

  it("writes RateLimit as a Structured Field Dictionary of integers, and the policy as a List of one integer with w", () => {
    const headers = rateLimitHeaders(apiRule, decision(), NOW, draft7);
    const dictionary = parseDictionary(headers["RateLimit"]!);
    expect(Object.fromEntries([...dictionary].map(([k, [v]]) => [k, v]))).toEqual({ limit: 1000, remaining: 5, reset: 6 });
    const [policy] = parseList(headers["RateLimit-Policy"]!);
    expect(policy?.[0]).toBe(1000);
    expect(Object.fromEntries(policy![1])).toEqual({ w: 60 });
  });

  it("is read back by ratelimit-header-parser: limit, remaining and reset, allowed and denied", () => {
    expect(clientReads(rateLimitHeaders(apiRule, decision(), NOW, draft7))).toEqual({ limit: 1000, remaining: 5, reset: 6 });
    expect(clientReads(rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, draft7))).toEqual({ limit: 1000, remaining: 0, reset: 12 });
  });
});

describe("rateLimitHeaders, draft-6", () => {
  const apiRule = rule({ name: "api-per-key", limit: 1000, periodMs: 60_000 });

  it("writes RateLimit-Limit, -Remaining, -Reset and -Policy as the PRODUCT.md example, and no RateLimit", () => {
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, draft6)).toEqual({
      "RateLimit-Limit": "1000",
      "RateLimit-Remaining": "0",
      "RateLimit-Reset": "12",
      "RateLimit-Policy": "1000;w=60",
      "Retry-After": "12",
    });
  });

  it("writes RateLimit-Reset 0 when the key is at its full quota", () => {
    expect(rateLimitHeaders(apiRule, full(), NOW, draft6)["RateLimit-Reset"]).toBe("0");
  });

  it("is read back by ratelimit-header-parser: limit, remaining and reset, allowed and denied", () => {
    expect(clientReads(rateLimitHeaders(apiRule, decision(), NOW, draft6))).toEqual({ limit: 1000, remaining: 5, reset: 6 });
    expect(clientReads(rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, draft6))).toEqual({ limit: 1000, remaining: 0, reset: 12 });
  });
});

describe("rateLimitHeaders, none", () => {
  const apiRule = rule({ name: "api-per-key", limit: 1000, periodMs: 60_000 });

  it("adds no header to an allowed response without the legacy ones", () => {
    expect(rateLimitHeaders(apiRule, decision(), NOW, { form: "none", legacy: false })).toEqual({});
  });

  it("still sends Retry-After on a denial", () => {
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, { form: "none", legacy: false })).toEqual({ "Retry-After": "12" });
  });
});

describe("rateLimitHeaders, legacy X-RateLimit-*", () => {
  const apiRule = rule({ name: "api-per-key", limit: 1000, periodMs: 60_000 });

  it("writes the X-RateLimit-* headers with the reset equal to t", () => {
    const headers = rateLimitHeaders(apiRule, decision({ remaining: 7, moreAt: NOW + 9_500 }), NOW, DEFAULT_HEADERS);
    expect(headers).toMatchObject({ "X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "7", "X-RateLimit-Reset": "10" });
  });

  it("writes X-RateLimit-Reset equal to Retry-After on a denial", () => {
    const headers = rateLimitHeaders(apiRule, denied({ retryAfter: 12_000 }), NOW, DEFAULT_HEADERS);
    expect(headers["X-RateLimit-Reset"]).toBe("12");
  });

  it("writes X-RateLimit-Reset 0 when t is left out", () => {
    expect(rateLimitHeaders(apiRule, full(), NOW, DEFAULT_HEADERS)["X-RateLimit-Reset"]).toBe("0");
  });

  it("adds them beside any form, and alone with none", () => {
    for (const form of HEADER_FORMS) {
      expect(rateLimitHeaders(apiRule, decision(), NOW, { form, legacy: true })).toMatchObject({ "X-RateLimit-Limit": "1000" });
    }
    expect(rateLimitHeaders(apiRule, decision(), NOW, { form: "none", legacy: true })).toEqual({
      "X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "6",
    });
  });

  it("leaves them out when legacy is off, in every form", () => {
    for (const form of HEADER_FORMS) {
      const names = Object.keys(rateLimitHeaders(apiRule, denied(), NOW, { form, legacy: false }));
      expect(names.filter((name) => name.startsWith("X-"))).toEqual([]);
    }
  });

  it("are read back by ratelimit-header-parser when they are the only ones", () => {
    const headers = rateLimitHeaders(apiRule, decision(), NOW, { form: "none", legacy: true });
    expect(clientReads(headers)).toEqual({ limit: 1000, remaining: 5, reset: 6 });
  });
});

describe("Retry-After", () => {
  const apiRule = rule({ name: "api-per-key", limit: 1000, periodMs: 60_000 });

  it("is not sent when allowed", () => {
    expect(rateLimitHeaders(apiRule, decision(), NOW, DEFAULT_HEADERS)).not.toHaveProperty("Retry-After");
  });

  it("rounds up to whole seconds when denied", () => {
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 4_200 }), NOW, DEFAULT_HEADERS)["Retry-After"]).toBe("5");
  });

  it("is at least 1 when denied", () => {
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 0 }), NOW, DEFAULT_HEADERS)["Retry-After"]).toBe("1");
    expect(rateLimitHeaders(apiRule, denied({ retryAfter: 200 }), NOW, DEFAULT_HEADERS)["Retry-After"]).toBe("1");
  });

  it("is sent on every denial, whatever the forms", () => {
    for (const form of HEADER_FORMS) {
      for (const legacy of [true, false]) {
        expect(rateLimitHeaders(apiRule, denied({ retryAfter: 4_200 }), NOW, { form, legacy })["Retry-After"]).toBe("5");
      }
    }
  });
});

describe("mostRestrictive", () => {
  it("picks the entry with the fewest units remaining", () => {
    const a = { rule: rule({ name: "a" }), decision: decision({ remaining: 3 }) };
    const b = { rule: rule({ name: "b" }), decision: decision({ remaining: 1 }) };
    const c = { rule: rule({ name: "c" }), decision: decision({ remaining: 2 }) };
    expect(mostRestrictive([a, b, c])).toBe(b);
  });

  it("breaks ties by the latest moreAt, the t it shows", () => {
    const a = { rule: rule({ name: "a" }), decision: decision({ remaining: 1, moreAt: NOW + 1_000, resetAt: NOW + 60_000 }) };
    const b = { rule: rule({ name: "b" }), decision: decision({ remaining: 1, moreAt: NOW + 9_000, resetAt: NOW + 9_000 }) };
    expect(mostRestrictive([a, b])).toBe(b);
    expect(mostRestrictive([b, a])).toBe(b);
  });

  it("breaks a tie with a concurrency rule for the rule whose next unit has a time: a slot's moreAt (its expiry) only bounds when one comes back", () => {
    // The last slot taken and the last unit of a 30 s window: the slot comes back when this response ends, the unit in 30 s.
    const slots = { rule: rule({ name: "slots", algorithm: "concurrency", limit: 1 }), decision: decision({ remaining: 0, moreAt: NOW + 60_000, resetAt: NOW + 60_000 }) };
    const window = { rule: rule({ name: "window", limit: 1, periodMs: 30_000 }), decision: decision({ remaining: 0, moreAt: NOW + 30_000, resetAt: NOW + 30_000 }) };
    expect(mostRestrictive([slots, window])).toBe(window);
    expect(mostRestrictive([window, slots])).toBe(window);
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

describe("rateLimitHeaders, a concurrency rule", () => {
  const inFlight = rule({ name: "uploads", algorithm: "concurrency", limit: 3, periodMs: 60_000 });

  it("writes RateLimit-Policy with qu=\"concurrent-requests\" and no window", () => {
    const [[name, params]] = parseList(rateLimitHeaders(inFlight, decision({ limit: 3, remaining: 1 }), NOW, DEFAULT_HEADERS)["RateLimit-Policy"]!) as [Item];
    expect(name).toBe("uploads");
    expect(Object.fromEntries(params)).toEqual({ q: 3, qu: "concurrent-requests" });
  });

  it("leaves t out of an allowed response: slots come back when responses end, which the slot expiry only bounds", () => {
    const headers = rateLimitHeaders(inFlight, decision({ limit: 3, remaining: 1, moreAt: NOW + 60_000 }), NOW, DEFAULT_HEADERS);
    expect(headers["RateLimit"]).toBe('"uploads";r=1');
    expect(headers["X-RateLimit-Reset"]).toBe("0");
  });

  it("makes t on a denial equal to Retry-After", () => {
    const headers = rateLimitHeaders(inFlight, denied({ limit: 3, retryAfter: 1_000, moreAt: NOW + 60_000 }), NOW, DEFAULT_HEADERS);
    expect(headers["RateLimit"]).toBe('"uploads";r=0;t=1');
    expect(headers["Retry-After"]).toBe("1");
  });

  it("writes draft-6 and -7's policy as the limit alone", () => {
    expect(rateLimitHeaders(inFlight, decision(), NOW, draft7)["RateLimit-Policy"]).toBe("3");
    expect(rateLimitHeaders(inFlight, decision(), NOW, draft6)["RateLimit-Policy"]).toBe("3");
  });
});
