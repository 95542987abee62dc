// The Floodgate service binding, called from another Worker over a real binding in workerd: limit, check, peek, reset and bad input.
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LimitResult } from "../../src/limiter/result";
import { startOrigin } from "../setup/origin-server";
import { bundleWorker } from "./bundle";
import { buildDistantLimiter } from "./cluster";

const RULES = [
  { name: "login", key: "ip", limit: 5, period: "1h", overrides: [{ keys: ["198.51.100.250"], limit: 8 }] },
  { name: "api", key: "header:x-api-key", limit: 3, period: "1h", mode: "fast" },
  { name: "gate", match: { path: "/gated/*" }, key: "ip", limit: 2, period: "1h" },
  { name: "smooth", match: { path: "/smooth/*" }, key: "ip", algorithm: "gcra", limit: 5, period: "1s", burst: 2, delay: 0 },
  { name: "slots", match: { path: "/slots/*" }, key: "ip", algorithm: "concurrency", limit: 1 },
  { name: "long-slots", match: { path: "/long-slots/*" }, key: "ip", algorithm: "concurrency", limit: 1, slotTtl: "1s" },
  { name: "relayed", match: { path: "/relayed/*" }, key: "ip", limit: 3, period: "1h", mode: "fast", aggregate: "location" },
  { name: "failed-logins", match: { path: "/failed-logins/*" }, key: "ip", limit: 2, period: "1h", count: "failed" },
  { name: "metered", match: { path: "/metered/*" }, key: "ip", limit: 10, period: "1h", responseCost: "header:x-units" },
];
const ADMIN = "binding-test-admin";

/** The caller: a Worker with the binding, whose routes run one kind of call each and answer JSON. */
const CALLER = `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (name) => url.searchParams.get(name);
    const settle = (promise) => promise.then((value) => ({ ok: true, value }), (error) => ({ ok: false, error: String(error && error.message || error) }));
    switch (url.pathname) {
      case "/limit": {
        const calls = Array.from({ length: Number(q("n") ?? 1) }, () => env.FLOODGATE.limit({ key: q("key"), ...(q("rule") ? { rule: q("rule") } : {}), ...(q("location") ? { location: q("location") } : {}) }));
        return Response.json(await Promise.all(calls));
      }
      case "/check": {
        // An API key of its own each call: the fast "api" rule applies to every path, and may deny its shared #none key a little early, as fast mode does.
        const sent = { "CF-Connecting-IP": q("ip"), "x-api-key": crypto.randomUUID() };
        const { allowed, headers, response } = await env.FLOODGATE.check(new Request("https://api.example.com" + q("path"), { headers: sent }));
        return Response.json({ allowed, headers, status: response ? response.status : null, body: response ? await response.json() : null });
      }
      case "/slots": {
        const held = await env.FLOODGATE.limit({ rule: "slots", key: q("key") });
        const denied = await env.FLOODGATE.limit({ rule: "slots", key: q("key") });
        await held.release();
        await held.release();
        const again = await env.FLOODGATE.limit({ rule: "slots", key: q("key") });
        const after = await env.FLOODGATE.limit({ rule: "slots", key: q("key") });
        return Response.json({ held: held.success, denied: denied.success, deniedRelease: typeof denied.release, again: again.success, after: after.success });
      }
      case "/long-slots": {
        // Past two slotTtls: each renewal may land two thirds of one late.
        const held = await env.FLOODGATE.limit({ rule: "long-slots", key: q("key") });
        await new Promise((resolve) => setTimeout(resolve, 2200));
        const denied = await env.FLOODGATE.limit({ rule: "long-slots", key: q("key") });
        await held.release();
        const again = await env.FLOODGATE.limit({ rule: "long-slots", key: q("key") });
        await again.release();
        return Response.json({ held: held.success, denied: denied.success, again: again.success });
      }
      case "/settled": {
        // Each attempt settled with the status its outcome gives: only the failures count.
        const limited = [];
        for (const status of q("statuses").split(",").map(Number)) {
          const result = await env.FLOODGATE.limit({ rule: "failed-logins", key: q("key") });
          limited.push(result.success);
          if (result.success) await result.settle(status);
        }
        const checked = [];
        for (const [i, status] of q("statuses").split(",").map(Number).entries()) {
          // An API key of its own each time: the "api" rule applies to every path, and its shared #none key is other tests'.
          const headers = { "CF-Connecting-IP": q("ip"), "x-api-key": q("ip") + "-" + i };
          const result = await env.FLOODGATE.check(new Request("https://api.example.com/failed-logins/x", { headers }));
          checked.push(result.allowed);
          if (result.allowed) await result.settle(status);
        }
        return Response.json({ limited, checked });
      }
      case "/charged": {
        // A call that used 5 units in all: 1 taken up front, 4 charged once known; then 2 given back of a call of 3.
        const first = await env.FLOODGATE.limit({ key: q("key") });
        await first.charge(4);
        const afterCharge = (await env.FLOODGATE.peek({ key: q("key") })).remaining;
        const denied = await env.FLOODGATE.limit({ key: q("key") });
        await env.FLOODGATE.reset({ key: q("key") });
        const second = await env.FLOODGATE.limit({ key: q("key"), cost: 3 });
        await second.charge(-2);
        const bad = await settle(second.charge(-2));
        return Response.json({ afterCharge, denied: denied.success, deniedCharge: typeof denied.charge, afterGiveBack: (await env.FLOODGATE.peek({ key: q("key") })).remaining, bad });
      }
      case "/waited": {
        // The login rule's 5 spent, a wait of a second cannot pass an hour's window: answered at once; a bad timeout rejects.
        await env.FLOODGATE.limit({ key: q("key"), cost: 5 });
        const started = Date.now();
        const late = await env.FLOODGATE.blockUntilReady({ key: q("key"), timeout: "1s" });
        const bad = await settle(env.FLOODGATE.blockUntilReady({ key: q("key"), timeout: "soon" }));
        const missing = await settle(env.FLOODGATE.blockUntilReady({ key: q("key") }));
        return Response.json({ success: late.success, quick: Date.now() - started < 900, bad, missing });
      }
      case "/metered": {
        // The origin's response said the call cost 7: its headers cross the binding as a plain object.
        const first = await env.FLOODGATE.limit({ rule: "metered", key: q("key") });
        await first.settle(200, Object.fromEntries(new Headers({ "x-units": "7" })));
        return Response.json({ remaining: (await env.FLOODGATE.peek({ rule: "metered", key: q("key") })).remaining });
      }
      case "/long-slots-forgotten": {
        const held = await env.FLOODGATE.limit({ rule: "long-slots", key: q("key") });
        return Response.json({ held: held.success });
      }
      case "/check-body": {
        const upload = new Request("https://api.example.com/gated/x", { method: "POST", body: "payload", headers: { "CF-Connecting-IP": q("ip"), "x-api-key": q("ip") } });
        const { allowed } = await env.FLOODGATE.check(new Request(upload, { body: null }));
        return Response.json({ allowed, body: await upload.text() });
      }
      case "/no-origin": {
        const results = [await env.NO_ORIGIN.limit({ key: "k" }), await env.NO_ORIGIN.limit({ key: "k" }), await env.NO_ORIGIN.limit({ key: "k" })];
        const proxied = await env.NO_ORIGIN_PROXY.fetch("https://api.example.com/x", { headers: { "CF-Connecting-IP": "198.51.100.64" } });
        return Response.json({ successes: results.map((r) => r.success), proxyStatus: proxied.status, proxyDetail: (await proxied.json()).detail });
      }
      case "/peek":
        return Response.json(await env.FLOODGATE.peek({ key: q("key"), ...(q("rule") ? { rule: q("rule") } : {}) }));
      case "/one-options": {
        const options = { key: q("key"), location: "AMS", continent: "EU" };
        const limited = await env.FLOODGATE.limit({ ...options, cost: 2 });
        const peeked = await env.FLOODGATE.peek(options);
        await env.FLOODGATE.reset(options);
        return Response.json({ limited: limited.remaining, peeked: peeked.remaining, afterReset: (await env.FLOODGATE.peek(options)).remaining });
      }
      case "/reset":
        await env.FLOODGATE.reset({ key: q("key") });
        return Response.json({ reset: true });
      case "/bad":
        return Response.json(await Promise.all([
          settle(env.FLOODGATE.limit({ rule: "nope", key: "k" })),
          settle(env.FLOODGATE.limit({ key: "" })),
          settle(env.FLOODGATE.limit({})),
          settle(env.FLOODGATE.limit({ key: "k", cost: 2 ** 60 })),
          settle(env.FLOODGATE.limit({ key: "k", cost: 1.5 })),
          settle(env.FLOODGATE.limit({ key: "k", cost: -2 })),
          settle(env.FLOODGATE.limit({ key: "k", location: "not a colo" })),
          settle(env.FLOODGATE.limit({ key: "k", continent: "Europe/Paris" })),
          settle(env.FLOODGATE.limit({ key: "k", cots: 3 })),
          settle(env.FLOODGATE.peek({ key: "k", cost: 1 })),
          settle(env.FLOODGATE.reset({ key: "k", location: "not a colo" })),
          settle(env.FLOODGATE.check("not a request")),
          settle(env.UNNAMED.limit({ key: "k" })),
          settle(env.BROKEN.check(new Request("https://api.example.com/"))),
          settle(env.BROKEN.limit({ key: "k" })),
          settle(env.FLOODGATE.limit({ rule: null, key: "k" })),
          settle(env.FLOODGATE.limit({ key: "k" }, { cost: 5 })),
        ]));
      case "/slow-object": {
        // The key's object answers 400 ms after it is asked, past the rule's 100 ms timeout: what the caller can tell of the error.
        const told = (promise) => promise.then(() => null, (error) => ({ name: error.name, message: error.message }));
        return Response.json({ peek: await told(env.SLOW.peek({ key: "k" })), reset: await told(env.SLOW.reset({ key: "k" })) });
      }
      case "/trailing-undefined":
        return Response.json((await env.FLOODGATE.limit({ key: q("key") }, undefined)).success);
      case "/internals":
        return Response.json(await Promise.all([
          settle(Promise.resolve().then(() => env.NO_ORIGIN.settings())),
          settle(Promise.resolve().then(() => env.NO_ORIGIN.resolve({ key: "k" }, 1, "limit", ["key"]))),
          settle(Promise.resolve().then(() => env.NO_ORIGIN.resolve({ key: "k" }, "limit", ["key"]))),
        ]));
    }
    return new Response("no such route", { status: 404 });
  },
};`;

let mf: Miniflare;
let origin: Awaited<ReturnType<typeof startOrigin>>;

beforeAll(async () => {
  origin = await startOrigin();
  const [bundle, distant] = await Promise.all([bundleWorker(), buildDistantLimiter()]);
  mf = new Miniflare({
    workers: [
      {
        name: "caller",
        modules: true,
        script: CALLER,
        compatibilityDate: "2026-04-20",
        serviceBindings: {
          FLOODGATE: { name: "floodgate", entrypoint: "Floodgate", props: { rule: "login" } },
          UNNAMED: { name: "floodgate", entrypoint: "Floodgate" },
          BROKEN: { name: "floodgate-broken", entrypoint: "Floodgate" },
          NO_ORIGIN: { name: "floodgate-no-origin", entrypoint: "Floodgate" },
          NO_ORIGIN_PROXY: { name: "floodgate-no-origin" },
          SLOW: { name: "floodgate-slow-object", entrypoint: "Floodgate" },
        },
      },
      {
        name: "floodgate",
        modules: true,
        scriptPath: bundle.path,
        compatibilityDate: "2026-04-20",
        bindings: { RATE_LIMIT_RULES: JSON.stringify(RULES), ORIGIN_URL: `http://127.0.0.1:${origin.port}`, ADMIN_TOKEN: ADMIN },
        durableObjects: { LIMITER: { className: "RateLimiter", useSQLite: true } },
      },
      {
        name: "floodgate-no-origin",
        modules: true,
        scriptPath: bundle.path,
        compatibilityDate: "2026-04-20",
        bindings: { RATE_LIMIT_RULES: JSON.stringify([{ name: "only", limit: 2, period: "1h" }]), ANALYTICS_HASH_KEY: "binding-test-hash-key" },
        durableObjects: { LIMITER: { className: "RateLimiter", useSQLite: true } },
      },
      {
        name: "floodgate-broken",
        modules: true,
        scriptPath: bundle.path,
        compatibilityDate: "2026-04-20",
        bindings: { RATE_LIMIT_RULES: JSON.stringify([{ name: "bad", limit: 5, period: "soon" }]), ORIGIN_URL: `http://127.0.0.1:${origin.port}` },
        durableObjects: { LIMITER: { className: "RateLimiter", useSQLite: true } },
      },
      {
        name: "floodgate-slow-object",
        modules: true,
        scriptPath: bundle.path,
        compatibilityDate: "2026-04-20",
        bindings: { RATE_LIMIT_RULES: JSON.stringify([{ name: "slow", limit: 5, period: "1h", timeout: "100ms" }]), ORIGIN_URL: "none" },
        durableObjects: { LIMITER: { className: "DistantLimiter", scriptName: "limiter-distant", useSQLite: true } },
      },
      {
        name: "limiter-distant",
        modules: true,
        script: distant,
        compatibilityDate: "2026-04-20",
        bindings: { OBJECT_DELAY_MS: "400" },
        durableObjects: { LIMITER: { className: "DistantLimiter", useSQLite: true } },
      },
    ],
  });
  await mf.ready;
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
  await origin?.close();
});

const call = async <T>(path: string): Promise<T> => (await mf.dispatchFetch(`http://caller${path}`)).json() as Promise<T>;
const originCount = async (tag: string) => ((await (await fetch(`http://127.0.0.1:${origin.port}/__origin/count?tag=${tag}`)).json()) as { count: number }).count;

type Result = LimitResult;

/** The floodgate Worker's own count of its Durable Object calls by `method` (its metrics, where the binding's calls run). */
async function objectCalls(method: string): Promise<number> {
  const worker = await mf.getWorker("floodgate");
  const text = await (await worker.fetch("http://floodgate/__floodgate/metrics", { headers: { Authorization: `Bearer ${ADMIN}` } })).text();
  return Number(new RegExp(`^floodgate_durable_object_calls_total\\{method="${method}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
}

describe("the Floodgate service binding", () => {
  it("grants exactly 5 of 40 concurrent limit({ key }) calls on a strict rule with limit 5, the rule from props", async () => {
    const results = await call<Result[]>("/limit?key=198.51.100.1&n=40");

    expect(results.filter((r) => r.success)).toHaveLength(5);
    expect(results.every((r) => r.rule === "login" && r.limit === 5)).toBe(true);
    const denied = results.filter((r) => !r.success);
    expect(denied.every((r) => r.retryAfter > 0 && r.remaining === 0)).toBe(true);
  });

  it("settles a rule that counts by response over RPC, for limit and check: only failed attempts count", async () => {
    expect(await call("/settled?key=198.51.100.70&ip=198.51.100.71&statuses=200,200,401,200,401,200")).toEqual({
      limited: [true, true, true, true, true, false],
      checked: [true, true, true, true, true, false],
    });
  });

  it("charges a request's real cost over RPC: more units after the fact, or some given back", async () => {
    expect(await call("/charged?key=198.51.100.72")).toEqual({
      afterCharge: 0,
      denied: false,
      deniedCharge: "undefined",
      afterGiveBack: 4,
      bad: { ok: false, error: 'charge ("login"): cannot give back 2 units: the request is counted at 1 now (it took 3; charges and give-backs since count too)' },
    });
  });

  it("answers blockUntilReady at once when the wait would outlast its timeout, and rejects a bad timeout", async () => {
    expect(await call("/waited?key=198.51.100.74")).toEqual({
      success: false,
      quick: true,
      bad: { ok: false, error: 'blockUntilReady: timeout must be milliseconds (a whole number, 0 or more) or a duration like "5s", got "soon"' },
      missing: { ok: false, error: expect.stringMatching(/^blockUntilReady: timeout must be milliseconds/) },
    });
  });

  it("settles a responseCost rule over RPC with the response's headers as a plain object", async () => {
    expect(await call("/metered?key=198.51.100.73")).toEqual({ remaining: 3 });
  });

  it("takes one object of the key and where it is asked from for limit, peek and reset", async () => {
    expect(await call("/one-options?key=198.51.100.44")).toEqual({ limited: 3, peeked: 3, afterReset: 5 });
  });

  it("resolves limit calls past a gcra delay only once they conform: 3 at once on burst 2, delay 0, one every 200 ms", async () => {
    const started = Date.now();
    const results = await call<Result[]>("/limit?rule=smooth&key=198.51.100.9&n=3");

    expect(results.map((r) => r.success)).toEqual([true, true, true]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400 - 20);
  });

  it("shares a key's counter with the proxy: the same rule and key are one object", async () => {
    await call<Result[]>("/limit?key=198.51.100.2&n=4");
    const proxy = await mf.getWorker("floodgate");
    const proxied = await proxy.fetch("http://floodgate.test/login-shared/x", { headers: { "CF-Connecting-IP": "198.51.100.2" } });
    const after = await call<Result[]>("/limit?key=198.51.100.2");

    expect(proxied.status).toBe(200);
    expect(after[0]?.success).toBe(false);
  });

  it("decides a fast rule named in the call from this isolate's lease", async () => {
    const results = await call<Result[]>("/limit?rule=api&key=k-fast&n=5");
    expect(results.filter((r) => r.success)).toHaveLength(3);
  });

  it("syncs a rule with aggregate: location through the relay of the location the call passes", async () => {
    const before = await objectCalls("relay");
    const results = await call<Result[]>("/limit?rule=relayed&key=k-relayed&n=5&location=AMS");
    expect(results.filter((r) => r.success)).toHaveLength(3);
    expect(await objectCalls("relay")).toBeGreaterThan(before);
  });

  it("checks a request as the proxy would without ever contacting the origin", async () => {
    const first = await call<{ allowed: boolean; headers: Record<string, string>; status: number | null }>("/check?path=/gated/check-only&ip=198.51.100.3");
    await call("/check?path=/gated/check-only&ip=198.51.100.3");
    const third = await call<{ allowed: boolean; headers: Record<string, string>; status: number | null; body: { status: number; "violated-policies": string[] } }>(
      "/check?path=/gated/check-only&ip=198.51.100.3",
    );

    expect(first.allowed).toBe(true);
    expect(first.status).toBeNull();
    expect(Object.keys(first.headers)).toContain("RateLimit");
    expect(third.allowed).toBe(false);
    expect(third.status).toBe(429);
    expect(third.body["violated-policies"]).toContain("gate");
    expect(third.headers["Retry-After"]).toBeDefined();
    expect(await originCount("check-only")).toBe(0);
  });

  it("hands a concurrency slot's caller a release over RPC that frees the slot once", async () => {
    const slots = await call<Record<string, unknown>>("/slots?key=198.51.100.60");
    expect(slots).toEqual({ held: true, denied: false, deniedRelease: "undefined", again: true, after: false });
  });

  it("keeps a slot held over RPC past slotTtl until its caller releases it", async () => {
    const slots = await call<Record<string, unknown>>("/long-slots?key=198.51.100.61");
    expect(slots).toEqual({ held: true, denied: false, again: true });
  });

  it("frees a slot its caller never released slotTtl after the caller's request ended", async () => {
    expect(await call("/long-slots-forgotten?key=198.51.100.62")).toEqual({ held: true });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await call("/long-slots-forgotten?key=198.51.100.62")).toEqual({ held: true });
  });

  it("checks a copy without the body, as the README shows, leaving the caller its request's body to read", async () => {
    expect(await call("/check-body?ip=198.51.100.63")).toEqual({ allowed: true, body: "payload" });
  });

  it("works without ORIGIN_URL, which only the proxy needs: the proxy answers the 500 naming it", async () => {
    const outcome = await call<{ successes: boolean[]; proxyStatus: number; proxyDetail: string }>("/no-origin");
    expect(outcome.successes).toEqual([true, true, false]);
    expect(outcome.proxyStatus).toBe(500);
    expect(outcome.proxyDetail).toMatch(/^ORIGIN_URL: not set/);
  });

  it("decides and peeks a key its rule's overrides name under that key's own quota", async () => {
    const limited = await call<Result[]>("/limit?key=198.51.100.250&n=10");
    const peeked = await call<Result>("/peek?key=198.51.100.250");

    expect(limited.filter((r) => r.success)).toHaveLength(8);
    expect(limited.every((r) => r.limit === 8)).toBe(true);
    expect(peeked).toMatchObject({ success: false, limit: 8, remaining: 0 });
  });

  it("peeks without consuming and resets a key", async () => {
    await call("/limit?key=198.51.100.4&n=2");
    const peeked = await call<Result>("/peek?key=198.51.100.4");
    const again = await call<Result>("/peek?key=198.51.100.4");
    await call("/reset?key=198.51.100.4");
    const afterReset = await call<Result>("/peek?key=198.51.100.4");

    expect(peeked.remaining).toBe(3);
    expect(again.remaining).toBe(3);
    expect(afterReset.remaining).toBe(5);
  });

  it("rejects bad calls, and every call while the configuration is invalid, with a message saying what is wrong, consuming nothing", async () => {
    const outcomes = await call<{ ok: boolean; error?: string }[]>("/bad");

    expect(outcomes.every((o) => !o.ok)).toBe(true);
    expect(outcomes.map((o) => o.error)).toEqual([
      expect.stringMatching(/no rule named "nope"/),
      expect.stringMatching(/key must be a non-empty string/),
      expect.stringMatching(/key must be a non-empty string/),
      expect.stringMatching(/at most 2\^53 - 1/),
      expect.stringMatching(/cost must be a positive integer, got 1\.5/),
      expect.stringMatching(/cost must be a positive integer, got -2/),
      expect.stringMatching(/location must be a Cloudflare location code like "AMS"/),
      expect.stringMatching(/continent must be a Cloudflare continent code like "EU"/),
      expect.stringMatching(/^limit: unknown option "cots"; the options are rule\?, key, cost\?, location\?, continent\?$/),
      expect.stringMatching(/^peek: unknown option "cost"; the options are rule\?, key, location\?, continent\?$/),
      expect.stringMatching(/^reset: location must be a Cloudflare location code/),
      expect.stringMatching(/expected a Request/),
      expect.stringMatching(/name a rule .*RATE_LIMIT_RULES has 9/),
      expect.stringMatching(/rules\[0\] \("bad"\)\.period: expected a duration/),
      expect.stringMatching(/rules\[0\] \("bad"\)\.period: expected a duration/),
      expect.stringMatching(/^limit: rule must be a rule's name, or left out, got null$/),
      expect.stringMatching(/^limit: takes one options object, got 2 arguments$/),
    ]);
    expect((await call<Result>("/peek?key=k")).remaining).toBe(5);
  });

  it("rejects a peek or reset its key's object does not answer within the rule's timeout with an error named TimeoutError on the caller's side of RPC", async () => {
    const told = await call<Record<string, { name: string; message: string } | null>>("/slow-object");
    expect(told).toEqual({
      peek: { name: "TimeoutError", message: expect.stringMatching(/^no answer within 100ms/) },
      reset: { name: "TimeoutError", message: expect.stringMatching(/^no answer within 100ms/) },
    });
  });

  it("takes a trailing undefined argument as none: a wrapper that forwards (options, maybe) still works", async () => {
    expect(await call<boolean>("/trailing-undefined?key=k-trailing")).toBe(true);
  });

  it("offers only its public methods (limit, blockUntilReady, check, peek, reset) over RPC: the helpers that read the settings (ANALYTICS_HASH_KEY included) are out of reach", async () => {
    const outcomes = await call<{ ok: boolean; value?: unknown }[]>("/internals");
    expect(outcomes.map((o) => o.ok)).toEqual([false, false, false]);
    expect(JSON.stringify(outcomes)).not.toContain("binding-test-hash-key");
  });
});
