// Property-based fuzzing in workerd: hostile requests and configurations never crash floodgate,
// every answer is a documented one, and API keys never leak.
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ADMIN_PREFIX, isAdminPath } from "../../src/admin/admin";
import { ConfigError } from "../../src/config/errors";
import { parseConfig } from "../../src/config/rules";
import type { KeyPart } from "../../src/config/types";
import { metrics } from "../../src/metrics/metrics";
import { buildKey, durableObjectName, MAX_KEY_BYTES, requestCost } from "../../src/routing/key";
import { canonicalKey, MISSING_PART } from "../../src/routing/key-text";
import { matchingRules } from "../../src/routing/match";
import { originLog, send } from "../helpers/worker";

// How many cases each property runs: about 33,000 in all, in about 35 s on a loaded 2-core machine. What costs is
// making Durable Objects (tens of ms each in workerd under vitest, and more with every object the
// run has made), so the Worker properties send hundreds of requests and make a few hundred
// objects, and the pure properties run thousands. Periods are an hour, so no object's cleanup
// alarm fires during the run. The Worker properties report their first counterexample as found
// (`endOnFailure`): shrinking one would cost a round of requests per step.
const RUNS = {
  /** batches of 1-3 concurrent requests through the Worker; about a third carry a new API key, so make a new object */
  workerRequests: 300,
  /** requests to the real origin */
  originRequests: 100,
  /** hostile requests through matching, key building and cost, without the Worker: each hashes an object name, about 2 ms */
  requestParts: 5_000,
  /** configurations through the parser */
  parser: 20_000,
  /** configurations through the Worker */
  workerConfigs: 600,
};

// ---------------------------------------------------------------------------------------------
// Requests

const TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const token = (maxLength: number) => fc.string({ unit: fc.constantFrom(...TOKEN_CHARS), minLength: 1, maxLength });
/** Characters a header value can carry without workerd's "non-ASCII" warning: ASCII less NUL, CR, LF. */
const asciiChar = fc.integer({ min: 1, max: 0x7f }).filter((c) => c !== 10 && c !== 13).map((c) => String.fromCharCode(c));
const ascii = (minLength: number, maxLength: number) => fc.string({ unit: asciiChar, minLength, maxLength });
const printable = (minLength: number, maxLength: number) => fc.string({ unit: "grapheme-ascii", minLength, maxLength });
/**
 * A long string: a short random run of `unit` repeated to a length in [minLength, maxLength].
 * Generating thousands of characters one by one would cost more than the requests themselves.
 */
const long = (unit: fc.Arbitrary<string>, minLength: number, maxLength: number) =>
  fc
    .tuple(fc.string({ unit, minLength: 1, maxLength: 12 }), fc.integer({ min: minLength, max: maxLength }))
    .map(([run, length]) => run.repeat(Math.ceil(length / run.length)).slice(0, length));

/** Standard methods, odd ones, and any token: workerd's Request refuses methods it does not know. */
const method = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS") },
  { weight: 2, arbitrary: fc.constantFrom("get", "Post", "pAtCh", "TRACE", "PROPFIND", "PURGE", "QUERY", "MKCOL", "LOCK", "REPORT", "SEARCH", "CONNECT", "TRACK", "M-SEARCH") },
  { weight: 1, arbitrary: token(24) },
);

const segment = fc.oneof(
  { weight: 4, arbitrary: fc.webSegment() },
  {
    weight: 3,
    arbitrary: fc.constantFrom("..", ".", "%2e%2e", "%2E%2e", "..%2f", "%2F", "%5C", "\\", "%00", "%", "%zz", "%%", "%c0%ae", "api", "__floodgate", "*", ";", "@", ":", "//", "?", "#"),
  },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 16 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 16 }) },
);
const path = fc.oneof(
  { weight: 12, arbitrary: fc.array(segment, { maxLength: 8 }).map((s) => `/${s.join("/")}`) },
  { weight: 2, arbitrary: fc.constantFrom("/__floodgate/metrics", "/__floodgate/rules", "/__floodgate/state", "/api/../__floodgate/rules") },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("/", "/api/"), long(fc.constantFrom("a", "/", "..", "%41", "é", "💥", "*"), 1_000, 6_000))
      .map(([prefix, rest]) => prefix + rest),
  },
);
const host = fc.constantFrom("floodgate.test", "api.floodgate.test", "API.Floodgate.TEST.", "floodgate.test:8787", "127.0.0.1", "[::1]:8443", "xn--bcher-kva.example");

/** Any Unicode (lone surrogates included): a query string carries it percent-encoded, silently. */
const anyText = (maxLength: number) =>
  fc.oneof(fc.string({ unit: "binary", maxLength }), fc.string({ unit: "grapheme", maxLength }), fc.string({ maxLength }));
const query = fc.oneof(
  { weight: 3, arbitrary: fc.constant("") },
  {
    weight: 4,
    arbitrary: fc
      .array(fc.tuple(fc.constantFrom("key", "key", "k", "KEY", "key "), anyText(60)), { maxLength: 4 })
      .map((pairs) => `?${new URLSearchParams(pairs).toString()}`),
  },
  { weight: 2, arbitrary: anyText(80).map((raw) => `?${raw}`) },
  { weight: 1, arbitrary: long(fc.constantFrom("key=", "&", "%", "%7C", "|", "#", "a"), 500, 4_000).map((raw) => `?${raw}`) },
);

/**
 * The API key: secret-shaped, very long, odd, empty or absent, and in `unicode` of 100 cases any
 * Unicode. workerd sends a non-ASCII header value as UTF-8 and prints a warning each time, so
 * Unicode keys are kept rare here; query parameters carry them silently.
 */
const apiKeyWith = (unicode: number) =>
  fc.oneof(
    { weight: 20, arbitrary: ascii(16, 120).map((s) => `sk_live_${s}`) },
    { weight: 5, arbitrary: long(asciiChar, 1_000, 9_000) },
    { weight: 10, arbitrary: fc.constantFrom("", " ", "#none", "a|b", "%7C", "%", "#sha256:00") },
    { weight: 65 - unicode, arbitrary: fc.constant(null) },
    { weight: unicode, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 40 }).filter((s) => !/[\0\r\n]/.test(s)) },
  );
const apiKey = apiKeyWith(0);
const costValue = fc.oneof(
  fc.integer({ min: 1, max: 40 }).map(String),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.constantFrom("0", "-1", "+1", "1.5", "1e3", " 7 ", "\t3\t", "0x10", "007", "9007199254740991", "9007199254740992", "", "1,2", "1;2"),
  ascii(0, 40),
);
const headerValue = fc.oneof(
  { weight: 6, arbitrary: ascii(0, 200) },
  { weight: 1, arbitrary: long(asciiChar, 2_000, 20_000) },
  { weight: 1, arbitrary: fc.string({ unit: fc.integer({ min: 1, max: 31 }).filter((c) => c !== 10 && c !== 13).map((c) => String.fromCharCode(c)), maxLength: 20 }) },
);
const headerName = fc.oneof(
  { weight: 3, arbitrary: token(40) },
  {
    weight: 2,
    arbitrary: fc.constantFrom("cookie", "cf-connecting-ip", "connection", "host", "content-length", "transfer-encoding", "x-forwarded-for", "authorization", "te", "upgrade", "keep-alive", "x-cost"),
  },
);
const cookie = fc
  .tuple(
    fc.array(fc.tuple(fc.oneof(fc.constantFrom("sid", "SID", " sid", "sid "), token(10)), fc.oneof(ascii(0, 40).filter((v) => !v.includes(";")), fc.constant('"quoted"'))), { maxLength: 4 }),
    fc.option(ascii(0, 60)),
  )
  .map(([pairs, junk]) => [...pairs.map(([name, value]) => `${name}=${value}`), ...(junk === null ? [] : [junk])].join("; "));
const clientIp = fc.option(
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom("192.0.2.1", "192.0.2.2", "2001:db8::1") },
    { weight: 1, arbitrary: fc.oneof(fc.ipV4(), fc.ipV6(), ascii(0, 40)) },
  ),
  { nil: null },
);
const bytes = fc
  .tuple(fc.uint8Array({ minLength: 1, maxLength: 32 }), fc.integer({ min: 0, max: 70_000 }))
  .map(([run, length]) => Uint8Array.from({ length }, (_, i) => run[i % run.length]!));
const body = fc.option(fc.oneof(anyText(200), bytes), { nil: null });

interface RequestSpec {
  method: string;
  url: string;
  headers: [string, string][];
  apiKey: string | null;
  cost: string | null;
  cookie: string | null;
  ip: string | null;
  authorization: string | null;
  body: string | Uint8Array | null;
}

const requestSpecWith = (unicodeKeys: number): fc.Arbitrary<RequestSpec> => fc.record({
  method,
  url: fc.tuple(host, path, query).map(([h, p, q]) => `http://${h}${p}${q}`),
  headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 6 }),
  apiKey: apiKeyWith(unicodeKeys),
  cost: fc.option(costValue, { nil: null }),
  cookie: fc.option(cookie, { nil: null }),
  ip: clientIp,
  authorization: fc.option(fc.oneof(ascii(0, 80).map((t) => `Bearer ${t}`), ascii(0, 80)), { nil: null }),
  body,
});
const requestSpec = requestSpecWith(0);

/**
 * The Request a client could send, or null when workerd refuses to build it (a method it does
 * not know, say): such a request never reaches a Worker.
 */
function toRequest(spec: RequestSpec): Request | null {
  const headers = new Headers();
  try {
    for (const [name, value] of spec.headers) headers.append(name, value);
    if (spec.apiKey !== null) headers.set("x-api-key", spec.apiKey);
    if (spec.cost !== null) headers.set("x-cost", spec.cost);
    if (spec.cookie !== null) headers.set("cookie", spec.cookie);
    if (spec.ip !== null) headers.set("cf-connecting-ip", spec.ip);
    if (spec.authorization !== null) headers.set("authorization", spec.authorization);
    const upper = spec.method.toUpperCase();
    const withBody = spec.body !== null && upper !== "GET" && upper !== "HEAD";
    return new Request(spec.url, { method: spec.method, headers, body: withBody ? spec.body : null });
  } catch (error) {
    if (error instanceof TypeError) return null;
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// What every answer must look like

interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  [member: string]: unknown;
}

/** Asserts the response is an RFC 9457 problem with the given status, and returns its body. */
async function expectProblem(response: Response, status: number): Promise<ProblemBody> {
  expect(response.status, recentLogs()).toBe(status);
  expect(response.headers.get("Content-Type")).toBe("application/problem+json");
  const problem = (await response.json()) as ProblemBody;
  expect(problem).toMatchObject({ type: expect.stringMatching(/^(about:blank|urn:floodgate:problem:[a-z-]+|https:\/\/iana\.org\/assignments\/http-problem-types#quota-exceeded)$/), title: expect.any(String), status, detail: expect.any(String) });
  expect(problem.title.length).toBeGreaterThan(0);
  expect(problem.detail.length).toBeGreaterThan(0);
  return problem;
}

/** A cost header the Worker must refuse with 400: anything but a positive decimal integer it can count exactly. */
function isBadCost(value: string | null): boolean {
  if (value === null) return false;
  const digits = /^[ \t]*([0-9]+)[ \t]*$/.exec(value)?.[1];
  return digits === undefined || !(Number(digits) >= 1 && Number(digits) <= Number.MAX_SAFE_INTEGER);
}

/** Every way a secret could be written into a header, a JSON body or a URL. */
function spellings(secret: string): string[] {
  const escaped = JSON.stringify(secret).slice(1, -1);
  try {
    return [secret, escaped, encodeURIComponent(secret)];
  } catch {
    return [secret, escaped]; // a lone surrogate has no URL form
  }
}

/** Fails when the secret appears in the text, in any spelling. */
function expectNoSecret(text: string, secret: string, where: string): void {
  for (const spelling of spellings(secret)) {
    if (text.includes(spelling)) expect.fail(`the API key ${JSON.stringify(secret.slice(0, 40))}… appears in ${where}`);
  }
}

/** An API key long enough that finding it anywhere cannot be chance. */
const isSecret = (key: string | null): key is string => key !== null && key.trim().length >= 16;

// ---------------------------------------------------------------------------------------------
// Console capture: floodgate must log no secret and hit no unexpected error.

/** What floodgate wrote to the console during the current test, and during the whole file. */
let logged: string[] = [];
const everLogged: string[] = [];
beforeEach(() => {
  logged = [];
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      const line = args.map((a) => (a instanceof Error ? `${a.name}: ${a.message}\n${a.stack}` : typeof a === "string" ? a : JSON.stringify(a))).join(" ");
      logged.push(line);
      everLogged.push(line);
    });
  }
});
afterEach(() => {
  vi.restoreAllMocks();
});

const internalErrors = () => metrics.value("floodgate_errors_total", { kind: "internal" });
/** The last lines floodgate logged, to explain a failed expectation. */
const recentLogs = () => `floodgate logged:\n${logged.slice(-5).join("\n") || "(nothing)"}`;

// ---------------------------------------------------------------------------------------------

describe("hostile requests through the Worker", () => {
  const ADMIN_TOKEN = "fuzz-admin-token-0123456789abcdef";
  const rules = [
    // strict: a new object for each new API key; #none for the requests without one
    { name: "fz-api-key", key: "header:x-api-key", limit: 3, period: "1h", onError: "deny" },
    // every request, keyed by parts built from hostile input, with few distinct values
    { name: "fz-method-host", key: ["method", "host"], limit: 5_000, period: "1h" },
    // fast mode, keyed by a query parameter and a cookie (on one host: new objects are slow to make)
    { name: "fz-query-cookie", match: { host: "api.floodgate.test" }, key: ["query:key", "cookie:sid"], mode: "fast", limit: 4, period: "1h", sync: "200ms" },
    // a token bucket charged by a cost header, on methods that carry bodies
    { name: "fz-cost", match: { methods: ["POST", "PUT", "PATCH", "DELETE"] }, key: "ip", algorithm: "token-bucket", limit: 20, period: "1h", burst: 30, cost: "header:x-cost" },
    // a glob that hostile paths must not break
    { name: "fz-dots", match: { path: "/*..*" }, key: "path", limit: 2, period: "1h" },
  ];
  const ruleNames = rules.map((r) => r.name);
  const COST_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);
  const bindings = { rules, ORIGIN_URL: "demo", ADMIN_TOKEN };
  const secrets = new Set<string>();
  let sent = 0;
  let refused = 0;

  /** Checks one answer against the contract; returns nothing, fails the property on any breach. */
  async function checkAnswer(request: Request, response: Response): Promise<void> {
    const key = request.headers.get("x-api-key");
    const secret = isSecret(key) ? key : null;
    if (secret) {
      secrets.add(secret);
      response.headers.forEach((value, name) => expectNoSecret(`${name}: ${value}`, secret, "a response header"));
    }
    const path = new URL(request.url).pathname;
    const method = request.method.toUpperCase();
    if (path === ADMIN_PREFIX && (method === "GET" || method === "HEAD")) {
      // The status page is served to anyone and holds no data: nothing of a request shows in it.
      expect(response.status).toBe(200);
      if (secret) expectNoSecret(await response.text(), secret, "the status page");
      return;
    }
    if (isAdminPath(path)) {
      // The admin API, its prefix however written: whatever was sent, no token is the right one. A HEAD is answered as GET, without the body.
      if (method === "HEAD") {
        expect(response.status, recentLogs()).toBe(401);
        expect(response.headers.get("Content-Type")).toBe("application/problem+json");
        expect(await response.text()).toBe("");
      } else {
        await expectProblem(response, 401);
      }
      return;
    }
    const badCost = COST_METHODS.has(method) && isBadCost(request.headers.get("x-cost"));
    if (badCost) {
      const problem = await expectProblem(response, 400);
      expect(problem.detail).toContain("fz-cost");
      if (secret) expectNoSecret(JSON.stringify(problem), secret, "a 400 problem");
      return;
    }
    expect([200, 429], recentLogs()).toContain(response.status);
    if (response.status === 429) {
      const problem = await expectProblem(response, 429);
      expect(problem["violated-policies"]).toEqual(expect.arrayContaining([expect.any(String)]));
      for (const name of problem["violated-policies"] as string[]) expect(ruleNames).toContain(name);
      expect(Number(response.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
      if (secret) expectNoSecret(JSON.stringify(problem), secret, "a 429 problem");
      return;
    }
    expect(response.headers.get("Content-Type")).toBe("application/json");
    expect(response.headers.get("RateLimit-Policy")).toMatch(/^"fz-[a-z-]+";q=\d+;w=\d+$/);
    await response.arrayBuffer();
  }

  it("answers any request with 200, 400, 401 or 429, never an error, problems as problem+json", async () => {
    const errorsBefore = internalErrors();
    await fc.assert(
      fc.asyncProperty(fc.array(requestSpecWith(1), { minLength: 1, maxLength: 3 }), async (specs) => {
        await Promise.all(
          specs.map(async (spec) => {
            const request = toRequest(spec);
            if (request === null) return void refused++;
            sent++;
            // A copy for the checks: the Worker consumes the request's body.
            const probe = new Request(request.url, { method: request.method, headers: request.headers });
            await checkAnswer(probe, await send(request, bindings));
          }),
        );
      }),
      { numRuns: RUNS.workerRequests, endOnFailure: true },
    );
    // Most generated requests are ones workerd accepts: the property is not vacuous.
    expect(sent).toBeGreaterThan(RUNS.workerRequests);
    expect(refused).toBeLessThan(sent / 2);
    expect(internalErrors()).toBe(errorsBefore);
    expect(logged.filter((line) => line.includes("unexpected error"))).toEqual([]);
  }, 60_000);

  it("never shows an API key used as a key in the metrics or the logs", async () => {
    // The test above used many; a few more here (allowed, then denied) so this test stands alone.
    await fc.assert(
      fc.asyncProperty(apiKey.filter(isSecret), fc.constantFrom("/", "/api/x", "/a/../b"), async (key, where) => {
        const request = () => new Request(`http://floodgate.test${where}`, { headers: { "x-api-key": key, "CF-Connecting-IP": "192.0.2.7" } });
        secrets.add(request().headers.get("x-api-key")!);
        for (let i = 0; i < 4; i++) await send(request(), bindings);
      }),
      { numRuns: 20 },
    );
    const response = await send(new Request(`http://floodgate.test${ADMIN_PREFIX}metrics`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } }), bindings);
    expect(response.status).toBe(200);
    const exposition = await response.text();
    expect(exposition).toContain('floodgate_decisions_total{decision="denied",rule="fz-api-key"}');
    const logs = everLogged.join("\n");
    for (const secret of secrets) {
      expectNoSecret(exposition, secret, "the metrics");
      expectNoSecret(logs, secret, "the logs");
    }
    expect(secrets.size).toBeGreaterThanOrEqual(20);
  }, 60_000);
});

/**
 * A real origin may close a kept-alive connection just as the runtime reuses it (Node closes idle
 * ones after 5 s): floodgate then answers 502, and must, since the request may have arrived. The
 * properties with the real origin allow that answer, rarely.
 */
const MAX_LOST_CONNECTIONS = 3;

/** Any query but one that instructs the test origin (`?h=`, `?status=`): the origin answers those as asked, or 400. */
const originQuery = query.filter((q) => !["h", "status"].some((name) => new URLSearchParams(q).has(name)));

async function expectBadGateway(response: Response): Promise<void> {
  const problem = await expectProblem(response, 502);
  expect(problem.type).toBe("about:blank");
}

describe("hostile requests to a real origin", () => {
  it("proxies any allowed request to the origin exactly once and answers its 200", async () => {
    const rules = [{ name: "fz-origin", key: "ip", limit: 1_000, period: "1h" }];
    const tag = "fuzz-origin";
    let proxied = 0;
    let lost = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"),
        fc.array(segment, { maxLength: 5 }),
        originQuery,
        // Node's HTTP parser, like most origins', answers 400 to control characters in a header.
        fc.array(fc.tuple(fc.oneof(token(30), fc.constantFrom("connection", "keep-alive", "te", "host")), printable(0, 200)), { maxLength: 6 }),
        body,
        async (requestMethod, segments, q, headers, payload) => {
          const withBody = payload !== null && requestMethod !== "GET";
          // Five levels under the tag, so that up to five `..` segments cannot climb out of it.
          const url = `http://floodgate.test/${tag}/1/2/3/4/5/${segments.join("/")}${q}`;
          const request = new Request(url, { method: requestMethod, headers: [...headers, ["CF-Connecting-IP", "192.0.2.200"]], body: withBody ? payload : null });
          const response = await send(request, { rules });
          if (response.status === 502) return void (lost++, await expectBadGateway(response));
          expect(response.status, recentLogs()).toBe(200);
          expect(response.headers.get("x-origin")).toBe("yes");
          expect(response.headers.get("RateLimit")).toMatch(/^"fz-origin";r=\d+;t=\d+$/);
          await response.arrayBuffer();
          proxied++;
        },
      ),
      { numRuns: RUNS.originRequests, endOnFailure: true },
    );
    expect(lost).toBeLessThanOrEqual(MAX_LOST_CONNECTIONS);
    // Each answered one arrived exactly once; a lost connection may or may not have delivered its request.
    const arrived = (await originLog(tag)).length;
    expect(arrived).toBeGreaterThanOrEqual(proxied);
    expect(arrived).toBeLessThanOrEqual(proxied + lost);
  }, 60_000);
});

describe("hostile requests through matching, keys and cost", () => {
  const parts: KeyPart[] = [
    { source: "ip" },
    { source: "header", name: "x-api-key" },
    { source: "query", name: "key" },
    { source: "cookie", name: "sid" },
    { source: "path" },
    { source: "method" },
    { source: "host" },
    { source: "global" },
  ];
  const globRules = parseConfig([
    { name: "a", match: { path: "/api/*" }, limit: 1, period: 1 },
    { name: "b", match: { path: "/*..*", methods: ["GET", "post"] }, limit: 1, period: 1 },
    { name: "c", match: { path: "/*a*a*a*b", host: "api.floodgate.test" }, limit: 1, period: 1 },
    { name: "d", match: { host: "floodgate.test:8787" }, limit: 1, period: 1 },
  ]).rules;
  const maxNameBytes = 64 + 1 + MAX_KEY_BYTES;

  it("takes back, as the admin API's key, every key it builds: canonicalKey(buildKey(request)) is the key itself", async () => {
    await fc.assert(
      fc.property(requestSpec, fc.subarray(parts, { minLength: 1 }), fc.integer({ min: 32, max: 128 }), (spec, keyParts, ipv6Prefix) => {
        const request = toRequest(spec);
        if (request === null) return;
        const rule = { key: keyParts, ipv6Prefix, newKeysPerSecond: null };
        const key = buildKey(rule, request);
        expect(canonicalKey(rule, key)).toBe(key);
      }),
      { numRuns: 2_000 },
    );
  });

  it("builds a key, an object name of bounded size and a cost for any request, and never throws", async () => {
    let built = 0;
    await fc.assert(
      fc.asyncProperty(requestSpec, fc.subarray(parts, { minLength: 1 }), fc.integer({ min: 32, max: 128 }), async (spec, keyParts, ipv6Prefix) => {
        const request = toRequest(spec);
        if (request === null) return;
        built++;
        const url = new URL(request.url);
        matchingRules(globRules, { method: request.method, path: url.pathname, host: url.host });
        const key = buildKey({ key: keyParts, ipv6Prefix }, request);
        expect(key.split("|")).toHaveLength(keyParts.length);
        // The ip part (first when present) is #none, a dotted quad, or an IPv6 network under the rule's prefix.
        if (keyParts[0]!.source === "ip") {
          const ipPart = key.split("|")[0]!;
          const shaped = ipPart === MISSING_PART || /^\d{1,3}(\.\d{1,3}){3}$/.test(ipPart) || new RegExp(`^[0-9a-f:]{2,39}/${ipv6Prefix}$`).test(ipPart);
          expect(shaped, ipPart).toBe(true);
        }
        const name = await durableObjectName("r".repeat(64), key);
        expect(new TextEncoder().encode(name).length).toBeLessThanOrEqual(maxNameBytes);
        const cost = requestCost({ header: "x-cost" }, request);
        expect("units" in cost ? Number.isSafeInteger(cost.units) && cost.units >= 1 : isBadCost(request.headers.get("x-cost"))).toBe(true);
      }),
      { numRuns: RUNS.requestParts },
    );
    expect(built).toBeGreaterThan(RUNS.requestParts / 2);
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------
// Configurations

/** Valid rules that between them use every field. */
const VALID_RULES: Record<string, unknown>[] = [
  { name: "minimal", limit: 10, period: "1h" },
  { name: "api-per-key", match: { path: "/api/*" }, key: "header:x-api-key", algorithm: "sliding-window", limit: 1000, period: "1h", mode: "fast", sync: "500ms" },
  { name: "login", match: { path: "/login", methods: ["POST"] }, key: "ip", algorithm: "token-bucket", limit: 5, period: 60, burst: 8, onError: "deny", timeout: "250ms" },
  { name: "uploads", match: { path: "/upload/*", host: "api.example.com:8443" }, key: ["ip", "header:x-tenant"], limit: 100_000, period: "1d", cost: "header:x-cost" },
  { name: "buckets_6", key: ["cookie:session", "query:k", "path", "method", "host"], limit: 60, period: 0.5, buckets: 6, cost: 3, onError: "allow" },
  { name: "global", key: "global", limit: 1, period: "1h", mode: "strict", onError: "local" },
];
const FIELDS = ["name", "match", "key", "algorithm", "limit", "period", "burst", "buckets", "cost", "mode", "sync", "onError", "timeout"];

/** Values that are nearly right, or wrong in instructive ways. */
const plausible = fc.oneof(
  fc.constantFrom(
    0, -1, 1, 1.5, 0.0001, 60, 2 ** 53, 2 ** 53 - 1, 1e21, -0, "", " ", "1m", "10x", "1e3s", "0s", "500ms", "9007199254740993ms", "ten",
    "sliding-window", "token-bucket", "fixed-window", "strict", "fast", "local", "allow", "deny", "ip", "global", "header:", "header:x a", "header:x-api-key",
    "query:", "query:k", "cookie:a b", "cookie:s", "path", "/api/*", "*", "api/*", "/a?b", "/a b", "api.example.com", "a..b", "h:99999", "GET", "G T",
    null, true, [], {}, ["ip", "ip"], ["GET", ""], ["ip", "header:x"], { path: "/x", methods: ["GET"] }, { host: "" }, { extra: 1 }, "\u0000", "💥",
  ),
  fc.jsonValue({ maxDepth: 2 }),
  fc.integer({ min: -5, max: 2 ** 53 }),
  fc.string({ unit: "binary", maxLength: 20 }),
);
type Mutation = (rule: Record<string, unknown>) => Record<string, unknown>;
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.tuple(fc.constantFrom(...FIELDS), plausible).map(([field, value]): Mutation => (r) => ({ ...r, [field]: value })),
  fc.constantFrom(...FIELDS).map((field): Mutation => (r) => Object.fromEntries(Object.entries(r).filter(([k]) => k !== field))),
  fc.tuple(fc.constantFrom("path", "methods", "host", "extra"), plausible).map(([field, value]): Mutation => (r) => ({ ...r, match: { ...(typeof r.match === "object" ? r.match : {}), [field]: value } })),
  fc.tuple(fc.oneof(fc.constantFrom("__proto__", "constructor", "toString", "Limit", "rules", ""), fc.string({ maxLength: 10 })), plausible).map(([field, value]): Mutation => (r) => {
    const copy = { ...r };
    Object.defineProperty(copy, field, { value, enumerable: true, configurable: true, writable: true });
    return copy;
  }),
);
const mutatedRule = fc
  .tuple(fc.constantFrom(...VALID_RULES), fc.array(mutation, { maxLength: 3 }))
  .map(([valid, mutations]) => mutations.reduce((r, m) => m(r), { ...valid }));
/** A configuration as a binding may hold it: a list, {"rules": list}, either as JSON text, sometimes damaged. */
const configuration = fc.oneof(
  { weight: 5, arbitrary: fc.array(mutatedRule, { maxLength: 3 }) },
  { weight: 2, arbitrary: fc.array(mutatedRule, { maxLength: 3 }).map((rules) => ({ rules })) },
  { weight: 4, arbitrary: fc.array(mutatedRule, { maxLength: 3 }).map((rules) => JSON.stringify(rules)) },
  { weight: 1, arbitrary: fc.tuple(fc.array(mutatedRule, { minLength: 1, maxLength: 3 }), fc.nat()).map(([rules, cut]) => { const text = JSON.stringify({ rules }); return text.slice(0, cut % text.length); }) },
  { weight: 2, arbitrary: fc.jsonValue() },
  { weight: 1, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
);

/** The outcome of parsing: the rules, or the ConfigError; anything else thrown fails the test. */
function parsed(raw: unknown): { ok: true; rules: ReturnType<typeof parseConfig>["rules"] } | { ok: false; error: ConfigError } {
  try {
    return { ok: true, rules: parseConfig(raw).rules };
  } catch (error) {
    if (error instanceof ConfigError) return { ok: false, error };
    throw error;
  }
}

const IDENTIFIER = "[A-Za-z_$][A-Za-z0-9_$]*";
/** `rules[1].period`, `rules[0].match.methods[2]`, `rules[0]["odd key"]`, `rules[0].match["x y"]`, or a top-level name. */
const FIELD_PATH = new RegExp(`^(RATE_LIMIT_RULES|rules|rules\\[\\d+\\](\\.${IDENTIFIER}(\\[\\d+\\])?|\\[".*"\\]|\\.match(\\.${IDENTIFIER}(\\[\\d+\\])?|\\[".*"\\]))?)$`, "s");

describe("configurations through the parser", () => {
  it("parses every rule of the valid set", () => {
    expect(parseConfig(VALID_RULES).rules.map((r) => r.name)).toEqual(VALID_RULES.map((r) => r.name));
  });

  it("either accepts a configuration with sound rules or names the field at fault", () => {
    fc.assert(
      fc.property(configuration, (raw) => {
        const outcome = parsed(raw);
        if (!outcome.ok) {
          const { field, rule, message } = outcome.error;
          expect(field).toMatch(FIELD_PATH);
          // The message starts with the field, the rule's name after its index when it has one.
          const located = typeof rule === "string" ? field.replace(/^rules\[\d+\]/, (at) => `${at} (${JSON.stringify(rule)})`) : field;
          expect(message.startsWith(`${located}: `)).toBe(true);
          return;
        }
        const names = outcome.rules.map((r) => r.name);
        expect(new Set(names).size).toBe(names.length);
        for (const rule of outcome.rules) {
          expect(rule.name).toMatch(/^[a-z0-9_-]{1,64}$/);
          for (const n of [rule.limit, rule.periodMs, rule.burst, rule.buckets, rule.syncMs, rule.timeoutMs]) expect(Number.isSafeInteger(n) && n >= 1).toBe(true);
          expect(Math.max(rule.limit, rule.burst) * rule.periodMs).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER);
          if ("units" in rule.cost) expect(rule.cost.units).toBeLessThanOrEqual(rule.algorithm === "token-bucket" ? rule.burst : rule.limit);
          expect(rule.key.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: RUNS.parser },
    );
  });

  it("rejects an unknown field in any rule, naming it", () => {
    const unknown = fc.string({ minLength: 1, maxLength: 12 }).filter((f) => !FIELDS.includes(f));
    fc.assert(
      fc.property(fc.constantFrom(...VALID_RULES), unknown, fc.jsonValue({ maxDepth: 1 }), (valid, field, value) => {
        const outcome = parsed([{ ...valid, [field]: value }]);
        expect(outcome.ok).toBe(false);
        if (!outcome.ok) expect(outcome.error.field).toBe(new RegExp(`^${IDENTIFIER}$`).test(field) ? `rules[0].${field}` : `rules[0][${JSON.stringify(field)}]`);
      }),
      { numRuns: RUNS.parser / 4 },
    );
  });

  it("rejects a rule without a required field, naming the field", () => {
    fc.assert(
      fc.property(fc.constantFrom(...VALID_RULES), fc.constantFrom("name", "limit", "period"), (valid, field) => {
        const { [field]: _dropped, ...rest } = valid;
        const outcome = parsed({ rules: [rest] });
        expect(outcome.ok).toBe(false);
        if (!outcome.ok) expect(outcome.error.field).toBe(`rules[0].${field}`);
      }),
      { numRuns: 200 },
    );
  });
});

describe("configurations through the Worker", () => {
  it("answers 500 problem+json naming the field for an invalid configuration and never contacts the origin, and never 500 for a valid one", async () => {
    const tag = "fuzz-config";
    let invalid = 0;
    let valid = 0;
    let proxied = 0;
    let lost = 0;
    const errorsBefore = internalErrors();
    await fc.assert(
      fc.asyncProperty(configuration, fc.constantFrom("GET", "POST"), fc.constantFrom("/", "/api/x", "/login", "/upload/a"), async (raw, requestMethod, where) => {
        const outcome = parsed(raw);
        const request = new Request(`http://api.example.com:8443/${tag}${where}`, { method: requestMethod, headers: { "CF-Connecting-IP": "192.0.2.9", "x-api-key": "k", "x-cost": "1" } });
        const response = await send(request, { RATE_LIMIT_RULES: raw });
        if (!outcome.ok) {
          invalid++;
          const problem = await expectProblem(response, 500);
          expect(problem.type).toBe("urn:floodgate:problem:invalid-config");
          expect(problem.detail).toBe(outcome.error.message);
          return;
        }
        valid++;
        if (response.status === 502) return void (lost++, await expectBadGateway(response));
        // A valid rule may read its cost from a header the request sends as no number (a mutated cost of "header:x-api-key"): the contract's 400.
        if (response.status === 400) return void expect((await expectProblem(response, 400)).detail).toMatch(/^rule "[^"]+": header [^:]+: expected /);
        expect([200, 429], recentLogs()).toContain(response.status);
        if (response.status === 429) await expectProblem(response, 429);
        else proxied++;
        await response.arrayBuffer().catch(() => undefined);
      }),
      { numRuns: RUNS.workerConfigs, endOnFailure: true },
    );
    expect(valid).toBeGreaterThan(RUNS.workerConfigs / 10);
    expect(invalid).toBeGreaterThan(RUNS.workerConfigs / 10);
    expect(internalErrors()).toBe(errorsBefore);
    expect(lost).toBeLessThanOrEqual(MAX_LOST_CONNECTIONS);
    // Exactly the admitted requests reached the origin: none under an invalid configuration.
    const arrived = (await originLog(tag)).length;
    expect(arrived).toBeGreaterThanOrEqual(proxied);
    expect(arrived).toBeLessThanOrEqual(proxied + lost);
  }, 120_000);

  it("answers 500 problem+json for an invalid ORIGIN_URL or FAST_MAX_KEYS, and never proxies", async () => {
    const tag = "fuzz-origin-url";
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom("", "ftp://x.test", "not a url", "https://u:p@x.test", "https://x.test/?q", "https://x.test/#f", "//x.test", "http:"), fc.string({ maxLength: 30 }).filter((s) => s !== "demo" && !/^https?:\/\/[^?#@]+$/.test(s))),
        async (origin) => {
          const response = await send(new Request(`http://floodgate.test/${tag}/x`), { ORIGIN_URL: origin, rules: VALID_RULES });
          const problem = await expectProblem(response, 500);
          expect(problem.detail).toMatch(/^ORIGIN_URL: /);
        },
      ),
      { numRuns: 100 },
    );
    const maxKeys = fc.oneof(fc.constantFrom("0", "-1", "1.5", "abc", " 1", "1e3", "99999999999999999999"), ascii(1, 10).filter((s) => !/^[0-9]+$/.test(s) || Number(s) < 1));
    await fc.assert(
      fc.asyncProperty(maxKeys, async (value) => {
        const response = await send(new Request(`http://floodgate.test/${tag}/y`), { FAST_MAX_KEYS: value, ORIGIN_URL: "demo", rules: VALID_RULES });
        const problem = await expectProblem(response, 500);
        expect(problem.detail).toMatch(/^FAST_MAX_KEYS: /);
      }),
      { numRuns: 100 },
    );
    expect(await originLog(tag)).toEqual([]);
  }, 60_000);
});
