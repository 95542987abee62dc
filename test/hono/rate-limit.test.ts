// The Hono middleware in a Hono app, with the real RateLimiter object: the limit, the proxy's 429, c.get("rateLimit"), and bad keys.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { Hono } from "hono";
import { upgradeWebSocket } from "hono/cloudflare-workers";
import { HTTPException } from "hono/http-exception";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/env";
import { rateLimit, type LimiterRule, type LimitResult, type RateLimitOptions } from "../../src/hono";
import { metrics } from "../../src/metrics/metrics";
import { send } from "../helpers/worker";
import { limiter } from "../../src/lib";

type App = { Bindings: Env; Variables: { rateLimit: LimitResult } };

function app(options: Partial<RateLimitOptions> & Pick<RateLimitOptions, "rule">) {
  const hono = new Hono<App>();
  hono.use("/api/*", rateLimit({ binding: "LIMITER", key: (c) => c.req.header("x-api-key"), ...options }));
  hono.get("/api/:id", (c) => c.json({ id: c.req.param("id"), rateLimit: c.get("rateLimit") }));
  return hono;
}

async function get(hono: Hono<App>, path: string, headers: Record<string, string> = {}, method = "GET"): Promise<Response> {
  const ctx = createExecutionContext();
  // What the request left to waitUntil lands before its answer is looked at, or its failure.
  const response = await Promise.resolve(hono.request(path, { method, headers }, env, ctx)).finally(() => waitOnExecutionContext(ctx));
  return response;
}

describe("rateLimit (Hono middleware)", () => {
  it("admits exactly the limit, concurrently, and exposes the result at c.get('rateLimit')", async () => {
    const hono = app({ rule: { name: "hono-exact", limit: 4, period: "1h" } });
    const responses = await Promise.all(Array.from({ length: 12 }, (_, i) => get(hono, `/api/${i}`, { "x-api-key": "k-exact" })));

    expect(responses.filter((r) => r.status === 200)).toHaveLength(4);
    const body = (await responses.find((r) => r.status === 200)!.json()) as { rateLimit: LimitResult };
    expect(body.rateLimit).toMatchObject({ success: true, limit: 4, rule: "hono-exact" });
  });

  it("lets the handler charge what the request really cost, once known, through c.get('rateLimit')", async () => {
    const hono = new Hono<App>();
    hono.use("/llm/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-tokens", limit: 1_000, period: "1h" }, key: (c) => c.req.header("x-api-key") }));
    hono.post("/llm/complete", async (c) => {
      const used = Number(c.req.header("x-tokens-used"));
      await c.get("rateLimit").charge!(used - 1);
      return c.json({ used });
    });
    const post = (tokens: number) => hono.request("/llm/complete", { method: "POST", headers: { "x-api-key": "k-tokens", "x-tokens-used": String(tokens) } }, env, createExecutionContext());

    expect((await post(600)).status).toBe(200);
    expect((await post(600)).status).toBe(200);
    const over = await post(1);
    expect(over.status).toBe(429);
    expect(over.headers.get("RateLimit")).toMatch(/^"hono-tokens";r=0;t=\d+$/);
  });

  it("charges a rule's responseCost from the handler's response header", async () => {
    const hono = new Hono<App>();
    hono.use("/metered/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-metered", limit: 100, period: "1h", responseCost: "header:x-units" }, key: (c) => c.req.header("x-api-key") }));
    hono.get("/metered/:units", (c) => c.text("ok", 200, { "x-units": c.req.param("units") }));
    const statuses = [];
    for (const units of [70, 40, 1]) statuses.push((await get(hono, `/metered/${units}`, { "x-api-key": "k-metered" })).status);

    expect(statuses).toEqual([200, 200, 429]);
  });

  it("reads responseCost as what the request cost in all, counting what the handler charged already", async () => {
    const hono = new Hono<App>();
    hono.use("/both/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-both", limit: 100, period: "1h", responseCost: "header:x-units" }, key: (c) => c.req.header("x-api-key") }));
    hono.get("/both/:units", async (c) => {
      await c.get("rateLimit").charge!(Number(c.req.param("units")) - 1);
      return c.text("ok", 200, { "x-units": c.req.param("units") });
    });
    await get(hono, "/both/60", { "x-api-key": "k-both" });
    const limiterOf = limiter((env as unknown as Env).LIMITER, { name: "hono-both", limit: 100, period: "1h" });
    expect((await limiterOf.peek("k-both")).remaining).toBe(40);
  });

  it("gives back a charge the handler left on its way when the rule does not count the response", async () => {
    const hono = new Hono<App>();
    hono.use("/skipped/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-skipped", limit: 100, period: "1h" }, key: () => "k-skipped", skipSuccessfulRequests: true }));
    hono.get("/skipped/x", (c) => {
      c.executionCtx.waitUntil(c.get("rateLimit").charge!(50));
      return c.text("ok");
    });
    await get(hono, "/skipped/x");
    const limiterOf = limiter((env as unknown as Env).LIMITER, { name: "hono-skipped", limit: 100, period: "1h" });
    expect((await limiterOf.peek("k-skipped")).remaining).toBe(100);
  });

  it("answers the 429 with the proxy's problem+json and headers", async () => {
    const hono = app({ rule: { name: "hono-same", limit: 1, period: "1m" } });
    await get(hono, "/api/a", { "x-api-key": "k-same" });
    const mine = await get(hono, "/api/b", { "x-api-key": "k-same" });
    const rules = [{ name: "hono-same", key: "header:x-api-key", limit: 1, period: "1m" }];
    await send(new Request("http://floodgate.test/hono-proxy/a", { headers: { "x-api-key": "k-proxy" } }), { rules });
    const proxy = await send(new Request("http://floodgate.test/hono-proxy/b", { headers: { "x-api-key": "k-proxy" } }), { rules });

    expect(mine.status).toBe(429);
    expect([...mine.headers.keys()].sort()).toEqual([...proxy.headers.keys()].sort());
    expect(mine.headers.get("RateLimit-Policy")).toBe(proxy.headers.get("RateLimit-Policy"));
    const [a, b] = (await Promise.all([mine.json(), proxy.json()])) as Record<string, unknown>[];
    expect(a).toEqual({ ...b!, detail: a!.detail });
    expect(a!.detail).toMatch(/^Rate limit exceeded for hono-same; retry in \d+ s\.$/);
  });

  it("answers a denial with the rule's denyResponse, as the proxy does", async () => {
    const denyResponse = { status: 503, body: '{"error": "slow down"}', contentType: "application/json" };
    const hono = app({ rule: { name: "hono-own", limit: 1, period: "1m", denyResponse } });
    await get(hono, "/api/a", { "x-api-key": "k-own" });
    const denied = await get(hono, "/api/b", { "x-api-key": "k-own" });

    expect([denied.status, denied.headers.get("Content-Type"), await denied.text()]).toEqual([503, "application/json", '{"error": "slow down"}']);
    expect(denied.headers.get("RateLimit")).toBe(`"hono-own";r=0;t=${denied.headers.get("Retry-After")}`);
  });

  it("adds the rate-limit headers to an allowed response", async () => {
    const response = await get(app({ rule: { name: "hono-headers", limit: 5, period: "1m" } }), "/api/x", { "x-api-key": "k-h" });
    expect(response.headers.get("RateLimit-Policy")).toBe('"hono-headers";q=5;w=60');
    expect(response.headers.get("X-RateLimit-Remaining")).toBe("4");
  });

  it("reads a header cost from each request as the proxy does: absent costs 1, malformed gets the 400", async () => {
    const hono = app({ rule: { name: "hono-cost", limit: 10, period: "1m", cost: "header:x-cost" } });
    const costly = await get(hono, "/api/a", { "x-api-key": "k-cost", "x-cost": "4" });
    const plain = await get(hono, "/api/b", { "x-api-key": "k-cost" });
    const bad = await get(hono, "/api/c", { "x-api-key": "k-cost", "x-cost": "-2" });

    expect([costly.headers.get("X-RateLimit-Remaining"), plain.headers.get("X-RateLimit-Remaining")]).toEqual(["6", "5"]);
    expect(bad.status).toBe(400);
    expect(bad.headers.get("Content-Type")).toBe("application/problem+json");
    expect(((await bad.json()) as { detail: string }).detail).toBe('rule "hono-cost": header x-cost: expected a positive integer, got "-2"');
  });

  it("counts a malformed cost's 400 as the rule's denial, as the proxy does", async () => {
    const hono = app({ rule: { name: "hono-cost-count", limit: 10, period: "1m", cost: "header:x-cost" } });
    const denied = () => metrics.value("floodgate_decisions_total", { rule: "hono-cost-count", decision: "denied" });
    const before = denied();
    expect((await get(hono, "/api/a", { "x-api-key": "k-cost-count", "x-cost": "abc" })).status).toBe(400);
    expect(denied() - before).toBe(1);
  });

  it("leaves a 429 from a rateLimit further in, or the handler's own Retry-After answer, with its own headers", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-outer", limit: 100, period: "1m" }, key: () => "k-nested" }));
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-inner", limit: 1, period: "1m" }, key: () => "k-nested" }));
    hono.get("/api/busy", (c) => c.text("busy", 503, { "Retry-After": "30" }));
    hono.get("/api/:id", (c) => c.text("ok"));
    await get(hono, "/api/a");
    const denied = await get(hono, "/api/b");
    expect(denied.status).toBe(429);
    expect(denied.headers.get("RateLimit")).toMatch(/^"hono-inner";r=0;t=\d+$/);
    expect(denied.headers.get("RateLimit")).toBe(`"hono-inner";r=0;t=${denied.headers.get("Retry-After")}`);
    const busy = await get(new Hono<App>().use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-busy", limit: 5, period: "1m" }, key: () => "k" })).get("/api/busy", (c) => c.text("busy", 503, { "Retry-After": "30" })), "/api/busy");
    expect([busy.status, busy.headers.get("Retry-After"), busy.headers.get("RateLimit")]).toEqual([503, "30", null]);
  });

  it("never denies under a dry-run rule: the handler runs, with no header, and c.get('rateLimit') says dry-run", async () => {
    const hono = app({ rule: { name: "hono-dry", limit: 1, period: "1m", cost: "header:x-cost", dryRun: true } });
    await get(hono, "/api/a", { "x-api-key": "k-dry" });
    const over = await get(hono, "/api/b", { "x-api-key": "k-dry" });
    const malformed = await get(hono, "/api/c", { "x-api-key": "k-dry", "x-cost": "-1" });
    expect([over.status, malformed.status]).toEqual([200, 200]);
    expect(over.headers.get("RateLimit")).toBeNull();
    expect(((await over.json()) as { rateLimit: LimitResult }).rateLimit).toMatchObject({ success: true, retryAfter: 0, reason: "dry-run", remaining: 0 });
  });

  it("shows the most restrictive of stacked rateLimits, and gives back the outer one's units when an inner one denies", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-stack-outer", limit: 10, period: "1m" }, key: () => "k-stack" }));
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-stack-inner", limit: 2, period: "1m" }, key: () => "k-stack" }));
    hono.get("/api/:id", (c) => c.text("ok"));
    const responses = [];
    for (let i = 0; i < 4; i++) responses.push(await get(hono, `/api/${i}`));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 429, 429]);
    expect(responses[0]!.headers.get("RateLimit")).toMatch(/^"hono-stack-inner";r=1;/);
    expect(responses[3]!.headers.get("RateLimit")).toMatch(/^"hono-stack-inner";r=0;t=\d+$/);
    const outer = limiter((env as unknown as Env).LIMITER, { name: "hono-stack-outer", limit: 10, period: "1m" });
    expect((await outer.peek("k-stack")).remaining).toBe(8);
  });

  it("shows the fewest units left of three stacked rateLimits, and gives units back when an inner one answers a malformed cost", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-three-outer", limit: 20, period: "1m" }, key: () => "k-three" }));
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-three-middle", limit: 5, period: "1m" }, key: () => "k-three" }));
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-three-inner", limit: 50, period: "1m", cost: "header:x-cost" }, key: () => "k-three" }));
    hono.get("/api/:id", (c) => c.text("ok"));
    expect((await get(hono, "/api/a")).headers.get("RateLimit")).toMatch(/^"hono-three-middle";r=4;/);
    expect((await get(hono, "/api/b", { "x-cost": "-1" })).status).toBe(400);
    const outer = limiter((env as unknown as Env).LIMITER, { name: "hono-three-outer", limit: 20, period: "1m" });
    expect((await outer.peek("k-three")).remaining).toBe(19);
  });

  it("gives a concurrency slot back at once for a HEAD, whose body Hono drops unread", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-head", algorithm: "concurrency", limit: 1 }, key: () => "k-head" }));
    hono.get("/api/:id", (c) => c.text("a body"));
    const head = async () => {
      const ctx = createExecutionContext();
      const response = await hono.request("/api/x", { method: "HEAD" }, env, ctx);
      await waitOnExecutionContext(ctx);
      return response.status;
    };
    expect([await head(), await head(), await head()]).toEqual([200, 200, 200]);
  });

  it("holds a concurrency slot while a WebSocket Hono's upgradeWebSocket opened is open, relaying its messages, and gives it back on close", async () => {
    const hono = new Hono<App>();
    hono.use("/ws", rateLimit({ binding: "LIMITER", rule: { name: "hono-ws", algorithm: "concurrency", limit: 1 }, key: () => "k-ws" }));
    hono.get("/ws", upgradeWebSocket(() => ({ onMessage: (event, ws) => ws.send(`echo ${String(event.data)}`) })));
    const upgrade = { headers: { upgrade: "websocket" } };
    const ctx = createExecutionContext();
    const open = await hono.request("/ws", upgrade, env, ctx);
    const socket = open.webSocket!;
    socket.accept();
    const echoed = new Promise((resolve) => socket.addEventListener("message", (event) => resolve(event.data)));
    socket.send("hi");

    expect([open.status, await echoed]).toEqual([101, "echo hi"]);
    expect((await get(hono, "/ws", upgrade.headers)).status).toBe(429);
    socket.close(1000);
    await waitOnExecutionContext(ctx);
    const closing = createExecutionContext();
    const again = await hono.request("/ws", upgrade, env, closing);
    again.webSocket?.accept();
    again.webSocket?.close(1000);
    await waitOnExecutionContext(closing);
    expect(again.status).toBe(101);
  });

  it("types c.get('rateLimit') as a LimitResult wherever the middleware is used, and refuses an option it does not know", () => {
    const plain = new Hono();
    plain.use(rateLimit({ binding: "LIMITER", rule: { name: "hono-typed", limit: 5, period: "1m" }, key: () => "k" }));
    plain.get("/", (c) => c.json({ left: c.get("rateLimit").remaining satisfies number }));
    expect(() => rateLimit({ binding: "LIMITER", rule: { name: "x", limit: 1, period: "1m" }, key: () => "k", legacyheaders: false } as never)).toThrow(/rateLimit: unknown option "legacyheaders"; the options are binding, rule, key, skip\?, handler\?, skipFailedRequests\?, skipSuccessfulRequests\?, requestWasSuccessful\?, headers\?, legacyHeaders\?, requestPropertyName\?/);
  });

  it("sets the result at the context variable its requestPropertyName names, so stacked rateLimits each keep theirs", async () => {
    const hono = new Hono()
      .use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-named-burst", limit: 5, period: "1s" }, key: () => "k-named", requestPropertyName: "burst" }))
      .use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-named-daily", limit: 1000, period: "1d" }, key: () => "k-named", requestPropertyName: "daily" }))
      .get("/api/:id", (c) => c.json({ burst: c.get("burst").remaining satisfies number, daily: c.get("daily").remaining satisfies number, plain: c.get("rateLimit") ?? null }));
    const ctx = createExecutionContext();
    const response = await hono.request("/api/1", {}, env, ctx);
    await waitOnExecutionContext(ctx);

    expect(await response.json()).toEqual({ burst: 4, daily: 999, plain: null });
  });

  it("refuses a requestPropertyName that names no variable", () => {
    expect(() => rateLimit({ binding: "LIMITER", rule: { name: "x", limit: 1, period: "1m" }, key: () => "k", requestPropertyName: "" })).toThrow(
      'rateLimit: requestPropertyName must be the name of the context variable to set the result at (e.g. "apiLimit"), got ""',
    );
  });

  it("sends the header forms it is given", async () => {
    const response = await get(app({ rule: { name: "hono-forms", limit: 5, period: "1m" }, headers: "draft-7", legacyHeaders: false }), "/api/x", { "x-api-key": "k-f" });
    expect(response.headers.get("RateLimit")).toMatch(/^limit=5, remaining=4, reset=\d+$/);
    expect(response.headers.get("X-RateLimit-Limit")).toBeNull();
  });

  it("counts requests whose key function returns nothing under one shared key, never unlimited", async () => {
    const hono = app({ rule: { name: "hono-none", limit: 2, period: "1h" } });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await get(hono, `/api/${i}`)).status);
    expect(statuses).toEqual([200, 200, 429, 429]);
  });

  it("drops the spaces and tabs around a key (a raw client's header value keeps them): a suffix buys no fresh quota", async () => {
    const hono = app({ rule: { name: "hono-trim", limit: 2, period: "1h" }, key: (c) => c.req.query("k") });
    const statuses = [];
    for (const k of ["K9", "K9", "K9%20", "K9%09", "%20K9%20%09"]) statuses.push((await get(hono, `/api/x?k=${k}`)).status);
    expect(statuses).toEqual([200, 200, 429, 429, 429]);
  });

  it("escapes a key as the proxy escapes a key part: a client's '#none' is not the shared key of requests without one", async () => {
    const hono = app({ rule: { name: "hono-marker", limit: 2, period: "1h" } });
    const statuses = [];
    const sent: Record<string, string>[] = [{ "x-api-key": "#none" }, { "x-api-key": "#none" }, {}, {}];
    for (const headers of sent) statuses.push((await get(hono, "/api/x", headers)).status);
    expect(statuses).toEqual([200, 200, 200, 200]);
  });

  it("lets a request its skip function picks go on uncounted, with no header and no rateLimit variable", async () => {
    const hono = app({ rule: { name: "hono-skip", limit: 1, period: "1h" }, skip: async (c) => c.req.header("x-internal") === "yes" });
    const internal = await Promise.all([1, 2, 3].map(() => get(hono, "/api/x", { "x-api-key": "k-skip", "x-internal": "yes" })));
    expect(internal.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(internal[0]!.headers.get("RateLimit-Policy")).toBeNull();
    expect(((await internal[0]!.json()) as { rateLimit?: unknown }).rateLimit).toBeUndefined();
    const outside = [await get(hono, "/api/x", { "x-api-key": "k-skip" }), await get(hono, "/api/x", { "x-api-key": "k-skip", "x-internal": "no" })];
    expect(outside.map((r) => r.status)).toEqual([200, 429]);
  });

  it("fails the request, never letting it through, when the skip function throws", async () => {
    const throwing = app({ rule: { name: "hono-skip-throw", limit: 2, period: "1h" }, skip: () => { throw new Error("no session"); } });
    expect((await get(throwing, "/api/x")).status).toBe(500);
  });

  it("limits a request its skip function answers anything but true for: a forgotten return skips nothing", async () => {
    const forgotten = app({ rule: { name: "hono-skip-forgotten", limit: 1, period: "1h" }, skip: (() => undefined) as never });
    const truthy = app({ rule: { name: "hono-skip-truthy", limit: 1, period: "1h" }, skip: (() => "yes") as never });
    for (const hono of [forgotten, truthy]) {
      expect([(await get(hono, "/api/x", { "x-api-key": "k" })).status, (await get(hono, "/api/x", { "x-api-key": "k" })).status]).toEqual([200, 429]);
    }
  });

  it("fails the request, never letting it through, when the key function throws", async () => {
    const hono = app({ rule: { name: "hono-throw", limit: 2, period: "1h" }, key: () => { throw new Error("no session"); } });
    const response = await get(hono, "/api/x");
    expect(response.status).toBe(500);
  });

  it("fails the request when the key function returns something other than a string", async () => {
    const response = await get(app({ rule: { name: "hono-number", limit: 2, period: "1h" }, key: () => 42 as never }), "/api/x");
    expect(response.status).toBe(500);
  });

  it("runs the handler only after a gcra hold, and never when the client leaves while held", async () => {
    // One unit every 200 ms, burst 1, delay 0: the second request of a burst is held 200 ms.
    const handled: string[] = [];
    const hono = new Hono<App>()
      .use("/api/*", rateLimit({ binding: "LIMITER", key: () => "k-hold", rule: { name: "hono-hold", algorithm: "gcra", limit: 5, period: "1s", burst: 1, delay: 0 } }))
      .get("/api/:id", (c) => {
        handled.push(c.req.path);
        return c.text("ok");
      });
    expect((await get(hono, "/api/first")).status).toBe(200);
    const ctx = createExecutionContext();
    const leaving = new Request("http://hono.test/api/gone", { signal: AbortSignal.timeout(30) });
    const gone = await hono.request(leaving, undefined, env, ctx);
    await waitOnExecutionContext(ctx);
    expect(gone.status).toBe(499);
    const held = await get(hono, "/api/held");
    expect(held.status).toBe(200);
    expect(handled).toEqual(["/api/first", "/api/held"]);
  });

  it("syncs a rule with aggregate: location through the relay of the request's location", async () => {
    const hono = app({ rule: { name: "hono-relay", limit: 3, period: "1h", mode: "fast", aggregate: "location" } });
    const relayed = metrics.value("floodgate_durable_object_calls_total", { method: "relay" });
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      const ctx = createExecutionContext();
      const request = new Request(`http://hono.test/api/${i}`, { headers: { "x-api-key": "k-relay" }, cf: { colo: "NRT" } });
      statuses.push((await hono.request(request, undefined, env, ctx)).status);
      await waitOnExecutionContext(ctx);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(metrics.value("floodgate_durable_object_calls_total", { method: "relay" })).toBeGreaterThan(relayed);
  });

  it("answers a denied request with its handler's response, carrying the rate-limit headers and Retry-After", async () => {
    const hono = app({ rule: { name: "hono-handler", limit: 1, period: "1m" }, handler: (c, result) => c.json({ error: "slow down", rule: result.rule, success: result.success }, 429) });
    await get(hono, "/api/a", { "x-api-key": "k-handler" });
    const denied = await get(hono, "/api/b", { "x-api-key": "k-handler" });

    expect(denied.status).toBe(429);
    expect(denied.headers.get("Content-Type")).toMatch(/^application\/json/);
    expect(await denied.json()).toEqual({ error: "slow down", rule: "hono-handler", success: false });
    expect(Number(denied.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    expect(denied.headers.get("RateLimit")).toBe(`"hono-handler";r=0;t=${denied.headers.get("Retry-After")}`);
    expect(denied.headers.get("X-RateLimit-Remaining")).toBe("0");
  });

  it("leaves a handler's own Retry-After, and its headers with it", async () => {
    const hono = app({ rule: { name: "hono-handler-own", limit: 1, period: "1m" }, handler: (c) => c.text("later", 503, { "Retry-After": "120" }) });
    await get(hono, "/api/a", { "x-api-key": "k-handler-own" });
    const denied = await get(hono, "/api/b", { "x-api-key": "k-handler-own" });
    expect([denied.status, denied.headers.get("Retry-After"), denied.headers.get("RateLimit")]).toEqual([503, "120", null]);
  });

  it("gives back the units of the rateLimits around when the handler throws, as for its own 429", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-throw-outer", limit: 10, period: "1h" }, key: () => "k-throw" }));
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-throw-inner", limit: 1, period: "1h" }, key: () => "k-throw", handler: () => { throw new HTTPException(429, { message: "slow down" }); } }));
    hono.get("/api/:id", (c) => c.text("ok"));
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await get(hono, `/api/${i}`)).status);

    expect(statuses).toEqual([200, 429, 429, 429]);
    const outer = limiter((env as unknown as Env).LIMITER, { name: "hono-throw-outer", limit: 10, period: "1h" });
    expect((await outer.peek("k-throw")).remaining).toBe(9);
  });

  it("gives back the units of the rateLimits around when an inner rateLimit's key function throws, as for its 429", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-key-throw-outer", limit: 10, period: "1h" }, key: () => "k-key-throw" }));
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-key-throw-inner", limit: 10, period: "1h" }, key: async () => { throw new Error("no session store"); } }));
    hono.get("/api/:id", (c) => c.text("ok"));
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await get(hono, `/api/${i}`)).status);

    expect(statuses).toEqual([500, 500, 500]);
    const outer = limiter((env as unknown as Env).LIMITER, { name: "hono-key-throw-outer", limit: 10, period: "1h" });
    expect((await outer.peek("k-key-throw")).remaining).toBe(10);
  });

  it("fails a denied request, never letting it through, when the handler returns no Response", async () => {
    const hono = app({ rule: { name: "hono-handler-none", limit: 1, period: "1m" }, handler: (() => undefined) as never });
    let thrown: unknown;
    hono.onError((error, c) => ((thrown = error), c.text("failed", 500)));
    await get(hono, "/api/a", { "x-api-key": "k-handler-none" });
    expect((await get(hono, "/api/b", { "x-api-key": "k-handler-none" })).status).toBe(500);
    expect(String(thrown)).toBe('TypeError: rateLimit("hono-handler-none"): handler must return a Response for the denied request, got undefined');
  });

  it("with skipSuccessfulRequests counts only failed requests: a success gives its unit back", async () => {
    const hono = new Hono<App>();
    hono.use("/login", rateLimit({ binding: "LIMITER", rule: { name: "hono-failures", limit: 3, period: "1h" }, key: () => "k-failures", skipSuccessfulRequests: true }));
    hono.post("/login", (c) => (c.req.header("x-password") === "right" ? c.text("welcome") : c.text("no", 401)));
    const login = (password: string) => get(hono, "/login", { "x-password": password }, "POST");

    const statuses = [];
    for (const password of ["right", "right", "right", "right", "wrong", "wrong", "right", "wrong", "wrong", "right"]) statuses.push((await login(password)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 401, 401, 200, 401, 429, 429]);
  });

  it("with skipFailedRequests gives back what a failed response took, a handler's error included", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-successes", limit: 2, period: "1h" }, key: () => "k-successes", skipFailedRequests: true }));
    hono.get("/api/missing", (c) => c.notFound());
    hono.get("/api/broken", () => {
      throw new Error("the handler failed");
    });
    hono.get("/api/:id", (c) => c.text("ok"));

    const statuses = [];
    for (const path of ["/api/missing", "/api/broken", "/api/a", "/api/missing", "/api/b", "/api/c"]) statuses.push((await get(hono, path)).status);
    expect(statuses).toEqual([404, 500, 200, 404, 200, 429]);
  });

  it("with skipFailedRequests gives back what a request took when it fails past Hono's error handler (an onError that throws)", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-past-on-error", limit: 2, period: "1h" }, key: () => "k-past-on-error", skipFailedRequests: true }));
    hono.get("/api/:id", () => {
      throw new Error("the handler failed");
    });
    hono.onError((error) => {
      throw error;
    });

    for (let i = 0; i < 3; i++) await expect(get(hono, `/api/${i}`)).rejects.toThrow("the handler failed");
    const counted = limiter((env as unknown as Env).LIMITER, { name: "hono-past-on-error", limit: 2, period: "1h" });
    expect((await counted.peek("k-past-on-error")).remaining).toBe(2);
  });

  it("gives back the units of the rateLimits around when an inner one's handler fails past Hono's error handler", async () => {
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-past-outer", limit: 10, period: "1h" }, key: () => "k-past" }));
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-past-inner", limit: 1, period: "1h" }, key: () => "k-past", handler: () => { throw new Error("the handler failed"); } }));
    hono.get("/api/:id", (c) => c.text("ok"));
    hono.onError((error) => {
      throw error;
    });

    expect((await get(hono, "/api/a")).status).toBe(200);
    for (let i = 0; i < 2; i++) await expect(get(hono, `/api/${i}`)).rejects.toThrow("the handler failed");
    const outer = limiter((env as unknown as Env).LIMITER, { name: "hono-past-outer", limit: 10, period: "1h" });
    expect((await outer.peek("k-past")).remaining).toBe(9);
  });

  it("reads success as requestWasSuccessful says, and gives units back on a fast rule too", async () => {
    const hono = new Hono<App>();
    const rule: LimiterRule = { name: "hono-judged", limit: 2, period: "1h", mode: "fast" };
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule, key: () => "k-judged", skipSuccessfulRequests: true, requestWasSuccessful: (c) => c.res.headers.get("x-outcome") === "ok" }));
    hono.get("/api/:outcome", (c) => c.text("done", 200, { "x-outcome": c.req.param("outcome") }));

    const statuses = [];
    for (const outcome of ["ok", "ok", "ok", "bad", "ok", "bad", "bad"]) statuses.push((await get(hono, `/api/${outcome}`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429]);
  });

  it("applies the rule its rule function picks for each request: each plan its limit, its headers and its own counter", async () => {
    const free: LimiterRule = { name: "hono-plan-free", limit: 2, period: "1h" };
    const pro: LimiterRule = { name: "hono-plan-pro", limit: 5, period: "1h" };
    const hono = app({ rule: (c) => (c.req.header("x-plan") === "pro" ? pro : free) });
    const statuses = async (plan: string) => {
      const seen = [];
      for (let i = 0; i < 6; i++) seen.push((await get(hono, `/api/${i}`, { "x-api-key": "k-plan", "x-plan": plan })).status);
      return seen;
    };

    expect(await statuses("free")).toEqual([200, 200, 429, 429, 429, 429]);
    expect(await statuses("pro")).toEqual([200, 200, 200, 200, 200, 429]);
    expect((await get(hono, "/api/x", { "x-api-key": "k-plan-2", "x-plan": "pro" })).headers.get("RateLimit-Policy")).toBe('"hono-plan-pro";q=5;w=3600');
  });

  it("takes a rule its function changes under one name as a deploy's change: the key's count carries over, and a bad rule is its request's 500", async () => {
    let thrown: unknown;
    const hono = app({ rule: (c) => ({ name: "hono-built", limit: Number(c.req.header("x-limit")), period: "1h" }) });
    hono.onError((error, c) => ((thrown = error), c.text("failed", 500)));

    expect((await get(hono, "/api/a", { "x-api-key": "k-built", "x-limit": "3" })).headers.get("RateLimit-Policy")).toBe('"hono-built";q=3;w=3600');
    expect((await get(hono, "/api/b", { "x-api-key": "k-built", "x-limit": "3" })).status).toBe(200);
    const raised = await get(hono, "/api/c", { "x-api-key": "k-built", "x-limit": "30" });
    expect([raised.status, raised.headers.get("RateLimit-Policy"), raised.headers.get("X-RateLimit-Remaining")]).toEqual([200, '"hono-built";q=30;w=3600', "27"]);
    expect((await get(hono, "/api/d", { "x-api-key": "k-built", "x-limit": "many" })).status).toBe(500);
    expect(String(thrown)).toMatch(/^ConfigError: rule \("hono-built"\)\.limit: /);
  });

  it("answers a rule function's invalid rule, past the app's onError, with the proxy's 500 problem+json, its detail naming the rule and field", async () => {
    const hono = app({ rule: () => ({ name: "hono-bad-rule", limit: 5, period: "ten" }) as never });
    const mine = await get(hono, "/api/x", { "x-api-key": "k" });
    const proxy = await send(new Request("http://floodgate.test/hono-bad-proxy/x"), { rules: [{ name: "hono-bad-rule", limit: 5, period: "ten" }] });

    expect([mine.status, mine.headers.get("Content-Type")]).toEqual([500, "application/problem+json"]);
    const [a, b] = (await Promise.all([mine.json(), proxy.json()])) as { detail: string }[];
    expect(a).toEqual({ ...b!, detail: a!.detail });
    expect(a!.detail).toMatch(/^rule \("hono-bad-rule"\)\.period: expected a duration/);
  });

  it("applies a rule function's skips where they fit: a rule with its own count keeps it, and requestWasSuccessful fails no request", async () => {
    const hono = new Hono<App>();
    const login: LimiterRule = { name: "hono-mixed-login", limit: 1, period: "1h", count: "failed" };
    const api: LimiterRule = { name: "hono-mixed-api", limit: 1, period: "1h" };
    hono.use("/*", rateLimit({ binding: "LIMITER", rule: (c) => (c.req.path === "/login" ? login : api), key: () => "k-mixed", requestWasSuccessful: (c) => c.res.status === 204 }));
    hono.post("/login", (c) => c.body(null, 204));
    hono.get("/api", (c) => c.text("ok"));

    const logins = [];
    for (let i = 0; i < 3; i++) logins.push((await get(hono, "/login", {}, "POST")).status);
    expect(logins).toEqual([204, 204, 204]);
    expect([(await get(hono, "/api")).status, (await get(hono, "/api")).status]).toEqual([200, 429]);
  });

  it("answers a 500 problem+json naming the rule when its rule function returns a concurrency rule and a rate rule under one name", async () => {
    const hono = new Hono<App>();
    hono.use("/*", rateLimit({ binding: "LIMITER", rule: (c): LimiterRule => (c.req.path === "/upload" ? { name: "hono-one-name", algorithm: "concurrency", limit: 1 } : { name: "hono-one-name", limit: 100, period: "1m" }), key: () => "k-one-name" }));
    hono.get("/*", (c) => c.text("ok"));

    // HEAD: the concurrency slot comes back as soon as the response is out, with no body to read.
    expect((await get(hono, "/upload", {}, "HEAD")).status).toBe(200);
    const mixed = await get(hono, "/api");
    expect([mixed.status, mixed.headers.get("Content-Type")]).toEqual([500, "application/problem+json"]);
    expect(((await mixed.json()) as { detail: string }).detail).toBe('rule ("hono-one-name"): a concurrency rule and a rate rule are both named "hono-one-name"; a key\'s object cannot count slots and units at once: give each its own name');
  });

  it("keeps a request counted and its response as it was when requestWasSuccessful throws or says neither true nor false", async () => {
    const errors = () => metrics.value("floodgate_errors_total", { kind: "request_was_successful" });
    const before = errors();
    const hono = new Hono<App>();
    hono.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "hono-judge-bad", limit: 2, period: "1h" }, key: () => "k-judge", skipSuccessfulRequests: true, requestWasSuccessful: ((c: { req: { path: string } }) => (c.req.path.endsWith("/throw") ? JSON.parse("{") : "yes")) as never }));
    hono.get("/api/:id", (c) => c.text("ok"));

    expect([(await get(hono, "/api/throw")).status, (await get(hono, "/api/string")).status, (await get(hono, "/api/again")).status]).toEqual([200, 200, 429]);
    expect(errors() - before).toBe(2);
  });

  it("checks its options when it is made", () => {
    expect(() => rateLimit({ binding: "LIMITER", rule: { name: "h", limit: 1, period: "ten" } as never, key: () => "k" })).toThrow(/^rule \("h"\)\.period/);
    expect(() => rateLimit({ binding: "LIMITER", rule: { name: "h", limit: 1, period: "1m" }, key: "x-api-key" as never })).toThrow(/key must be a function/);
    expect(() => rateLimit({ binding: "LIMITER", rule: { name: "h", limit: 1, period: "1m" }, key: () => "k", skip: true as never })).toThrow(/^rateLimit: skip must be a function of the context/);
    expect(() => rateLimit({ binding: 42 as never, rule: { name: "h", limit: 1, period: "1m" }, key: () => "k" })).toThrow(/binding must be the name/);
    expect(() => rateLimit({ binding: "LIMITER", rule: { name: "h", limit: 1, period: "1m" }, key: () => "k", headers: "draft-99" as never })).toThrow(/headers/);
    expect(() => rateLimit({ binding: "LIMITER", rule: { name: "h", limit: 1, period: "1m", ipv6Prefix: 64 } as never, key: () => "k" })).toThrow(/^rule \("h"\)\.ipv6Prefix: has no meaning/);
  });

  it("counts by the rule's own count as by the skips: count: failed keeps only failed responses counted", async () => {
    const hono = new Hono<App>();
    hono.use("/login", rateLimit({ binding: "LIMITER", rule: { name: "hono-count", limit: 1, period: "1h", count: "failed" }, key: () => "k-count" }));
    hono.post("/login", (c) => (c.req.header("x-password") === "right" ? c.text("welcome") : c.text("no", 401)));
    const statuses = [];
    for (const password of ["right", "right", "wrong", "right"]) statuses.push((await get(hono, "/login", { "x-password": password }, "POST")).status);
    expect(statuses).toEqual([200, 200, 401, 429]);
  });

  it("refuses response skips it would ignore or that would count nothing, and a handler that is not a function", () => {
    const made = (options: Partial<Parameters<typeof rateLimit>[0]>) => () => rateLimit({ binding: "LIMITER", rule: { name: "h", limit: 1, period: "1m" }, key: () => "k", ...options });
    expect(made({ handler: "slow down" as never })).toThrow(/^rateLimit: handler must be a function/);
    expect(made({ skipFailedRequests: "yes" as never })).toThrow(/^rateLimit: skipFailedRequests must be true or false, got "yes"$/);
    expect(made({ skipFailedRequests: true, skipSuccessfulRequests: true })).toThrow(/^rateLimit: skipFailedRequests and skipSuccessfulRequests together would count no request/);
    expect(made({ requestWasSuccessful: () => true })).toThrow(/^rateLimit\("h"\): requestWasSuccessful is read only with skipFailedRequests, skipSuccessfulRequests or a rule.s count/);
    expect(made({ skipFailedRequests: true, rule: { name: "h", limit: 1, period: "1m", count: "failed" } })).toThrow(/^rateLimit\("h"\): the rule's count \("failed"\) already says which requests it counts/);
    expect(made({ requestWasSuccessful: () => true, rule: { name: "h", limit: 1, period: "1m", count: "failed" } })).not.toThrow();
    expect(made({ skipFailedRequests: true, rule: { name: "h", algorithm: "concurrency", limit: 1 } })).toThrow(/^rateLimit\("h"\): skipFailedRequests and skipSuccessfulRequests are the rule's count: a concurrency slot comes back once its response is sent/);
    expect(made({ skipSuccessfulRequests: true, rule: { name: "h", algorithm: "token-bucket", limit: 1, period: "1m" } })).toThrow(/^rateLimit\("h"\): skipFailedRequests and skipSuccessfulRequests are the rule's count: "token-bucket" cannot count by response/);
  });

  it("answers a binding missing from c.env with a 500 problem+json naming the rule and the binding, never letting the request through", async () => {
    const response = await get(app({ rule: { name: "hono-nobind", limit: 1, period: "1m" }, binding: "NOPE" }), "/api/x", { "x-api-key": "k" });
    expect([response.status, response.headers.get("Content-Type")]).toEqual([500, "application/problem+json"]);
    expect(await response.json()).toMatchObject({ status: 500, title: "Invalid Configuration", detail: expect.stringMatching(/^rateLimit\("hono-nobind"\)\.binding: expected .*c\.env\.NOPE.*, got nothing$/) });
  });

  it("lets the app's onError see a missing binding's ConfigError, and answer as it chooses", async () => {
    let thrown: unknown;
    const hono = app({ rule: { name: "hono-nobind-seen", limit: 1, period: "1m" }, binding: "NOPE" });
    hono.onError((error, c) => ((thrown = error), c.text("ours", 503)));
    const response = await get(hono, "/api/x", { "x-api-key": "k" });

    expect([response.status, await response.text()]).toEqual([503, "ours"]);
    expect(String(thrown)).toMatch(/^ConfigError: rateLimit\("hono-nobind-seen"\)\.binding: /);
  });

  it("answers a binding function that returns no Durable Object namespace with a 500 problem+json naming the rule and the binding", async () => {
    const response = await get(app({ rule: { name: "hono-badbind", limit: 1, period: "1m" }, binding: () => "LIMITER" as never }), "/api/x", { "x-api-key": "k" });
    expect([response.status, response.headers.get("Content-Type")]).toEqual([500, "application/problem+json"]);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/^rateLimit\("hono-badbind"\)\.binding: expected .*, got "LIMITER"$/);
  });
});
