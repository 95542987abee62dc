// Keys, Durable Object names, keys as an operator types them, and request costs.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/rules";
import type { KeyPart } from "../../src/config/types";
import { MAX_KEY_BYTES, buildKey, durableObjectName, namedObject, requestCost } from "../../src/routing/key";
import { MISSING_PART, OVERFLOW_KEY, canonicalKey, UnbuildableKeyError } from "../../src/routing/key-text";

const request = (headers: Record<string, string> = {}, url = "https://api.example.com/v1/items?page=2", method = "GET") =>
  new Request(url, { method, headers });

const header = (name: string): KeyPart => ({ source: "header", name });
const query = (name: string): KeyPart => ({ source: "query", name });
const cookie = (name: string): KeyPart => ({ source: "cookie", name });
const IP: KeyPart = { source: "ip" };
/** What buildKey reads of a rule: its key parts and, for `ip`, its IPv6 prefix length. */
const keyed = (key: KeyPart[], ipv6Prefix = 56) => ({ key, ipv6Prefix });

describe("buildKey", () => {
  it("takes asn and country from what Cloudflare says of the client, and #none without it", () => {
    const from = (cf: Record<string, unknown> | undefined) => new Request("https://api.example.com/", { ...(cf ? { cf } : {}) });
    const byNetwork = keyed([{ source: "asn" }, { source: "country" }]);
    expect(buildKey(byNetwork, from({ asn: 13335, country: "nl" }))).toBe("13335|NL");
    expect(buildKey(byNetwork, from({ asn: 0, country: "T1" }))).toBe("0|T1");
    expect(buildKey(byNetwork, from(undefined))).toBe(`${MISSING_PART}|${MISSING_PART}`);
    expect(buildKey(byNetwork, from({ asn: "13335", country: "Netherlands" }))).toBe(`${MISSING_PART}|${MISSING_PART}`);
  });

  it("takes ip from CF-Connecting-IP", () => {
    expect(buildKey(keyed([IP]), request({ "CF-Connecting-IP": "203.0.113.9" }))).toBe("203.0.113.9");
  });

  it("keys an IPv6 address by its /56 when the rule names no ipv6Prefix", () => {
    const [byIp] = parseConfig([{ name: "by-ip", limit: 1, period: 1 }]).rules;
    expect(buildKey(byIp!, request({ "CF-Connecting-IP": "2001:DB8:abcd:12ff::1" }))).toBe("2001:db8:abcd:1200::/56");
  });

  it("keys an IPv6 address by the rule's ipv6Prefix", () => {
    const [byIp] = parseConfig([{ name: "by-ip", limit: 1, period: 1, ipv6Prefix: 64 }]).rules;
    expect(buildKey(byIp!, request({ "CF-Connecting-IP": "2001:db8:abcd:12ff::1" }))).toBe("2001:db8:abcd:12ff::/64");
  });

  it("keys an IPv4-mapped IPv6 address as its IPv4 address", () => {
    expect(buildKey(keyed([IP]), request({ "CF-Connecting-IP": "::ffff:203.0.113.9" }))).toBe("203.0.113.9");
  });

  it.each(["", "garbage", "localhost", "203.0.113.9:443", "[2001:db8::1]", "2001:db8::1%eth0", "203.0.113.09", "#none"])(
    "marks a CF-Connecting-IP of %j, not an address, as #none",
    (value) => {
      expect(buildKey(keyed([IP, { source: "method" }]), request({ "CF-Connecting-IP": value }))).toBe(`${MISSING_PART}|GET`);
    },
  );

  it("ignores client-set address headers when CF-Connecting-IP is absent", () => {
    const spoofed = request({ "X-Forwarded-For": "198.51.100.1", "True-Client-IP": "198.51.100.2", "X-Real-IP": "198.51.100.3" });
    expect(buildKey(keyed([IP]), spoofed)).toBe(MISSING_PART);
  });

  it("ignores client-set address headers when CF-Connecting-IP is present", () => {
    const spoofed = request({ "CF-Connecting-IP": "203.0.113.9", "X-Forwarded-For": "198.51.100.1", "True-Client-IP": "198.51.100.2" });
    expect(buildKey(keyed([IP]), spoofed)).toBe("203.0.113.9");
  });

  it("reads a header by case-insensitive name", () => {
    expect(buildKey(keyed([header("x-api-key")]), request({ "X-API-Key": "k-123" }))).toBe("k-123");
  });

  it("marks a missing header as #none", () => {
    expect(buildKey(keyed([header("x-api-key")]), request())).toBe("#none");
  });

  it("puts every request lacking a part in one shared bucket", () => {
    const parts = [header("x-api-key"), { source: "method" } as const];
    expect(buildKey(keyed(parts), request({ "x-other": "1" }))).toBe(buildKey(keyed(parts), request({ "x-other": "2" })));
  });

  it("counts an empty header value as missing: emptying a header buys no fresh quota", () => {
    expect(buildKey(keyed([header("x-api-key")]), request({ "x-api-key": "" }))).toBe("#none");
    expect(buildKey(keyed([header("x-api-key")]), request({ "x-api-key": "  " }))).toBe("#none");
    expect(buildKey(keyed([query("k")]), request({}, "https://x.test/?k="))).toBe("#none");
    expect(buildKey(keyed([cookie("sid")]), request({ Cookie: "sid=" }))).toBe("#none");
  });

  it("takes a query parameter's value decoded", () => {
    expect(buildKey(keyed([query("k")]), request({}, "https://x.test/?k=a%20b+c"))).toBe("a b c");
  });

  it("counts a query parameter given twice as missing: origins read the first or the last, so neither may be trusted", () => {
    expect(buildKey(keyed([query("k")]), request({}, "https://x.test/?k=random&k=victim"))).toBe("#none");
  });

  it("reads a query parameter by its name in any case, as ASP.NET does: a second spelling is the parameter given twice, never a fresh key", () => {
    expect(buildKey(keyed([query("k")]), request({}, "https://x.test/?K=victim"))).toBe("victim");
    expect(buildKey(keyed([query("api_key")]), request({}, "https://x.test/?API_KEY=victim"))).toBe("victim");
    // ASP.NET reads "victim,random" here, and an app taking the first value takes "victim".
    expect(buildKey(keyed([query("k")]), request({}, "https://x.test/?K=victim&k=random"))).toBe("#none");
  });

  it("marks a missing query parameter as #none", () => {
    expect(buildKey(keyed([query("k")]), request({}, "https://x.test/?other=1"))).toBe("#none");
  });

  it("reads a cookie from the Cookie header", () => {
    expect(buildKey(keyed([cookie("session")]), request({ Cookie: "theme=dark; session=s-42; lang=en" }))).toBe("s-42");
  });

  it("takes the first of repeated cookies, as browsers send the most specific first and parsers read it", () => {
    expect(buildKey(keyed([cookie("session")]), request({ Cookie: "session=first; session=second" }))).toBe("first");
  });

  it("percent-decodes a cookie's value, as origins' cookie parsers do: one client, one key", () => {
    expect(buildKey(keyed([cookie("sid")]), request({ Cookie: "sid=vic%74im" }))).toBe("victim");
    expect(buildKey(keyed([cookie("sid")]), request({ Cookie: "sid=100%" }))).toBe("100%25");
  });

  it("matches cookie names exactly, not by prefix, suffix or case", () => {
    const req = request({ Cookie: "xsession=a; sessionx=b; Session=c; session=d" });
    expect(buildKey(keyed([cookie("session")]), req)).toBe("d");
  });

  it("tolerates stray whitespace, empty pairs and pairs without =", () => {
    const req = request({ Cookie: " ;flag;  ; \tsession \t=\t s-42 ;" });
    expect(buildKey(keyed([cookie("session")]), req)).toBe("s-42");
  });

  it("keeps = inside a cookie value", () => {
    expect(buildKey(keyed([cookie("t")]), request({ Cookie: "t=a=b==" }))).toBe("a=b==");
  });

  it("drops the double quotes around a quoted cookie value", () => {
    expect(buildKey(keyed([cookie("session")]), request({ Cookie: 'session="s-42"' }))).toBe("s-42");
  });

  it("marks a missing cookie as #none, with or without a Cookie header", () => {
    expect(buildKey(keyed([cookie("session")]), request({ Cookie: "theme=dark" }))).toBe("#none");
    expect(buildKey(keyed([cookie("session")]), request())).toBe("#none");
  });

  it("takes path as the URL pathname without the query", () => {
    expect(buildKey(keyed([{ source: "path" }]), request())).toBe("/v1/items");
  });

  it("takes method upper-case", () => {
    expect(buildKey(keyed([{ source: "method" }]), request({}, "https://x.test/", "patch"))).toBe("PATCH");
  });

  it("takes host lower-case, without its port or a trailing dot: one host is one key however it is spelled", () => {
    for (const url of ["https://API.Example.com:8443/", "https://api.example.com./", "https://api.example.com../", "https://api.example.com/"]) {
      expect(buildKey(keyed([{ source: "host" }]), request({}, url))).toBe("api.example.com");
    }
    expect(buildKey(keyed([{ source: "host" }]), request({}, "https://[2001:DB8::1]:8443/"))).toBe("[2001:db8::1]");
  });

  it("makes global the same literal for every request", () => {
    expect(buildKey(keyed([{ source: "global" }]), request())).toBe("global");
  });

  it("joins parts with |", () => {
    const req = request({ "CF-Connecting-IP": "203.0.113.9" });
    expect(buildKey(keyed([IP, { source: "method" }, { source: "path" }]), req)).toBe("203.0.113.9|GET|/v1/items");
  });

  it("escapes %, | and # inside values, and nothing else", () => {
    expect(buildKey(keyed([header("x-k")]), request({ "x-k": "a|b%c#d :/?=;, [::1]" }))).toBe("a%7Cb%25c%23d :/?=;, [::1]");
  });

  it("never turns a real value into #none", () => {
    expect(buildKey(keyed([header("x-k")]), request({ "x-k": "#none" }))).toBe("%23none");
  });

  // A tiny alphabet of what escaping is about (the separators and their escapes), so that a
  // careless encoding collides within a run; Unicode strings and the marker itself ride along.
  const special = fc.constantFrom("|", "%", "#", "%7C", "%23", "%25", "a");
  const value = fc.option(
    fc.oneof(
      { arbitrary: fc.string({ unit: special, maxLength: 2 }), weight: 6 },
      { arbitrary: fc.string({ unit: "grapheme", maxLength: 4 }), weight: 1 },
      { arbitrary: fc.constant("#none"), weight: 1 },
    ),
    { nil: null },
  );
  const tupleOf = (n: number) => fc.array(value, { minLength: n, maxLength: n });
  // Query parameters carry any Unicode; a null value leaves the parameter out, and an empty one counts as left out.
  const keyOf = (values: (string | null)[]) => {
    const url = new URL("https://x.test/");
    values.forEach((v, i) => { if (v !== null) url.searchParams.append(`p${i}`, v); });
    return buildKey(keyed(values.map((_, i) => query(`p${i}`))), new Request(url));
  };

  it("gives different value tuples different keys", () => {
    // Many distinct tuples per run: every pair among them is a chance to collide.
    const distinctTuples = fc.integer({ min: 2, max: 3 }).chain((n) =>
      fc.uniqueArray(tupleOf(n), { selector: (t) => JSON.stringify(t), minLength: 50, maxLength: 150 }));
    fc.assert(
      fc.property(distinctTuples, (tuples) => {
        const asKeyed = new Set(tuples.map((t) => JSON.stringify(t.map((v) => (v === "" ? null : v)))));
        expect(new Set(tuples.map(keyOf)).size).toBe(asKeyed.size);
      }),
      { numRuns: 300 },
    );
  });

  it("gives keys that split back into exactly their values", () => {
    const unescape = (s: string) => s.replace(/%7C|%23|%25/g, (e) => decodeURIComponent(e));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }).chain(tupleOf), (values) => {
        const decoded = keyOf(values).split("|").map((part) => (part === MISSING_PART ? null : unescape(part)));
        expect(decoded).toEqual(values.map((v) => (v === "" ? null : v)));
      }),
      { numRuns: 1_000 },
    );
  });
});

describe("durableObjectName", () => {
  it("is <rule>/<key> for a short key", async () => {
    expect(await durableObjectName("login", "203.0.113.9")).toBe("login/203.0.113.9");
  });

  it("keeps a key of exactly MAX_KEY_BYTES unhashed", async () => {
    const key = "a".repeat(MAX_KEY_BYTES);
    expect(await durableObjectName("r", key)).toBe(`r/${key}`);
  });

  it("hashes a key longer than MAX_KEY_BYTES with SHA-256", async () => {
    expect(await durableObjectName("r", "a".repeat(MAX_KEY_BYTES + 1))).toBe(
      "r/#sha256:4a82297889eb505cf6b5cbdf69977afab4632d6557539782f657bd7dc78091a5",
    );
  });

  it("measures the key in UTF-8 bytes, not characters", async () => {
    const key = "€".repeat(342); // 342 characters, 1026 bytes
    expect(await durableObjectName("r", key)).toMatch(/^r\/#sha256:[0-9a-f]{64}$/);
  });
});

describe("requestCost", () => {
  const headerCost = { header: "x-cost" };
  const withCost = (value: string) => request({ "x-cost": value });

  it("returns a fixed cost as is", () => {
    expect(requestCost({ units: 5 }, request())).toEqual({ units: 5 });
  });

  it("reads a positive integer from the header", () => {
    expect(requestCost(headerCost, withCost("3"))).toEqual({ units: 3 });
  });

  it("charges 1 when the header is missing", () => {
    expect(requestCost(headerCost, request())).toEqual({ units: 1 });
  });

  it("accepts surrounding spaces and tabs", () => {
    expect(requestCost(headerCost, withCost(" \t42\t "))).toEqual({ units: 42 });
  });

  it("accepts leading zeros", () => {
    expect(requestCost(headerCost, withCost("007"))).toEqual({ units: 7 });
  });

  it("accepts Number.MAX_SAFE_INTEGER", () => {
    expect(requestCost(headerCost, withCost(String(Number.MAX_SAFE_INTEGER)))).toEqual({ units: Number.MAX_SAFE_INTEGER });
  });

  it("rejects a value above Number.MAX_SAFE_INTEGER", () => {
    expect(requestCost(headerCost, withCost("9007199254740992"))).toHaveProperty("error");
  });

  it.each(["0", "000", "-1", "+1", "1.5", "1e3", "0x10", "1 2", "1,000", "1_000", "", "abc"])("rejects %j", (value) => {
    expect(requestCost(headerCost, withCost(value))).toEqual({
      error: `header x-cost: expected a positive integer, got ${JSON.stringify(value)}`,
    });
  });

  it("quotes at most 32 characters of a long bad value", () => {
    const result = requestCost(headerCost, withCost("x".repeat(100)));
    expect(result).toEqual({ error: `header x-cost: expected a positive integer, got "${"x".repeat(31)}…"` });
  });

  it("escapes quotes in the quoted value", () => {
    expect(requestCost(headerCost, withCost('1"2'))).toEqual({ error: 'header x-cost: expected a positive integer, got "1\\"2"' });
  });

  it("never throws, and returns either a safe positive integer or an error", () => {
    // ASCII without NUL, CR or LF: what a header can carry without workerd's non-ASCII warning.
    const ascii = fc.integer({ min: 1, max: 0x7f }).filter((c) => c !== 10 && c !== 13).map((c) => String.fromCharCode(c));
    const digitsAndSpace = fc.constantFrom("0", "1", "9", " ", "\t", "-", "+");
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: ascii }), fc.string({ unit: digitsAndSpace })), (value) => {
        const result = requestCost(headerCost, withCost(value));
        if ("units" in result) {
          expect(Number.isSafeInteger(result.units) && result.units >= 1).toBe(true);
        } else {
          expect(result.error).toMatch(/^header x-cost: expected a positive integer, got "/);
        }
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("the path key part", () => {
  it("keys a path by one spelling: escapes of letters, digits and -._~ decoded, the rest upper-cased", () => {
    const PATH: KeyPart = { source: "path" };
    const spellings = ["/api/caf%C3%A9", "/%61pi/caf%c3%a9", "/ap%69/caf%C3%a9"].map((path) => buildKey(keyed([PATH]), request({}, `https://api.example.com${path}`)));
    expect(new Set(spellings)).toEqual(new Set(["/api/caf%25C3%25A9"]));
  });

  it("keys a | in a path raw or escaped alike: one quota, not one per spelling", () => {
    const PATH: KeyPart = { source: "path" };
    const spellings = ["/p/X|x", "/p/X%7Cx", "/p/X%7cx"].map((path) => buildKey(keyed([PATH]), request({}, `https://api.example.com${path}`)));
    expect(new Set(spellings)).toEqual(new Set(["/p/X%7Cx"]));
    expect(canonicalKey({ key: [PATH], ipv6Prefix: 56, newKeysPerSecond: null }, "/p/X%7Cx")).toBe("/p/X%7Cx");
  });

  it("keys a % that starts no escape as its escape: one quota, not one per spelling", () => {
    const PATH: KeyPart = { source: "path" };
    const spellings = ["/p/%zz%2", "/p/%25zz%252", "/p/%zz%252"].map((path) => buildKey(keyed([PATH]), request({}, `https://api.example.com${path}`)));
    expect(new Set(spellings)).toEqual(new Set([buildKey(keyed([PATH]), request({}, "https://api.example.com/p/%25zz%252"))]));
  });
});

describe("canonicalKey", () => {
  const typed = (key: KeyPart[], ipv6Prefix = 56, newKeysPerSecond: number | null = null) => ({ key, ipv6Prefix, newKeysPerSecond });

  it("writes a key as buildKey builds it for the same request", () => {
    const rule = typed([IP, header("x-api-key")]);
    const built = buildKey(rule, request({ "CF-Connecting-IP": "2001:db8:abcd:12ff::1", "x-api-key": "k|1%#" }));
    expect(canonicalKey(rule, "2001:DB8:abcd:12ff::9|k%7C1%25%23")).toBe(built);
    expect(canonicalKey(rule, built)).toBe(built);
    expect(canonicalKey(rule, `${MISSING_PART}|${MISSING_PART}`)).toBe(`${MISSING_PART}|${MISSING_PART}`);
  });

  it("writes an asn and a country as Cloudflare gives them, and refuses what it never gives", () => {
    const rule = typed([{ source: "asn" }, { source: "country" }]);
    expect(canonicalKey(rule, "013335|nl")).toBe("13335|NL");
    expect(() => canonicalKey(rule, "AS13335|NL")).toThrow(/^asn: expected an AS number like 13335/);
    expect(() => canonicalKey(rule, "13335|NLD")).toThrow(/^country: expected a two-letter country code like NL/);
  });

  it.each([
    ["203.0.113.7", /has 2 parts \(ip, header:x-api-key\) joined by "\|", this one 1; a "\|" inside a value is written %7C/],
    ["203.0.113.7|a|b", /this one 3/],
    ["203.0.113.7|a#b", /header:x-api-key: a value's "%", "\|" and "#" are written %25, %7C and %23/],
    ["203.0.113.7|a%b", /written %25, %7C and %23/],
    ["not-an-address|k", /^ip: expected an address/],
    ["2001:db8::/48|k", /^ip: expected an address/],
    ["203.0.113.7/56|k", /^ip: expected an address/],
    ["203.0.113.7| k ", /without the spaces and tabs around them/],
    ["203.0.113.7|", /is empty/],
    ["203.0.113.7|a\nb", /holds no NUL, CR or LF/],
  ])("refuses %j, which no request could have, saying how to write it", (key, why) => {
    expect(() => canonicalKey(typed([IP, header("x-api-key")]), key)).toThrow(UnbuildableKeyError);
    expect(() => canonicalKey(typed([IP, header("x-api-key")]), key)).toThrow(why);
  });

  it.each([
    [{ source: "path" } as KeyPart, "api/items", /expected a path starting with "\/"/],
    [{ source: "path" } as KeyPart, "/api?x=1", /without its query/],
    [{ source: "global" } as KeyPart, "other", /is always "global"/],
    [{ source: "method" } as KeyPart, "G E T", /expected an HTTP method/],
    [{ source: "host" } as KeyPart, "a b.example", /expected a host name/],
    [{ source: "host" } as KeyPart, "api.example.com/x", /expected a host name/],
    [{ source: "host" } as KeyPart, "user@api.example.com", /expected a host name/],
    [{ source: "host" } as KeyPart, "api.exa\tmple.com", /expected a host name/],
    [{ source: "path" } as KeyPart, "/a%2Fb", /a path may be typed as is, \/café, or with its own escapes' "%" written %25/],
    [{ source: "path" } as KeyPart, MISSING_PART, /every request has one, so it is never #none/],
    [{ source: "method" } as KeyPart, MISSING_PART, /every request has one/],
    [{ source: "host" } as KeyPart, MISSING_PART, /every request has one/],
    [{ source: "global" } as KeyPart, MISSING_PART, /every request has one/],
  ])("refuses a %j part no request could give: %j", (part, key, why) => {
    expect(() => canonicalKey(typed([part]), key)).toThrow(why);
  });

  it.each([
    [OVERFLOW_KEY, /^#overflow is the key new keys share past newKeysPerSecond, which this rule does not set$/],
    ["#sha256:abc", /^a #sha256 name is "#sha256:" then 64 lower-case hex digits, the SHA-256 of a key past 1 KB$/],
    [`#sha256:${"A".repeat(64)}`, /^a #sha256 name is "#sha256:" then 64 lower-case hex digits/],
  ])("refuses the marker %j where it cannot be, saying what it is rather than how to escape a #", (key, why) => {
    expect(() => canonicalKey(typed([header("x-api-key")]), key)).toThrow(why);
  });

  it("writes a path typed with a space or a control as a request's URL escapes it, and refuses a tab or line break, which none holds", () => {
    const PATH: KeyPart = { source: "path" };
    expect(canonicalKey(typed([PATH]), "/a\x01b c")).toBe(buildKey(typed([PATH]), new Request("http://x.example/a\x01b c")));
    expect(() => canonicalKey(typed([PATH]), "/a\tb")).toThrow(/no request path holds a tab or a line break/);
  });

  it("takes a header value as the runtime hands it over, UTF-8 decoded", () => {
    const rule = typed([header("x-api-key")]);
    expect(canonicalKey(rule, "ключ")).toBe(buildKey(rule, request({ "x-api-key": "ключ" })));
  });

  it("refuses an AS number past 32 bits, which no network has", () => {
    expect(() => canonicalKey(typed([{ source: "asn" }]), "4294967296")).toThrow(/^asn: expected an AS number like 13335 \(at most 4294967295\)/);
  });

  it.each(["[2001:0DB8:0:0::1]", "[2001:db8::1]:8443", "127.1", "API.Example.COM.:443", "bücher.example"])("writes the host %j as a request's URL to it has it", (host) => {
    const HOST: KeyPart = { source: "host" };
    expect(canonicalKey(typed([HOST]), host)).toBe(buildKey(typed([HOST]), new Request(`http://${host}/x`)));
  });

  it("writes a path part typed as a path as floodgate keys it: encoded, normalized, then escaped", () => {
    const PATH: KeyPart = { source: "path" };
    expect(canonicalKey(typed([PATH]), "/café/a")).toBe("/caf%25C3%25A9/a");
    expect(canonicalKey(typed([PATH]), "/caf%25c3%25a9/%2561")).toBe("/caf%25C3%25A9/a");
    expect(canonicalKey(typed([PATH]), "/caf%25C3%25A9/a")).toBe("/caf%25C3%25A9/a");
  });

  it("takes the #sha256 name of a key past 1 KB, which an operator names its object by as the key itself would", async () => {
    const long = "k".repeat(MAX_KEY_BYTES + 1);
    const hashed = (await durableObjectName("r", long)).slice("r/".length);
    expect(canonicalKey(typed([header("x-api-key")]), hashed)).toBe(hashed);
    expect(await namedObject("r", hashed)).toBe(await durableObjectName("r", long));
  });

  it("hashes a key that is itself written as a #sha256 name, so that code passing it never reaches the long key's object", async () => {
    const hashed = (await durableObjectName("r", "k".repeat(MAX_KEY_BYTES + 1))).slice("r/".length);
    expect(await durableObjectName("r", hashed)).toMatch(/^r\/#sha256:[0-9a-f]{64}$/);
    expect(await durableObjectName("r", hashed)).not.toBe(`r/${hashed}`);
  });

  it("takes #overflow as a key of a rule with newKeysPerSecond only", () => {
    expect(canonicalKey(typed([IP], 56, 5), OVERFLOW_KEY)).toBe(OVERFLOW_KEY);
    expect(() => canonicalKey(typed([IP]), OVERFLOW_KEY)).toThrow(UnbuildableKeyError);
  });
});
