// RATE_LIMIT_RULES: the shapes accepted, the defaults filled in, and an error naming the field for every mistake.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/errors";
import { describeRule, parseConfig, parseStandaloneRule } from "../../src/config/rules";
import type { Rule } from "../../src/config/types";
import { matchingRules } from "../../src/routing/match";
import { normalizePath } from "../../src/routing/path";

/** A valid rule, overridden field by field; `undefined` removes a field. */
function rule(fields: Record<string, unknown> = {}): Record<string, unknown> {
  const merged: Record<string, unknown> = { name: "api", limit: 10, period: "1m", ...fields };
  return Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== undefined));
}

function errorFor(raw: unknown): ConfigError {
  try {
    parseConfig(raw);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("parseConfig accepted the configuration");
}

/** The field path the error names when a rule has these fields. */
function fieldFor(fields: Record<string, unknown>): string {
  return errorFor([rule(fields)]).field;
}

function only(raw: unknown): Rule {
  const { rules } = parseConfig(raw);
  expect(rules).toHaveLength(1);
  return rules[0] as Rule;
}

const minimal: Rule = {
  name: "api",
  match: { path: "*", methods: null, host: null, ips: null },
  key: [{ source: "ip" }],
  algorithm: "sliding-window",
  limit: 10,
  periodMs: 60_000,
  burst: 10,
  buckets: 60,
  cost: { units: 1 },
  mode: "strict",
  syncMs: 1_000,
  onError: "local",
  timeoutMs: 1_000,
  ipv6Prefix: 56,
  newKeysPerSecond: null,
  dryRun: false,
  blockMs: null,
  count: "all",
};

describe("accepted shapes", () => {
  it("accepts a JSON bare array of rules", () => {
    expect(parseConfig(JSON.stringify([rule()]))).toEqual({ rules: [minimal] });
  });

  it('accepts a JSON {"rules": [...]} object', () => {
    expect(parseConfig(JSON.stringify({ rules: [rule()] }))).toEqual({ rules: [minimal] });
  });

  it("accepts the object wrangler makes of a TOML table", () => {
    expect(parseConfig({ rules: [rule()] })).toEqual({ rules: [minimal] });
  });

  it("accepts an already-parsed bare array", () => {
    expect(parseConfig([rule()])).toEqual({ rules: [minimal] });
  });

  it("treats an absent binding as no rules", () => {
    expect(parseConfig(undefined)).toEqual({ rules: [] });
  });

  it("treats an empty or blank string as no rules", () => {
    expect(parseConfig("")).toEqual({ rules: [] });
    expect(parseConfig(" \n\t")).toEqual({ rules: [] });
  });

  it("takes an optional field given as undefined (a rule built in code from options) as left out, as the rest of the rule's fields are", () => {
    const fields = ["timeout", "block", "newKeysPerSecond", "slotTtl", "period", "match"] as const;
    const given = (field: string) => ({ name: "api", limit: 10, ...(field === "slotTtl" || field === "period" ? { algorithm: "concurrency" } : { period: "1m" }), [field]: undefined });
    const left = (field: string) => Object.fromEntries(Object.entries(given(field)).filter(([, value]) => value !== undefined));
    expect(fields.map((field) => parseConfig([given(field)]))).toEqual(fields.map((field) => parseConfig([left(field)])));
    expect(parseConfig([rule({ match: { path: "/api/*", ips: undefined } })]).rules[0]!.match.ips).toBeNull();
  });

  it("refuses a hole in a list built in code, naming its index, rather than returning the list with the hole in it", () => {
    expect(errorFor([, rule()]).message).toBe('rules[0]: expected a rule object like {"name": "api", "limit": 100, "period": "1m"}, got nothing');
    expect(fieldFor({ key: ["ip", , "global"] })).toBe("rules[0].key[1]");
    expect(fieldFor({ match: { methods: [, "GET"] } })).toBe("rules[0].match.methods[0]");
    expect(fieldFor({ overrides: [, { keys: ["203.0.113.7"], limit: 2 }] })).toBe("rules[0].overrides[0]");
    expect(fieldFor({ overrides: [{ keys: [, "203.0.113.7"], limit: 2 }] })).toBe("rules[0].overrides[0].keys[0]");
  });

  it("accepts an empty rules list", () => {
    expect(parseConfig("[]")).toEqual({ rules: [] });
    expect(parseConfig({ rules: [] })).toEqual({ rules: [] });
  });

  it("parses the example from the product page", () => {
    const example = `[
      {"name": "api-per-key", "match": {"path": "/api/*"}, "key": "header:x-api-key",
       "algorithm": "sliding-window", "limit": 1000, "period": "1m", "mode": "fast"},
      {"name": "login", "match": {"path": "/login", "methods": ["POST"]}, "key": "ip",
       "algorithm": "token-bucket", "limit": 5, "period": "1m", "burst": 5}
    ]`;
    expect(parseConfig(example).rules).toEqual([
      {
        name: "api-per-key",
        match: { path: "/api/*", methods: null, host: null, ips: null },
        key: [{ source: "header", name: "x-api-key" }],
        algorithm: "sliding-window",
        limit: 1000,
        periodMs: 60_000,
        burst: 1000,
        buckets: 60,
        cost: { units: 1 },
        mode: "fast",
        syncMs: 1_000,
        aggregate: "auto",
        onError: "local",
        timeoutMs: 1_000,
        ipv6Prefix: 56,
        newKeysPerSecond: null,
        dryRun: false,
        blockMs: null,
        count: "all",
      },
      {
        name: "login",
        match: { path: "/login", methods: ["POST"], host: null, ips: null },
        key: [{ source: "ip" }],
        algorithm: "token-bucket",
        limit: 5,
        periodMs: 60_000,
        burst: 5,
        buckets: 1,
        cost: { units: 1 },
        mode: "strict",
        syncMs: 1_000,
        onError: "local",
        timeoutMs: 1_000,
        ipv6Prefix: 56,
        newKeysPerSecond: null,
        dryRun: false,
        blockMs: null,
        count: "all",
      },
    ]);
  });

  it("keeps the rules in the order given", () => {
    const names = parseConfig([rule({ name: "b" }), rule({ name: "a" })]).rules.map((r) => r.name);
    expect(names).toEqual(["b", "a"]);
  });
});

describe("defaults", () => {
  it("fills every default for a rule with only name, limit and period", () => {
    expect(only([rule()])).toEqual(minimal);
  });

  it("fills match.path, match.methods and match.host when match is empty", () => {
    expect(only([rule({ match: {} })]).match).toEqual({ path: "*", methods: null, host: null, ips: null });
  });

  it("defaults a token bucket's burst to its limit", () => {
    expect(only([rule({ algorithm: "token-bucket", limit: 7 })]).burst).toBe(7);
  });

  it("reads null methods and host as every method and every host", () => {
    expect(only([rule({ match: { methods: null, host: null } })]).match).toEqual(minimal.match);
  });
});

describe("normalisation", () => {
  it("upper-cases and deduplicates methods, keeping their order", () => {
    expect(only([rule({ match: { methods: ["post", "GET", "Post"] } })]).match.methods).toEqual(["POST", "GET"]);
  });

  it("lower-cases the host, keeping its port", () => {
    expect(only([rule({ match: { host: "API.Example.com:8443" } })]).match.host).toBe("api.example.com:8443");
  });

  it("accepts the key as one part or an array of parts", () => {
    expect(only([rule({ key: "global" })]).key).toEqual([{ source: "global" }]);
    expect(only([rule({ key: ["ip", "path", "method", "host"] })]).key).toEqual([
      { source: "ip" },
      { source: "path" },
      { source: "method" },
      { source: "host" },
    ]);
  });

  it("lower-cases header names in keys and costs", () => {
    const parsed = only([rule({ key: "header:X-Api-Key", cost: "header:X-Cost" })]);
    expect(parsed.key).toEqual([{ source: "header", name: "x-api-key" }]);
    expect(parsed.cost).toEqual({ header: "x-cost" });
  });

  it("keeps query and cookie names as written, since they are case-sensitive", () => {
    expect(only([rule({ key: ["query:apiKey", "cookie:SessionID"] })]).key).toEqual([
      { source: "query", name: "apiKey" },
      { source: "cookie", name: "SessionID" },
    ]);
  });

  it("reads a number period as seconds", () => {
    expect(only([rule({ period: 0.5 })]).periodMs).toBe(500);
  });

  it("rejects a member given twice in a rule, naming the rule and field: JSON keeps only the last", () => {
    const error = errorFor('[{"name": "dup", "key": "global", "limit": 2, "period": "1m", "limit": 1000}]');
    expect(error.field).toBe("rules[0].limit");
    expect(error.message).toBe('rules[0] ("dup").limit: given twice, and JSON keeps only the last, so the other would be ignored; write it once');
  });

  it("names a member given twice in a rule that is an array, not an object, by a well-formed path", () => {
    expect(errorFor('[[{"a": 1, "a": 2}]]').message).toMatch(/^rules\[0\]\[0\]\.a: given twice/);
  });

  it("rejects a member given twice inside a rule's match, or at the top level", () => {
    expect(errorFor('{"rules": [{"name": "m", "match": {"path": "/a/*", "path": "/b/*"}, "limit": 1, "period": "1m"}]}').message).toMatch(/^rules\[0\] \("m"\)\.match\.path: given twice/);
    expect(errorFor('{"rules": [], "rules": [{"name": "r", "limit": 1, "period": "1m"}]}').message).toMatch(/^rules: "rules" is given twice/);
  });

  it("keeps glob characters other than * literal", () => {
    expect(only([rule({ match: { path: "/a+b[1]/(c)/*" } })]).match.path).toBe("/a+b[1]/(c)/*");
  });

  it("accepts a sliding-window burst equal to the limit", () => {
    expect(only([rule({ limit: 10, burst: 10 })]).burst).toBe(10);
  });

  it("accepts a token-bucket burst above or below the limit", () => {
    expect(only([rule({ algorithm: "token-bucket", limit: 10, burst: 50 })]).burst).toBe(50);
    expect(only([rule({ algorithm: "token-bucket", limit: 10, burst: 2 })]).burst).toBe(2);
  });

  it("accepts a fixed cost equal to the capacity", () => {
    expect(only([rule({ limit: 10, cost: 10 })]).cost).toEqual({ units: 10 });
    expect(only([rule({ algorithm: "token-bucket", limit: 1, burst: 3, cost: 3 })]).cost).toEqual({ units: 3 });
  });
});

describe("error messages", () => {
  it("names the rule by index and name, the field, and what was found", () => {
    const error = errorFor([rule({ name: "api" }), rule({ name: "login", period: "ten" })]);
    const expected = 'expected a duration like "10s" (a positive integer then ms, s, m, h or d) or a positive number';
    expect(error.message).toBe(`rules[1] ("login").period: ${expected} of seconds, got "ten"`);
    expect(error.field).toBe("rules[1].period");
    expect(error.rule).toBe("login");
    expect(error.problem).toMatch(/^expected a duration/);
    expect(error.name).toBe("ConfigError");
    expect(error).toBeInstanceOf(Error);
  });

  it("names the rule by index alone when its name is invalid", () => {
    const error = errorFor([rule({ name: "Bad Name" })]);
    expect(error.message).toMatch(/^rules\[0\]\.name: /);
    expect(error.rule).toBe(0);
  });

  it("names RATE_LIMIT_RULES for problems outside any rule", () => {
    const error = errorFor("42");
    expect(error.field).toBe("RATE_LIMIT_RULES");
    expect(error.rule).toBeNull();
    expect(error.message).toBe('RATE_LIMIT_RULES: expected {"rules": [...]} or an array of rules, got 42');
  });
});

describe("top-level errors", () => {
  it("rejects a string that is not JSON, quoting the parser", () => {
    const text = "[{name: 'api'}]";
    let parserMessage = "";
    try {
      JSON.parse(text);
    } catch (error) {
      parserMessage = (error as Error).message;
    }
    const error = errorFor(text);
    expect(error.field).toBe("RATE_LIMIT_RULES");
    expect(error.message).toContain(`not valid JSON at line 1 column 3 (${parserMessage.replace(/ in JSON at position .*$/, "")})`);
  });

  it("rejects a string that is not JSON without quoting its text, which may hold an override's API key", () => {
    const error = errorFor(`[{"name": "api", "key": "header:x-api-key", "limit": 5, "period": "1m", "overrides": [{"keys": ["sk_live_PARTNER"], "limit": 9},]}]`);
    expect(error.message).not.toContain("sk_live");
    expect(error.message).toMatch(/^RATE_LIMIT_RULES: not valid JSON at line 1 column \d+ \(Unexpected token '\]'\)/);
  });

  it("names the line and column of a trailing comma, which JSON does not allow", () => {
    const text = `[\n  {"name": "a", "limit": 1, "period": "1m"},\n  {"name": "b", "limit": 2, "period": "1m"},\n]`;
    expect(errorFor(text).message).toBe(
      `RATE_LIMIT_RULES: not valid JSON at line 3 column 44 (Unexpected token ']'): a trailing comma, which JSON does not allow; remove it`,
    );
  });

  it("names the line and column of a trailing comma in an object", () => {
    expect(errorFor(`[{"name": "a", "limit": 1, "period": "1m",}]`).message).toMatch(/^RATE_LIMIT_RULES: not valid JSON at line 1 column 42 \(.*\): a trailing comma, which JSON does not allow; remove it$/);
  });

  it("names the line and column of a comment, which JSON does not allow", () => {
    const text = `[\n  {"name": "a", "limit": 1, "period": "1m"} // the API's own\n]`;
    expect(errorFor(text).message).toMatch(/^RATE_LIMIT_RULES: not valid JSON at line 2 column 45 \(.*\): a comment, which JSON does not allow; remove it$/);
  });

  it("names a comment after the rules by its line and column alone, not by the parser's offset too", () => {
    expect(errorFor(`[{"name": "a", "limit": 1, "period": "1m"}]\n// the API's own`).message).toBe(
      `RATE_LIMIT_RULES: not valid JSON at line 2 column 1 (Unexpected non-whitespace character after JSON): a comment, which JSON does not allow; remove it`,
    );
  });

  it("names the line and column of any other fault, with the parser's words", () => {
    expect(errorFor(`[{"name": "a" "limit": 1}]`).message).toMatch(/^RATE_LIMIT_RULES: not valid JSON at line 1 column 15 \([^)]*\); write \{"rules": \[\.\.\.\]\} or a bare array of rules$/);
  });

  it.each(['"rules"', "null", "true", "7"])("rejects the JSON %s, which is neither an array nor an object", (text) => {
    expect(errorFor(text).field).toBe("RATE_LIMIT_RULES");
  });

  it("rejects a parsed value that is neither an array nor an object", () => {
    expect(errorFor(null).field).toBe("RATE_LIMIT_RULES");
    expect(errorFor(5).field).toBe("RATE_LIMIT_RULES");
  });

  it("rejects an unknown top-level key, saying rules is the only one", () => {
    const error = errorFor({ rules: [], rule: [] });
    expect(error.field).toBe("RATE_LIMIT_RULES");
    expect(error.message).toContain('unknown key "rule"; the only top-level key is "rules"');
  });

  it("rejects an object without rules", () => {
    expect(errorFor({}).field).toBe("rules");
  });

  it("rejects rules that are not an array", () => {
    const error = errorFor({ rules: { name: "api" } });
    expect(error.field).toBe("rules");
    expect(error.message).toBe("rules: expected an array of rules (an empty array for none), got an object");
  });

  it("rejects a rule that is not an object, naming its index", () => {
    expect(errorFor([rule(), "api"]).field).toBe("rules[1]");
    expect(errorFor([[rule()]]).field).toBe("rules[0]");
    expect(errorFor([null]).field).toBe("rules[0]");
  });
});

describe("unknown fields", () => {
  it("rejects an unknown rule field, listing the allowed ones", () => {
    const error = errorFor([rule({ limits: 5 })]);
    expect(error.field).toBe("rules[0].limits");
    const allowed = "name, match, key, algorithm, limit, period, burst, buckets, delay, cost, mode, sync, onError, timeout";
    expect(error.message).toContain(`allowed fields here are ${allowed}`);
  });

  it("rejects an unknown match field, listing the allowed ones", () => {
    const error = errorFor([rule({ match: { paths: "/api/*" } })]);
    expect(error.field).toBe("rules[0].match.paths");
    expect(error.message).toContain("allowed fields here are path, methods, host");
  });

  it("quotes an unknown field that is not an identifier", () => {
    expect(fieldFor({ "max requests": 5 })).toBe('rules[0]["max requests"]');
    expect(fieldFor({ match: { "": 1 } })).toBe('rules[0].match[""]');
  });

  it("rejects a __proto__ field rather than reading through it", () => {
    expect(errorFor(`[{"name": "api", "limit": 1, "period": 1, "__proto__": {"mode": "bogus"}}]`).field).toBe(
      "rules[0].__proto__",
    );
  });
});

describe("name", () => {
  it("requires a name", () => {
    const error = errorFor([rule({ name: undefined })]);
    expect(error.field).toBe("rules[0].name");
    expect(error.message).toContain("required");
  });

  it.each(["", "API", "has space", "a".repeat(65), "dot.ted", 7])("rejects the name %j", (name) => {
    expect(fieldFor({ name })).toBe("rules[0].name");
  });

  it("accepts a 64-character name of every allowed character", () => {
    const name = "abcdefghijklmnopqrstuvwxyz0123456789_-".padEnd(64, "z");
    expect(only([rule({ name })]).name).toBe(name);
  });

  it("rejects a duplicate rule name, naming both indexes", () => {
    const error = errorFor([rule({ name: "login" }), rule({ name: "api" }), rule({ name: "login" })]);
    expect(error.field).toBe("rules[2].name");
    expect(error.message).toBe('rules[2] ("login").name: rules[0] already has this name; give each rule its own name');
  });
});

describe("match", () => {
  it.each(["/api/*", "*", "/", "/login"])("accepts the path %j", (path) => {
    expect(only([rule({ match: { path } })]).match.path).toBe(path);
  });

  it("rejects a match that is not an object", () => {
    expect(fieldFor({ match: "/api/*" })).toBe("rules[0].match");
  });

  it("rejects an empty path", () => {
    expect(fieldFor({ match: { path: "" } })).toBe("rules[0].match.path");
  });

  const unprintable = ["/a b", "/a\tb", "/a\u0000", "/a\u007f", "/a\u00a0b"];
  it.each(unprintable)("rejects the path %j with whitespace or control characters", (path) => {
    const error = errorFor([rule({ match: { path } })]);
    expect(error.field).toBe("rules[0].match.path");
    expect(error.message).toContain("whitespace or control characters");
  });

  it.each(["/search?q=*", "/page#top"])("rejects %j, explaining globs match the path only", (path) => {
    const error = errorFor([rule({ match: { path } })]);
    expect(error.field).toBe("rules[0].match.path");
    expect(error.message).toContain("globs match the path only, not the query string or fragment");
  });

  it.each(["api/*", "*/api", "**"])("rejects the path %j, which neither starts with / nor is *", (path) => {
    expect(fieldFor({ match: { path } })).toBe("rules[0].match.path");
  });

  it.each([
    ["/café/*", "/caf%C3%A9/*"],
    ["/{id}/*", "/%7Bid%7D/*"],
    ['/a<b>"c"`d`', "/a%3Cb%3E%22c%22%60d%60"],
    ["/a/../b/*", "/b/*"],
    ["/a%7Cb/*", "/a|b/*"],
    ["/a\\b", "/a/b"],
    ["/100%/*", "/100%25/*"],
  ])("rejects the path %j, which never matches as written, naming the form requests arrive in: %j", (path, arrives) => {
    const error = errorFor([rule({ match: { path } })]);
    expect(error.field).toBe("rules[0].match.path");
    expect(error.message).toContain(`never matches: request paths are matched percent-encoded (escapes upper-case; letters, digits, -._~ and []^| unescaped; a % that starts no escape as %25), with "." and ".." segments resolved; write ${JSON.stringify(arrives)}`);
  });

  const samples = ["/%61pi/*", "/caf%c3%a9", "/a%7e%2fb", "/api/*", "/v1/*/items", "/a+b", "/a;b=c", "/%2F", "/~user/*", "/a[1]", "/@scope/*", "/a|b", "/a'b", "/a!$&()*,=", "//x/*", "/a/b.", "/a..b", "/a^b", "/café/*", "/%2e%2E/x", "/a/%2e/b", "/a/.", "/a/..", "/{x}", "/\\a", "/a%zz", "/a%2", "/a%25zz"];
  it.each(samples)("asks for %j to be written as a request to it is matched: as workerd's own URL parser hands it over, normalized", (path) => {
    const arrives = normalizePath(new URL(`http://floodgate.invalid${path}`).pathname);
    if (arrives === path) expect(only([rule({ match: { path } })]).match.path).toBe(path);
    else expect(errorFor([rule({ match: { path } })]).message).toContain(`write ${JSON.stringify(arrives)}`);
  });

  it.each([
    ["/files/%2*", "/files/%2Fetc"],
    ["/files/%*", "/files/%C3%A9"],
    ["/files/%*", "/files/%zz"],
  ])("accepts the glob %j, a \"%\" before \"*\" standing for the start of an escape, and matches %j with it", (path, requested) => {
    const { rules } = parseConfig([rule({ match: { path } })]);
    expect(matchingRules(rules, { method: "GET", path: requested, host: "api.example.com" })).toHaveLength(1);
  });

  it("rejects a path holding a lone surrogate", () => {
    expect(errorFor([rule({ match: { path: "/a\uD800" } })]).message).toContain("must be well-formed Unicode");
  });

  it("accepts a path written as it arrives, percent-encoded", () => {
    expect(only([rule({ match: { path: "/caf%C3%A9/*" } })]).match.path).toBe("/caf%C3%A9/*");
  });

  it("rejects a path that is not a string", () => {
    expect(fieldFor({ match: { path: ["/api"] } })).toBe("rules[0].match.path");
  });

  it("rejects an empty methods list", () => {
    const error = errorFor([rule({ match: { methods: [] } })]);
    expect(error.field).toBe("rules[0].match.methods");
    expect(error.message).toContain("leave it out for every method");
  });

  it("rejects methods given as a string", () => {
    expect(fieldFor({ match: { methods: "GET" } })).toBe("rules[0].match.methods");
  });

  it.each(["GET POST", "", "GET,", 3])("rejects the method %j, naming its index", (method) => {
    expect(fieldFor({ match: { methods: ["GET", method] } })).toBe("rules[0].match.methods[1]");
  });

  const badHosts = [
    "https://api.example.com",
    "api.example.com/",
    "*.example.com",
    "api..example.com",
    "",
    "api.example.com:0",
    "api.example.com:70000",
    "host:",
    80,
  ];
  it.each(badHosts)("rejects the host %j", (host) => {
    expect(fieldFor({ match: { host } })).toBe("rules[0].match.host");
  });

  it.each([
    ["api.example.com:080", "api.example.com:80"],
    ["127.1", "127.0.0.1"],
    ["0x7f.0.0.1:8787", "127.0.0.1:8787"],
  ])("rejects the host %j, which never matches as written, naming the form requests arrive in: %j", (host, arrives) => {
    expect(errorFor([rule({ match: { host } })]).message).toBe(`rules[0] ("api").match.host: ${JSON.stringify(host)} never matches: a request's host is matched as the URL parser writes it; write ${JSON.stringify(arrives)}`);
  });

  it("takes a host the URL parser refuses as written: Node's and workerd's disagree on some, and the deploy check runs in Node", () => {
    expect(only([rule({ match: { host: "xn--ss-.example" } })]).match.host).toBe("xn--ss-.example");
  });

  const goodHosts = ["localhost", "api.example.com", "127.0.0.1:8787", "xn--bcher-kva.example"];
  it.each(goodHosts)("accepts the host %j", (host) => {
    expect(only([rule({ match: { host } })]).match.host).toBe(host);
  });
});

describe("key", () => {
  it("rejects an empty key list", () => {
    expect(fieldFor({ key: [] })).toBe("rules[0].key");
  });

  it("rejects a key that is neither a string nor an array", () => {
    expect(fieldFor({ key: { header: "x" } })).toBe("rules[0].key");
  });

  it("rejects an unknown key part, listing the known ones", () => {
    const error = errorFor([rule({ key: "user" })]);
    expect(error.field).toBe("rules[0].key");
    expect(error.message).toContain("ip, path, method, host, global, asn, country, header:<name>, query:<name> or cookie:<name>");
  });

  it("names the index of a bad part in a key list", () => {
    expect(fieldFor({ key: ["ip", "IP"] })).toBe("rules[0].key[1]");
    expect(fieldFor({ key: ["ip", 1] })).toBe("rules[0].key[1]");
  });

  const badParts = ["header", "header:", "header:x api", "header:x:y", "query:", "cookie:", "cookie:a=b", "body:x"];
  it.each(badParts)("rejects the key part %j", (part) => {
    expect(fieldFor({ key: part })).toBe("rules[0].key");
  });

  it("accepts any non-empty query parameter name", () => {
    expect(only([rule({ key: "query:a b:c" })]).key).toEqual([{ source: "query", name: "a b:c" }]);
  });

  it("rejects a repeated key part, naming both indexes", () => {
    const error = errorFor([rule({ key: ["header:x-api-key", "ip", "header:X-API-Key"] })]);
    expect(error.field).toBe("rules[0].key[2]");
    expect(error.message).toContain('repeats key[0] ("header:x-api-key")');
  });
});

describe("algorithm and mode", () => {
  it("rejects an unknown algorithm, listing the known ones", () => {
    const error = errorFor([rule({ algorithm: "leaky-bucket" })]);
    expect(error.field).toBe("rules[0].algorithm");
    expect(error.message).toContain('expected "sliding-window" or "token-bucket" or "fixed-window" or "sliding-log" or "gcra"');
  });

  it("rejects an unknown mode, listing the known ones", () => {
    const error = errorFor([rule({ mode: "eventual" })]);
    expect(error.field).toBe("rules[0].mode");
    expect(error.message).toContain('expected "strict" or "fast"');
  });
});

describe("limit, period and burst", () => {
  it("requires a limit", () => {
    const error = errorFor([rule({ limit: undefined })]);
    expect(error.field).toBe("rules[0].limit");
    expect(error.message).toContain("required: a positive integer");
  });

  it.each([0, -1, 1.5, "100", 2 ** 53, null])("rejects the limit %j", (limit) => {
    expect(fieldFor({ limit })).toBe("rules[0].limit");
  });

  it("requires a period", () => {
    const error = errorFor([rule({ period: undefined })]);
    expect(error.field).toBe("rules[0].period");
    expect(error.message).toContain("required");
  });

  it.each(["ten", 0, 0.0005, "0s", "10", "1w", true])("rejects the period %j", (period) => {
    expect(fieldFor({ period })).toBe("rules[0].period");
  });

  it.each([0, -1, 2.5, "5"])("rejects the burst %j", (burst) => {
    expect(fieldFor({ algorithm: "token-bucket", burst })).toBe("rules[0].burst");
  });

  it("rejects a sliding-window burst that differs from the limit", () => {
    const error = errorFor([rule({ limit: 10, burst: 20 })]);
    expect(error.field).toBe("rules[0].burst");
    expect(error.message).toContain("burst applies to token-bucket and gcra only (a sliding-window's burst is its limit, 10); remove it");
  });

  it("defaults a sliding window's buckets and accepts others", () => {
    expect(only([rule()]).buckets).toBe(60);
    expect(only([rule({ buckets: 10 })]).buckets).toBe(10);
  });

  it("keeps default buckets at least 1ms long", () => {
    expect(only([rule({ period: "20ms" })]).buckets).toBe(20);
  });

  it("gives a fast rule the same default buckets as a strict one", () => {
    expect(only([rule({ mode: "fast", period: "1m", sync: "1s" })]).buckets).toBe(only([rule({ period: "1m" })]).buckets);
  });

  it.each([0, 1.5, "4", 61])("rejects the buckets %j", (buckets) => {
    expect(fieldFor({ buckets })).toBe("rules[0].buckets");
  });

  it("rejects buckets on a token bucket", () => {
    const error = errorFor([rule({ algorithm: "token-bucket", buckets: 4 })]);
    expect(error.field).toBe("rules[0].buckets");
    expect(error.message).toContain("sliding-window only");
  });

  it("rejects buckets shorter than a millisecond", () => {
    const error = errorFor([rule({ period: "10ms", buckets: 20 })]);
    expect(error.field).toBe("rules[0].buckets");
    expect(error.message).toContain("at least 1ms");
  });

  it("reads a fixed window's calendar period in months, a year being 12, and writes it back as given", () => {
    const monthly = only([rule({ algorithm: "fixed-window", period: "1mo" })]);
    expect([monthly.months, monthly.periodMs, describeRule(monthly).period]).toEqual([1, 31 * 86_400_000, "1mo"]);
    expect([only([rule({ algorithm: "fixed-window", period: "1y" })]).months, describeRule(only([rule({ algorithm: "fixed-window", period: "24mo" })])).period]).toEqual([12, "2y"]);
    expect(describeRule(only([rule({ algorithm: "fixed-window", period: "3mo" })])).period).toBe("3mo");
    expect(only([rule({ algorithm: "fixed-window", period: "30d" })]).months).toBeUndefined();
  });

  it.each(["sliding-window", "token-bucket", "sliding-log", "gcra"])("rejects a calendar period on %s, which has no one length to spread its units over", (algorithm) => {
    const error = errorFor([rule({ algorithm, period: "1mo" })]);
    expect(error.field).toBe("rules[0].period");
    expect(error.message).toContain(`"1mo" is a calendar period, which only "fixed-window" counts by`);
    expect(error.message).toContain(`a duration like "30d"`);
  });

  it.each(["0mo", "121mo", "11y"])("rejects the calendar period %j, saying how many months it may hold", (period) => {
    const error = errorFor([rule({ algorithm: "fixed-window", period })]);
    expect(error.field).toBe("rules[0].period");
    expect(error.message).toContain("expected 1 to 120 months");
  });

  it("bounds a fixed window's limit by 2^52 alone, since it counts whole units, never scaled by its period", () => {
    expect(only([rule({ algorithm: "fixed-window", limit: 1_000_000_000, period: "1y" })]).limit).toBe(1_000_000_000);
    expect(only([rule({ algorithm: "fixed-window", limit: 2 ** 52, period: "1y" })]).limit).toBe(2 ** 52);
    const error = errorFor([rule({ algorithm: "fixed-window", limit: 2 ** 52 + 1, period: "1s" })]);
    expect(error.field).toBe("rules[0].limit");
    expect(error.message).toContain(`expected at most 4503599627370496 for "fixed-window"`);
  });

  it("accepts limit × period exactly at the largest safe integer", () => {
    // 9007199254740991 = 6361 × 69431 × 20394401
    expect(only([rule({ limit: 6361 * 69431, period: "20394401ms" })]).periodMs).toBe(20_394_401);
  });

  it("rejects limit × period past the largest safe integer, naming the limit", () => {
    const error = errorFor([rule({ limit: 6361 * 69431, period: "20394402ms" })]);
    expect(error.field).toBe("rules[0].limit");
    expect(error.message).toContain("must not exceed 9007199254740991 unit·ms");
    expect(error.message).toContain("use a shorter period or a smaller limit");
  });

  it("names gcra's bound by 1 + burst, the units it counts, not by the burst alone", () => {
    const error = errorFor([rule({ algorithm: "gcra", limit: 1, burst: 2 ** 40 - 1, period: "1d" })]);
    expect(error.field).toBe("rules[0].burst");
    expect(error.message).toContain("(1 + burst) × period (1099511627776 × 86400000ms)");
  });

  it("rejects burst × period past the largest safe integer, naming the burst", () => {
    const error = errorFor([rule({ algorithm: "token-bucket", limit: 1, burst: 2 ** 40, period: "1d" })]);
    expect(error.field).toBe("rules[0].burst");
    expect(error.message).toContain("use a shorter period or a smaller burst");
  });
});

describe("cost", () => {
  it.each([0, -2, 1.5, "3", "x-cost", "header:", "header:x cost", null])("rejects the cost %j", (cost) => {
    const error = errorFor([rule({ cost })]);
    expect(error.field).toBe("rules[0].cost");
    expect(error.message).toContain('a positive integer, or "header:<name>"');
  });

  it("rejects a sliding-window cost above the limit, which could never be admitted", () => {
    const error = errorFor([rule({ limit: 10, cost: 11 })]);
    expect(error.field).toBe("rules[0].cost");
    expect(error.message).toContain("a cost of 11 exceeds the rule's limit of 10, so no request could ever be");
  });

  it("rejects a token-bucket cost above the burst, even when within the limit", () => {
    const error = errorFor([rule({ algorithm: "token-bucket", limit: 10, burst: 2, cost: 5 })]);
    expect(error.field).toBe("rules[0].cost");
    expect(error.message).toContain("exceeds the rule's burst of 2");
  });
});

describe("abuse controls", () => {
  it("groups IPv6 clients by /56 unless ipv6Prefix says otherwise", () => {
    expect(only([rule()]).ipv6Prefix).toBe(56);
    expect(only([rule({ key: ["ip", "header:x-api-key"], ipv6Prefix: 64 })]).ipv6Prefix).toBe(64);
  });

  it.each([31, 129, 56.5, "56", -1, null])("rejects the ipv6Prefix %j, naming the range", (ipv6Prefix) => {
    const error = errorFor([rule({ ipv6Prefix })]);
    expect(error.field).toBe("rules[0].ipv6Prefix");
    expect(error.message).toContain("from 32 to 128");
  });

  it("rejects an ipv6Prefix on a rule whose key has no ip part", () => {
    const error = errorFor([rule({ key: "header:x-api-key", ipv6Prefix: 64 })]);
    expect(error.field).toBe("rules[0].ipv6Prefix");
    expect(error.message).toContain('add "ip" to the key');
  });

  it("caps no keys unless newKeysPerSecond is set", () => {
    expect(only([rule()]).newKeysPerSecond).toBeNull();
    expect(only([rule({ newKeysPerSecond: 50 })]).newKeysPerSecond).toBe(50);
  });

  it.each([0, -5, 2.5, "10", true])("rejects the newKeysPerSecond %j", (newKeysPerSecond) => {
    const error = errorFor([rule({ newKeysPerSecond })]);
    expect(error.field).toBe("rules[0].newKeysPerSecond");
    expect(error.message).toContain("positive integer");
  });

  it("describes both only where they apply", () => {
    expect(describeRule(only([rule({ newKeysPerSecond: 5 })]))).toMatchObject({ ipv6Prefix: 56, newKeysPerSecond: 5 });
    const described = describeRule(only([rule({ key: "global" })]));
    expect("ipv6Prefix" in described || "newKeysPerSecond" in described).toBe(false);
  });
});

describe("rule policies", () => {
  it("enforces unless dryRun is true, and blocks nothing unless block is set", () => {
    expect(only([rule()])).toMatchObject({ dryRun: false, blockMs: null });
    expect(only([rule({ dryRun: true, block: "10m" })])).toMatchObject({ dryRun: true, blockMs: 600_000 });
  });

  it.each(["yes", 1, "true", null])("rejects the dryRun %j, naming the field", (dryRun) => {
    const error = errorFor([rule({ dryRun })]);
    expect(error.field).toBe("rules[0].dryRun");
    expect(error.message).toContain("expected true or false");
  });

  it("counts every admitted request unless count says failed or successful, and describes count only when set", () => {
    expect(only([rule()]).count).toBe("all");
    const failed = only([rule({ count: "failed" })]);
    expect([failed.count, describeRule(failed).count, describeRule(only([rule()])).count]).toEqual(["failed", "failed", undefined]);
    expect(only([rule({ count: "successful" })]).count).toBe("successful");
  });

  it.each(["failures", true, 400, ""])("rejects the count %j, naming the field and the choices", (count) => {
    const error = errorFor([rule({ count })]);
    expect(error.field).toBe("rules[0].count");
    expect(error.message).toContain(`expected "all" or "failed" or "successful" (default "all")`);
  });

  it.each(["token-bucket", "gcra"])("rejects a count on a %s, which cannot tell a unit given back from its refill, naming the algorithms that can", (algorithm) => {
    const error = errorFor([rule({ algorithm, count: "failed" })]);
    expect(error.field).toBe("rules[0].count");
    expect(error.message).toContain(`"${algorithm}" cannot count by response: a bucket keeps no history`);
    expect(error.message).toContain(`use "sliding-window", "fixed-window" or "sliding-log"`);
  });

  it("rejects a count on a concurrency rule, whose slots always come back", () => {
    const error = errorFor([rule({ algorithm: "concurrency", period: undefined, count: "failed" })]);
    expect(error.field).toBe("rules[0].count");
    expect(error.message).toContain("a concurrency slot comes back once its response is sent");
  });

  it("reads a request's real cost from the response header responseCost names, lower-cased, and describes it only when set", () => {
    const priced = only([rule({ responseCost: "header:X-Tokens-Used" })]);
    expect(priced.responseCost).toEqual({ header: "x-tokens-used" });
    expect([describeRule(priced).responseCost, describeRule(only([rule()])).responseCost]).toEqual(["header:x-tokens-used", undefined]);
    expect(only([rule({ algorithm: "token-bucket", responseCost: "header:x-cost" })]).responseCost).toEqual({ header: "x-cost" });
  });

  it.each(["x-tokens", "header:", "header:bad name", 5, true])("rejects the responseCost %j, saying the form", (responseCost) => {
    const error = errorFor([rule({ responseCost })]);
    expect(error.field).toBe("rules[0].responseCost");
    expect(error.message).toContain(`expected "header:<name>", the origin's response header that says what the request cost`);
  });

  it("rejects a responseCost on a concurrency rule, which counts requests in flight", () => {
    const error = errorFor([rule({ algorithm: "concurrency", period: undefined, responseCost: "header:x-cost" })]);
    expect(error.field).toBe("rules[0].responseCost");
    expect(error.message).toContain("a concurrency rule counts requests in flight, not units");
  });

  it("rejects a responseCost on a rule used from code with a key alone, pointing to charge", () => {
    expect(() => parseStandaloneRule({ name: "llm", limit: 100, period: "1m", responseCost: "header:x-tokens" })).toThrow(/^rule \("llm"\)\.responseCost: a response cost needs a response, and limit never sees one; call charge\(units\)/);
    expect(parseStandaloneRule({ name: "llm", limit: 100, period: "1m", responseCost: "header:x-tokens" }, { requests: true }).responseCost).toEqual({ header: "x-tokens" });
  });

  it("reads a denyResponse's status, body and content type, and describes it only when set", () => {
    const own = only([rule({ denyResponse: { status: 503, body: '{"error": "slow down"}', contentType: "application/json" } })]);
    expect(own.denyResponse).toEqual({ status: 503, body: { text: '{"error": "slow down"}', contentType: "application/json" } });
    expect(describeRule(own).denyResponse).toEqual({ status: 503, body: '{"error": "slow down"}', contentType: "application/json" });
    expect(describeRule(only([rule()])).denyResponse).toBeUndefined();
  });

  it("defaults a denyResponse's status to 429 and a body's content type to plain text", () => {
    expect(only([rule({ denyResponse: { body: "slow down" } })]).denyResponse).toEqual({ status: 429, body: { text: "slow down", contentType: "text/plain; charset=utf-8" } });
    expect(only([rule({ denyResponse: { status: 503 } })]).denyResponse).toEqual({ status: 503 });
  });

  it.each([
    [{ status: 200 }, "rules[0].denyResponse.status", "expected an HTTP status from 400 to 599"],
    [{ status: 600 }, "rules[0].denyResponse.status", "expected an HTTP status from 400 to 599"],
    [{ status: "503" }, "rules[0].denyResponse.status", "expected an HTTP status from 400 to 599"],
    [{ body: { error: "slow down" } }, "rules[0].denyResponse.body", "expected a string, the body as sent"],
    [{ status: 503, contentType: "application/json" }, "rules[0].denyResponse.contentType", `says what "body" is, and there is none`],
    [{ body: "x", contentType: "json" }, "rules[0].denyResponse.contentType", "expected a media type"],
    [{ body: "x", contentType: "text/plain\r\nSet-Cookie: a=b" }, "rules[0].denyResponse.contentType", "expected a media type"],
    [{ body: "{error: 1}", contentType: "application/json; charset=utf-8" }, "rules[0].denyResponse.body", "is not valid JSON"],
    [{ body: "<x/>", contentType: "application/problem+json" }, "rules[0].denyResponse.body", "is not valid JSON"],
    [{ message: "slow down" }, "rules[0].denyResponse.message", "unknown field; allowed fields here are status, body, contentType"],
    [{}, "rules[0].denyResponse", `give a "status", a "body" or both`],
    ["slow down", "rules[0].denyResponse", "expected an object like"],
  ])("rejects the denyResponse %j, naming the field at fault", (denyResponse, field, problem) => {
    const error = errorFor([rule({ denyResponse })]);
    expect(error.field).toBe(field);
    expect(error.message).toContain(problem);
  });

  it("accepts a media type with quoted parameters, and a JSON body under a +json type", () => {
    const contentType = 'text/html; charset="utf-8"; profile=x';
    expect(only([rule({ denyResponse: { body: "<p>slow down</p>", contentType } })]).denyResponse?.body?.contentType).toBe(contentType);
    expect(only([rule({ denyResponse: { body: "{}", contentType: "application/vnd.api+json" } })]).denyResponse?.body?.text).toBe("{}");
  });

  it("rejects a denyResponse on a rule used from code with a key alone, whose denial the code answers", () => {
    expect(() => parseStandaloneRule({ name: "api", limit: 100, period: "1m", denyResponse: { status: 503 } })).toThrow(/^rule \("api"\)\.denyResponse: limit answers with a LimitResult, not a response/);
    expect(parseStandaloneRule({ name: "api", limit: 100, period: "1m", denyResponse: { status: 503 } }, { requests: true }).denyResponse).toEqual({ status: 503 });
  });

  it.each(["forever", 0, -1, "10"])("rejects the block %j as a duration", (block) => {
    expect(fieldFor({ block })).toBe("rules[0].block");
  });

  it("reads match.ips into a list matched by address, shown as written", () => {
    const parsed = only([rule({ match: { ips: ["192.0.2.0/24", "2001:db8::/32"] } })]);
    expect(parsed.match.ips?.has("192.0.2.9")).toBe(true);
    expect(parsed.match.ips?.has("198.51.100.1")).toBe(false);
    expect(describeRule(parsed).match.ips).toEqual(["192.0.2.0/24", "2001:db8::/32"]);
  });

  it.each([
    [[], "rules[0].match.ips"],
    [["192.0.2.0/33"], "rules[0].match.ips[0]"],
    [["192.0.2.0/24", "not an address"], "rules[0].match.ips[1]"],
  ])("rejects the match.ips %j, naming the entry", (ips, field) => {
    expect(fieldFor({ match: { ips } })).toBe(field);
  });
});

describe("failure handling and fast mode", () => {
  it("defaults onError to local and timeout to 1s", () => {
    expect(only([rule()])).toMatchObject({ onError: "local", timeoutMs: 1_000 });
  });

  it("accepts onError allow and deny, and a timeout duration", () => {
    expect(only([rule({ onError: "deny", timeout: "250ms" })])).toMatchObject({ onError: "deny", timeoutMs: 250 });
    expect(only([rule({ onError: "allow" })]).onError).toBe("allow");
  });

  it.each(["open", true, 1])("rejects the onError %j", (onError) => {
    expect(fieldFor({ onError })).toBe("rules[0].onError");
  });

  it.each(["soon", 0, "0ms"])("rejects the timeout %j", (timeout) => {
    expect(fieldFor({ timeout })).toBe("rules[0].timeout");
  });

  it("reads a fast rule's sync interval, 1s by default", () => {
    expect(only([rule({ mode: "fast" })]).syncMs).toBe(1_000);
    expect(only([rule({ mode: "fast", sync: "250ms" })]).syncMs).toBe(250);
  });

  it("rejects a sync interval on a strict rule", () => {
    const error = errorFor([rule({ sync: "1s" })]);
    expect(error.field).toBe("rules[0].sync");
    expect(error.message).toContain("fast mode only");
  });

  it.each(["often", -1])("rejects the sync %j", (sync) => {
    expect(fieldFor({ mode: "fast", sync })).toBe("rules[0].sync");
  });

  it("reads a fast rule's aggregate, auto by default", () => {
    expect(only([rule({ mode: "fast" })]).aggregate).toBe("auto");
    expect(describeRule(only([rule({ mode: "fast" })]))).toMatchObject({ aggregate: "auto" });
    expect(only([rule({ mode: "fast", aggregate: "auto" })]).aggregate).toBe("auto");
    expect(only([rule({ mode: "fast", aggregate: "none" })]).aggregate).toBeUndefined();
    expect(describeRule(only([rule({ mode: "fast", aggregate: "none" })]))).not.toHaveProperty("aggregate");
    expect(only([rule({ mode: "fast", aggregate: "location" })]).aggregate).toBe("location");
    expect(describeRule(only([rule({ mode: "fast", aggregate: "location" })]))).toMatchObject({ aggregate: "location" });
    expect(only([rule({ mode: "fast", aggregate: "continent" })]).aggregate).toBe("continent");
    expect(describeRule(only([rule({ mode: "fast", aggregate: "continent" })]))).toMatchObject({ aggregate: "continent" });
  });

  it("leaves a strict rule without aggregate, which it does not take", () => {
    expect(only([rule({})]).aggregate).toBeUndefined();
    expect(only([rule({ aggregate: "none" })]).aggregate).toBeUndefined();
  });

  it.each(["auto", "location", "continent"])("rejects aggregate: %s on a strict rule", (aggregate) => {
    const error = errorFor([rule({ aggregate })]);
    expect(error.field).toBe("rules[0].aggregate");
    expect(error.message).toContain("fast mode only");
  });

  it.each(["colo", true, 1])("rejects the aggregate %j", (aggregate) => {
    expect(fieldFor({ mode: "fast", aggregate })).toBe("rules[0].aggregate");
  });
});

describe("describeRule", () => {
  it("shows a minimal rule in the user-facing format with every default", () => {
    expect(describeRule(minimal)).toEqual({
      name: "api",
      match: { path: "*", methods: null, host: null },
      key: ["ip"],
      algorithm: "sliding-window",
      limit: 10,
      period: "1m",
      periodMs: 60_000,
      burst: 10,
      buckets: 60,
      cost: 1,
      mode: "strict",
      onError: "local",
      timeout: "1s",
      ipv6Prefix: 56,
      dryRun: false,
    });
  });

  it("writes named key parts and a header cost as the user wrote them", () => {
    const parsed = only([
      rule({
        algorithm: "token-bucket",
        key: ["ip", "header:X-Api-Key", "query:k"],
        cost: "header:X-Cost",
        period: 1.5,
        burst: 20,
      }),
    ]);
    expect(describeRule(parsed)).toMatchObject({
      key: ["ip", "header:x-api-key", "query:k"],
      cost: "header:x-cost",
      period: "1500ms",
      periodMs: 1500,
      burst: 20,
    });
  });

  it("does not share arrays with the parsed rule", () => {
    const parsed = only([rule({ match: { methods: ["GET"] } })]);
    const described = describeRule(parsed);
    described.match.methods?.push("POST");
    expect(parsed.match.methods).toEqual(["GET"]);
  });
});

describe("properties", () => {
  function throwsOnlyConfigErrors(raw: unknown): boolean {
    try {
      parseConfig(raw);
      return true;
    } catch (error) {
      return error instanceof ConfigError;
    }
  }

  const fieldNames = ["name", "match", "key", "algorithm", "limit", "period", "burst", "cost", "mode", "extra"];
  const ruleField = fc.constantFrom(...fieldNames);
  const plausible = fc.oneof(
    fc.jsonValue(),
    fc.constantFrom("api", "token-bucket", "fast", "1m", "header:x", "query:q", "cookie:c", "/api/*", "*", 0.5),
    fc.integer({ min: -2, max: 2 ** 53 }),
    fc.record({ path: fc.string(), methods: fc.array(fc.string()), host: fc.string() }, { requiredKeys: [] }),
  );
  const ruleLike = fc.dictionary(ruleField, plausible);

  it("throws nothing but a ConfigError for any JSON value, parsed or as text", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        return throwsOnlyConfigErrors(value) && throwsOnlyConfigErrors(JSON.stringify(value));
      }),
    );
  });

  it("throws nothing but a ConfigError for any JavaScript value", () => {
    const anything = fc.anything({
      withBigInt: true,
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withNullPrototype: true,
      withObjectString: true,
      withSet: true,
      withSparseArray: true,
      withTypedArray: true,
    });
    fc.assert(fc.property(anything, (value) => throwsOnlyConfigErrors(value) && throwsOnlyConfigErrors([value])));
  });

  it("throws nothing but a ConfigError for rule-shaped values", () => {
    fc.assert(fc.property(fc.array(ruleLike, { maxLength: 3 }), throwsOnlyConfigErrors), { numRuns: 2000 });
  });

  it("throws nothing but a ConfigError for any string", () => {
    fc.assert(fc.property(fc.string(), throwsOnlyConfigErrors));
  });

  const validRule = fc.record({
    name: fc.stringMatching(/^[a-z0-9_-]{1,64}$/),
    match: fc.record({
      path: fc.constantFrom("*", "/", "/api/*", "/login"),
      methods: fc.option(fc.uniqueArray(fc.constantFrom("GET", "POST", "PUT", "DELETE"), { minLength: 1 })),
      host: fc.option(fc.constantFrom("api.example.com", "localhost:8787")),
    }),
    key: fc.uniqueArray(
      fc.constantFrom("ip", "path", "method", "host", "global", "header:x-api-key", "query:k", "cookie:s"),
      { minLength: 1 },
    ),
    algorithm: fc.constantFrom("sliding-window", "token-bucket"),
    limit: fc.integer({ min: 1, max: 1_000_000 }),
    period: fc.oneof(fc.integer({ min: 1, max: 86_400_000 }).map((ms) => `${ms}ms`), fc.integer({ min: 1, max: 3600 })),
    mode: fc.constantFrom("strict", "fast"),
  });

  it("reads back what describeRule shows, less periodMs, as the same rule", () => {
    fc.assert(
      fc.property(validRule, (input) => {
        const [parsed] = parseConfig([input]).rules as [Rule];
        const { periodMs: _shown, ...asWritten } = describeRule(parsed);
        expect(parseConfig([asWritten]).rules).toEqual([parsed]);
      }),
    );
  });
});

describe("fixed-window, sliding-log and gcra", () => {
  it("accepts each new algorithm with its defaults", () => {
    expect(only([rule({ algorithm: "fixed-window" })])).toMatchObject({ algorithm: "fixed-window", burst: 10, buckets: 1 });
    expect(only([rule({ algorithm: "sliding-log", mode: "fast" })])).toMatchObject({ algorithm: "sliding-log", burst: 10, buckets: 1, mode: "fast" });
    expect(only([rule({ algorithm: "fixed-window", mode: "fast" })]).mode).toBe("fast");
    expect(only([rule({ algorithm: "gcra" })])).toMatchObject({ algorithm: "gcra", burst: 0, delay: 0, buckets: 1 });
    expect(only([rule({ algorithm: "gcra", burst: 5, delay: 5 })])).toMatchObject({ burst: 5, delay: 5 });
  });

  it.each(["fixed-window", "sliding-log"])("rejects buckets on a %s", (algorithm) => {
    const error = errorFor([rule({ algorithm, buckets: 4 })]);
    expect(error.field).toBe("rules[0].buckets");
    expect(error.message).toContain("buckets applies to sliding-window only");
  });

  it.each(["sliding-window", "token-bucket", "fixed-window", "sliding-log"])("rejects delay on a %s", (algorithm) => {
    const error = errorFor([rule({ algorithm, delay: 1 })]);
    expect(error.field).toBe("rules[0].delay");
    expect(error.message).toContain("delay applies to gcra only");
  });

  it.each([-1, 1.5, "2"])("rejects the gcra burst %j, which must be 0 or more", (burst) => {
    const error = errorFor([rule({ algorithm: "gcra", burst })]);
    expect(error.field).toBe("rules[0].burst");
    expect(error.message).toContain("0 or more");
  });

  it.each([-1, 1.5, 6])("rejects the gcra delay %j outside 0 to the burst", (delay) => {
    const error = errorFor([rule({ algorithm: "gcra", burst: 5, delay })]);
    expect(error.field).toBe("rules[0].delay");
    expect(error.message).toContain("from 0 to the burst (5)");
  });

  it("accepts a gcra delay from 0 to below the burst: the rest of the burst is held", () => {
    expect(only([rule({ algorithm: "gcra", burst: 5, delay: 2 })])).toMatchObject({ burst: 5, delay: 2 });
    expect(only([rule({ algorithm: "gcra", burst: 5, delay: 0 })])).toMatchObject({ burst: 5, delay: 0 });
  });

  it("names the rule and the field for a gcra delay above the burst", () => {
    const error = errorFor([rule({ name: "smooth", algorithm: "gcra", burst: 3, delay: 4 })]);
    expect(error.field).toBe("rules[0].delay");
    expect(error.message).toContain('rules[0] ("smooth").delay: expected an integer from 0 to the burst (3), got 4');
  });

  it("rejects gcra in fast mode, saying why", () => {
    const error = errorFor([rule({ algorithm: "gcra", mode: "fast" })]);
    expect(error.field).toBe("rules[0].mode");
    expect(error.message).toContain('"gcra" is strict-only');
  });

  it("rejects a sliding log over 1,000 units, saying why", () => {
    expect(only([rule({ algorithm: "sliding-log", limit: 1_000 })]).limit).toBe(1_000);
    const error = errorFor([rule({ algorithm: "sliding-log", limit: 1_001 })]);
    expect(error.field).toBe("rules[0].limit");
    expect(error.message).toContain("at most 1000");
    expect(error.message).toContain("keeps the time of every request");
  });

  it("bounds a gcra cost by 1 + burst, naming the burst", () => {
    expect(only([rule({ algorithm: "gcra", burst: 2, cost: 3 })]).cost).toEqual({ units: 3 });
    const error = errorFor([rule({ algorithm: "gcra", burst: 2, cost: 4 })]);
    expect(error.field).toBe("rules[0].cost");
    expect(error.message).toContain("1 + its burst of 2");
  });

  it("rejects a fixed-window or sliding-log burst that differs from the limit", () => {
    expect(fieldFor({ algorithm: "fixed-window", limit: 10, burst: 20 })).toBe("rules[0].burst");
    expect(fieldFor({ algorithm: "sliding-log", limit: 10, burst: 20 })).toBe("rules[0].burst");
  });
});

describe("concurrency", () => {
  /** A concurrency rule: it has no period. */
  const slots = (fields: Record<string, unknown> = {}) => rule({ algorithm: "concurrency", limit: 3, period: undefined, ...fields });

  it("holds a slot for 60 s at most by default, as its periodMs, with burst the limit", () => {
    expect(only([slots()])).toMatchObject({ algorithm: "concurrency", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 });
    expect(only([slots({ slotTtl: "5m" })]).periodMs).toBe(300_000);
  });

  it("rejects period, naming the rule and the field", () => {
    const error = errorFor([slots({ name: "uploads", period: "1m" })]);
    expect(error.field).toBe("rules[0].period");
    expect(error.message).toContain('rules[0] ("uploads").period: "concurrency" has no period');
  });

  it.each(["ten", 0, -1, "1w"])("rejects the slotTtl %j, which must be a duration", (slotTtl) => {
    expect(fieldFor({ algorithm: "concurrency", period: undefined, slotTtl })).toBe("rules[0].slotTtl");
  });

  it("says a zero slotTtl must be a positive duration, not a period, which a concurrency rule has none of", () => {
    expect(errorFor([rule({ algorithm: "concurrency", period: undefined, slotTtl: "0s" })]).message).toBe('rules[0] ("api").slotTtl: a duration must be positive, got "0s"');
  });

  it("rejects slotTtl on another algorithm", () => {
    const error = errorFor([rule({ slotTtl: "1m" })]);
    expect(error.field).toBe("rules[0].slotTtl");
    expect(error.message).toContain("slotTtl applies to concurrency only");
  });

  it("rejects fast mode, saying why", () => {
    const error = errorFor([slots({ mode: "fast" })]);
    expect(error.field).toBe("rules[0].mode");
    expect(error.message).toContain('"concurrency" is strict-only: a slot comes back the moment its response ends');
  });

  it("rejects a limit over 1,000 slots, and a cost over the limit", () => {
    expect(only([slots({ limit: 1_000 })]).limit).toBe(1_000);
    expect(fieldFor({ algorithm: "concurrency", period: undefined, limit: 1_001 })).toBe("rules[0].limit");
    expect(fieldFor({ algorithm: "concurrency", period: undefined, limit: 3, cost: 4 })).toBe("rules[0].cost");
  });

  it("is described with its slotTtl and no period", () => {
    const described = describeRule(only([slots({ slotTtl: "90s" })]));
    expect(described).toMatchObject({ algorithm: "concurrency", slotTtl: "90s" });
    expect(described).not.toHaveProperty("period");
  });
});

describe("token-bucket warmup", () => {
  it("reads a warmup duration on a token bucket and shows it as written", () => {
    const parsed = only([rule({ algorithm: "token-bucket", warmup: "30s" })]);
    expect(parsed.warmupMs).toBe(30_000);
    expect(describeRule(parsed).warmup).toBe("30s");
    expect(describeRule(only([rule({ algorithm: "token-bucket" })]))).not.toHaveProperty("warmup");
  });

  it("names the rule and the field for a warmup that is not a duration", () => {
    const error = errorFor([rule({ algorithm: "token-bucket", warmup: "soon" })]);
    expect(error.field).toBe("rules[0].warmup");
    expect(error.message).toContain('rules[0] ("api").warmup: expected a duration like');
    expect(error.message).toContain('got "soon"');
  });

  it.each(["sliding-window", "fixed-window", "sliding-log", "gcra"])("rejects warmup on a %s", (algorithm) => {
    const error = errorFor([rule({ algorithm, warmup: "30s" })]);
    expect(error.field).toBe("rules[0].warmup");
    expect(error.message).toContain("warmup applies to token-bucket only");
  });

  it("rejects a warmup in fast mode, saying why", () => {
    const error = errorFor([rule({ algorithm: "token-bucket", warmup: "30s", mode: "fast" })]);
    expect(error.field).toBe("rules[0].warmup");
    expect(error.message).toContain("a warmup is strict-only");
    expect(error.message).toContain("only at the next sync");
  });

  it("rejects a warmup too long to count exactly, naming the warmup", () => {
    const error = errorFor([rule({ algorithm: "token-bucket", limit: 10 ** 9, period: "1s", warmup: "1d" })]);
    expect(error.field).toBe("rules[0].warmup");
    expect(error.message).toContain("use a shorter warmup");
  });
});
